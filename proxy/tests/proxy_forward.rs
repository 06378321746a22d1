//! queen-proxy's forwarding and control plane end to end: identity headers,
//! the audited control plane and revocation, limits, timeouts, a dead broker
//! and a large body, against real PostgreSQL and a broker with JWT and native
//! tenancy on (issue 16, proxy.md §5..§7).
#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use std::time::Duration;
use support::*;

#[test]
fn identity_headers_cell_token_and_forged_tenant() {
    let db = Db::fresh();
    let (broker, proxy) = setup(&db, &[]);
    bootstrap(&db, &broker, "beta-inc", "beta", TENANT_B);
    let a = key_for(&db, "acme");
    let b = key_for(&db, "beta");
    eventually("keys loaded", || {
        proxy
            .call("beta", Some(&b), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
    // The broker (JWT on) accepts the proxied push: it saw the cell token,
    // since the caller's key is no broker JWT, as the direct call shows.
    let mut c = broker.conn();
    let direct = c
        .request(
            "POST",
            "/api/v1/push",
            &[
                ("Authorization", &format!("Bearer {a}")),
                ("Content-Type", "application/json"),
            ],
            Some(&push_body("shared", "d1")),
        )
        .unwrap();
    assert_eq!(direct.status, 401, "the broker refuses the caller's key");
    // A forged x-queen-tenant naming beta's tenant is replaced by acme's.
    let r = proxy.call_with(
        &[
            ("Host", "acme.proxy.test"),
            ("Authorization", &format!("Bearer {a}")),
            ("x-queen-tenant", TENANT_B),
            ("Content-Type", "application/json"),
            ("Connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
        ],
        "POST",
        "/api/v1/push",
        Some(&push_body("shared", "forged-1")),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let rid = r
        .header("x-queen-request-id")
        .expect("request id on the response")
        .to_string();
    assert!(rid.starts_with("px-"), "{rid}");
    let tenants: Vec<String> = db
        .query(
            "SELECT tenant_id::text FROM queen.queues WHERE name = 'shared'",
            &[],
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(tenants, vec![TENANT_A.to_string()]);
    let pop = proxy.call(
        "beta",
        Some(&b),
        "GET",
        "/api/v1/pop/queue/shared?wait=false",
        None,
    );
    assert_eq!(
        pop.status,
        204,
        "beta must not see acme's message: {}",
        pop.text()
    );
    let pop = proxy.call(
        "acme",
        Some(&a),
        "GET",
        "/api/v1/pop/queue/shared?wait=false",
        None,
    );
    assert_eq!(pop.status, 200, "{}", pop.text());
    assert_eq!(txids(&pop.json()), vec!["forged-1"]);
    // Bodies pass byte for byte: a payload with unicode and escapes comes back equal.
    let payload = serde_json::json!({"s": "é\u{1F600}\\\"x", "n": [1, 2.5, null]});
    let body = serde_json::json!({"items": [{"queue": "bytes", "payload": payload}]}).to_string();
    assert_eq!(
        proxy
            .call(
                "acme",
                Some(&a),
                "POST",
                "/api/v1/push",
                Some(body.as_bytes())
            )
            .status,
        201
    );
    let pop = proxy.call(
        "acme",
        Some(&a),
        "GET",
        "/api/v1/pop/queue/bytes?wait=false",
        None,
    );
    assert_eq!(messages(&pop.json())[0]["data"], payload);
}

#[test]
fn control_plane_calls_are_audited_and_take_effect_at_once() {
    let db = Db::fresh();
    let broker = secured_broker(&db);
    let ops = || db.count("SELECT count(*) FROM queen_proxy.operations", &[]);
    let v = bootstrap(&db, &broker, "acme-inc", "acme", TENANT_A);
    assert_eq!(v["brokerTenant"], TENANT_A);
    assert!(
        v["tenantId"].is_string() && v["clusterId"].is_string(),
        "{v}"
    );
    assert_eq!(ops(), 1);
    let proxy = Proxy::builder(&db).start();
    let (id, key) = issue_key(&db, "acme", "produce,read");
    assert_eq!(ops(), 2);
    assert!(key.starts_with("qk_live_") && key.len() == 8 + 43, "{key}");
    let list = admin_ok(&db, &["list-keys", "--cluster", "acme"]);
    assert_eq!(list["keys"][0]["id"], id.as_str());
    assert!(
        !list.to_string().contains(&key[8..]),
        "list-keys never shows a key"
    );
    assert_eq!(ops(), 2, "a read appends nothing");
    eventually("key works", || {
        proxy
            .call(
                "acme",
                Some(&key),
                "POST",
                "/api/v1/push",
                Some(&push_body("q", &random_uuid())),
            )
            .status
            == 201
    });
    // No table of the database holds the key's text.
    let secret = &key[8..];
    for t in db.query("SELECT format('%I.%I', table_schema, table_name) FROM information_schema.tables WHERE table_schema IN ('queen_proxy', 'queen') AND table_type = 'BASE TABLE'", &[]) {
        let t: String = t.get(0);
        let n = db.count(&format!("SELECT count(*) FROM {t} x WHERE row_to_json(x)::text LIKE '%' || $1 || '%'"), &[&secret]);
        assert_eq!(n, 0, "{t} holds the plaintext key");
    }
    // Status changes reach the running proxy.
    admin_ok(
        &db,
        &[
            "set-status",
            "--cluster",
            "acme",
            "--status",
            "push_blocked",
        ],
    );
    assert_eq!(ops(), 3);
    eventually("push blocked", || {
        code(&proxy.call(
            "acme",
            Some(&key),
            "POST",
            "/api/v1/push",
            Some(&push_body("q", "b")),
        )) == "push_blocked"
    });
    assert_eq!(
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status,
        200,
        "reads still pass"
    );
    admin_ok(
        &db,
        &["set-status", "--cluster", "acme", "--status", "suspended"],
    );
    eventually("suspended", || {
        code(&proxy.call("acme", Some(&key), "GET", "/api/v1/resources/queues", None))
            == "cluster_suspended"
    });
    admin_ok(
        &db,
        &["set-status", "--cluster", "acme", "--status", "active"],
    );
    assert_eq!(ops(), 5);
    // A revoked key is 401 at once.
    eventually("active again", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
    admin_ok(&db, &["revoke-key", "--id", &id]);
    assert_eq!(ops(), 6);
    eventually("revoked", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 401
    });
    // Users, roles and a revoked session.
    let u = admin_ok(
        &db,
        &[
            "create-user",
            "--tenant",
            "acme-inc",
            "--email",
            "a@acme.test",
        ],
    );
    let uid = u["id"].as_str().unwrap().to_string();
    admin_ok(
        &db,
        &[
            "grant-role",
            "--user",
            &uid,
            "--cluster",
            "acme",
            "--role",
            "viewer",
        ],
    );
    assert_eq!(ops(), 8);
    let token = admin_ok(&db, &["mint-session", "--user", &uid])["token"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("session works", || {
        proxy
            .call(
                "acme",
                Some(&token),
                "GET",
                "/api/v1/resources/queues",
                None,
            )
            .status
            == 200
    });
    let jti = jwt_jti(&token);
    admin_ok(&db, &["revoke-session", "--user", &uid, "--jti", &jti]);
    assert_eq!(ops(), 9);
    eventually("session revoked", || {
        proxy
            .call(
                "acme",
                Some(&token),
                "GET",
                "/api/v1/resources/queues",
                None,
            )
            .status
            == 401
    });
    // Refusals append nothing and print one JSON error.
    let (code_, v) = admin(
        &db,
        &["issue-key", "--cluster", "acme", "--scopes", "produce,root"],
    );
    assert_eq!(
        (code_, v["code"].as_str()),
        (1, Some("scope_unknown")),
        "{v}"
    );
    let (code_, v) = admin(
        &db,
        &["set-status", "--cluster", "nope", "--status", "active"],
    );
    assert_eq!((code_, v["code"].as_str()), (1, Some("not_found")), "{v}");
    assert_eq!(ops(), 9);
    // The audit table is append-only for every role, the owner included.
    let mut c = db.client();
    for sql in [
        "DELETE FROM queen_proxy.operations",
        "UPDATE queen_proxy.operations SET action = 'x'",
        "UPDATE queen_proxy.operations SET cluster_id = NULL",
        "TRUNCATE queen_proxy.operations",
    ] {
        let e = c.batch_execute(sql).expect_err(sql);
        assert!(format!("{e:?}").contains("append-only"), "{sql}: {e:?}");
    }
    // ... and for a role that was granted every privilege on it.
    let role = format!("px_{}", std::process::id());
    c.batch_execute(&format!("CREATE ROLE {role}; GRANT USAGE ON SCHEMA queen_proxy TO {role}; GRANT ALL ON queen_proxy.operations TO {role}"))
        .unwrap();
    let mut tx = c.transaction().unwrap();
    tx.batch_execute(&format!("SET LOCAL ROLE {role}")).unwrap();
    let e = tx
        .batch_execute("DELETE FROM queen_proxy.operations")
        .expect_err("as another role");
    assert!(format!("{e:?}").contains("append-only"), "{e:?}");
    drop(tx);
    c.batch_execute(&format!("DROP OWNED BY {role}; DROP ROLE {role}"))
        .unwrap();
    assert_eq!(ops(), 9);
    let actions: Vec<String> = db
        .query("SELECT action FROM queen_proxy.operations ORDER BY id", &[])
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        actions,
        [
            "bootstrap_tenant",
            "issue_api_key",
            "set_cluster_status",
            "set_cluster_status",
            "set_cluster_status",
            "revoke_api_key",
            "create_user",
            "grant_role",
            "revoke_session"
        ]
    );
}

/// The `jti` claim of a token (its payload, unverified).
fn jwt_jti(token: &str) -> String {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["jti"].as_str().unwrap().to_string()
}

#[test]
fn body_cap_rate_limit_long_poll_timeout_and_dead_upstream() {
    let db = Db::fresh();
    let (mut broker, proxy) = setup(
        &db,
        &[
            ("QUEEN_PROXY_MAX_BODY_BYTES", "4096"),
            ("QUEEN_PROXY_ENFORCE", "true"),
            ("QUEEN_PROXY_LONGPOLL_MAX_MS", "300"),
            ("QUEEN_PROXY_LONGPOLL_MARGIN_MS", "200"),
        ],
    );
    let key = key_for(&db, "acme");
    let slow = admin_ok(
        &db,
        &[
            "issue-key",
            "--cluster",
            "acme",
            "--scopes",
            "read",
            "--rate-rps",
            "2",
        ],
    )["key"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("keys loaded", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
    // Over the cap: 413 and nothing reaches the broker.
    let big =
        serde_json::json!({"items": [{"queue": "big", "payload": "x".repeat(8000)}]}).to_string();
    let r = proxy.call(
        "acme",
        Some(&key),
        "POST",
        "/api/v1/push",
        Some(big.as_bytes()),
    );
    assert_eq!((r.status, code(&r)), (413, "payload_too_large".into()));
    assert_eq!(
        db.count("SELECT count(*) FROM queen.queues WHERE name = 'big'", &[]),
        0
    );
    // The key's rate: 2 per second, then 429 with Retry-After (one
    // keep-alive connection: each shard enforces the whole rate).
    let auth = format!("Bearer {slow}");
    let headers = [
        ("Host", "acme.proxy.test"),
        ("Authorization", auth.as_str()),
    ];
    let mut c = Conn::connect(proxy.port).unwrap();
    let answers: Vec<Resp> = (0..4)
        .map(|_| {
            c.request("GET", "/api/v1/resources/queues", &headers, None)
                .unwrap()
        })
        .collect();
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(&statuses[..2], [200, 200], "{statuses:?}");
    let r = answers.last().unwrap();
    assert_eq!(
        (r.status, code(r)),
        (429, "rate_limited".into()),
        "{statuses:?}"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    // A long poll longer than max + margin: 504.
    let r = proxy.call(
        "acme",
        Some(&key),
        "GET",
        "/api/v1/pop/queue/idle?wait=true&timeout=3000",
        None,
    );
    assert_eq!(
        (r.status, code(&r)),
        (504, "upstream_timeout".into()),
        "{}",
        r.text()
    );
    // The broker killed: 502, on a pooled connection and a fresh one alike.
    broker.signal(libc::SIGKILL);
    broker
        .wait_exit(Duration::from_secs(10))
        .expect("broker dies");
    for _ in 0..2 {
        let r = proxy.call(
            "acme",
            Some(&key),
            "POST",
            "/api/v1/push",
            Some(&push_body("q", &random_uuid())),
        );
        assert_eq!(
            (r.status, code(&r)),
            (502, "bad_gateway".into()),
            "{}",
            r.text()
        );
    }
}

#[test]
fn a_large_push_is_forwarded_byte_for_byte_and_held_once() {
    const BODY: usize = 48 << 20;
    let db = Db::fresh();
    let (_broker, proxy) = setup(&db, &[("QUEEN_PROXY_MAX_BODY_BYTES", "67108864")]);
    let key = key_for(&db, "acme");
    eventually("key loaded", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
    let filler = "x".repeat(BODY - 200);
    let body = format!(
        r#"{{"items":[{{"queue":"large","transactionId":"big-1","payload":"{filler}"}}]}}"#
    );
    let before = proxy.status_kib("VmHWM");
    let mut c = Conn::connect(proxy.port).unwrap();
    c.set_timeout(Duration::from_secs(60));
    let auth = format!("Bearer {key}");
    let r = c
        .request(
            "POST",
            "/api/v1/push",
            &[
                ("Host", "acme.proxy.test"),
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    // Held once: the peak grows by about the body (49 MiB measured), not twice it.
    let grew_kib = proxy.status_kib("VmHWM").saturating_sub(before);
    let body_kib = (body.len() / 1024) as u64;
    assert!(
        grew_kib < body_kib * 3 / 2,
        "the proxy's peak grew {grew_kib} KiB for a {body_kib} KiB body: held twice?"
    );
    let stored = db.count("SELECT length(payload #>> '{}')::bigint FROM queen.messages WHERE transaction_id = 'big-1'", &[]);
    assert_eq!(stored as usize, filler.len(), "the payload arrived whole");
}
