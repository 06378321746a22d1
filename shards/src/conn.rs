//! One HTTP connection: reads requests with the codec, runs the handler
//! while watching the socket (a disconnect cancels it), writes responses,
//! and enforces the idle, head and body timeouts.
//!
//! Runs as one glommio task per connection on the shard that accepted it;
//! only this task touches the stream and its buffer. A slow or broken
//! client ends only its own task. With TLS configured the task first runs
//! the handshake (see `tls.rs`), then serves the decrypted stream with the
//! same code: everything below the entry point is generic over the stream.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_lite::future;
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use glommio::net::TcpStream;
use glommio::timer::Timer;

use crate::http::{Decoded, Decoder, HttpError, Method, Request};
use crate::server::{Handler, ServerConfig};
use crate::shutdown::LocalSignal;

/// Bytes asked of the socket per read.
const READ_SIZE: usize = 16 * 1024;
/// How long, and how many bytes, we read and discard after answering an
/// error before closing, so the client reads our answer instead of a RST.
const LINGER: Duration = Duration::from_millis(200);
/// See [`LINGER`].
const LINGER_BYTES: usize = 256 * 1024;
/// Bodies up to this size are copied behind the head and sent in one write;
/// a larger one is written from the response itself, so a big answer is not
/// held twice (response and write buffer), and the write buffer a connection
/// keeps between requests stays this small (issue 18, broker memory).
const INLINE_BODY: usize = 16 * 1024;
/// A read buffer left larger than this once a request is decoded and
/// nothing else is buffered (pipelined bytes gathered while a big request
/// ran) is given back rather than kept for the connection's life.
const KEEP_READ: usize = 4 * READ_SIZE;
/// The interim answer to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// What waiting for bytes ended with.
enum Read {
    /// Some bytes were appended to the buffer.
    Data,
    /// The peer closed, or the socket failed.
    Closed,
    /// The deadline passed.
    Timeout,
    /// Shutdown fired (only when waiting idle).
    Stopped,
}

/// Which timer applies while waiting for bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between requests (idle timeout, shutdown closes).
    Idle,
    /// Inside a head (header timeout).
    Head,
    /// Inside a body (body timeout).
    Body,
}

/// Serves an accepted TCP connection: runs the TLS handshake first when
/// `cfg.tls` is set (a failed or timed-out handshake ends only this
/// connection), then serves requests until the connection ends.
pub(crate) async fn serve_tcp(
    stream: TcpStream,
    cfg: Rc<ServerConfig>,
    handler: Rc<dyn Handler>,
    stop: LocalSignal,
) {
    let _ = stream.set_nodelay(true);
    let peer = stream.peer_addr().ok();
    let Some(tls) = cfg.tls.clone() else {
        return serve_conn(stream, peer, cfg, handler, stop).await;
    };
    match crate::tls::handshake(&tls, stream, cfg.handshake_timeout, &stop).await {
        Ok(stream) => serve_conn(stream, peer, cfg, handler, stop).await,
        Err(e) => log::debug!("connection {peer:?}: {e}"),
    }
}

/// Serves `stream` until it closes, fails, times out or shutdown finds it
/// idle.
async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    peer: Option<SocketAddr>,
    cfg: Rc<ServerConfig>,
    handler: Rc<dyn Handler>,
    stop: LocalSignal,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_SIZE);
    let mut dec = Decoder::new(cfg.limits());
    let mut out = Vec::new();
    loop {
        let (mut req, keep_alive) =
            match next_request(&mut stream, &mut buf, &mut dec, &cfg, &stop).await {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    log::debug!("connection {peer:?}: {e}");
                    out.clear();
                    e.to_response().write_to(&mut out, true, false);
                    if write_all(&mut stream, &out, cfg.body_timeout).await {
                        linger_close(&mut stream).await;
                    }
                    return;
                }
            };
        req.peer = peer;
        let head = req.method == Method::Head;
        let response = {
            let handling = handler.handle(req);
            let cap = cfg.max_header_bytes.saturating_add(cfg.max_body_bytes);
            future::or(async { Some(handling.await) }, async {
                watch_peer(&mut stream, &mut buf, cap).await;
                None
            })
            .await
        };
        let Some(response) = response else {
            log::debug!("connection {peer:?}: peer left, handler cancelled");
            return;
        };
        let close = !keep_alive || stop.is_fired();
        out.clear();
        response.write_head(&mut out, close);
        let sent = write_body(
            &mut stream,
            &mut out,
            &response.body_pieces(head),
            cfg.body_timeout,
        )
        .await;
        drop(response);
        if !sent || close {
            return;
        }
        if buf.is_empty() && buf.capacity() > KEEP_READ {
            buf = Vec::with_capacity(READ_SIZE);
        }
    }
}

/// Reads until the decoder yields a request. `Ok(None)`: close quietly
/// (peer left, idle timeout, shutdown while idle, or write failure).
async fn next_request<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    dec: &mut Decoder,
    cfg: &ServerConfig,
    stop: &LocalSignal,
) -> Result<Option<(Request, bool)>, HttpError> {
    let mut phase = (Phase::Idle, Instant::now());
    loop {
        match dec.decode(buf)? {
            Decoded::Request { req, keep_alive } => return Ok(Some((req, keep_alive))),
            Decoded::Continue => {
                if !write_all(stream, CONTINUE, cfg.body_timeout).await {
                    return Ok(None);
                }
                continue;
            }
            Decoded::Incomplete => {}
        }
        let now_phase = if dec.in_body() {
            Phase::Body
        } else if dec.in_progress(buf) {
            Phase::Head
        } else {
            Phase::Idle
        };
        if now_phase != phase.0 {
            phase = (now_phase, Instant::now());
        }
        let timeout = match phase.0 {
            Phase::Idle => cfg.idle_timeout,
            Phase::Head => cfg.header_timeout,
            Phase::Body => cfg.body_timeout,
        };
        let idle_stop = (phase.0 == Phase::Idle).then_some(stop);
        match read_more(stream, buf, phase.1 + timeout, idle_stop).await {
            Read::Data => {}
            Read::Closed | Read::Stopped => return Ok(None),
            Read::Timeout if phase.0 == Phase::Idle => return Ok(None),
            Read::Timeout => return Err(HttpError::Timeout),
        }
    }
}

/// Appends one read's worth of bytes to `buf`, unless the deadline passes
/// or (when given) `stop` fires first.
async fn read_more<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    deadline: Instant,
    stop: Option<&LocalSignal>,
) -> Read {
    if stop.is_some_and(|s| s.is_fired()) {
        return Read::Stopped;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let read = async {
        match read_into(stream, buf).await {
            Ok(0) | Err(_) => Read::Closed,
            Ok(_) => Read::Data,
        }
    };
    let timer = async {
        Timer::new(left).await;
        Read::Timeout
    };
    let stopped = async {
        match stop {
            Some(s) => s.wait().await,
            None => future::pending::<()>().await,
        }
        Read::Stopped
    };
    future::or(read, future::or(timer, stopped)).await
}

/// One read appended to `buf`'s end.
///
/// Cancel-safe: this future is dropped mid-read whenever a handler finishes
/// first (see `watch_peer`), so the zeroed read space is cut off by a drop
/// guard, never left in the buffer to be parsed as request bytes.
async fn read_into<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    /// Truncates the buffer to `keep` bytes when dropped.
    struct Keep<'a> {
        buf: &'a mut Vec<u8>,
        keep: usize,
    }
    impl Drop for Keep<'_> {
        fn drop(&mut self) {
            self.buf.truncate(self.keep);
        }
    }
    let len = buf.len();
    buf.resize(len + READ_SIZE, 0);
    let mut guard = Keep { buf, keep: len };
    let result = stream.read(&mut guard.buf[len..]).await;
    guard.keep = len + *result.as_ref().unwrap_or(&0);
    result
}

/// While a handler runs: keeps reading pipelined bytes into `buf` (up to
/// `cap` bytes buffered, then stops reading) and returns only when the
/// peer closes or the socket fails.
async fn watch_peer<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>, cap: usize) {
    loop {
        if buf.len() >= cap {
            // Back-pressure: the handler's response decides what happens next.
            future::pending::<()>().await;
        }
        match read_into(stream, buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Writes `out` (the head) and then `pieces` in order, all within one
/// `timeout` (a client that reads slowly holds a spliced answer, and the
/// result row behind it, no longer than a plain one). Pieces of up to
/// `INLINE_BODY` gather in `out` and go out together once it holds that much;
/// a bigger piece goes out on its own, so neither a plain body nor a spliced
/// one (thousands of small framing pieces between the payloads) is copied
/// whole, and neither costs a write per piece. False on failure or timeout.
async fn write_body<S: AsyncWrite + Unpin>(
    stream: &mut S,
    out: &mut Vec<u8>,
    pieces: &[&[u8]],
    timeout: Duration,
) -> bool {
    let write = async {
        for piece in pieces {
            if piece.len() > INLINE_BODY {
                if !out.is_empty() {
                    if !send(stream, out).await {
                        return false;
                    }
                    out.clear();
                }
                if !send(stream, piece).await {
                    return false;
                }
                continue;
            }
            out.extend_from_slice(piece);
            if out.len() >= INLINE_BODY {
                if !send(stream, out).await {
                    return false;
                }
                out.clear();
            }
        }
        out.is_empty() || send(stream, out).await
    };
    within(timeout, write).await
}

/// Writes all of `bytes` within `timeout`; false on failure or timeout.
async fn write_all<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8], timeout: Duration) -> bool {
    within(timeout, send(stream, bytes)).await
}

/// Writes all of `bytes`; false on failure. Flushes too: a TLS stream may
/// hold encrypted records back until then.
async fn send<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> bool {
    stream.write_all(bytes).await.is_ok() && stream.flush().await.is_ok()
}

/// `work`'s answer, or false once `timeout` has passed.
async fn within(timeout: Duration, work: impl std::future::Future<Output = bool>) -> bool {
    let timer = async {
        Timer::new(timeout).await;
        false
    };
    future::or(work, timer).await
}

/// Half-closes, then reads and discards briefly so unread request bytes do
/// not turn our close into a RST that destroys the answer just sent.
/// `close` is a write-side shutdown on TCP (glommio) and sends TLS
/// `close_notify` first on a TLS stream; reading stays possible.
async fn linger_close<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S) {
    if stream.close().await.is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut scratch = Vec::new();
    let mut discarded = 0;
    while discarded < LINGER_BYTES {
        scratch.clear();
        match read_more(stream, &mut scratch, deadline, None).await {
            Read::Data => discarded += scratch.len(),
            _ => return,
        }
    }
}
