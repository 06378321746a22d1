//! TLS from the broker to PostgreSQL (security.md SEC-24..28), against this
//! test binary's own cluster switched to `ssl=on` with a CA and a server
//! certificate the test makes (rcgen). The harness's own clients keep using
//! plaintext; the broker's backends are inspected in `pg_stat_ssl`.
mod common;
mod tls_support;

use common::*;
use std::sync::OnceLock;
use std::time::Duration;
use tls_support::*;

/// The PKI the cluster serves with, set up once per test binary.
static PKI: OnceLock<Pki> = OnceLock::new();

/// Switches the cluster to `ssl=on` with a fresh PKI (once) and returns it.
fn ssl_cluster() -> &'static Pki {
    PKI.get_or_init(|| {
        let pki = make_pki("Queen PG test CA", &["127.0.0.1", "localhost"]);
        let data: String = pg().query("postgres", "SHOW data_directory", &[])[0].get(0);
        let dir = std::path::Path::new(&data);
        let cert = write(dir, "queen-test-server.crt", &pki.cert_pem);
        let key = write(dir, "queen-test-server.key", &pki.key_pem);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        if unsafe { libc::geteuid() } == 0 {
            let name = std::ffi::CString::new("postgres").unwrap();
            // SAFETY: getpwnam returns static storage or null; read at once.
            let pw = unsafe { libc::getpwnam(name.as_ptr()) };
            assert!(!pw.is_null(), "no postgres user");
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            for f in [&cert, &key] {
                std::os::unix::fs::chown(f, Some(uid), Some(gid)).expect("chown");
            }
        }
        // One statement per call: ALTER SYSTEM refuses to run in the
        // implicit transaction of a multi-statement query.
        for sql in [
            format!("ALTER SYSTEM SET ssl_cert_file = '{cert}'"),
            format!("ALTER SYSTEM SET ssl_key_file = '{key}'"),
            "ALTER SYSTEM SET ssl = on".to_string(),
            "SELECT pg_reload_conf()".to_string(),
        ] {
            pg().psql_exec("postgres", &sql);
        }
        check_for(Duration::from_secs(20), || {
            let on: String = pg().query("postgres", "SHOW ssl", &[])[0].get(0);
            (on == "on").then_some(())
        });
        pki
    })
}

/// Backends of the broker on `db`, as (with TLS, without TLS).
fn broker_backends(db: &Db) -> (i64, i64) {
    let q = |ssl: bool| {
        db.count(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = $1 AND a.application_name = 'queen' AND s.ssl = $2",
            &[&db.name, &ssl],
        )
    };
    (q(true), q(false))
}

/// Pushes and pops one message, proving the DB link works end to end.
fn round_trip(b: &Broker) {
    b.push(json!([{"queue": "pgtls", "payload": {"x": 1}}]));
    let got = b
        .pop("/api/v1/pop/queue/pgtls?batch=1&wait=false")
        .expect("popped");
    assert_eq!(got["messages"][0]["data"]["x"], 1, "{got}");
}

/// Asserts the broker stays unready (health 503) and logs a certificate
/// refusal; returns its log.
fn assert_refused(b: &mut Broker) -> String {
    let log = try_check_for(Duration::from_secs(30), || {
        let log = b.log();
        log.contains("invalid peer certificate").then_some(log)
    })
    .unwrap_or_else(|| panic!("no certificate refusal logged:\n{}", b.log_tail(30)));
    assert!(b.try_wait().is_none(), "broker exited:\n{}", b.log_tail(30));
    // The DB boot thread can log the refusal before the shards listen.
    let port = b.port;
    let r = check_for(Duration::from_secs(30), || {
        Conn::connect(port)
            .ok()?
            .request("GET", "/health", &[], None)
            .ok()
    });
    assert_eq!(r.status, 503, "health must not be ready: {}", r.text());
    log
}

#[test]
fn sec24_pg_use_ssl_defaults_to_plaintext() {
    ssl_cluster();
    let db = Db::fresh();
    let b = Broker::start(&db);
    round_trip(&b);
    assert!(
        b.log()
            .contains("PostgreSQL link: plaintext (trust mode plaintext"),
        "{}",
        b.log_tail(30)
    );
    let (tls, plain) = broker_backends(&db);
    assert_eq!(tls, 0, "no TLS backend expected");
    assert!(plain > 0, "the broker's plaintext backends must be visible");
}

#[test]
fn sec25_default_webpki_roots_refuse_a_private_ca() {
    ssl_cluster();
    let db = Db::fresh();
    let mut b = Broker::builder(&db).env("PG_USE_SSL", "true").spawn();
    let log = assert_refused(&mut b);
    assert!(log.contains("trust mode webpki-roots"), "{log}");
    assert_eq!(broker_backends(&db), (0, 0));
}

#[test]
fn sec26_supplied_ca_connects_verified_over_tls() {
    let pki = ssl_cluster();
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("PG_USE_SSL", "true")
        .env("PG_SSL_ROOT_CERT", &pki.ca_pem)
        .start();
    round_trip(&b);
    assert!(b.log().contains("trust mode supplied-ca"), "{}", b.log());
    let (tls, plain) = broker_backends(&db);
    assert!(tls > 0, "the broker's backends must use TLS");
    assert_eq!(plain, 0, "no plaintext backend of the broker expected");
}

#[test]
fn sec26_supplied_ca_with_escaped_newlines_connects() {
    let pki = ssl_cluster();
    let db = Db::fresh();
    let one_line = pki.ca_pem.trim_end().replace('\n', "\\n");
    let b = Broker::builder(&db)
        .env("PG_USE_SSL", "true")
        .env("PG_SSL_ROOT_CERT", &one_line)
        .start();
    round_trip(&b);
    assert!(broker_backends(&db).0 > 0);
}

#[test]
fn sec26_only_the_supplied_ca_is_trusted_and_it_outranks_reject_unauthorized_false() {
    ssl_cluster();
    let other = make_pki("Some other CA", &["127.0.0.1"]);
    let db = Db::fresh();
    let mut b = Broker::builder(&db)
        .env("PG_USE_SSL", "true")
        .env("PG_SSL_ROOT_CERT", &other.ca_pem)
        .env("PG_SSL_REJECT_UNAUTHORIZED", "false")
        .spawn();
    let log = assert_refused(&mut b);
    assert!(log.contains("trust mode supplied-ca"), "{log}");
    assert!(!log.contains("accept-any"), "{log}");
}

#[test]
fn sec26_malformed_root_cert_exits_1_even_with_ssl_off() {
    let db = Db::fresh();
    for bad in [
        "not a certificate",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    ] {
        let mut b = Broker::builder(&db)
            .env("PG_USE_SSL", "false")
            .env("PG_SSL_ROOT_CERT", bad)
            .spawn();
        let st = b
            .wait_exit(Duration::from_secs(20))
            .unwrap_or_else(|| panic!("{bad:?}: broker did not exit"));
        assert_eq!(st.code(), Some(1), "{bad:?}");
        let log = b.log();
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one line expected: {log}");
        assert!(lines[0].contains("PG_SSL_ROOT_CERT"), "{log}");
    }
}

#[test]
fn sec27_reject_unauthorized_false_encrypts_without_verifying_and_warns() {
    ssl_cluster();
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("PG_USE_SSL", "true")
        .env("PG_SSL_REJECT_UNAUTHORIZED", "false")
        .start();
    round_trip(&b);
    let log = b.log();
    let warn = log
        .lines()
        .find(|l| l.contains("trust mode accept-any"))
        .unwrap_or_else(|| panic!("no accept-any line: {log}"));
    assert!(warn.contains("WARN"), "{warn}");
    assert!(warn.contains("NOT authenticated"), "{warn}");
    let (tls, plain) = broker_backends(&db);
    assert!(tls > 0 && plain == 0, "tls={tls} plain={plain}");
}

#[test]
fn sec28_boot_log_names_the_trust_mode_in_one_line() {
    let pki = ssl_cluster();
    let db = Db::fresh();
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[], "plaintext"),
        (
            &[("PG_USE_SSL", "true"), ("PG_SSL_ROOT_CERT", &pki.ca_pem)],
            "supplied-ca",
        ),
        (
            &[
                ("PG_USE_SSL", "true"),
                ("PG_SSL_REJECT_UNAUTHORIZED", "false"),
            ],
            "accept-any",
        ),
    ];
    for (envs, mode) in cases {
        let mut bb = Broker::builder(&db);
        for (k, v) in envs {
            bb = bb.env(k, v);
        }
        let b = bb.start();
        let log = b.log();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("PostgreSQL link:"))
            .collect();
        assert_eq!(lines.len(), 1, "{log}");
        assert!(
            lines[0].contains(&format!("trust mode {mode}")),
            "{}",
            lines[0]
        );
        let authenticated = !matches!(mode, "plaintext" | "accept-any");
        assert_eq!(
            lines[0].contains("not authenticated") || lines[0].contains("NOT authenticated"),
            !authenticated,
            "{}",
            lines[0]
        );
    }
}
