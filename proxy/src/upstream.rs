//! The connections to brokers: a per-shard pool of keep-alive TCP
//! connections per broker address, and one request/response exchange on
//! them with a deadline. Runs on its shard only (the pool is `RefCell`
//! state of `Shard`); a connection is used by one request at a time and
//! goes back to the pool only after a whole response that allows it.
//!
//! A request body is written from the buffer the server codec filled (the
//! head first, then the body slice: never copied), and the response body is
//! read into one buffer that becomes the client's response body, so a large
//! push or pop is held once. A pooled connection the broker closed while
//! idle fails before any response byte arrives; that one case is retried
//! once on a fresh connection (the broker read nothing of it, or it would
//! have answered). Idle connections older than [`IDLE_MAX`] are dropped
//! rather than reused, well before the broker's own 60 s idle timeout.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_lite::future;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use glommio::timer::Timer;
use shards::http::client::{ClientResponse, DecodedResponse, ResponseDecoder};

/// Idle connections kept per broker address on one shard.
const MAX_IDLE_PER_ADDR: usize = 256;
/// An idle connection older than this is closed, not reused (the broker
/// closes idle connections after 60 s by default).
const IDLE_MAX: Duration = Duration::from_secs(20);
/// Bytes asked of the socket per read.
const READ_SIZE: usize = 64 * 1024;
/// Bodies up to this size are written together with the head (one write).
const COALESCE_BODY: usize = 16 * 1024;
/// Largest response body accepted from a broker (256 MiB: far above any
/// pop batch the broker builds).
const MAX_RESPONSE_BODY: usize = 256 * 1024 * 1024;

/// Why an exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// No connection, or the connection broke (502).
    Unreachable,
    /// The deadline passed (504).
    Timeout,
}

/// One idle connection.
#[derive(Debug)]
struct Idle {
    /// The stream.
    stream: TcpStream,
    /// When it went idle.
    since: Instant,
}

/// How one attempt on one connection ended.
enum Attempt {
    /// A whole response.
    Done(ClientResponse),
    /// Failed before any response byte (safe to retry on a reused conn).
    FailedEarly,
    /// Failed after the response began.
    Failed,
}

/// A shard's upstream connections.
#[derive(Debug)]
pub struct Upstream {
    /// Idle keep-alive connections by broker address.
    idle: RefCell<HashMap<SocketAddr, Vec<Idle>>>,
    /// Connect timeout.
    connect_timeout: Duration,
}

impl Upstream {
    /// An empty pool.
    pub fn new(connect_timeout: Duration) -> Upstream {
        Upstream {
            idle: RefCell::new(HashMap::new()),
            connect_timeout,
        }
    }

    /// A pooled connection to `addr` young enough to reuse.
    fn take(&self, addr: SocketAddr) -> Option<TcpStream> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(&addr)?;
        while let Some(conn) = list.pop() {
            if conn.since.elapsed() < IDLE_MAX {
                return Some(conn.stream);
            }
        }
        None
    }

    fn put(&self, addr: SocketAddr, stream: TcpStream) {
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry(addr).or_default();
        if list.len() < MAX_IDLE_PER_ADDR {
            list.push(Idle {
                stream,
                since: Instant::now(),
            });
        }
    }

    async fn connect(&self, addr: SocketAddr) -> Result<TcpStream, UpstreamError> {
        let stream = TcpStream::connect_timeout(addr, self.connect_timeout)
            .await
            .map_err(|e| {
                log::debug!("upstream {addr}: connect failed: {e}");
                UpstreamError::Unreachable
            })?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// Sends `head` + `body` to `addr` and reads the response, all within
    /// `timeout`.
    pub async fn exchange(
        &self,
        addr: SocketAddr,
        head: &[u8],
        body: &[u8],
        head_request: bool,
        timeout: Duration,
    ) -> Result<ClientResponse, UpstreamError> {
        let work = async {
            if let Some(mut stream) = self.take(addr) {
                match attempt(&mut stream, head, body, head_request).await {
                    Attempt::Done(resp) => return Ok(self.finish(addr, stream, resp)),
                    Attempt::Failed => return Err(UpstreamError::Unreachable),
                    Attempt::FailedEarly => {} // closed while idle: retry fresh
                }
            }
            let mut stream = self.connect(addr).await?;
            match attempt(&mut stream, head, body, head_request).await {
                Attempt::Done(resp) => Ok(self.finish(addr, stream, resp)),
                Attempt::Failed | Attempt::FailedEarly => Err(UpstreamError::Unreachable),
            }
        };
        let timer = async {
            Timer::new(timeout).await;
            Err(UpstreamError::Timeout)
        };
        future::or(work, timer).await
    }

    fn finish(&self, addr: SocketAddr, stream: TcpStream, resp: ClientResponse) -> ClientResponse {
        if resp.keep_alive {
            self.put(addr, stream);
        }
        resp
    }
}

/// One request and its response on `stream`.
async fn attempt(stream: &mut TcpStream, head: &[u8], body: &[u8], head_request: bool) -> Attempt {
    let written = if body.len() <= COALESCE_BODY {
        let mut one = Vec::with_capacity(head.len() + body.len());
        one.extend_from_slice(head);
        one.extend_from_slice(body);
        stream.write_all(&one).await
    } else {
        match stream.write_all(head).await {
            Ok(()) => stream.write_all(body).await,
            Err(e) => Err(e),
        }
    };
    if written.is_err() {
        return Attempt::FailedEarly;
    }
    let mut dec = ResponseDecoder::new(head_request, MAX_RESPONSE_BODY);
    let mut buf: Vec<u8> = Vec::with_capacity(READ_SIZE);
    let mut chunk = vec![0u8; READ_SIZE];
    let mut got_any = false;
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            Err(_) if !got_any => return Attempt::FailedEarly,
            Err(_) => return Attempt::Failed,
        };
        if n == 0 && !got_any {
            return Attempt::FailedEarly;
        }
        got_any = true;
        buf.extend_from_slice(&chunk[..n]);
        match dec.decode(&mut buf, n == 0) {
            Ok(DecodedResponse::Response(resp)) => return Attempt::Done(resp),
            Ok(DecodedResponse::Incomplete) => {}
            Err(e) => {
                log::debug!("upstream response refused: {e}");
                return Attempt::Failed;
            }
        }
    }
}
