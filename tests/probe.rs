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

const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

fn as_tenant(b: &Broker, tenant: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let body = body.map(|v| v.to_string().into_bytes());
    let mut h = vec![("x-queen-tenant", tenant)];
    if body.is_some() {
        h.push(("Content-Type", "application/json"));
    }
    send(b, method, path, &h, body.as_deref())
}

/// `v` with the keys that name the probed id itself removed, so two answers
/// about two different ids can be compared.
fn without(mut v: Value, keys: &[&str]) -> Value {
    match &mut v {
        Value::Object(o) => {
            for k in keys {
                o.remove(*k);
            }
            for (_, x) in o.iter_mut() {
                *x = without(x.take(), keys);
            }
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                *x = without(x.take(), keys);
            }
        }
        _ => {}
    }
    v
}

/// Issue 17, point 2: with native tenancy, tenant A cannot extend, ack or require
/// tenant B's lease, and each answer is exactly the one for an id that does not exist.
#[test]
fn another_tenants_lease_and_partition_answer_as_ones_that_do_not_exist() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start();
    let push = json!({"items": [{"queue": "lq", "transactionId": "t1", "payload": 1}]});
    assert_eq!(
        as_tenant(&b, TENANT_B, "POST", "/api/v1/push", Some(&push)).status,
        201
    );
    let pop = as_tenant(&b, TENANT_B, "GET", "/api/v1/pop/queue/lq?wait=false", None);
    assert_eq!(pop.status, 200, "{}", pop.text());
    let pop = pop.json();
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let pid = pop["messages"][0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let expires = |db: &Db| {
        db.count(
            "SELECT extract(epoch FROM lease_expires_at)::bigint FROM queen.partition_consumers \
             WHERE worker_id = $1::text::uuid",
            &[&lease],
        )
    };
    let before = expires(&db);
    let (nobody_lease, nobody_pid) = (random_uuid(), random_uuid());

    // Lease extension.
    let ext = |l: &str| {
        let r = as_tenant(
            &b,
            TENANT_A,
            "POST",
            &format!("/api/v1/lease/{l}/extend"),
            Some(&json!({"seconds": 604800})),
        );
        (r.status, without(r.json(), &["leaseId"]))
    };
    assert_eq!(ext(&lease), ext(&nobody_lease), "A extending B's lease");
    assert_eq!(expires(&db), before, "B's lease was not extended");

    // Ack on B's partition.
    let ack = |p: &str| {
        let body = json!({"transactionId": "t1", "partitionId": p, "leaseId": lease,
                          "status": "completed"});
        let r = as_tenant(&b, TENANT_A, "POST", "/api/v1/ack", Some(&body));
        (r.status, without(r.json(), &["partitionId"]))
    };
    let (theirs, none) = (ack(&pid), ack(&nobody_pid));
    assert_eq!(theirs, none, "A acking on B's partition");
    assert!(!theirs.1.to_string().contains("Default"), "{theirs:?}");

    // A transaction requiring B's lease.
    let txn = |l: &str| {
        let body = json!({"operations": [{"type": "push", "items": [{"queue": "aq", "payload": 1}]}],
                          "requiredLeases": [l]});
        let r = as_tenant(&b, TENANT_A, "POST", "/api/v1/transaction", Some(&body));
        (r.status, without(r.json(), &["transactionId"]))
    };
    assert_eq!(txn(&lease), txn(&nobody_lease), "A requiring B's lease");

    // B's claim is intact: B acks its message.
    let body = json!({"transactionId": "t1", "partitionId": pid, "leaseId": lease,
                      "status": "completed"});
    let r = as_tenant(&b, TENANT_B, "POST", "/api/v1/ack", Some(&body));
    assert_eq!(r.json()[0]["success"], true, "{}", r.text());
}

/// Issue 17, point 6: the proxy sets one tenant; two headers or a list are refused.
#[test]
fn two_tenant_headers_or_a_list_in_one_are_a_400() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start();
    let path = "/api/v1/resources/queues";
    let r = send(
        &b,
        "GET",
        path,
        &[("x-queen-tenant", TENANT_A), ("x-queen-tenant", TENANT_B)],
        None,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(error_text(&r).contains("x-queen-tenant"), "{}", r.text());
    let list = format!("{TENANT_A}, {TENANT_B}");
    let r = send(&b, "GET", path, &[("x-queen-tenant", list.as_str())], None);
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        send(&b, "GET", path, &[("x-queen-tenant", TENANT_A)], None).status,
        200
    );
}

/// A foreign page's `<img src=".../pop/queue/q?autoAck=true">` sends a GET with no
/// Origin; browsers mark it `Sec-Fetch-Site: cross-site` (or `same-site` from another
/// port of the same host). It must consume nothing.
#[test]
fn a_cross_site_get_from_a_browser_cannot_pop_or_consume() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("img", "p", "m-", 3);
    let path = "/api/v1/pop/queue/img?autoAck=true&batch=10&wait=false";
    for site in ["cross-site", "same-site"] {
        let r = send(&b, "GET", path, &[("Sec-Fetch-Site", site)], None);
        assert_eq!(r.status, 403, "{site}: {}", r.text());
        assert!(error_text(&r).contains(site), "{}", r.text());
    }
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.partition_consumers WHERE last_consumed_id IS NOT NULL",
            &[]
        ),
        0,
        "nothing was consumed"
    );
    // The dashboard's own fetches, a typed URL and non-browser clients still pop.
    let r = send(&b, "GET", path, &[("Sec-Fetch-Site", "same-origin")], None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(messages(&r.json()).len(), 3);
    // The dashboard itself may be opened from a link on another site.
    let r = send(&b, "GET", "/", &[("Sec-Fetch-Site", "cross-site")], None);
    assert_eq!(r.status, 200);
}
