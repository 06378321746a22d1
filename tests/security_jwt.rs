//! JWT authentication and access levels (security.md SEC-05..17): each test
//! is named for the requirement it checks, against a real broker over HTTP.
mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECRET: &str = "test-secret-0123456789abcdef-xyz";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An HS256 token with `claims`.
fn hs(claims: Value) -> String {
    hs_alg(Algorithm::HS256, SECRET, claims)
}

fn hs_alg(alg: Algorithm, secret: &str, claims: Value) -> String {
    encode(
        &Header::new(alg),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

fn role_token(role: &str) -> String {
    hs(json!({"sub": format!("{role}-user"), "role": role, "exp": now() + 3600}))
}

fn hs_broker(db: &Db) -> BrokerBuilder {
    Broker::builder(db)
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", SECRET)
}

/// `method path` with an optional `Authorization` value and JSON body.
fn call(b: &Broker, method: &str, path: &str, auth: Option<&str>, body: Option<&Value>) -> Resp {
    let mut c = b.conn();
    let mut headers: Vec<(&str, &str)> = Vec::new();
    if let Some(a) = auth {
        headers.push(("Authorization", a));
    }
    let body = body.map(|v| v.to_string().into_bytes());
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    c.request(method, path, &headers, body.as_deref())
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

fn push_body(queue: &str) -> Value {
    json!({"items": [{"queue": queue, "payload": {"x": 1}}]})
}

fn assert_401(r: &Resp, reason: &str) {
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json(), json!({ "error": reason }), "exact 401 body");
}

#[test]
fn sec05_jwt_off_by_default_every_route_answers_without_credentials() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = call(&b, "POST", "/api/v1/push", None, Some(&push_body("open")));
    assert_eq!(r.status, 201, "{}", r.text());
    for (m, p) in [
        ("DELETE", "/api/v1/resources/queues/open"),
        ("POST", "/api/v1/system/maintenance"),
        ("GET", "/api/v1/dlq"),
        ("GET", "/api/v1/pop/queue/open?wait=false"),
    ] {
        let r = call(&b, m, p, None, Some(&json!({})).filter(|_| m == "POST"));
        assert!(
            r.status != 401 && r.status != 403,
            "{m} {p} answered {} with JWT off",
            r.status
        );
    }
}

#[test]
fn sec06_boot_log_states_the_auth_mode_in_one_line_without_the_secret() {
    let db = Db::fresh();
    let off = Broker::start(&db);
    let lines = |b: &Broker| {
        b.log()
            .lines()
            .filter(|l| l.contains("Authentication:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let l = lines(&off);
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].contains("disabled"), "{l:?}");
    let on = hs_broker(&db).start();
    let l = lines(&on);
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].contains("enabled") && l[0].contains("HS256"), "{l:?}");
    assert!(!on.log().contains(SECRET), "the secret is in the log");
}

#[test]
fn sec07_bearer_scheme_is_case_insensitive_and_a_bare_token_works() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let t = role_token("admin");
    for auth in [
        format!("Bearer {t}"),
        format!("bearer {t}"),
        format!("BEARER  {t}"),
        t.clone(),
    ] {
        let r = call(&b, "GET", "/api/v1/dlq", Some(&auth), None);
        assert_eq!(r.status, 200, "{auth:.12}: {}", r.text());
    }
}

#[test]
fn sec08_token_alg_must_match_and_none_is_refused() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let claims = json!({"sub": "u", "role": "admin", "exp": now() + 3600});
    let wrong_alg = hs_alg(Algorithm::HS384, SECRET, claims.clone());
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", Some(&bearer(&wrong_alg)), None),
        "Invalid token signature",
    );
    let forged = hs_alg(Algorithm::HS256, "another-secret", claims.clone());
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", Some(&bearer(&forged)), None),
        "Invalid token signature",
    );
    let none = format!(
        "{}.{}.",
        base64url(br#"{"alg":"none","typ":"JWT"}"#),
        base64url(claims.to_string().as_bytes())
    );
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", Some(&bearer(&none)), None),
        "Invalid token signature",
    );
}

fn base64url(b: &[u8]) -> String {
    B64.encode(b)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// A fresh Ed25519 key pair: (PKCS#8 DER private key, SPKI PEM public key).
fn ed25519() -> (Vec<u8>, String) {
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let mut spki = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    spki.extend_from_slice(pair.public_key().as_ref());
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        B64.encode(&spki)
    );
    (pkcs8.as_ref().to_vec(), pem)
}

#[test]
fn sec08_eddsa_with_public_key_and_no_hs_with_public_key_confusion() {
    let db = Db::fresh();
    let (private, pem) = ed25519();
    let b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env("JWT_ALGORITHM", "EdDSA")
        .env("JWT_PUBLIC_KEY", &pem)
        .start();
    let claims = json!({"sub": "ed", "role": "admin", "exp": now() + 3600});
    let good = encode(
        &Header::new(Algorithm::EdDSA),
        &claims,
        &EncodingKey::from_ed_der(&private),
    )
    .unwrap();
    let r = call(&b, "GET", "/api/v1/dlq", Some(&bearer(&good)), None);
    assert_eq!(r.status, 200, "{}", r.text());
    // The classic confusion: HMAC keyed with the public key's text.
    let confused = hs_alg(Algorithm::HS256, &pem, claims);
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", Some(&bearer(&confused)), None),
        "Invalid token signature",
    );
}

#[test]
fn sec08_boot_fails_without_usable_key_material_or_with_an_unknown_algorithm() {
    let db = Db::fresh();
    for (envs, var) in [
        (vec![("JWT_ENABLED", "true")], "JWT_SECRET"),
        (
            vec![
                ("JWT_ENABLED", "true"),
                ("JWT_ALGORITHM", "RS256"),
                ("JWT_SECRET", SECRET),
            ],
            "JWT_PUBLIC_KEY",
        ),
        (
            vec![("JWT_ENABLED", "true"), ("JWT_PUBLIC_KEY", "not a pem")],
            "JWT_PUBLIC_KEY",
        ),
        (
            vec![
                ("JWT_ENABLED", "true"),
                ("JWT_ALGORITHM", "HS999"),
                ("JWT_SECRET", SECRET),
            ],
            "JWT_ALGORITHM",
        ),
    ] {
        let mut bb = Broker::builder(&db);
        for (k, v) in &envs {
            bb = bb.env(k, v);
        }
        let mut b = bb.spawn();
        let st = b
            .wait_exit(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{envs:?}: broker kept running"));
        assert_eq!(st.code(), Some(1), "{envs:?}");
        assert!(
            b.log().contains(var),
            "{envs:?}: log names {var}: {}",
            b.log()
        );
    }
}

#[test]
fn sec10_exp_nbf_skew_issuer_and_audience() {
    let db = Db::fresh();
    let b = hs_broker(&db)
        .env("JWT_ISSUER", "https://issuer.test")
        .env("JWT_AUDIENCE", "queen")
        .env("JWT_CLOCK_SKEW", "30")
        .start();
    let base = json!({"sub": "u", "role": "admin", "iss": "https://issuer.test", "aud": "queen",
                      "exp": now() + 3600});
    let with = |extra: Value| {
        let mut c = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        bearer(&hs(c))
    };
    let get = |auth: String| call(&b, "GET", "/api/v1/dlq", Some(&auth), None);
    assert_eq!(get(with(json!({"exp": now() + 60}))).status, 200);
    assert_eq!(get(with(json!({}))).status, 200);
    assert_eq!(
        get(with(json!({"exp": now() - 10}))).status,
        200,
        "within the 30 s skew"
    );
    assert_401(&get(with(json!({"exp": now() - 120}))), "Token has expired");
    assert_401(
        &get(with(json!({"nbf": now() + 120}))),
        "Token not yet valid",
    );
    assert_eq!(
        get(with(json!({"nbf": now() + 10}))).status,
        200,
        "nbf skew"
    );
    assert_401(
        &get(with(json!({"iss": "https://evil.test"}))),
        "Invalid token issuer",
    );
    assert_401(
        &get(with(json!({"aud": "other"}))),
        "Invalid token audience",
    );
}

#[test]
fn sec10_iss_and_aud_are_not_checked_when_unset() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let t = hs(json!({"sub": "u", "role": "admin", "iss": "x", "aud": "y", "exp": now() + 3600}));
    assert_eq!(
        call(&b, "GET", "/api/v1/dlq", Some(&bearer(&t)), None).status,
        200
    );
}

#[test]
fn sec10_cached_token_still_expires() {
    let db = Db::fresh();
    let b = hs_broker(&db).env("JWT_CLOCK_SKEW", "0").start();
    let t = bearer(&hs(json!({"sub": "u", "role": "admin", "exp": now() + 2})));
    // Validated and cached on whichever shard serves it (several connections).
    for _ in 0..4 {
        assert_eq!(call(&b, "GET", "/api/v1/dlq", Some(&t), None).status, 200);
    }
    std::thread::sleep(Duration::from_millis(3200));
    for _ in 0..4 {
        assert_401(
            &call(&b, "GET", "/api/v1/dlq", Some(&t), None),
            "Token has expired",
        );
    }
}

#[test]
fn sec11_exact_401_and_403_answers() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", None, None),
        "Authentication required",
    );
    assert_401(
        &call(&b, "GET", "/api/v1/dlq", Some("Bearer not.a.token"), None),
        "Invalid token signature",
    );
    let r = call(
        &b,
        "POST",
        "/api/v1/push",
        Some(&bearer(&role_token("read-only"))),
        Some(&push_body("q")),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json(), json!({"error": "Insufficient permissions"}));
}

#[test]
fn sec12_roles_from_string_and_array_claims_with_mapped_names() {
    let db = Db::fresh();
    let b = hs_broker(&db)
        .env("JWT_ROLES_CLAIM", "grp")
        .env("JWT_ROLES_ARRAY_CLAIM", "perms")
        .env("JWT_ROLE_ADMIN", "superuser")
        .env("JWT_ROLE_READ_ONLY", "viewer")
        .start();
    let maint = |t: &str| {
        call(
            &b,
            "GET",
            "/api/v1/system/maintenance",
            Some(&bearer(t)),
            None,
        )
    };
    let admin_str = hs(json!({"sub": "a", "grp": "superuser", "exp": now() + 3600}));
    let admin_arr = hs(json!({"sub": "a", "perms": ["viewer", "superuser"], "exp": now() + 3600}));
    let default_name =
        hs(json!({"sub": "a", "role": "admin", "roles": ["admin"], "exp": now() + 3600}));
    assert_ne!(maint(&admin_str).status, 403);
    assert_ne!(maint(&admin_str).status, 401);
    assert_ne!(maint(&admin_arr).status, 403);
    assert_eq!(
        maint(&default_name).status,
        403,
        "default names are remapped"
    );
    let viewer = hs(json!({"sub": "v", "perms": ["viewer"], "exp": now() + 3600}));
    assert_eq!(
        call(&b, "GET", "/api/v1/dlq", Some(&bearer(&viewer)), None).status,
        200
    );
}

#[test]
fn sec13_access_levels_are_a_set_not_a_ladder() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let wo = bearer(&role_token("write-only"));
    let ro = bearer(&role_token("read-only"));
    let rw = bearer(&role_token("read-write"));
    let r = call(
        &b,
        "POST",
        "/api/v1/push",
        Some(&wo),
        Some(&push_body("lv")),
    );
    assert_eq!(r.status, 201, "write-only pushes: {}", r.text());
    for p in [
        "/api/v1/resources/queues",
        "/api/v1/dlq",
        "/api/v1/pop/queue/lv?wait=false",
    ] {
        assert_eq!(
            call(&b, "GET", p, Some(&wo), None).status,
            403,
            "write-only GET {p}"
        );
    }
    let r = call(&b, "GET", "/api/v1/resources/queues", Some(&ro), None);
    assert!(
        r.status != 401 && r.status != 403,
        "read-only lists queues: {}",
        r.status
    );
    assert_eq!(call(&b, "GET", "/api/v1/dlq", Some(&ro), None).status, 200);
    assert_eq!(
        call(
            &b,
            "POST",
            "/api/v1/push",
            Some(&ro),
            Some(&push_body("lv"))
        )
        .status,
        403
    );
    assert_eq!(
        call(
            &b,
            "GET",
            "/api/v1/pop/queue/lv?wait=false",
            Some(&ro),
            None
        )
        .status,
        403,
        "pop is READ_WRITE"
    );
    let r = call(
        &b,
        "GET",
        "/api/v1/pop/queue/lv?wait=false",
        Some(&rw),
        None,
    );
    assert_eq!(r.status, 200, "read-write pops: {}", r.text());
    assert_eq!(
        call(
            &b,
            "POST",
            "/api/v1/system/maintenance",
            Some(&rw),
            Some(&json!({}))
        )
        .status,
        403,
        "read-write is not admin"
    );
}

#[test]
fn sec14_route_levels_admin_routes_and_exact_skip_paths() {
    let db = Db::fresh();
    let b = hs_broker(&db)
        .env("JWT_SKIP_PATHS", "/health,/api/v1/dlq")
        .start();
    assert_eq!(
        call(&b, "GET", "/api/v1/dlq", None, None).status,
        200,
        "skipped"
    );
    assert_401(
        &call(&b, "GET", "/api/v1/dlq/", None, None),
        "Authentication required",
    );
    let rw = bearer(&role_token("read-write"));
    for (m, p) in [
        ("DELETE", "/api/v1/resources/queues/x"),
        ("GET", "/api/v1/system/shared-state"),
        ("POST", "/internal/api/notify"),
        ("POST", "/api/v1/stats/refresh"),
        ("DELETE", "/api/v1/consumer-groups/g"),
    ] {
        assert_eq!(
            call(&b, m, p, Some(&rw), None).status,
            403,
            "{m} {p} is ADMIN"
        );
    }
    let r = call(&b, "DELETE", "/api/v1/dlq", Some(&rw), None);
    assert!(
        r.status != 401 && r.status != 403,
        "a skip path skips every method: {}",
        r.text()
    );
    let admin = bearer(&role_token("admin"));
    let r = call(
        &b,
        "DELETE",
        "/api/v1/resources/queues/x",
        Some(&admin),
        None,
    );
    assert!(
        r.status != 401 && r.status != 403,
        "admin deletes: {}",
        r.status
    );
    let r = call(
        &b,
        "POST",
        "/api/v1/configure",
        Some(&rw),
        Some(&json!({"queue": "c"})),
    );
    assert_eq!(r.status, 200, "configure is READ_WRITE: {}", r.text());
}

#[test]
fn sec15_health_and_metrics_stay_public_whatever_the_skip_paths() {
    let db = Db::fresh();
    let b = hs_broker(&db).env("JWT_SKIP_PATHS", "/nothing").start();
    assert_eq!(call(&b, "GET", "/health", None, None).status, 200);
    for p in ["/metrics", "/metrics/prometheus", "/", "/assets/x.js"] {
        let r = call(&b, "GET", p, None, None);
        assert!(r.status != 401 && r.status != 403, "{p}: {}", r.status);
    }
}

#[test]
fn sec16_producer_sub_comes_from_the_token_never_the_body() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let t = bearer(&hs(
        json!({"sub": "alice", "role": "read-write", "exp": now() + 3600}),
    ));
    let body = json!({"items": [{"queue": "ps", "transactionId": "p1",
                                 "producerSub": "mallory", "payload": {"a": 1}}]});
    let r = call(&b, "POST", "/api/v1/push", Some(&t), Some(&body));
    assert_eq!(r.status, 201, "{}", r.text());
    let txn = json!({"operations": [{"type": "push", "items": [
        {"queue": "ps", "transactionId": "p2", "producerSub": "mallory", "payload": {"b": 2}}]}]});
    let r = call(&b, "POST", "/api/v1/transaction", Some(&t), Some(&txn));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["success"], true, "{}", r.text());
    let rows = db.query(
        "SELECT m.transaction_id, m.producer_sub FROM queen.messages m ORDER BY 1",
        &[],
    );
    let subs: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        subs,
        vec![
            ("p1".to_string(), Some("alice".to_string())),
            ("p2".to_string(), Some("alice".to_string()))
        ]
    );
    let pop = call(
        &b,
        "GET",
        "/api/v1/pop/queue/ps?batch=10&wait=false",
        Some(&t),
        None,
    );
    assert_eq!(pop.status, 200, "{}", pop.text());
    for m in messages(&pop.json()) {
        assert_eq!(m["producerSub"], "alice", "{m}");
    }
}

#[test]
fn sec16_without_jwt_a_body_producer_sub_is_not_stored() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push(json!([{"queue": "ps0", "producerSub": "mallory", "payload": 1}]));
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE producer_sub IS NOT NULL",
            &[]
        ),
        0
    );
}

#[test]
fn sec17_prometheus_metrics_are_public_with_jwt_on() {
    let db = Db::fresh();
    let b = hs_broker(&db).start();
    let r = call(&b, "GET", "/metrics/prometheus", None, None);
    assert!(r.status != 401 && r.status != 403, "{}", r.status);
}

/// Issue 17, point 4: a time claim that is present but not a whole number of
/// seconds in range was read as absent, so such a token never expired; and a
/// token without `exp` is refused unless `JWT_REQUIRE_EXP=false`.
#[test]
fn malformed_time_claims_and_a_missing_exp_are_401() {
    let db = Db::fresh();
    let strict = hs_broker(&db).start();
    let lax = hs_broker(&db).env("JWT_REQUIRE_EXP", "false").start();
    let get = |b: &Broker, extra: Value| {
        let mut c = json!({"sub": "u", "role": "admin"});
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        call(b, "GET", "/api/v1/dlq", Some(&bearer(&hs(c))), None)
    };
    let soon = now() + 3600;
    let bad = [
        json!({"exp": -1}),
        json!({"exp": "never"}),
        json!({"exp": true}),
        json!({"exp": null}),
        json!({"exp": 9_223_372_036_854_775_808u64}),
        json!({"exp": soon as f64 + 0.5}),
        json!({"exp": soon, "nbf": 1e300}),
        json!({"exp": soon, "nbf": "now"}),
        json!({"exp": soon, "iat": -5}),
    ];
    for claims in &bad {
        for b in [&strict, &lax] {
            let r = get(b, claims.clone());
            assert_eq!(r.status, 401, "{claims}: {}", r.text());
            assert_401(&r, "Invalid token time claim");
        }
    }
    assert_401(&get(&strict, json!({})), "Token has no expiry");
    assert_eq!(get(&lax, json!({})).status, 200, "JWT_REQUIRE_EXP=false");
    assert_eq!(
        get(&strict, json!({"exp": soon, "nbf": now() - 5})).status,
        200
    );
}
