//! JWKS key source (security.md SEC-09): keys selected by `kid`, cached,
//! refreshed every `JWT_JWKS_REFRESH_INTERVAL`, an unknown `kid` refetching
//! at most once per 5 s, fetches bounded by `JWT_JWKS_TIMEOUT_MS`. The JWKS
//! is served by the test on loopback and counts its fetches; keys are
//! Ed25519 pairs made by the test.
mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use common::*;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// An Ed25519 key: its PKCS#8 private key and public JWK.
struct TestKey {
    private: Vec<u8>,
    jwk: Value,
}

fn key(kid: &str) -> TestKey {
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("keygen");
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("pkcs8");
    TestKey {
        private: pkcs8.as_ref().to_vec(),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA",
                    "kid": kid, "x": B64URL.encode(pair.public_key().as_ref())}),
    }
}

/// A token signed by `signer` whose header names `kid`.
fn token(signer: &TestKey, kid: Option<&str>) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = kid.map(str::to_string);
    // A distinct `jti` per token: the broker caches validated token texts.
    let claims = json!({"sub": "u", "role": "admin", "exp": now + 3600,
                        "jti": rand::random::<u64>()});
    encode(&h, &claims, &EncodingKey::from_ed_der(&signer.private)).expect("sign")
}

/// The test's JWKS endpoint on loopback.
struct JwksServer {
    url: String,
    doc: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
    stall: Arc<AtomicBool>,
}

impl JwksServer {
    fn start(keys: &[&TestKey]) -> JwksServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!(
            "http://127.0.0.1:{}/jwks.json",
            l.local_addr().unwrap().port()
        );
        let s = JwksServer {
            url,
            doc: Arc::new(Mutex::new(String::new())),
            fetches: Arc::new(AtomicUsize::new(0)),
            stall: Arc::new(AtomicBool::new(false)),
        };
        s.serve(keys);
        let (doc, fetches, stall) = (s.doc.clone(), s.fetches.clone(), s.stall.clone());
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                fetches.fetch_add(1, Ordering::SeqCst);
                if stall.load(Ordering::SeqCst) {
                    held.push(c);
                    continue;
                }
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let body = doc.lock().unwrap().clone();
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        s
    }

    /// Serves `keys` from now on.
    fn serve(&self, keys: &[&TestKey]) {
        let list: Vec<Value> = keys.iter().map(|k| k.jwk.clone()).collect();
        *self.doc.lock().unwrap() = json!({ "keys": list }).to_string();
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn jwks_broker(db: &Db, jwks: &JwksServer, extra: &[(&str, &str)]) -> Broker {
    let mut bb = Broker::builder(db)
        .env("JWT_ENABLED", "true")
        .env("JWT_ALGORITHM", "EdDSA")
        .env("JWT_JWKS_URL", &jwks.url);
    for (k, v) in extra {
        bb = bb.env(k, v);
    }
    let b = bb.start();
    // The boot fetch has happened once the key set is logged.
    check_for(Duration::from_secs(20), || {
        b.log().contains("JWKS: ").then_some(())
    });
    b
}

/// `GET /api/v1/resources/queues` (READ_ONLY) with `token`.
fn read(b: &Broker, token: &str) -> Resp {
    let mut c = b.conn();
    c.request(
        "GET",
        "/api/v1/resources/queues",
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    )
    .expect("request")
}

fn assert_401(r: &Resp, reason: &str) {
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json(), json!({ "error": reason }));
}

#[test]
fn sec09_jwks_keys_are_selected_by_kid() {
    let (k1, k2) = (key("k1"), key("k2"));
    let jwks = JwksServer::start(&[&k1, &k2]);
    let db = Db::fresh();
    let b = jwks_broker(&db, &jwks, &[]);
    assert!(
        b.log()
            .contains(&format!("key from JWT_JWKS_URL {}", jwks.url)),
        "{}",
        b.log_tail(20)
    );
    assert_eq!(read(&b, &token(&k1, Some("k1"))).status, 200);
    assert_eq!(read(&b, &token(&k2, Some("k2"))).status, 200);
    // Signed by k2 but naming k1: the kid picks k1, the signature fails.
    assert_401(
        &read(&b, &token(&k2, Some("k1"))),
        "Invalid token signature",
    );
    // No kid with two keys in the set: no key can be picked.
    assert_401(&read(&b, &token(&k1, None)), "Unknown key ID");
    assert_401(&read(&b, &token(&k1, Some("nope"))), "Unknown key ID");
}

#[test]
fn sec09_jwks_is_cached_and_unknown_kids_refetch_at_most_once_per_5s() {
    let k1 = key("k1");
    let jwks = JwksServer::start(&[&k1]);
    let db = Db::fresh();
    let b = jwks_broker(&db, &jwks, &[]);
    let boot = jwks.fetches();
    assert_eq!(boot, 1, "one fetch at boot");
    // Known kids are served from the cache: no fetch.
    for _ in 0..20 {
        assert_eq!(read(&b, &token(&k1, Some("k1"))).status, 200);
    }
    assert_eq!(jwks.fetches(), boot, "known kids must not fetch");
    // A burst of unknown kids: at most one refetch within 5 s.
    let started = Instant::now();
    for i in 0..20 {
        assert_401(
            &read(&b, &token(&k1, Some(&format!("unknown-{i}")))),
            "Unknown key ID",
        );
    }
    if started.elapsed() < Duration::from_secs(5) {
        assert!(
            jwks.fetches() <= boot + 1,
            "{} fetches for a burst of unknown kids",
            jwks.fetches() - boot
        );
    }
}

#[test]
fn sec09_jwks_key_rotation_is_picked_up_by_the_unknown_kid_refetch() {
    let (k1, k2) = (key("k1"), key("k2"));
    let jwks = JwksServer::start(&[&k1]);
    let db = Db::fresh();
    let b = jwks_broker(&db, &jwks, &[]);
    let t1 = token(&k1, Some("k1"));
    assert_eq!(read(&b, &t1).status, 200);
    // The issuer rotates: k2 in, k1 out.
    jwks.serve(&[&k2]);
    let before = jwks.fetches();
    // Past the 5 s refetch gap since the boot fetch, the first k2 token
    // triggers one refetch and is accepted by the same request.
    std::thread::sleep(Duration::from_millis(5_500));
    let r = read(&b, &token(&k2, Some("k2")));
    assert_eq!(r.status, 200, "rotated key refused: {}", r.text());
    assert_eq!(jwks.fetches(), before + 1, "exactly one refetch");
    // A new k1 token now names a kid the set no longer has.
    assert_401(&read(&b, &token(&k1, Some("k1"))), "Unknown key ID");
}

#[test]
fn sec09_jwks_is_refreshed_every_interval() {
    let (k1, k2) = (key("k1"), key("k2"));
    let jwks = JwksServer::start(&[&k1]);
    let db = Db::fresh();
    let b = jwks_broker(&db, &jwks, &[("JWT_JWKS_REFRESH_INTERVAL", "1")]);
    let boot = jwks.fetches();
    jwks.serve(&[&k1, &k2]);
    check_for(Duration::from_secs(20), || {
        (jwks.fetches() >= boot + 2).then_some(())
    });
    // The refresh (not a refetch) brought k2 in: a request finds it without fetching.
    let n = jwks.fetches();
    assert_eq!(read(&b, &token(&k2, Some("k2"))).status, 200);
    assert!(jwks.fetches() <= n + 1, "refresh cadence only");
}

#[test]
fn sec09_jwks_fetch_timeout_bounds_a_stalled_endpoint() {
    let k1 = key("k1");
    let jwks = JwksServer::start(&[&k1]);
    jwks.stall.store(true, Ordering::SeqCst);
    let db = Db::fresh();
    let b = jwks_broker(&db, &jwks, &[("JWT_JWKS_TIMEOUT_MS", "500")]);
    let log = check_for(Duration::from_secs(20), || {
        let l = b.log();
        l.contains("JWKS: fetch from").then_some(l)
    });
    assert!(log.contains("keeping the previous keys"), "{log}");
    // The request waits at most about one fetch timeout, then answers 401.
    std::thread::sleep(Duration::from_secs(5));
    let started = Instant::now();
    assert_401(&read(&b, &token(&k1, Some("k1"))), "Unknown key ID");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "waited {:?} for a stalled JWKS",
        started.elapsed()
    );
    // The shard kept serving meanwhile.
    assert_eq!(b.get("/health").status, 200);
}

#[test]
fn sec08_jwks_url_must_be_http_or_https() {
    let db = Db::fresh();
    let mut b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env("JWT_ALGORITHM", "EdDSA")
        .env("JWT_JWKS_URL", "ftp://example.invalid/jwks")
        .spawn();
    let st = b.wait_exit(Duration::from_secs(20)).expect("exits");
    assert_eq!(st.code(), Some(1));
    assert!(b.log().contains("JWT_JWKS_URL"), "{}", b.log());
}
