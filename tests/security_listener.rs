//! The HTTP listener boundary (security.md SEC-01..04) and the access
//! levels of the operator routes issue 3 added (SEC-14, http-api.md §21).
//! Bind narrowing is shown with a second loopback address (127.0.0.2):
//! traffic never leaves the loopback range.
mod common;

use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Whether a TCP connection to `ip:port` is accepted.
fn accepts(ip: &str, port: u16) -> bool {
    let addr: SocketAddr = format!("{ip}:{port}").parse().expect("addr");
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok()
}

/// `GET /health` over a raw connection to `addr`; the status line.
fn health_status_line(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .map(str::to_string)
}

fn exits_1_naming(db: &Db, var: &str, envs: &[(&str, &str)]) {
    let mut bb = Broker::builder(db);
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

#[test]
fn sec01_bind_addr_127_0_0_1_refuses_other_addresses() {
    let db = Db::fresh();
    let narrow = Broker::builder(&db)
        .env("QUEEN_BIND_ADDR", "127.0.0.1")
        .start();
    assert!(accepts("127.0.0.1", narrow.port));
    assert!(
        !accepts("127.0.0.2", narrow.port),
        "a 127.0.0.1 listener must refuse 127.0.0.2"
    );
    let wide = Broker::builder(&db)
        .env("QUEEN_BIND_ADDR", "0.0.0.0")
        .start();
    assert!(
        accepts("127.0.0.2", wide.port),
        "0.0.0.0 listens everywhere"
    );
    assert!(wide
        .log()
        .contains(&format!("listen=http://0.0.0.0:{}", wide.port)));
}

#[test]
fn sec02_bind_addr_empty_or_with_a_port_exits_1_naming_the_variable() {
    let db = Db::fresh();
    exits_1_naming(&db, "QUEEN_BIND_ADDR", &[("QUEEN_BIND_ADDR", "")]);
    exits_1_naming(
        &db,
        "QUEEN_BIND_ADDR",
        &[("QUEEN_BIND_ADDR", "0.0.0.0:7000")],
    );
    exits_1_naming(&db, "QUEEN_BIND_ADDR", &[("QUEEN_BIND_ADDR", "not-an-ip")]);
}

#[test]
fn sec02_ipv6_literal_bind_addr_is_accepted() {
    if !std::fs::read_to_string("/proc/net/if_inet6")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("00000000000000000000000000000001"))
        })
        .unwrap_or(false)
    {
        eprintln!("no ::1 on this host; skipping the IPv6 half");
        return;
    }
    let db = Db::fresh();
    let mut b = Broker::builder(&db).env("QUEEN_BIND_ADDR", "::1").spawn();
    let line = check_for(BROKER_READY_DEADLINE, || {
        if let Some(st) = b.try_wait() {
            panic!("broker exited with {st}:\n{}", b.log_tail(20));
        }
        health_status_line(&format!("[::1]:{}", b.port)).filter(|l| l.contains(" 200 "))
    });
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert!(!accepts("127.0.0.1", b.port), "::1 must not listen on IPv4");
}

#[test]
fn sec03_narrow_bind_addr_narrows_the_mesh_unless_mesh_bind_addr_is_set() {
    let db = Db::fresh();
    let mesh_broker = |mesh_bind: Option<&str>| {
        let mesh_port = free_port();
        let mut bb = Broker::builder(&db)
            .env("QUEEN_BIND_ADDR", "127.0.0.1")
            .env("QUEEN_MESH_PORT", &mesh_port.to_string())
            // A peer nobody runs: the mesh listens, dialing out just retries.
            .env("QUEEN_MESH_PEERS", &format!("127.0.0.1:{}", free_port()))
            .env("QUEEN_MESH_ADVERTISE_HOST", "queen-a.example");
        if let Some(a) = mesh_bind {
            bb = bb.env("QUEEN_MESH_BIND_ADDR", a);
        }
        (bb.start(), mesh_port)
    };
    let (narrow, narrow_port) = mesh_broker(None);
    assert!(
        accepts("127.0.0.1", narrow_port),
        "mesh listens on 127.0.0.1"
    );
    assert!(
        !accepts("127.0.0.2", narrow_port),
        "mesh must follow QUEEN_BIND_ADDR"
    );
    let (wide, wide_port) = mesh_broker(Some("0.0.0.0"));
    assert!(accepts("127.0.0.2", wide_port), "QUEEN_MESH_BIND_ADDR wins");
    // Neither bind variable changes the advertised address.
    for (b, bind, port) in [
        (&narrow, "127.0.0.1", narrow_port),
        (&wide, "0.0.0.0", wide_port),
    ] {
        let want = format!("mesh: listening on {bind}:{port} as queen-a.example:{port}");
        assert!(
            b.log().contains(&want),
            "{want} not in:\n{}",
            b.log_tail(20)
        );
    }
}

#[test]
fn sec04_no_cors_headers_by_default() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for r in [
        b.get("/health"),
        b.get("/api/v1/resources/queues"),
        b.request("OPTIONS", "/api/v1/push", None),
    ] {
        for h in [
            "access-control-allow-origin",
            "access-control-allow-methods",
            "access-control-allow-headers",
        ] {
            assert!(
                r.header(h).is_none(),
                "{h} sent by default (status {})",
                r.status
            );
        }
    }
    assert_ne!(b.request("OPTIONS", "/api/v1/push", None).status, 204);
}

#[test]
fn sec04_cors_switch_restores_the_headers_and_public_preflight() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_CORS_ALLOW_ORIGIN", "*")
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", "cors-test-secret-0123456789")
        .start();
    let r = b.get("/health");
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    // A 401 carries them too, so a browser can read the refusal.
    let r = b.get("/api/v1/resources/queues");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    // The preflight is public and answers 204 with the 0.15 header set.
    let r = b.request("OPTIONS", "/api/v1/push", None);
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(
        r.header("access-control-allow-methods"),
        Some("GET, POST, PUT, DELETE, OPTIONS")
    );
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("Content-Type, Authorization")
    );
    assert_eq!(r.header("access-control-max-age"), Some("86400"));
}

const SECRET: &str = "levels-test-secret-0123456789";

fn role_token(role: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    encode(
        &Header::new(Algorithm::HS256),
        &json!({"sub": role, "role": role, "exp": now + 3600}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

#[test]
fn sec14_issue3_operator_routes_follow_the_level_table() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", SECRET)
        .start();
    let call = |method: &str, path: &str, role: &str, body: Option<&Value>| {
        let t = format!("Bearer {}", role_token(role));
        let mut headers = vec![("Authorization", t.as_str())];
        let body = body.map(|v| v.to_string().into_bytes());
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        b.conn()
            .request(method, path, &headers, body.as_deref())
            .expect("request")
            .status
    };
    let empty = json!({});
    // (method, path, body, level) per http-api.md §21.
    let routes: &[(&str, &str, Option<&Value>, &str)] = &[
        ("DELETE", "/api/v1/consumer-groups/g1", None, "ADMIN"),
        (
            "DELETE",
            "/api/v1/consumer-groups/g1/queues/q1",
            None,
            "ADMIN",
        ),
        ("DELETE", "/api/v1/resources/queues/q1", None, "ADMIN"),
        ("DELETE", "/api/v1/queues/q1/clear", None, "ADMIN"),
        ("DELETE", "/api/v1/dlq?queue=q1", None, "ADMIN"),
        ("POST", "/api/v1/stats/refresh", Some(&empty), "ADMIN"),
        ("GET", "/api/v1/consumer-groups", None, "READ_ONLY"),
        ("GET", "/api/v1/consumer-groups/lagging", None, "READ_ONLY"),
        ("GET", "/api/v1/resources/partitions", None, "READ_ONLY"),
        ("GET", "/api/v1/messages", None, "READ_ONLY"),
        ("GET", "/api/v1/traces/names", None, "READ_ONLY"),
        (
            "POST",
            "/api/v1/consumer-groups/g1/queues/q1/seek",
            Some(&empty),
            "READ_WRITE",
        ),
        (
            "POST",
            "/api/v1/consumer-groups/g1/subscription",
            Some(&empty),
            "READ_WRITE",
        ),
    ];
    for (method, path, body, level) in routes {
        for role in ["admin", "read-write", "read-only", "write-only"] {
            let allowed = match (*level, role) {
                (_, "admin") => true,
                ("ADMIN", _) => false,
                ("READ_WRITE", r) => r == "read-write",
                ("READ_ONLY", r) => r != "write-only",
                _ => unreachable!(),
            };
            let status = call(method, path, role, *body);
            if allowed {
                assert!(
                    status != 401 && status != 403,
                    "{method} {path} ({level}) refused {role} with {status}"
                );
            } else {
                assert_eq!(status, 403, "{method} {path} ({level}) must refuse {role}");
            }
        }
    }
}
