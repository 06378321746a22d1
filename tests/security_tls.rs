//! The HTTPS listener (issue 6, beyond the original broker): with
//! `QUEEN_TLS_CERT` and `QUEEN_TLS_KEY` every shard serves HTTPS on `PORT`
//! through rustls. Certificates are made by the test (a private CA and a
//! server certificate for 127.0.0.1/localhost); the client is ureq over
//! rustls trusting only that CA.
mod common;
mod tls_support;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use tls_support::*;

/// A broker serving HTTPS with a fresh PKI; returns it with the PKI.
fn tls_broker(db: &Db) -> (Broker, Pki) {
    let pki = make_pki("Queen listener test CA", &["localhost", "127.0.0.1"]);
    let dir = temp_dir("listener");
    let b = Broker::builder(db)
        .env("QUEEN_TLS_CERT", &write(&dir, "cert.pem", &pki.cert_pem))
        .env("QUEEN_TLS_KEY", &write(&dir, "key.pem", &pki.key_pem))
        .spawn();
    let agent = https_agent(Some(&pki.ca_pem));
    let url = format!("https://localhost:{}/health", b.port);
    let mut b = b;
    check_for(BROKER_READY_DEADLINE, || {
        if let Some(st) = b.try_wait() {
            panic!("broker exited with {st}:\n{}", b.log_tail(40));
        }
        let r = agent.get(&url).call().ok()?;
        (r.status() == 200).then_some(())
    });
    (b, pki)
}

fn body_json(r: ureq::http::Response<ureq::Body>) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.into_body().read_to_string().expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn tls_listener_serves_push_and_pop_over_https_with_keep_alive() {
    let db = Db::fresh();
    let (b, pki) = tls_broker(&db);
    assert!(
        b.log()
            .contains(&format!("listening on https://127.0.0.1:{}", b.port)),
        "{}",
        b.log_tail(20)
    );
    let agent = https_agent(Some(&pki.ca_pem));
    let base = format!("https://127.0.0.1:{}", b.port);
    // Several requests through one agent reuse its TLS connections (keep-alive).
    for i in 0..5 {
        let r = agent
            .post(&format!("{base}/api/v1/push"))
            .header("Content-Type", "application/json")
            .send(json!({"items": [{"queue": "tlsq", "payload": {"n": i}}]}).to_string())
            .expect("push over https");
        let (status, v) = body_json(r);
        assert_eq!(status, 201, "{v}");
        assert_eq!(v[0]["status"], "queued", "{v}");
    }
    let r = agent
        .get(&format!("{base}/api/v1/pop/queue/tlsq?batch=10&wait=false"))
        .call()
        .expect("pop over https");
    let (status, v) = body_json(r);
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["messages"].as_array().map(|a| a.len()), Some(5), "{v}");
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 5);
}

#[test]
fn tls_listener_does_not_answer_plaintext_http() {
    let db = Db::fresh();
    let (b, _pki) = tls_broker(&db);
    let mut s = TcpStream::connect(("127.0.0.1", b.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(
        !got.starts_with(b"HTTP/"),
        "a TLS listener answered plaintext: {:?}",
        String::from_utf8_lossy(&got)
    );
}

#[test]
fn tls_client_not_trusting_the_ca_is_refused() {
    let db = Db::fresh();
    let (b, _pki) = tls_broker(&db);
    // The Mozilla roots do not include the test's private CA.
    let r = https_agent(None)
        .get(&format!("https://localhost:{}/health", b.port))
        .call();
    assert!(
        r.is_err(),
        "a private CA must not verify against webpki roots"
    );
    // A certificate from another CA is refused as well.
    let other = make_pki("Another CA", &["localhost"]);
    let r = https_agent(Some(&other.ca_pem))
        .get(&format!("https://localhost:{}/health", b.port))
        .call();
    assert!(r.is_err(), "a different CA must not verify the broker");
}

#[test]
fn tls_bad_and_stalled_handshakes_do_not_block_other_connections() {
    let db = Db::fresh();
    let (mut b, pki) = tls_broker(&db);
    // Stalled handshakes: connected, never a byte (several, to hit both shards).
    let stalled: Vec<TcpStream> = (0..8)
        .map(|_| TcpStream::connect(("127.0.0.1", b.port)).expect("connect"))
        .collect();
    // Garbage and a truncated ClientHello.
    for junk in [
        &b"\x16\x03\x01\x00\xffgarbage"[..],
        &[0xffu8; 4096][..],
        &b"\x16\x03\x01"[..],
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", b.port)).expect("connect");
        let _ = s.write_all(junk);
        drop(s);
    }
    let agent = https_agent(Some(&pki.ca_pem));
    let started = Instant::now();
    for _ in 0..10 {
        let r = agent
            .get(&format!("https://localhost:{}/health", b.port))
            .call()
            .expect("health while handshakes stall");
        assert_eq!(r.status(), 200);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "10 requests took {:?} while other handshakes stalled",
        started.elapsed()
    );
    assert!(b.try_wait().is_none(), "broker died:\n{}", b.log_tail(40));
    drop(stalled);
}

#[test]
fn tls_silent_client_is_closed_after_the_handshake_timeout() {
    let db = Db::fresh();
    let (b, _pki) = tls_broker(&db);
    let mut s = TcpStream::connect(("127.0.0.1", b.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let n = s.read(&mut byte);
    let waited = started.elapsed();
    assert!(
        matches!(n, Ok(0)) || n.is_err(),
        "expected a close, got {n:?}"
    );
    // The handshake timeout is 10 s; a close long before or never fails.
    assert!(
        waited >= Duration::from_secs(8) && waited < Duration::from_secs(35),
        "closed after {waited:?}"
    );
}

#[test]
fn tls_cert_without_key_and_key_without_cert_exit_1_naming_the_variable() {
    let db = Db::fresh();
    let pki = make_pki("CA", &["localhost"]);
    let dir = temp_dir("half");
    let cert = write(&dir, "cert.pem", &pki.cert_pem);
    let key = write(&dir, "key.pem", &pki.key_pem);
    let garbage = write(&dir, "garbage.pem", "not a certificate\n");
    let other_key = write(&dir, "other.pem", &make_pki("X", &["x"]).key_pem);
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[("QUEEN_TLS_CERT", &cert)], "QUEEN_TLS_CERT"),
        (&[("QUEEN_TLS_KEY", &key)], "QUEEN_TLS_KEY"),
        (
            &[("QUEEN_TLS_CERT", &garbage), ("QUEEN_TLS_KEY", &key)],
            "QUEEN_TLS_CERT",
        ),
        (
            &[
                ("QUEEN_TLS_CERT", &cert),
                ("QUEEN_TLS_KEY", "/nonexistent/k.pem"),
            ],
            "QUEEN_TLS_KEY",
        ),
        (
            &[("QUEEN_TLS_CERT", &cert), ("QUEEN_TLS_KEY", &other_key)],
            "QUEEN_TLS_CERT",
        ),
    ];
    for (envs, var) in cases {
        let mut bb = Broker::builder(&db);
        for (k, v) in envs {
            bb = bb.env(k, v);
        }
        let mut b = bb.spawn();
        let st = b
            .wait_exit(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{envs:?}: broker did not exit"));
        assert_eq!(st.code(), Some(1), "{envs:?}");
        let log = b.log();
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{envs:?}: one line expected: {log}");
        assert!(lines[0].contains(var), "{envs:?}: {log}");
    }
}

#[test]
fn tls_long_poll_over_https_is_woken_by_a_push_on_another_connection() {
    let db = Db::fresh();
    let (b, pki) = tls_broker(&db);
    let base = format!("https://localhost:{}", b.port);
    let popper = {
        let (agent, base) = (https_agent(Some(&pki.ca_pem)), base.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let r = agent
                .get(&format!(
                    "{base}/api/v1/pop/queue/tlslp?wait=true&timeout=20000&batch=10"
                ))
                .call()
                .expect("long poll over https");
            (body_json(r), started.elapsed())
        })
    };
    // Give the pop time to park so the push wakes it (had it not parked
    // yet, it would find the message at once: the assertions hold either way).
    std::thread::sleep(Duration::from_millis(500));
    let r = https_agent(Some(&pki.ca_pem))
        .post(&format!("{base}/api/v1/push"))
        .header("Content-Type", "application/json")
        .send(json!({"items": [{"queue": "tlslp", "payload": {"hello": "tls"}}]}).to_string())
        .expect("push");
    assert_eq!(r.status(), 201);
    let ((status, v), waited) = popper.join().expect("popper");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["messages"][0]["data"]["hello"], "tls", "{v}");
    assert!(
        waited < Duration::from_secs(15),
        "woken after {waited:?}, not by the push"
    );
}
