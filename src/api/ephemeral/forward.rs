//! Forwarding an ephemeral request to the broker that owns its partition:
//! a plain HTTP/1.1 request over a fresh loopback-or-LAN TCP connection
//! (`Connection: close`), with the caller's `Authorization` and
//! `x-queen-tenant` so the owner checks them itself, and
//! [`FWD_HEADER`](super::FWD_HEADER) naming this broker. The owner's answer
//! (status, body, `Retry-After`) goes back to the client as it is.
//!
//! Trade-offs: a connection per forwarded request costs a TCP handshake
//! (tens of µs on a LAN) but has no idle pool to go stale; forwarding is
//! the cross-broker path, not the hot one (a client that keeps its queue on
//! one broker never forwards). Forwarding speaks plain HTTP: with
//! `QUEEN_TLS_CERT` set on the owners, forwarding fails with 503 (README).

use super::FWD_HEADER;
use crate::shard::ephemeral::owner::Member;
use crate::shard::ephemeral::EphError;
use crate::shard::Shard;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use shards::http::{Request, Response};
use std::net::SocketAddr;
use std::time::Duration;

/// Connect timeout: a live peer on a LAN answers in milliseconds; past this
/// the peer is as good as gone and the client retries (503).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Answer timeout beyond the request's own long-poll budget.
const ANSWER_SLACK: Duration = Duration::from_secs(10);
/// Largest forwarded answer read, bytes (a pop of 10,000 large messages
/// fits; anything bigger is refused rather than buffered).
const MAX_ANSWER_BYTES: usize = 256 * 1024 * 1024;

/// What to send.
#[derive(Debug)]
pub struct Forward<'a> {
    /// Method.
    pub method: &'a str,
    /// Path and query, e.g. `/api/v1/ephemeral/pop?queue=q`.
    pub target: String,
    /// JSON body (empty: none).
    pub body: Vec<u8>,
    /// The client's request (its auth and tenant headers travel).
    pub req: &'a Request,
    /// Long-poll budget the owner may use.
    pub wait: Duration,
}

/// Sends `f` to `to` and returns its answer.
pub async fn forward(shard: &Shard, to: &Member, f: Forward<'_>) -> Result<Response, EphError> {
    let addr: SocketAddr = to
        .http
        .parse()
        .map_err(|_| EphError::Unavailable("the owning broker's address is not ip:port"))?;
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{}: {}\r\n",
        f.method,
        f.target,
        to.http,
        FWD_HEADER,
        shard.eph.members.borrow().me.id
    );
    for name in ["authorization", "x-queen-tenant"] {
        if let Some(v) = f.req.header(name) {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    if !f.body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            f.body.len()
        ));
    }
    head.push_str("\r\n");
    fn unreachable<E>(_: E) -> EphError {
        EphError::Unavailable("the owning broker is unreachable")
    }
    let mut s = TcpStream::connect_timeout(addr, CONNECT_TIMEOUT)
        .await
        .map_err(unreachable)?;
    let _ = s.set_read_timeout(Some(f.wait + ANSWER_SLACK));
    s.write_all(head.as_bytes()).await.map_err(unreachable)?;
    s.write_all(&f.body).await.map_err(unreachable)?;
    s.flush().await.map_err(unreachable)?;
    let mut raw = Vec::new();
    (&mut s)
        .take(MAX_ANSWER_BYTES as u64)
        .read_to_end(&mut raw)
        .await
        .map_err(unreachable)?;
    parse(&raw).ok_or(EphError::Unavailable("the owning broker answered garbage"))
}

/// Parses a whole HTTP/1.1 answer (read to EOF).
fn parse(raw: &[u8]) -> Option<Response> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(at) = r.parse(raw).ok()? else {
        return None;
    };
    let status = r.code?;
    let mut body = &raw[at..];
    let mut retry_after = None;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = std::str::from_utf8(h.value).ok()?.trim().parse().ok()?;
            body = body.get(..n)?;
        } else if h.name.eq_ignore_ascii_case("retry-after") {
            retry_after = std::str::from_utf8(h.value).ok().map(str::to_string);
        }
    }
    let mut resp = Response::json(status, body.to_vec());
    if let Some(v) = retry_after {
        resp = resp.with_header("Retry-After", v);
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_an_answer() {
        let raw = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nRetry-After: 1\r\n\r\n{}junk";
        let r = super::parse(raw).unwrap();
        assert_eq!(r.status, 503);
        assert_eq!(r.body, b"{}");
        assert!(super::parse(b"HTTP/1.1 20").is_none());
    }
}
