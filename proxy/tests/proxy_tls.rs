//! queen-proxy's listener rules (PX-01..PX-04) and TLS with a CA made here,
//! and the stale grace while the control database is down. Its own binary:
//! the last test stops this binary's PostgreSQL.
#[path = "../../tests/common/mod.rs"]
mod common;
mod support;
#[path = "../../tests/tls_support/mod.rs"]
mod tls_support;

use common::*;
use std::time::Duration;
use support::*;

/// The stale-grace test stops PostgreSQL: it holds this for writing, the
/// others for reading, so none of them runs while the database is down.
static PG_UP: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn pg_shared() -> std::sync::RwLockReadGuard<'static, ()> {
    PG_UP.read().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn one_tls_variable_alone_exits_1_naming_the_missing_one() {
    let _pg = pg_shared();
    let db = Db::fresh();
    for (set, missing) in [
        ("QUEEN_PROXY_TLS_CERT", "QUEEN_PROXY_TLS_KEY"),
        ("QUEEN_PROXY_TLS_KEY", "QUEEN_PROXY_TLS_CERT"),
    ] {
        let mut p = Proxy::builder(&db).env(set, "/nonexistent.pem").spawn();
        let st = p
            .wait_exit(Duration::from_secs(10))
            .expect("must refuse to boot");
        assert_eq!(st.code(), Some(1));
        let log = p.log();
        assert!(log.contains(&format!("{missing} is missing")), "{log}");
    }
    for bad in ["", "127.0.0.1:80"] {
        let mut p = Proxy::builder(&db)
            .env("QUEEN_PROXY_BIND_ADDR", bad)
            .spawn();
        assert_eq!(
            p.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(1),
            "bind {bad:?}"
        );
        assert!(p.log().contains("QUEEN_PROXY_BIND_ADDR"), "{}", p.log());
    }
    let p = Proxy::builder(&db).start();
    assert!(
        p.log().contains("plaintext"),
        "the boot log says there is no TLS: {}",
        p.log()
    );
}

#[test]
fn tls_listener_serves_with_a_test_ca_and_forwards() {
    let _pg = pg_shared();
    let db = Db::fresh();
    let broker = secured_broker(&db);
    bootstrap(&db, &broker, "acme-inc", "acme", TENANT_A);
    let key = issue_key(&db, "acme", "produce,consume").1;
    let pki = tls_support::make_pki("proxy test CA", &["127.0.0.1"]);
    let dir = tls_support::temp_dir("proxy");
    let cert = tls_support::write(&dir, "cert.pem", &pki.cert_pem);
    let pem = tls_support::write(&dir, "key.pem", &pki.key_pem);
    let proxy = Proxy::builder(&db)
        .env("QUEEN_PROXY_TLS_CERT", &cert)
        .env("QUEEN_PROXY_TLS_KEY", &pem)
        .env("QUEEN_PROXY_DEFAULT_CLUSTER", "acme")
        .spawn();
    let agent = tls_support::https_agent(Some(&pki.ca_pem));
    let url = format!("https://127.0.0.1:{}/api/v1/push", proxy.port);
    let body = String::from_utf8(push_body("tls", "t1")).unwrap();
    let status = check_for(Duration::from_secs(15), || {
        let r = agent
            .post(&url)
            .header("Authorization", &format!("Bearer {key}"))
            .header("Content-Type", "application/json")
            .send(&body)
            .ok()?;
        (r.status().as_u16() == 201).then_some(201)
    });
    assert_eq!(status, 201);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE transaction_id = 't1'",
            &[]
        ),
        1
    );
    // A client that does not trust the CA is refused, and plaintext gets no HTTP answer.
    let stranger = tls_support::https_agent(None);
    assert!(stranger.get(&url).call().is_err());
    let raw = raw_exchange(
        proxy.port,
        b"GET / HTTP/1.1\r\nHost: acme\r\n\r\n",
        Duration::from_millis(500),
    );
    assert_ne!(
        raw_status(&raw),
        Some(401),
        "plaintext must not be served on the TLS port"
    );
    assert!(proxy.log().contains("TLS on"), "{}", proxy.log());
}

#[test]
fn cached_clusters_serve_while_the_control_database_is_down() {
    let _pg = PG_UP.write().unwrap_or_else(|e| e.into_inner());
    let db = Db::fresh();
    let broker = secured_broker(&db);
    bootstrap(&db, &broker, "acme-inc", "acme", TENANT_A);
    let key = issue_key(&db, "acme", "read").1;
    // The broker keeps serving reads from its caches while PostgreSQL is down
    // only partly, so the check is the proxy's own answer: never 503 within
    // the grace, 503 control_unavailable after it.
    let proxy = Proxy::builder(&db)
        .env("QUEEN_PROXY_STALE_GRACE_MS", "5000")
        .start();
    eventually("key loaded", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
    /// Starts PostgreSQL again however the test ends.
    struct Restart;
    impl Drop for Restart {
        fn drop(&mut self) {
            pg().start();
        }
    }
    pg().stop_immediate();
    let restart = Restart;
    let r = proxy.call("acme", Some(&key), "GET", "/api/v1/resources/queues", None);
    assert_ne!(
        code(&r),
        "control_unavailable",
        "within the grace the cache serves"
    );
    assert_ne!(r.status, 401, "the key is still known");
    let r = check_for(Duration::from_secs(15), || {
        let r = proxy.call("acme", Some(&key), "GET", "/api/v1/resources/queues", None);
        (code(&r) == "control_unavailable").then_some(r)
    });
    assert_eq!(r.status, 503);
    drop(restart);
    eventually("back after the database returns", || {
        proxy
            .call("acme", Some(&key), "GET", "/api/v1/resources/queues", None)
            .status
            == 200
    });
}

#[test]
fn ed25519_sessions_verify_and_unusable_key_material_exits_1() {
    let _pg = pg_shared();
    let db = Db::fresh();
    for (k, v) in [
        ("QUEEN_PROXY_JWT_ED25519_PEM", "not a pem"),
        (
            "QUEEN_PROXY_JWT_ED25519_PUB_PEM",
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
        ),
    ] {
        let mut p = Proxy::builder(&db)
            .env("QUEEN_PROXY_JWT_SECRET", "")
            .env(k, v)
            .spawn();
        assert_eq!(
            p.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
            Some(1),
            "{k}"
        );
        assert!(p.log().contains(k), "{}", p.log());
    }
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("ed25519 key");
    let pem = key.serialize_pem();
    let mut p = Proxy::builder(&db)
        .env("QUEEN_PROXY_JWT_ED25519_PEM", &pem)
        .spawn();
    assert_eq!(
        p.wait_exit(Duration::from_secs(10)).and_then(|s| s.code()),
        Some(1),
        "with the HS256 secret too"
    );
    assert!(p.log().contains("set only one of"), "{}", p.log());

    let broker = secured_broker(&db);
    bootstrap(&db, &broker, "acme-inc", "acme", TENANT_A);
    let ed = [
        ("QUEEN_PROXY_JWT_SECRET", ""),
        ("QUEEN_PROXY_JWT_ED25519_PEM", pem.as_str()),
    ];
    let (_, u) = admin_env(
        &db,
        &ed,
        &[
            "create-user",
            "--tenant",
            "acme-inc",
            "--email",
            "ed@acme.test",
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
    let (code_, t) = admin_env(&db, &ed, &["mint-session", "--user", &uid]);
    assert_eq!(code_, 0, "{t}");
    let token = t["token"].as_str().unwrap().to_string();
    let hs_token = admin_ok(&db, &["mint-session", "--user", &uid])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let proxy = Proxy::builder(&db)
        .env("QUEEN_PROXY_JWT_SECRET", "")
        .env("QUEEN_PROXY_JWT_ED25519_PEM", &pem)
        .start();
    assert!(proxy.log().contains("sessions: EdDSA"), "{}", proxy.log());
    eventually("EdDSA session works", || {
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
    let r = proxy.call(
        "acme",
        Some(&hs_token),
        "GET",
        "/api/v1/resources/queues",
        None,
    );
    assert_eq!(r.status, 401, "a token of another key is refused");
}
