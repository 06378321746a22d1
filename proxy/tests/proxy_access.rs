//! queen-proxy's access decisions end to end: every row of the route table
//! and every cell of the authorization matrix, against real PostgreSQL and a
//! broker with JWT and native tenancy on (issue 16, proxy.md §3, §4).
#[path = "../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use support::*;

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
