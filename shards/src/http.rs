//! HTTP/1.1 server side: the types a handler sees ([`Request`],
//! [`Response`], [`Method`]), the sans-I/O request [`Decoder`] and the
//! errors the codec answers by itself ([`HttpError`]).
//!
//! Everything here is pure and runs on whichever shard owns the connection;
//! `listen.rs` does the I/O.
//!
//! Decisions (inferred): a percent escape that is not `%` + two hex digits
//! makes [`Request::segments`] fail (400) but is kept literally by
//! [`Request::query_param`]; HTTP/1.0 requests are served and closed unless
//! they send `Connection: keep-alive`; `Transfer-Encoding` other than
//! `chunked` (alone) is a 400; trailers after the last chunk are read and
//! dropped.

pub mod client;
mod codec;
mod request;
mod response;
mod spliced;

pub use codec::{Decoded, Decoder, Limits, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADER_BYTES};
pub use request::{percent_decode, Method, Request};
pub use response::Response;
pub use spliced::{Shared, Spliced};

use std::fmt;

/// Most headers a request may carry; more is a 431.
pub const MAX_HEADERS: usize = 100;

/// A request the codec refuses; each maps to one status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// Malformed request line or headers (httparse's reason).
    BadRequest {
        /// What was wrong.
        reason: &'static str,
    },
    /// The head exceeded `max_header_bytes` or [`MAX_HEADERS`].
    HeadersTooLarge {
        /// The byte limit in force.
        limit: usize,
    },
    /// The body exceeds `max_body_bytes`.
    PayloadTooLarge {
        /// The byte limit in force.
        limit: usize,
    },
    /// Bad chunked framing.
    BadChunk {
        /// What was wrong.
        reason: &'static str,
    },
    /// A path segment is not valid percent-encoded UTF-8.
    BadPath,
    /// The head or body did not arrive in time.
    Timeout,
}

impl HttpError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            HttpError::BadRequest { .. } | HttpError::BadChunk { .. } | HttpError::BadPath => 400,
            HttpError::HeadersTooLarge { .. } => 431,
            HttpError::PayloadTooLarge { .. } => 413,
            HttpError::Timeout => 408,
        }
    }

    /// The machine-readable `code` of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            HttpError::BadRequest { .. } | HttpError::BadChunk { .. } | HttpError::BadPath => {
                "bad_request"
            }
            HttpError::HeadersTooLarge { .. } => "headers_too_large",
            HttpError::PayloadTooLarge { .. } => "payload_too_large",
            HttpError::Timeout => "request_timeout",
        }
    }

    /// The response: JSON `{"error": .., "code": ..}`. The caller closes
    /// the connection after it.
    pub fn to_response(&self) -> Response {
        let body = format!(
            "{{\"error\":\"{}\",\"code\":\"{}\"}}",
            json_escape(&self.to_string()),
            self.code()
        );
        Response::json(self.status(), body.into_bytes())
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadRequest { reason } => write!(f, "malformed request: {reason}"),
            HttpError::HeadersTooLarge { limit } => {
                write!(
                    f,
                    "request headers exceed {limit} bytes or {MAX_HEADERS} headers"
                )
            }
            HttpError::PayloadTooLarge { limit } => {
                write!(f, "request body exceeds {limit} bytes")
            }
            HttpError::BadChunk { reason } => write!(f, "bad chunked encoding: {reason}"),
            HttpError::BadPath => write!(f, "path is not valid percent-encoded UTF-8"),
            HttpError::Timeout => write!(f, "request not received in time"),
        }
    }
}

impl std::error::Error for HttpError {}

/// Escapes `s` for use inside a JSON string literal.
fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_json_with_code() {
        let r = HttpError::PayloadTooLarge { limit: 10 }.to_response();
        assert_eq!(r.status, 413);
        assert_eq!(
            String::from_utf8(r.body).expect("utf8"),
            r#"{"error":"request body exceeds 10 bytes","code":"payload_too_large"}"#
        );
        assert_eq!(HttpError::HeadersTooLarge { limit: 1 }.status(), 431);
        assert_eq!(HttpError::Timeout.code(), "request_timeout");
        assert_eq!(json_escape("a\"b\\\n"), "a\\\"b\\\\\\u000a");
    }
}
