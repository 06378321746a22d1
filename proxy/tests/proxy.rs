//! queen-proxy end to end: real PostgreSQL, a broker with JWT and native
//! tenancy on, and the proxy in front of it (issue 16, proxy.md).
#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use std::time::Duration;
use support::*;

const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

/// A broker, a proxy with operator routes on, and cluster `acme`.
fn setup(db: &Db, extra: &[(&str, &str)]) -> (Broker, Proxy) {
    let broker = secured_broker(db);
    bootstrap(db, &broker, "acme-inc", "acme", TENANT_A);
    let mut b = Proxy::builder(db).env("QUEEN_PROXY_OPERATOR_ENABLED", "true");
    for (k, v) in extra {
        b = b.env(k, v);
    }
    (broker, b.start())
}

/// A user of tenant acme-inc with `role` on acme (or an operator); returns
/// (user id, session token).
fn user(db: &Db, email: &str, role: Option<&str>, operator: bool) -> (String, String) {
    let mut args = vec!["create-user", "--tenant", "acme-inc", "--email", email];
    if operator {
        args.push("--operator");
    }
    let id = admin_ok(db, &args)["id"].as_str().unwrap().to_string();
    if let Some(role) = role {
        admin_ok(
            db,
            &[
                "grant-role",
                "--user",
                &id,
                "--cluster",
                "acme",
                "--role",
                role,
            ],
        );
    }
    let token = admin_ok(db, &["mint-session", "--user", &id])["token"]
        .as_str()
        .unwrap()
        .to_string();
    (id, token)
}

/// One sample request per class: (label, method, path, body).
fn samples() -> Vec<(&'static str, &'static str, &'static str, Option<Vec<u8>>)> {
    vec![
        (
            "produce",
            "POST",
            "/api/v1/push",
            Some(push_body("mq", &random_uuid())),
        ),
        ("consume", "GET", "/api/v1/pop/queue/mq?wait=false", None),
        (
            "queue_admin",
            "POST",
            "/api/v1/configure",
            Some(br#"{"queue":"cq","options":{}}"#.to_vec()),
        ),
        ("read", "GET", "/api/v1/resources/queues", None),
        ("gated", "GET", "/api/v1/ephemeral/queues", None),
        ("operator", "GET", "/api/v1/status", None),
    ]
}

/// What each sample got: 'A' allowed (the broker answered), 'F' 403
/// forbidden, 'B' 404 route_blocked, 'U' 401.
fn outcomes(proxy: &Proxy, token: Option<&str>) -> String {
    samples()
        .into_iter()
        .map(|(label, m, p, body)| {
            let r = proxy.call("acme", token, m, p, body.as_deref());
            match (r.status, code(&r).as_str()) {
                (403, "forbidden") => 'F',
                (404, "route_blocked") => 'B',
                (401, "unauthorized") => 'U',
                // Anything else is the broker's own answer: the proxy let it through.
                (s, _) if s < 500 => 'A',
                (s, c) => panic!("{label} {m} {p}: unexpected {s} {c}: {}", r.text()),
            }
        })
        .collect()
}

#[test]
fn classification_rows_are_answered_before_authentication() {
    let db = Db::fresh();
    let (_broker, proxy) = setup(&db, &[]);
    let blocked = [
        ("GET", "/api/v1/migration"),
        ("GET", "/api/v1/system/shared-state"),
        ("GET", "/internal/peers"),
        ("POST", "/api/v1/stats/refresh"),
        ("GET", "/metrics"),
        ("GET", "/status"),
        ("GET", "/api/v1/pop"),
        ("GET", "/api/v1/pop/"),
        ("GET", "/api/v1/no-such-route"),
        ("PUT", "/api/v1/push"),
        ("POST", "/api/v1/PUSH"),
        ("DELETE", "/api/v1/queues/q/clear"),
        ("GET", "/api/v1/status/../system/shared-state"),
    ];
    for (m, p) in blocked {
        let r = proxy.call("acme", None, m, p, None);
        assert_eq!(
            (r.status, code(&r)),
            (404, "route_blocked".into()),
            "{m} {p}: {}",
            r.text()
        );
        assert_eq!(r.json()["error"], "not available");
    }
    // Every other class needs a credential.
    for (label, m, p, body) in samples() {
        let r = proxy.call("acme", None, m, p, body.as_deref());
        let want = if label == "operator" {
            (404, "route_blocked")
        } else {
            (401, "unauthorized")
        };
        assert_eq!((r.status, code(&r).as_str()), want, "{label}: {}", r.text());
    }
    let r = proxy.call("acme", None, "GET", "/", None);
    assert_eq!(
        (r.status, code(&r)),
        (401, "unauthorized".into()),
        "the dashboard is Read"
    );
    let r = proxy.call(
        "nobody",
        None,
        "POST",
        "/api/v1/push",
        Some(&push_body("q", "x")),
    );
    assert_eq!((r.status, code(&r)), (421, "cluster_unknown".into()));
    let r = proxy.call_with(
        &[("Host", "ACME.proxy.test.:443")],
        "GET",
        "/api/v1/pop",
        None,
    );
    assert_eq!(
        code(&r),
        "route_blocked",
        "Host is lower-cased, port and dot stripped"
    );
    // Every named row reaches the broker for a principal allowed everywhere
    // (a live operator): whatever the broker answers, the proxy refused nothing.
    let (_, op) = user(&db, "op@acme.test", None, true);
    let named = [
        ("POST", "/api/v1/push"),
        ("POST", "/api/v1/transaction"),
        ("GET", "/api/v1/pop/queue/q?wait=false"),
        ("GET", "/api/v1/pop/queue/q/partition/p?wait=false"),
        ("POST", "/api/v1/ack"),
        ("POST", "/api/v1/ack/batch"),
        (
            "POST",
            "/api/v1/lease/00000000-0000-0000-0000-000000000000/extend",
        ),
        ("POST", "/api/v1/configure"),
        ("DELETE", "/api/v1/resources/queues/q"),
        ("POST", "/api/v1/messages/p/t/retry"),
        ("POST", "/api/v1/dlq/1/replay"),
        ("DELETE", "/api/v1/messages/p/t"),
        ("DELETE", "/api/v1/dlq"),
        ("POST", "/api/v1/consumer-groups/g/subscription"),
        ("DELETE", "/api/v1/consumer-groups/g"),
        ("POST", "/streams/v1/cycle"),
        ("GET", "/streams/v1/streams"),
        ("POST", "/api/v1/traces"),
        ("POST", "/api/v1/kv"),
        ("GET", "/api/v1/kv/ns/k"),
        ("PUT", "/api/v1/kv/ns/k"),
        ("DELETE", "/api/v1/kv/ns/k"),
        ("POST", "/api/v1/timers"),
        ("GET", "/api/v1/timers/t"),
        ("DELETE", "/api/v1/timers/t"),
        ("POST", "/api/v1/ephemeral/push"),
        ("GET", "/api/v1/ephemeral/pop"),
        ("POST", "/api/v1/ephemeral/ack"),
        ("POST", "/api/v1/ephemeral/configure"),
        ("POST", "/api/v1/ephemeral/reset"),
        ("DELETE", "/api/v1/ephemeral/queue/q"),
        ("GET", "/api/v1/ephemeral/queues"),
        ("GET", "/api/v1/ephemeral/queues/q/depth"),
        ("GET", "/api/v1/messages"),
        ("GET", "/api/v1/resources/queues"),
        ("POST", "/api/v1/resources/kv/list"),
        ("GET", "/api/v1/status/queues"),
        ("GET", "/api/v1/analytics/queue-lag"),
        ("GET", "/api/v1/consumer-groups"),
        ("GET", "/api/v1/dlq"),
        ("GET", "/api/v1/traces/names"),
        ("GET", "/"),
        ("GET", "/api/v1/status"),
        ("GET", "/api/v1/status/buffers"),
        ("GET", "/api/v1/analytics/system-metrics"),
        ("GET", "/api/v1/analytics/worker-metrics"),
        ("GET", "/api/v1/analytics/postgres-stats"),
        ("GET", "/api/v1/system/maintenance"),
        ("GET", "/api/v1/system/maintenance/pop"),
    ];
    let proxy_codes = [
        "route_blocked",
        "forbidden",
        "unauthorized",
        "feature_gated",
        "bad_gateway",
        "upstream_timeout",
    ];
    eventually("the operator is loaded", || {
        proxy.call("acme", Some(&op), "GET", "/", None).status != 401
    });
    for (m, p) in named {
        let body = (m != "GET").then(|| b"{}".to_vec());
        let r = proxy.call("acme", Some(&op), m, p, body.as_deref());
        assert!(
            !proxy_codes.contains(&code(&r).as_str()),
            "{m} {p}: {} {}",
            r.status,
            r.text()
        );
        assert!(r.header("x-queen-request-id").is_some());
    }
}

#[test]
fn authorization_matrix_for_keys_users_and_operators() {
    let db = Db::fresh();
    let (broker, proxy) = setup(&db, &[]);
    let key = |scopes| issue_key(&db, "acme", scopes).1;
    //                 produce consume admin read gated operator
    let cases = [
        (key("produce"), "AFFFAB"),
        (key("consume"), "FAFFAB"),
        (key("admin"), "FFAAFB"),
        (key("read"), "FFFAFB"),
        (key("produce,consume,admin,read"), "AAAAAB"),
    ];
    for (k, want) in &cases {
        eventually("new keys are loaded", || {
            outcomes(&proxy, Some(k)) != "UUUUUB"
        });
        assert_eq!(outcomes(&proxy, Some(k)), *want, "key {}", &k[..8]);
    }
    let users = [
        (
            user(&db, "admin@acme.test", Some("admin"), false).1,
            "AAAAAB",
        ),
        (
            user(&db, "prod@acme.test", Some("producer"), false).1,
            "AFFAAB",
        ),
        (
            user(&db, "cons@acme.test", Some("consumer"), false).1,
            "FAFAAB",
        ),
        (
            user(&db, "view@acme.test", Some("viewer"), false).1,
            "FFFAFB",
        ),
        (user(&db, "none@acme.test", None, false).1, "FFFFFB"),
        (user(&db, "op@acme.test", None, true).1, "AAAAAA"),
    ];
    for (token, want) in &users {
        eventually("new users are loaded", || {
            !outcomes(&proxy, Some(token)).contains('U')
        });
        assert_eq!(outcomes(&proxy, Some(token)), *want);
    }
    // A key of another cluster is 403 here.
    bootstrap(&db, &broker, "beta-inc", "beta", TENANT_B);
    let beta_key = key_for(&db, "beta");
    eventually("beta key loaded", || {
        proxy
            .call(
                "beta",
                Some(&beta_key),
                "GET",
                "/api/v1/resources/queues",
                None,
            )
            .status
            == 200
    });
    let r = proxy.call(
        "acme",
        Some(&beta_key),
        "GET",
        "/api/v1/resources/queues",
        None,
    );
    assert_eq!((r.status, code(&r)), (403, "forbidden".into()));
    // Garbage and unknown keys are 401.
    for bad in [
        "qk_live_short",
        &format!("qk_live_{}", "A".repeat(43)),
        "not-a-jwt",
    ] {
        let r = proxy.call("acme", Some(bad), "GET", "/api/v1/resources/queues", None);
        assert_eq!((r.status, code(&r)), (401, "unauthorized".into()), "{bad}");
    }
    // The session cookie works, except on a top-level navigation of an API path.
    let cookie = format!("queen_session={}", users[0].0);
    let host = [("Host", "acme.proxy.test"), ("Cookie", cookie.as_str())];
    assert_eq!(
        proxy
            .call_with(&host, "GET", "/api/v1/resources/queues", None)
            .status,
        200
    );
    let nav = [host[0], host[1], ("Sec-Fetch-Mode", "navigate")];
    assert_eq!(
        proxy
            .call_with(&nav, "GET", "/api/v1/resources/queues", None)
            .status,
        401
    );
    // The proxy's own metrics: operators only, never a tenant.
    let all = &cases[4].0;
    let r = proxy.call("acme", Some(all), "GET", "/metrics/prometheus", None);
    assert_eq!((r.status, code(&r)), (404, "route_blocked".into()));
    let r = proxy.call(
        "acme",
        Some(&users[5].0),
        "GET",
        "/metrics/prometheus",
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text()
            .contains("queen_proxy_requests_total{class=\"produce\",code=\"201\"}"),
        "{}",
        r.text()
    );
    assert!(r.text().contains("queen_proxy_upstream_seconds_count"));
    // A feature switched off is 403 feature_gated (before authentication).
    db.exec("UPDATE queen_proxy.clusters SET features = '{}' WHERE slug = 'acme'; SELECT pg_notify('queen_proxy_inval', '')");
    eventually("features reloaded", || {
        code(&proxy.call("acme", None, "GET", "/api/v1/ephemeral/queues", None)) == "feature_gated"
    });
    drop(broker);
}

fn key_for(db: &Db, slug: &str) -> String {
    issue_key(db, slug, "produce,consume,admin,read").1
}

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
