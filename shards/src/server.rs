//! What a server is told: its settings ([`ServerConfig`]) and what answers
//! its requests ([`Handler`]). Both the listener (`listen`) and each
//! connection (`conn`) read them, so they live below both.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use crate::http::{Limits, Request, Response, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADER_BYTES};

/// Default head timeout (10 s): a client has this long from the first byte
/// of a request to the end of its headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default keep-alive idle timeout (60 s) between requests.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default body timeout (30 s), from the end of the head to the end of the
/// body; also bounds writing a response.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default connection limit per shard (10 000); past it new connections
/// are accepted and closed at once, so the backlog does not fill.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Server settings; every shard gets the same immutable copy (in an `Rc`).
/// Changing any of them needs a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address every shard binds (with `SO_REUSEPORT`).
    pub addr: SocketAddr,
    /// Request line plus headers, in bytes; more is a 431.
    pub max_header_bytes: usize,
    /// Request body, in bytes; more is a 413.
    pub max_body_bytes: usize,
    /// First byte of a request to end of headers; past it a 408.
    pub header_timeout: Duration,
    /// Keep-alive idle time between requests; past it the connection closes.
    pub idle_timeout: Duration,
    /// End of headers to end of body (past it a 408), and per response write.
    pub body_timeout: Duration,
    /// Live connections per shard; more are accepted and closed.
    pub max_connections: usize,
    /// Serve HTTPS with this certificate instead of plaintext HTTP.
    pub tls: Option<crate::tls::TlsSetup>,
    /// Accept to end of the TLS handshake; past it the connection closes.
    pub handshake_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            addr: SocketAddr::from(([0, 0, 0, 0], 6632)),
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            tls: None,
            handshake_timeout: crate::tls::DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }
}

impl ServerConfig {
    /// The defaults, listening on `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        ServerConfig {
            addr,
            ..Default::default()
        }
    }

    /// The codec limits of this configuration.
    pub fn limits(&self) -> Limits {
        Limits {
            max_header_bytes: self.max_header_bytes,
            max_body_bytes: self.max_body_bytes,
        }
    }
}

/// Answers requests. Runs on the connection's shard; the returned future
/// is dropped unfinished if the client disconnects while it runs.
pub trait Handler: 'static {
    /// Produces the response to `req`.
    fn handle(&self, req: Request) -> Pin<Box<dyn Future<Output = Response>>>;
}

impl<F, Fut> Handler for F
where
    F: Fn(Request) -> Fut + 'static,
    Fut: Future<Output = Response> + 'static,
{
    fn handle(&self, req: Request) -> Pin<Box<dyn Future<Output = Response>>> {
        Box::pin(self(req))
    }
}
