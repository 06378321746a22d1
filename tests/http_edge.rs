//! HTTP edge cases: routing errors, malformed and oversized requests, chunked bodies,
//! keep-alive, percent-decoding, robustness against garbage, shutdown and port clashes.
mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[test]
fn unknown_route_is_404_no_such_route() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for path in ["/api/v1/nope", "/api/v1/pop/queue"] {
        let r = b.get(path);
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        let j = r.json();
        assert_eq!(j["code"], "no_such_route", "{j}");
        assert!(j["error"].is_string(), "{j}");
        assert!(r
            .header("content-type")
            .unwrap_or("")
            .contains("application/json"));
    }
}

#[test]
fn wrong_method_on_a_known_path_is_405() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    assert_eq!(b.get("/api/v1/push").status, 405);
    assert_eq!(b.post_empty("/api/v1/pop/queue/x").status, 405);
    assert_eq!(b.delete("/api/v1/ack").status, 405);
}

#[test]
fn malformed_request_line_is_400() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for bytes in [
        &b"GET\r\n\r\n"[..],
        b"\x01\x02\x03 garbage\r\n\r\n",
        b"GET /health HTTP/1.1 extra\r\n\r\n",
    ] {
        let out = b.raw(bytes);
        assert_eq!(
            raw_status(&out),
            Some(400),
            "{:?} → {:?}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&out)
        );
    }
    assert_eq!(b.get("/health").status, 200);
}

#[test]
fn oversized_headers_are_431() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let big = "a".repeat(256 * 1024);
    let req = format!("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let out = b.raw(req.as_bytes());
    assert_eq!(
        raw_status(&out),
        Some(431),
        "{:?}",
        String::from_utf8_lossy(&out[..out.len().min(300)])
    );
    assert_eq!(b.get("/health").status, 200);
}

#[test]
fn body_over_the_limit_is_413() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_MAX_BODY_BYTES", "1024")
        .start();
    let payload = "x".repeat(4096);
    let body = json!({"items": [{"queue": "big", "payload": payload}]}).to_string();
    let req = format!(
        "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let out = b.raw(req.as_bytes());
    assert_eq!(
        raw_status(&out),
        Some(413),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("payload_too_large"), "{text}");
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 0);
    // Under the limit still works.
    let ok = b.push(json!([{"queue": "big", "payload": "x".repeat(500)}]));
    assert_eq!(ok[0]["status"], "queued");
}

#[test]
fn chunked_request_body_is_accepted() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let body =
        json!({"items": [{"queue": "ch", "transactionId": "c1", "payload": {"a": 1}}]}).to_string();
    let bytes = body.as_bytes();
    let (p1, rest) = bytes.split_at(7);
    let (p2, p3) = rest.split_at(rest.len() / 2);
    let mut req = b"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for part in [p1, p2, p3] {
        req.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        req.extend_from_slice(part);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let mut c = b.conn();
    c.send_raw(&req).unwrap();
    let r = c.read_response().expect("response");
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json_array()[0]["transaction_id"], "c1");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE transaction_id = 'c1'",
            &[]
        ),
        1
    );
}

#[test]
fn keep_alive_serves_three_requests_on_one_socket() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let mut c = b.conn();
    let port = c.local_port();
    assert_eq!(c.get("/health").unwrap().status, 200);
    let r = c
        .post_json(
            "/api/v1/push",
            &json!({"items": [{"queue": "ka", "transactionId": "k"}]}),
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let r = c.get("/api/v1/pop/queue/ka?batch=1").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(txids(&r.json()), vec!["k"]);
    assert_eq!(c.local_port(), port, "same TCP connection throughout");
}

#[test]
fn percent_encoded_path_segments_are_decoded() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("my-q", "p", "t", 1);
    let pop = b
        .pop("/api/v1/pop/queue/my%2Dq?batch=1")
        .expect("my%2Dq is my-q");
    assert_eq!(pop["queue"], "my-q");
}

#[test]
fn garbage_connections_do_not_take_the_shard_down() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let port = b.port;
    let workers: Vec<_> = (0..8)
        .map(|w| {
            std::thread::spawn(move || {
                for i in 0..25 {
                    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { continue };
                    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
                    let junk: Vec<u8> = match (w + i) % 5 {
                        0 => (0..512).map(|k| (k * 31 + i) as u8).collect(),
                        1 => b"POST /api/v1/push HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{\"items\":".to_vec(),
                        2 => format!("GET /{} HTTP/1.1\r\n", "z".repeat(70_000)).into_bytes(),
                        3 => b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -3\r\n\r\n".to_vec(),
                        _ => b"POST /api/v1/push HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
                    };
                    let _ = s.write_all(&junk);
                    // Drop: abrupt close, often with unread data (RST).
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    for _ in 0..10 {
        assert_eq!(b.get("/health").status, 200, "every shard still serves");
    }
    assert_eq!(
        b.push(json!([{"queue": "g", "payload": 1}]))[0]["status"],
        "queued"
    );
}

#[test]
fn sigterm_answers_an_in_flight_long_poll_and_exits_zero() {
    let db = Db::fresh();
    let mut b = Broker::start(&db);
    b.configure("st", json!({}));
    let port = b.port;
    let h = std::thread::spawn(move || {
        let mut c = Conn::connect(port).unwrap();
        c.set_timeout(Duration::from_secs(30));
        let t0 = Instant::now();
        (
            c.get("/api/v1/pop/queue/st?wait=true&timeout=20000"),
            t0.elapsed(),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    b.signal(libc::SIGTERM);
    let (resp, took) = h.join().unwrap();
    let resp = resp.expect("the parked pop got an HTTP answer, not a dropped connection");
    assert!(
        resp.status == 204 || resp.status == 503 || resp.status == 200,
        "status {}",
        resp.status
    );
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    let st = b
        .wait_exit(Duration::from_secs(15))
        .expect("broker exits after SIGTERM");
    assert_eq!(st.code(), Some(0), "exit status {st}");
}

#[test]
fn second_broker_on_the_same_port_exits_non_zero_quickly() {
    let db = Db::fresh();
    let a = Broker::start(&db);
    let mut second = Broker::builder(&db).port(a.port).spawn();
    let st = second
        .wait_exit(Duration::from_secs(15))
        .expect("second broker must exit");
    assert_ne!(st.code(), Some(0), "exit status {st}");
    assert!(
        st.code().is_some(),
        "exits by itself, not by a signal: {st}"
    );
    assert_eq!(
        a.get("/health").status,
        200,
        "the first broker still serves"
    );
}

#[test]
fn large_bodies_spanning_several_reads_are_accepted() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for (n, size) in [(50usize, 100usize), (10, 20_000), (1, 300_000)] {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"queue": "lb", "transactionId": format!("{size}-{i}"), "payload": {"s": "y".repeat(size)}}))
            .collect();
        let r = b.post_json("/api/v1/push", &json!({"items": items}));
        assert_eq!(
            r.status,
            201,
            "{n} items of {size} B on a fresh connection: {}",
            r.text()
        );
        assert_eq!(r.json_array().len(), n);
    }
}
