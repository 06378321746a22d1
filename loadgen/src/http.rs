//! A minimal blocking HTTP/1.1 keep-alive client over `std::net::TcpStream`.
//!
//! One [`Client`] is one TCP connection with one request in flight (closed
//! loop), driven by one OS thread. Why not an async client: at the rates this
//! box can reach (a few thousand requests/s) a blocked thread costs nothing,
//! and the per-request work here is one `write` and usually one `read`, with
//! buffers reused across requests, so the generator stays at a few percent of
//! one core. Only what the bench needs is handled: `Content-Length` and
//! chunked bodies, `Connection: close`, reconnect after a transport error.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest header block accepted before the response is called malformed.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Why a request got no HTTP response.
#[derive(Debug)]
pub enum HttpError {
    /// Could not open the TCP connection.
    Connect(io::Error),
    /// Read or write failed (includes the read timeout).
    Io(io::Error),
    /// The peer closed the connection before a full response.
    Closed,
    /// The bytes received are not an HTTP/1.1 response we understand.
    Malformed(&'static str),
    /// The server sent this many bytes after the previous response, before
    /// the next request.
    Unsolicited(usize),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Connect(e) => write!(f, "connect: {e}"),
            // A read timeout (SO_RCVTIMEO) surfaces as EAGAIN: name it.
            HttpError::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                write!(f, "timed out waiting for the response")
            }
            HttpError::Io(e) => write!(f, "io: {e}"),
            HttpError::Closed => write!(f, "connection closed mid-response"),
            HttpError::Malformed(why) => write!(f, "malformed response: {why}"),
            HttpError::Unsolicited(n) => {
                write!(
                    f,
                    "server sent {n} unsolicited bytes after the previous response"
                )
            }
        }
    }
}

impl std::error::Error for HttpError {}

/// Host and port of the broker, parsed once from `http://host:port`.
#[derive(Debug, Clone)]
pub struct Target {
    /// Resolved address every connection dials.
    pub addr: SocketAddr,
    /// Value of the `Host` header.
    pub host: String,
    /// Bearer token sent on every request (`http://TOKEN@host:port`, as a
    /// run through queen-proxy with an API key needs).
    pub bearer: Option<String>,
}

impl Target {
    /// Parses `http://[TOKEN@]host[:port][/]`; only plain HTTP is supported.
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("only http:// URLs are supported: {url}"))?;
        let (bearer, rest) = match rest.split_once('@') {
            Some((token, hostport)) => (Some(token.to_string()), hostport),
            None => (None, rest),
        };
        let host = rest.trim_end_matches('/').to_string();
        let with_port = if host.contains(':') {
            host.clone()
        } else {
            format!("{host}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("resolve {with_port}: {e}"))?
            .next()
            .ok_or_else(|| format!("resolve {with_port}: no address"))?;
        Ok(Target { addr, host, bearer })
    }
}

/// One keep-alive connection. Not `Sync`: each thread owns its own.
#[derive(Debug)]
pub struct Client {
    /// Where to (re)connect.
    target: Target,
    /// Open connection, or `None` after an error or `Connection: close`.
    stream: Option<TcpStream>,
    /// Read timeout applied to every request (long polls need more).
    timeout: Duration,
    /// Outgoing request bytes, reused.
    wbuf: Vec<u8>,
    /// Incoming bytes not yet consumed, reused.
    rbuf: Vec<u8>,
    /// Body of the last response.
    body: Vec<u8>,
    /// Read landing area, zeroed once: zeroing a fresh buffer per read was
    /// the generator's largest user-space cost.
    chunk: Box<[u8]>,
}

impl Client {
    /// A client that connects lazily on the first request.
    pub fn new(target: Target, timeout: Duration) -> Client {
        Client {
            target,
            stream: None,
            timeout,
            wbuf: Vec::with_capacity(16 * 1024),
            rbuf: Vec::with_capacity(64 * 1024),
            body: Vec::with_capacity(64 * 1024),
            chunk: vec![0u8; 32 * 1024].into_boxed_slice(),
        }
    }

    /// Changes the per-request read timeout.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
        if let Some(s) = &self.stream {
            let _ = s.set_read_timeout(Some(timeout));
        }
    }

    /// Body of the last successful response.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// `GET path`; returns the status, body in [`Client::body`].
    pub fn get(&mut self, path: &str) -> Result<u16, HttpError> {
        self.request("GET", path, None)
    }

    /// `POST path` with a JSON body.
    pub fn post(&mut self, path: &str, json: &[u8]) -> Result<u16, HttpError> {
        self.request("POST", path, Some(json))
    }

    /// Sends one request and reads its whole response. On any error the
    /// connection is dropped and the next request reconnects.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<u16, HttpError> {
        let r = self.exchange(method, path, body);
        if r.is_err() {
            self.stream = None;
            self.rbuf.clear();
        }
        r
    }

    fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<u16, HttpError> {
        if !self.rbuf.is_empty() {
            // Bytes nobody asked for (e.g. a second response to one request):
            // the connection is out of step, so it is dropped, and this
            // request fails unsent rather than take that answer as its own.
            return Err(HttpError::Unsolicited(self.rbuf.len()));
        }
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(&self.target.addr, Duration::from_secs(5))
                .map_err(HttpError::Connect)?;
            s.set_nodelay(true).map_err(HttpError::Connect)?;
            s.set_read_timeout(Some(self.timeout))
                .map_err(HttpError::Connect)?;
            self.stream = Some(s);
            self.rbuf.clear();
        }
        self.wbuf.clear();
        let _ = write!(
            self.wbuf,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
            self.target.host
        );
        if let Some(token) = &self.target.bearer {
            let _ = write!(self.wbuf, "Authorization: Bearer {token}\r\n");
        }
        if let Some(b) = body {
            let _ = write!(
                self.wbuf,
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                b.len()
            );
            self.wbuf.extend_from_slice(b);
        } else {
            self.wbuf.extend_from_slice(b"\r\n");
        }
        // Checked just above: the stream was opened if it was missing.
        let stream = self.stream.as_mut().expect("stream opened above");
        stream.write_all(&self.wbuf).map_err(HttpError::Io)?;
        self.read_response(method == "HEAD")
    }

    /// Reads until `rbuf` holds at least `want` bytes.
    fn fill(&mut self, want: usize) -> Result<(), HttpError> {
        let stream = self.stream.as_mut().ok_or(HttpError::Closed)?;
        while self.rbuf.len() < want {
            let n = stream.read(&mut self.chunk).map_err(HttpError::Io)?;
            if n == 0 {
                return Err(HttpError::Closed);
            }
            self.rbuf.extend_from_slice(&self.chunk[..n]);
        }
        Ok(())
    }

    /// Reads more bytes (at least one) into `rbuf`.
    fn fill_more(&mut self) -> Result<(), HttpError> {
        let want = self.rbuf.len() + 1;
        self.fill(want)
    }

    fn read_response(&mut self, head_only: bool) -> Result<u16, HttpError> {
        let head_end = loop {
            if let Some(p) = find(&self.rbuf, b"\r\n\r\n") {
                break p + 4;
            }
            if self.rbuf.len() > MAX_HEAD_BYTES {
                return Err(HttpError::Malformed("header block too large"));
            }
            self.fill_more()?;
        };
        let head = Head::parse(&self.rbuf[..head_end])?;
        self.rbuf.drain(..head_end);
        self.body.clear();
        let no_body = head_only || head.status == 204 || head.status == 304 || head.status < 200;
        if no_body {
        } else if head.chunked {
            self.read_chunked()?;
        } else if let Some(n) = head.content_length {
            self.fill(n)?;
            self.body.extend_from_slice(&self.rbuf[..n]);
            self.rbuf.drain(..n);
        } else {
            // No length: the body runs to the end of the connection.
            loop {
                match self.fill_more() {
                    Ok(()) => {}
                    Err(HttpError::Closed) => break,
                    Err(e) => return Err(e),
                }
            }
            self.body.append(&mut self.rbuf);
            self.stream = None;
        }
        if head.close {
            self.stream = None;
        }
        Ok(head.status)
    }

    fn read_chunked(&mut self) -> Result<(), HttpError> {
        loop {
            let line_end = loop {
                if let Some(p) = find(&self.rbuf, b"\r\n") {
                    break p;
                }
                self.fill_more()?;
            };
            let line = std::str::from_utf8(&self.rbuf[..line_end])
                .map_err(|_| HttpError::Malformed("chunk size"))?;
            let hex = line.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(hex, 16).map_err(|_| HttpError::Malformed("chunk size"))?;
            self.rbuf.drain(..line_end + 2);
            if size == 0 {
                // Trailers (normally none) end with an empty line.
                loop {
                    if let Some(p) = find(&self.rbuf, b"\r\n") {
                        self.rbuf.drain(..p + 2);
                        if p == 0 {
                            return Ok(());
                        }
                    } else {
                        self.fill_more()?;
                    }
                }
            }
            self.fill(size + 2)?;
            self.body.extend_from_slice(&self.rbuf[..size]);
            self.rbuf.drain(..size + 2);
        }
    }
}

/// What the bench needs from a response head.
#[derive(Debug)]
struct Head {
    status: u16,
    content_length: Option<usize>,
    chunked: bool,
    close: bool,
}

impl Head {
    fn parse(bytes: &[u8]) -> Result<Head, HttpError> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| HttpError::Malformed("non-UTF-8 head"))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        if !version.starts_with("HTTP/1.") {
            return Err(HttpError::Malformed("status line"));
        }
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or(HttpError::Malformed("status code"))?;
        let mut head = Head {
            status,
            content_length: None,
            chunked: false,
            close: version == "HTTP/1.0",
        };
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = Some(
                    value
                        .parse()
                        .map_err(|_| HttpError::Malformed("content-length"))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                let v = value.to_ascii_lowercase();
                if v.contains("close") {
                    head.close = true;
                } else if v.contains("keep-alive") {
                    head.close = false;
                }
            }
        }
        Ok(head)
    }
}

/// Position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Number of non-overlapping occurrences of `needle` in `hay`.
pub fn count(hay: &[u8], needle: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while let Some(p) = find(&hay[i..], needle) {
        n += 1;
        i += p + needle.len();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// Serves the given raw responses, one per request, on one connection.
    fn serve(responses: Vec<&'static [u8]>) -> Target {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            for r in responses {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while find(&got, b"\r\n\r\n").is_none() {
                    let n = s.read(&mut buf).unwrap();
                    got.extend_from_slice(&buf[..n]);
                }
                s.write_all(r).unwrap();
            }
        });
        Target::parse(&format!("http://{addr}")).unwrap()
    }

    #[test]
    fn userinfo_of_the_url_is_the_bearer_token() {
        let t = Target::parse("http://qk_live_abc@127.0.0.1:6711/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.bearer.as_deref()),
            ("127.0.0.1:6711", Some("qk_live_abc"))
        );
        assert_eq!(Target::parse("http://127.0.0.1:1").unwrap().bearer, None);
    }

    #[test]
    fn reads_length_chunked_and_empty_bodies_on_one_connection() {
        let t = serve(vec![
            b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n[]",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ]);
        let mut c = Client::new(t, Duration::from_secs(5));
        assert_eq!(c.post("/a", b"{}").unwrap(), 201);
        assert_eq!(c.body(), b"[]");
        assert_eq!(c.get("/b").unwrap(), 200);
        assert_eq!(c.body(), b"abcde");
        assert_eq!(c.get("/c").unwrap(), 204);
        assert!(c.body().is_empty());
    }

    #[test]
    fn bytes_after_a_response_fail_the_next_request_unsent() {
        let t = serve(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 400 Bad\r\n\r\n",
        ]);
        let mut c = Client::new(t, Duration::from_secs(5));
        assert_eq!(c.get("/a").unwrap(), 200);
        assert!(matches!(c.get("/b"), Err(HttpError::Unsolicited(_))));
    }

    #[test]
    fn counts_occurrences() {
        assert_eq!(count(b"a\"x\"b\"x\"", b"\"x\""), 2);
        assert_eq!(count(b"", b"x"), 0);
    }
}
