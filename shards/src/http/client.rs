//! HTTP/1.1 client side, sans-I/O: the [`ResponseDecoder`] that turns an
//! upstream connection's bytes into a [`ClientResponse`]. A caller that
//! forwards requests (the front proxy) writes the request itself and feeds
//! what it reads here. Pure; runs on the shard that owns the connection.
//!
//! Framing follows RFC 9112 §6.3: no body for a HEAD request and for 1xx,
//! 204 and 304; otherwise chunked, `Content-Length`, or (neither) the body
//! runs to the close of the connection. Interim 1xx answers are skipped
//! (nothing we send asks for `100 Continue`, but a server may send one).
//! The chunked and length parts are the request decoder's own code.

use httparse::Status;

use super::codec::{decode_body, keep_alive, Framing};
use super::{HttpError, MAX_HEADERS};

/// One upstream response with its whole (de-chunked) body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResponse {
    /// Status code.
    pub status: u16,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Whether the connection may carry another request.
    pub keep_alive: bool,
}

/// What one call of [`ResponseDecoder::decode`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodedResponse {
    /// Need more bytes (normal).
    Incomplete,
    /// A whole response; bytes after it stay in the buffer.
    Response(ClientResponse),
}

/// How the body of the current response ends.
#[derive(Debug)]
enum BodyEnd {
    /// Length or chunked framing.
    Framed(Framing),
    /// At the close of the connection.
    Close,
}

/// Progress within the current response.
#[derive(Debug)]
enum State {
    /// Waiting for a complete (non-1xx) head.
    Head,
    /// Head parsed; reading the body.
    Body {
        /// The response so far (body empty).
        resp: ClientResponse,
        /// How it ends.
        end: BodyEnd,
    },
}

/// Decodes the one response to the request just written.
#[derive(Debug)]
pub struct ResponseDecoder {
    /// The request was HEAD: the response has no body whatever it says.
    head_request: bool,
    /// Longest body accepted, in bytes.
    max_body: usize,
    /// Where we are.
    state: State,
}

impl ResponseDecoder {
    /// A decoder for the answer to a request (`head_request` for HEAD),
    /// refusing bodies over `max_body` bytes.
    pub fn new(head_request: bool, max_body: usize) -> ResponseDecoder {
        ResponseDecoder {
            head_request,
            max_body,
            state: State::Head,
        }
    }

    /// True once a head has been parsed (some response bytes arrived).
    pub fn started(&self) -> bool {
        matches!(self.state, State::Body { .. })
    }

    /// Consumes what it can of `buf`'s front; `eof` says the peer closed
    /// (which ends a close-delimited body, and is an error anywhere else).
    pub fn decode(&mut self, buf: &mut Vec<u8>, eof: bool) -> Result<DecodedResponse, HttpError> {
        if let State::Head = self.state {
            loop {
                match self.parse_head(buf)? {
                    None if eof => {
                        return Err(HttpError::BadRequest {
                            reason: "connection closed before a response",
                        })
                    }
                    None => return Ok(DecodedResponse::Incomplete),
                    Some(None) => continue, // a 1xx was skipped
                    Some(Some((resp, end))) => {
                        self.state = State::Body { resp, end };
                        break;
                    }
                }
            }
        }
        let State::Body { resp, end } = &mut self.state else {
            unreachable!("state is Body after the head was parsed")
        };
        let done = match end {
            BodyEnd::Framed(framing) => decode_body(buf, &mut resp.body, framing, self.max_body)?,
            BodyEnd::Close => {
                if resp.body.len().saturating_add(buf.len()) > self.max_body {
                    return Err(HttpError::PayloadTooLarge {
                        limit: self.max_body,
                    });
                }
                resp.body.append(buf);
                eof
            }
        };
        if !done {
            if eof {
                return Err(HttpError::BadChunk {
                    reason: "connection closed inside a response body",
                });
            }
            return Ok(DecodedResponse::Incomplete);
        }
        match std::mem::replace(&mut self.state, State::Head) {
            State::Body { resp, .. } => Ok(DecodedResponse::Response(resp)),
            State::Head => unreachable!("state was Body just above"),
        }
    }

    /// Parses one head off `buf`: `None` incomplete, `Some(None)` a 1xx
    /// that was consumed, `Some(Some(..))` the final head.
    #[allow(clippy::type_complexity)]
    fn parse_head(
        &self,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Option<(ClientResponse, BodyEnd)>>, HttpError> {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut slots);
        let len = match parsed.parse(buf) {
            Ok(Status::Complete(len)) => len,
            Ok(Status::Partial) => return Ok(None),
            Err(_) => {
                return Err(HttpError::BadRequest {
                    reason: "malformed response head",
                })
            }
        };
        let (Some(status), Some(version)) = (parsed.code, parsed.version) else {
            return Err(HttpError::BadRequest {
                reason: "incomplete status line",
            });
        };
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
        buf.drain(..len);
        if (100..200).contains(&status) {
            return Ok(Some(None));
        }
        let end = self.body_end(status, &headers)?;
        let persist = keep_alive(&headers, version) && !matches!(end, BodyEnd::Close);
        let resp = ClientResponse {
            status,
            headers,
            body: Vec::new(),
            keep_alive: persist,
        };
        Ok(Some(Some((resp, end))))
    }

    /// The body framing of a final response.
    fn body_end(&self, status: u16, headers: &[(String, String)]) -> Result<BodyEnd, HttpError> {
        if self.head_request || status == 204 || status == 304 {
            return Ok(BodyEnd::Framed(Framing::Length(0)));
        }
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            return Ok(BodyEnd::Framed(Framing::ChunkSize));
        }
        let Some((_, len)) = headers.iter().find(|(n, _)| n == "content-length") else {
            return Ok(BodyEnd::Close);
        };
        let n: usize = len.trim().parse().map_err(|_| HttpError::BadRequest {
            reason: "invalid Content-Length in response",
        })?;
        if n > self.max_body {
            return Err(HttpError::PayloadTooLarge {
                limit: self.max_body,
            });
        }
        Ok(BodyEnd::Framed(Framing::Length(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(dec: &mut ResponseDecoder, bytes: &[u8], eof: bool) -> ClientResponse {
        let mut buf = bytes.to_vec();
        match dec.decode(&mut buf, eof).expect("decodes") {
            DecodedResponse::Response(r) => r,
            DecodedResponse::Incomplete => panic!("incomplete"),
        }
    }

    #[test]
    fn length_body_byte_by_byte_and_pipelined_rest_kept() {
        let raw = b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabcHTTP/1.1";
        let mut dec = ResponseDecoder::new(false, 1024);
        let mut buf = Vec::new();
        let mut out = None;
        for &b in raw.iter() {
            buf.push(b);
            if let DecodedResponse::Response(r) = dec.decode(&mut buf, false).expect("ok") {
                out = Some(r);
                break;
            }
        }
        let r = out.expect("a response");
        assert_eq!(
            (r.status, r.body.as_slice(), r.keep_alive),
            (201, &b"abc"[..], true)
        );
        assert_eq!(r.headers[1], ("x-a".to_string(), "b".to_string()));
    }

    #[test]
    fn chunked_close_delimited_head_and_interim() {
        let mut dec = ResponseDecoder::new(false, 1024);
        let r = whole(
            &mut dec,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
            false,
        );
        assert_eq!(r.body, b"ab");
        let mut dec = ResponseDecoder::new(false, 1024);
        let mut buf = b"HTTP/1.0 200 OK\r\n\r\nxyz".to_vec();
        assert_eq!(dec.decode(&mut buf, false), Ok(DecodedResponse::Incomplete));
        let r = whole(&mut dec, b"", true);
        assert_eq!((r.body.as_slice(), r.keep_alive), (&b"xyz"[..], false));
        let mut dec = ResponseDecoder::new(true, 1024);
        let r = whole(
            &mut dec,
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
            false,
        );
        assert!(r.body.is_empty());
    }

    #[test]
    fn early_close_and_oversize_are_errors() {
        let mut dec = ResponseDecoder::new(false, 1024);
        let mut buf = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab".to_vec();
        assert!(dec.decode(&mut buf, true).is_err());
        let mut dec = ResponseDecoder::new(false, 4);
        let mut buf = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n".to_vec();
        assert!(dec.decode(&mut buf, false).is_err());
        let mut dec = ResponseDecoder::new(false, 4);
        assert!(dec.decode(&mut Vec::new(), true).is_err());
    }
}
