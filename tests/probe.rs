//! The black-box probe of issue 17, kept as tests so no later change reopens what it
//! found (the mesh flood is `mesh_admission.rs`): simple cross-site POSTs, foreign
//! origins and rebinding hosts, NUL bytes everywhere a name is taken, cross-tenant
//! lease and ack, malformed token claims, repeated tenant headers.
//! `tools/probe.sh` runs these with the mesh ones.
mod common;

use common::*;

/// Sends `method path` with these headers and body on a fresh connection.
fn send(
    b: &Broker,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Resp {
    b.conn()
        .request(method, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

fn maintenance_on(b: &Broker) -> bool {
    b.get("/api/v1/system/maintenance").json()["maintenanceMode"] == true
}

/// The JSON error text of a refusal (asserting there is one).
fn error_text(r: &Resp) -> String {
    let e = r.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(
        !e.is_empty(),
        "{} without an error text: {}",
        r.status,
        r.text()
    );
    e
}

#[test]
fn a_simple_cross_site_post_is_refused_with_415_and_changes_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let body = br#"{"enabled":true}"#;
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let mut h = vec![];
        if let Some(ct) = ct {
            h.push(("Content-Type", ct));
        }
        let r = send(&b, "POST", "/api/v1/system/maintenance", &h, Some(body));
        assert_eq!(r.status, 415, "{ct:?}: {}", r.text());
        assert!(error_text(&r).contains("application/json"), "{}", r.text());
        assert!(!maintenance_on(&b), "{ct:?} switched maintenance on");
    }
    // A push as form data stores nothing either.
    let r = send(
        &b,
        "POST",
        "/api/v1/push",
        &[("Content-Type", "text/plain")],
        Some(br#"{"items":[{"queue":"xs","payload":1}]}"#),
    );
    assert_eq!(r.status, 415, "{}", r.text());
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 0);
    // A body-less POST stays accepted, and JSON with a charset is JSON.
    assert_eq!(b.post_empty("/api/v1/stats/refresh").status / 100, 2);
    let r = send(
        &b,
        "POST",
        "/api/v1/configure",
        &[("Content-Type", "application/json; charset=utf-8")],
        Some(br#"{"queue":"xs"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn a_foreign_origin_cannot_change_state_but_the_brokers_own_pages_can() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let json = ("Content-Type", "application/json");
    let body = br#"{"enabled":true}"#;
    let r = send(
        &b,
        "POST",
        "/api/v1/system/maintenance",
        &[json, ("Origin", "http://evil.example")],
        Some(body),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(error_text(&r).contains("origin"), "{}", r.text());
    assert!(!maintenance_on(&b));
    let r = send(
        &b,
        "DELETE",
        "/api/v1/resources/queues/anything",
        &[("Origin", "null")],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // Reading from a foreign origin is CORS's business, not refused here.
    let r = send(
        &b,
        "GET",
        "/health",
        &[("Origin", "http://evil.example")],
        None,
    );
    assert_eq!(r.status, 200);
    // The dashboard's own origin (the Host it was served under) may.
    let own = format!("http://127.0.0.1:{}", b.port);
    let off = br#"{"enabled":false}"#;
    let r = send(
        &b,
        "POST",
        "/api/v1/system/maintenance",
        &[json, ("Origin", own.as_str())],
        Some(off),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // So may the origin QUEEN_CORS_ALLOW_ORIGIN names.
    let c = Broker::builder(&db)
        .env("QUEEN_CORS_ALLOW_ORIGIN", "https://console.example")
        .start();
    let r = send(
        &c,
        "POST",
        "/api/v1/system/maintenance",
        &[json, ("Origin", "https://console.example")],
        Some(off),
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Routes that take a name in the path or the query, each with a NUL in it.
const NUL_PROBES: &[(&str, &str)] = &[
    ("GET", "/api/v1/resources/queues/q%00x"),
    ("GET", "/api/v1/resources/queues/q%00x/depth"),
    ("DELETE", "/api/v1/resources/queues/q%00x"),
    ("GET", "/api/v1/messages?queue=q%00x"),
    ("GET", "/api/v1/messages?queue=q&partition=%00"),
    ("GET", "/api/v1/dlq?queue=%00"),
    ("GET", "/api/v1/consumer-groups/g%00x"),
    ("DELETE", "/api/v1/consumer-groups/g%00x"),
    ("GET", "/api/v1/consumer-groups/lagging?queue=%00"),
    ("GET", "/api/v1/traces/by-name/n%00x"),
    ("GET", "/api/v1/status/queues/q%00x"),
    ("GET", "/api/v1/status/queues?queue=%00"),
    ("GET", "/api/v1/resources/partitions?queue=%00"),
    ("GET", "/api/v1/pop/queue/q%00x?wait=false"),
    ("GET", "/api/v1/pop/queue/q/partition/%00?wait=false"),
    ("GET", "/api/v1/pop?namespace=%00&wait=false"),
    ("DELETE", "/api/v1/queues/q%00x/clear"),
];

#[test]
fn a_nul_byte_in_any_name_is_a_400_naming_it_never_a_database_error() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("q", json!({}));
    for (method, path) in NUL_PROBES {
        let r = send(&b, method, path, &[], None);
        assert_eq!(r.status, 400, "{method} {path}: {}", r.text());
        let e = error_text(&r).to_ascii_lowercase();
        assert!(e.contains("nul"), "{method} {path}: {e}");
        for leak in [
            "postgres",
            "invalid byte sequence",
            "0x00",
            "sqlstate",
            "utf8",
        ] {
            assert!(!e.contains(leak), "{method} {path} leaks {leak:?}: {e}");
        }
    }
    assert_eq!(b.get("/health").status, 200);
}

#[test]
fn with_allowed_hosts_set_a_rebound_host_name_gets_421() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_ALLOWED_HOSTS", "localhost, 127.0.0.1")
        .start();
    let r = send(
        &b,
        "GET",
        "/api/v1/resources/queues",
        &[("Host", "attacker.example")],
        None,
    );
    assert_eq!(r.status, 421, "{}", r.text());
    assert!(error_text(&r).contains("attacker.example"), "{}", r.text());
    let r = send(
        &b,
        "GET",
        "/api/v1/resources/queues",
        &[("Host", "LOCALHOST:1234")],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // The harness's own requests name 127.0.0.1:<port>.
    assert_eq!(b.get("/health").status, 200);
    // A list entry that can never match stops the boot.
    let mut bad = Broker::builder(&db)
        .env("QUEEN_ALLOWED_HOSTS", "http://localhost:6632")
        .spawn();
    let st = bad
        .wait_exit(std::time::Duration::from_secs(20))
        .expect("exits");
    assert_eq!(st.code(), Some(1));
    assert!(bad.log().contains("QUEEN_ALLOWED_HOSTS"), "{}", bad.log());
}
