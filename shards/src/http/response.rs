//! The response a handler returns, and its serialisation. Pure; runs on
//! the connection's shard.

use super::spliced::Spliced;

/// One HTTP response. The codec adds `Content-Length` and, when closing,
/// `Connection: close`; handlers should not set either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Extra headers, written as given.
    pub headers: Vec<(&'static str, String)>,
    /// The body (not sent for HEAD, but counted in `Content-Length`).
    pub body: Vec<u8>,
    /// When set, the body instead of `body` (which is then empty): text
    /// with ranges of a shared buffer spliced in, written piece by piece.
    pub spliced: Option<Spliced>,
}

impl Response {
    /// `status` with `Content-Type: application/json` and `body`.
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response::text(status, "application/json", body)
    }

    /// 204 No Content, no body.
    pub fn no_content() -> Response {
        Response {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
            spliced: None,
        }
    }

    /// `status` with the given `Content-Type` and `body`.
    pub fn text(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body: body.into(),
            spliced: None,
        }
    }

    /// `status` with `Content-Type: application/json` and a spliced body.
    pub fn json_spliced(status: u16, body: Spliced) -> Response {
        Response {
            spliced: Some(body),
            ..Response::json(status, Vec::new())
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// Appends the serialised response to `out`. `close` adds
    /// `Connection: close`; `head` omits the body. `Content-Length` is
    /// written for every status except 1xx, 204 and 304, where RFC 9110
    /// forbids a body.
    pub fn write_to(&self, out: &mut Vec<u8>, close: bool, head: bool) {
        self.write_head(out, close);
        for piece in self.body_pieces(head) {
            out.extend_from_slice(piece);
        }
    }

    /// The pieces that follow the head on the wire, in order: the body, or
    /// nothing for a HEAD request and the statuses that have none.
    pub fn body_pieces(&self, head: bool) -> Vec<&[u8]> {
        if head || self.bodyless() {
            Vec::new()
        } else if let Some(s) = &self.spliced {
            s.pieces().collect()
        } else {
            vec![&self.body]
        }
    }

    /// The body's length (`Content-Length`).
    pub fn body_len(&self) -> usize {
        self.spliced.as_ref().map_or(self.body.len(), Spliced::len)
    }

    /// Whether RFC 9110 forbids this status a body (1xx, 204, 304).
    fn bodyless(&self) -> bool {
        self.status < 200 || self.status == 204 || self.status == 304
    }

    /// Appends the status line and headers (through the blank line) to
    /// `out`, as [`Response::write_to`] does; the body is the caller's.
    pub fn write_head(&self, out: &mut Vec<u8>, close: bool) {
        out.extend_from_slice(b"HTTP/1.1 ");
        out.extend_from_slice(self.status.to_string().as_bytes());
        out.push(b' ');
        out.extend_from_slice(reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("connection")
                || name.eq_ignore_ascii_case("transfer-encoding")
            {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if !self.bodyless() {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(self.body_len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// The reason phrase of `status` (empty for unknown codes, which is valid).
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(r: &Response, close: bool, head: bool) -> String {
        let mut out = Vec::new();
        r.write_to(&mut out, close, head);
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn json_response_has_type_length_and_body() {
        let r = Response::json(201, &b"{}"[..]).with_header("X-Id", "7");
        assert_eq!(
            render(&r, false, false),
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Id: 7\r\n\
             Content-Length: 2\r\n\r\n{}"
        );
    }

    #[test]
    fn close_and_head_and_no_content() {
        let r = Response::text(200, "text/plain", "hi");
        assert_eq!(
            render(&r, true, true),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\
             Connection: close\r\n\r\n"
        );
        assert_eq!(
            render(&Response::no_content(), false, false),
            "HTTP/1.1 204 No Content\r\n\r\n"
        );
    }

    #[test]
    fn handler_set_framing_headers_are_ignored() {
        let r = Response::json(200, "x").with_header("Content-Length", "99");
        assert!(!render(&r, false, false).contains("99"));
    }
}
