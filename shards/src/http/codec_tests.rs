//! Tests of `codec.rs`: split reads, chunked bodies, pipelining, limits.

use super::*;

fn limits(max_header_bytes: usize, max_body_bytes: usize) -> Limits {
    Limits {
        max_header_bytes,
        max_body_bytes,
    }
}

/// Feeds `input` to a fresh decoder `step` bytes at a time; collects
/// requests, `Continue`s (as None) and the first error.
fn feed(
    input: &[u8],
    step: usize,
    lim: Limits,
) -> (Vec<Option<(Request, bool)>>, Option<HttpError>) {
    let mut dec = Decoder::new(lim);
    let mut buf = Vec::new();
    let mut got = Vec::new();
    for piece in input.chunks(step) {
        buf.extend_from_slice(piece);
        loop {
            match dec.decode(&mut buf) {
                Ok(Decoded::Incomplete) => break,
                Ok(Decoded::Continue) => got.push(None),
                Ok(Decoded::Request { req, keep_alive }) => got.push(Some((req, keep_alive))),
                Err(e) => return (got, Some(e)),
            }
        }
    }
    assert!(!dec.in_body(), "input ended inside a body");
    (got, None)
}

fn requests(input: &[u8], step: usize) -> Vec<(Request, bool)> {
    let (got, err) = feed(input, step, Limits::default());
    assert_eq!(err, None);
    got.into_iter().flatten().collect()
}

#[test]
fn byte_by_byte_equals_all_at_once() {
    let input = b"POST /api/v1/push?x=1&y=%20 HTTP/1.1\r\nHost: a\r\nX-Case: V\r\n\
                  Content-Length: 5\r\n\r\nhello";
    for step in [1, 2, 7, input.len()] {
        let got = requests(input, step);
        assert_eq!(got.len(), 1);
        let (req, keep_alive) = &got[0];
        assert!(keep_alive);
        assert_eq!(req.method, Method::Post);
        assert_eq!(req.path, "/api/v1/push");
        assert_eq!(req.query, "x=1&y=%20");
        assert_eq!(req.header("x-case"), Some("V"));
        assert_eq!(req.headers[1].0, "x-case");
        assert_eq!(req.body, b"hello");
    }
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let input = b"PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                  5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n\
                  GET /next HTTP/1.1\r\n\r\n";
    for step in [1, 3, input.len()] {
        let got = requests(input, step);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.body, b"hello world");
        assert_eq!(got[1].0.path, "/next");
    }
}

#[test]
fn pipelined_requests_keep_following_bytes() {
    let mut dec = Decoder::new(Limits::default());
    let mut buf =
        b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\nGET /c".to_vec();
    let Ok(Decoded::Request { req, keep_alive }) = dec.decode(&mut buf) else {
        panic!("first request")
    };
    assert_eq!((req.path.as_str(), keep_alive), ("/a", true));
    let Ok(Decoded::Request { req, keep_alive }) = dec.decode(&mut buf) else {
        panic!("second request")
    };
    assert_eq!((req.path.as_str(), keep_alive), ("/b", false));
    assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
    assert_eq!(buf, b"GET /c");
    assert!(dec.in_progress(&buf));
}

#[test]
fn expect_continue_is_announced_before_the_body() {
    let head = b"POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    let mut dec = Decoder::new(Limits::default());
    let mut buf = head.to_vec();
    assert_eq!(dec.decode(&mut buf), Ok(Decoded::Continue));
    assert!(dec.in_body());
    assert_eq!(dec.decode(&mut buf), Ok(Decoded::Incomplete));
    buf.extend_from_slice(b"ok");
    assert!(matches!(dec.decode(&mut buf), Ok(Decoded::Request { req, .. }) if req.body == b"ok"));
    // A client that sent the body anyway gets no 100.
    let mut buf = [&head[..], b"ok"].concat();
    let mut dec = Decoder::new(Limits::default());
    assert!(matches!(dec.decode(&mut buf), Ok(Decoded::Request { .. })));
}

#[test]
fn http10_closes_unless_keep_alive() {
    let got = requests(
        b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        4,
    );
    assert!(!got[0].1);
    assert!(got[1].1);
}

fn error_of(input: &[u8], lim: Limits) -> HttpError {
    for step in [1, input.len()] {
        let (_, err) = feed(input, step, lim);
        assert!(err.is_some(), "no error for step {step}");
    }
    feed(input, input.len(), lim).1.expect("error")
}

#[test]
fn malformed_heads_are_400() {
    for bad in [
        &b"GET\x01/ HTTP/1.1\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
    ] {
        let e = error_of(bad, Limits::default());
        assert_eq!((e.status(), e.code()), (400, "bad_request"), "{bad:?}");
    }
}

#[test]
fn framing_conflicts_are_400() {
    let both = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
    let two = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
    let bad = b"POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n";
    let gzip = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
    for input in [&both[..], two, bad, gzip] {
        assert_eq!(error_of(input, Limits::default()).status(), 400);
    }
    let same = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(requests(same, 1)[0].0.body, b"x");
}

#[test]
fn bad_chunks_are_400() {
    let head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for chunks in [
        &b"zz\r\n"[..],
        b"\r\n",
        b"3\r\nabcX\r\n",
        b"fffffffffffffffffffff\r\n",
    ] {
        let e = error_of(&[&head[..], chunks].concat(), Limits::default());
        assert_eq!((e.status(), e.code()), (400, "bad_request"), "{chunks:?}");
    }
}

#[test]
fn too_many_or_too_large_headers_are_431() {
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..101 {
        many.extend_from_slice(format!("h{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(
        error_of(&many, Limits::default()).code(),
        "headers_too_large"
    );
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(200));
    let e = error_of(big.as_bytes(), limits(100, 10));
    assert_eq!((e.status(), e.code()), (431, "headers_too_large"));
}

#[test]
fn oversized_bodies_are_413_before_reading_them() {
    let e = error_of(
        b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n",
        limits(1024, 10),
    );
    assert_eq!((e.status(), e.code()), (413, "payload_too_large"));
    let huge = b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
    assert_eq!(error_of(huge, limits(1024, 10)).status(), 413);
    let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\n";
    assert_eq!(error_of(chunked, limits(1024, 10)).status(), 413);
}
