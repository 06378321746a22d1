//! The sans-I/O request decoder: bytes in, [`Decoded`] out. Handles the
//! head (httparse), Content-Length and chunked bodies, `Expect:
//! 100-continue`, limits, and leaves pipelined bytes in the buffer.
//! Pure; runs on the connection's shard.

use httparse::Status;

use super::{HttpError, Method, Request, MAX_HEADERS};

/// Default limit of the request line plus headers, in bytes (64 KiB).
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;

/// Default limit of a request body, in bytes (16 MiB); the broker sets its
/// own from its configuration.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Longest chunk-size line (size, extensions, CRLF) we accept.
const MAX_CHUNK_LINE: usize = 1024;

/// Size limits of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Request line plus headers, in bytes; more is a 431.
    pub max_header_bytes: usize,
    /// Decoded body, in bytes; more is a 413.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// What one call of [`Decoder::decode`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Need more bytes (normal, not an error).
    Incomplete,
    /// The client awaits `HTTP/1.1 100 Continue` before sending the body:
    /// write it, then read and decode again.
    Continue,
    /// A whole request; bytes after it stay in the buffer.
    Request {
        /// The request.
        req: Request,
        /// Whether the connection may serve another request afterwards.
        keep_alive: bool,
    },
}

/// Where the decoder is inside the current request.
#[derive(Debug)]
enum State {
    /// Waiting for a complete head.
    Head,
    /// Head parsed; reading the body.
    Body {
        /// The request so far (body empty).
        req: Request,
        /// Connection persistence from the head.
        keep_alive: bool,
        /// Framing of the body.
        framing: Framing,
    },
}

/// Body framing of the current request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Exactly this many bytes.
    Length(usize),
    /// Expecting a chunk-size line.
    ChunkSize,
    /// Inside a chunk: this many data bytes left.
    ChunkData(usize),
    /// After chunk data: expecting CRLF.
    ChunkEnd,
    /// After the last chunk: reading trailer lines until an empty one.
    Trailers(usize),
}

/// Decodes requests from a connection's read buffer, one at a time.
#[derive(Debug)]
pub struct Decoder {
    /// Limits in force.
    limits: Limits,
    /// Progress within the current request.
    state: State,
}

impl Decoder {
    /// A decoder at the start of a request.
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            state: State::Head,
        }
    }

    /// True once some byte of the current request was seen (the head timer
    /// runs), false while idle between requests.
    pub fn in_progress(&self, buf: &[u8]) -> bool {
        matches!(self.state, State::Body { .. }) || !buf.is_empty()
    }

    /// True while reading a body (the body timer runs).
    pub fn in_body(&self) -> bool {
        matches!(self.state, State::Body { .. })
    }

    /// Consumes what it can of `buf`'s front. After an error the connection
    /// must be answered with [`HttpError::to_response`] and closed.
    pub fn decode(&mut self, buf: &mut Vec<u8>) -> Result<Decoded, HttpError> {
        if let State::Head = self.state {
            let Some((req, keep_alive, framing, expect)) = self.parse_head(buf)? else {
                return Ok(Decoded::Incomplete);
            };
            self.state = State::Body {
                req,
                keep_alive,
                framing,
            };
            if expect && buf.is_empty() && framing != Framing::Length(0) {
                return Ok(Decoded::Continue);
            }
        }
        let max_body = self.limits.max_body_bytes;
        let State::Body { req, framing, .. } = &mut self.state else {
            unreachable!("state is Body after the head was parsed")
        };
        if !decode_body(buf, &mut req.body, framing, max_body)? {
            return Ok(Decoded::Incomplete);
        }
        match std::mem::replace(&mut self.state, State::Head) {
            State::Body {
                req, keep_alive, ..
            } => Ok(Decoded::Request { req, keep_alive }),
            State::Head => unreachable!("state was Body just above"),
        }
    }

    /// Parses a complete head off `buf`'s front, if there is one.
    #[allow(clippy::type_complexity)]
    fn parse_head(
        &self,
        buf: &mut Vec<u8>,
    ) -> Result<Option<(Request, bool, Framing, bool)>, HttpError> {
        let limit = self.limits.max_header_bytes;
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut slots);
        let len = match parsed.parse(buf) {
            Ok(Status::Complete(len)) if len <= limit => len,
            Ok(Status::Complete(_)) => return Err(HttpError::HeadersTooLarge { limit }),
            Ok(Status::Partial) if buf.len() > limit => {
                return Err(HttpError::HeadersTooLarge { limit })
            }
            Ok(Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(HttpError::HeadersTooLarge { limit })
            }
            Err(e) => {
                return Err(HttpError::BadRequest {
                    reason: parse_reason(e),
                })
            }
        };
        // httparse guarantees method, path and version on Complete.
        let (Some(method), Some(target), Some(version)) =
            (parsed.method, parsed.path, parsed.version)
        else {
            return Err(HttpError::BadRequest {
                reason: "incomplete request line",
            });
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
        let mut req = Request {
            method: Method::parse(method),
            path: path.to_string(),
            query: query.to_string(),
            headers,
            body: Vec::new(),
            peer: None,
        };
        let framing = body_framing(&req.headers, self.limits.max_body_bytes)?;
        let keep_alive = keep_alive(&req.headers, version);
        let expect = version == 1
            && req
                .header("expect")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"));
        buf.drain(..len);
        req.body.reserve(match framing {
            Framing::Length(n) => n,
            _ => 0,
        });
        Ok(Some((req, keep_alive, framing, expect)))
    }
}

/// Body framing from the headers; 413 early when Content-Length is too big.
fn body_framing(headers: &[(String, String)], max_body: usize) -> Result<Framing, HttpError> {
    let mut length: Option<usize> = None;
    let mut chunked = false;
    for (name, value) in headers {
        if name == "content-length" {
            let value = value.trim();
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HttpError::BadRequest {
                    reason: "invalid Content-Length",
                });
            }
            let n: usize = value
                .parse()
                .map_err(|_| HttpError::PayloadTooLarge { limit: max_body })?;
            if length.is_some_and(|prev| prev != n) {
                return Err(HttpError::BadRequest {
                    reason: "conflicting Content-Length",
                });
            }
            length = Some(n);
        } else if name == "transfer-encoding" {
            if chunked || !value.trim().eq_ignore_ascii_case("chunked") {
                return Err(HttpError::BadRequest {
                    reason: "unsupported Transfer-Encoding",
                });
            }
            chunked = true;
        }
    }
    match (length, chunked) {
        (Some(_), true) => Err(HttpError::BadRequest {
            reason: "both Content-Length and Transfer-Encoding",
        }),
        (Some(n), false) if n > max_body => Err(HttpError::PayloadTooLarge { limit: max_body }),
        (Some(n), false) => Ok(Framing::Length(n)),
        (None, true) => Ok(Framing::ChunkSize),
        (None, false) => Ok(Framing::Length(0)),
    }
}

/// HTTP/1.1 persists unless `Connection: close`; HTTP/1.0 only with
/// `Connection: keep-alive`.
pub(super) fn keep_alive(headers: &[(String, String)], version: u8) -> bool {
    let has = |token: &str| {
        headers.iter().any(|(n, v)| {
            n == "connection" && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token))
        })
    };
    if version == 1 {
        !has("close")
    } else {
        has("keep-alive")
    }
}

/// Moves body bytes from `buf` into `body`; true once the body is whole.
/// The response decoder (`client.rs`) shares it.
pub(super) fn decode_body(
    buf: &mut Vec<u8>,
    body: &mut Vec<u8>,
    framing: &mut Framing,
    max_body: usize,
) -> Result<bool, HttpError> {
    loop {
        match *framing {
            Framing::Length(n) => {
                let take = (n - body.len()).min(buf.len());
                body.extend_from_slice(&buf[..take]);
                buf.drain(..take);
                return Ok(body.len() == n);
            }
            Framing::ChunkSize => {
                let Some(line) = take_line(buf, MAX_CHUNK_LINE)? else {
                    return Ok(false);
                };
                let size = parse_chunk_size(&line)?;
                if body.len().saturating_add(size) > max_body {
                    return Err(HttpError::PayloadTooLarge { limit: max_body });
                }
                *framing = if size == 0 {
                    Framing::Trailers(0)
                } else {
                    Framing::ChunkData(size)
                };
            }
            Framing::ChunkData(left) => {
                let take = left.min(buf.len());
                body.extend_from_slice(&buf[..take]);
                buf.drain(..take);
                if take < left {
                    *framing = Framing::ChunkData(left - take);
                    return Ok(false);
                }
                *framing = Framing::ChunkEnd;
            }
            Framing::ChunkEnd => match take_line(buf, 2)? {
                None => return Ok(false),
                Some(line) if line.is_empty() => *framing = Framing::ChunkSize,
                Some(_) => {
                    return Err(HttpError::BadChunk {
                        reason: "missing CRLF after chunk",
                    })
                }
            },
            Framing::Trailers(seen) => {
                let Some(line) = take_line(buf, MAX_CHUNK_LINE * 64)? else {
                    return Ok(false);
                };
                if line.is_empty() {
                    return Ok(true);
                }
                *framing = Framing::Trailers(seen + line.len());
                if seen + line.len() > MAX_CHUNK_LINE * 64 {
                    return Err(HttpError::BadChunk {
                        reason: "trailers too large",
                    });
                }
            }
        }
    }
}

/// Takes one line (without CRLF or bare LF) off `buf`'s front. `None` when
/// no line end yet; an error when the line would exceed `max` bytes.
fn take_line(buf: &mut Vec<u8>, max: usize) -> Result<Option<Vec<u8>>, HttpError> {
    let Some(pos) = buf.iter().take(max + 2).position(|&b| b == b'\n') else {
        if buf.len() > max + 1 {
            return Err(HttpError::BadChunk {
                reason: "line too long",
            });
        }
        return Ok(None);
    };
    let mut line: Vec<u8> = buf.drain(..=pos).collect();
    line.pop(); // the '\n' found above
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Some(line))
}

/// Parses `HEX[;extensions]`.
fn parse_chunk_size(line: &[u8]) -> Result<usize, HttpError> {
    let hex = line.split(|&b| b == b';').next().unwrap_or(&[]);
    let hex = hex.trim_ascii();
    if hex.is_empty() {
        return Err(HttpError::BadChunk {
            reason: "empty chunk size",
        });
    }
    let mut size: usize = 0;
    for &b in hex {
        let digit = (b as char).to_digit(16).ok_or(HttpError::BadChunk {
            reason: "invalid chunk size",
        })?;
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(digit as usize))
            .ok_or(HttpError::BadChunk {
                reason: "chunk size overflows",
            })?;
    }
    Ok(size)
}

/// httparse's error as a short static reason.
fn parse_reason(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status",
        httparse::Error::Token => "invalid token in request line",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "invalid HTTP version",
    }
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
