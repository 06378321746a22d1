//! JWKS key source (SEC-09): `JWT_JWKS_URL` names a JSON Web Key Set whose
//! RSA and Ed25519 keys verify RS*/EdDSA tokens, selected by the token's
//! `kid`.
//!
//! # Threads
//! - `jwks` (one helper thread, started at boot when the URL is set): the
//!   only code that fetches. It fetches at start, every
//!   `JWT_JWKS_REFRESH_INTERVAL` seconds, and when a shard asks (unknown
//!   `kid`), at most once per [`REFETCH_MIN_GAP`]; each fetch is bounded by
//!   `JWT_JWKS_TIMEOUT_MS`. A failed fetch keeps the previous key set.
//! - shards: read the current key set through a lock-free `ArcSwap` (one
//!   atomic load), and on an unknown `kid` send a refetch request on a
//!   bounded channel and await its answer (a oneshot) without blocking the
//!   shard; other requests keep being served meanwhile.
//!
//! Decisions (inferred): a key whose `use` is not `sig`, whose type is not
//! RSA or OKP/Ed25519 (symmetric `oct` keys are never taken from a JWKS), or
//! whose `alg` (when present) differs from the token's is not used; a
//! token without `kid` is accepted only when the set holds exactly one
//! usable key; a key set that fails to parse keeps the previous one.

use super::config::{is_rsa, AuthConfig};
pub use super::config::{serves, JwksConfig};
use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Unknown-`kid` refetches are at most this frequent (SEC-09).
pub const REFETCH_MIN_GAP: Duration = Duration::from_secs(5);
/// Pending refetch requests; more are answered at once by the caller
/// (they would only wait for the same fetch).
const REFETCH_QUEUE: usize = 256;
/// Largest JWKS document accepted, bytes.
const MAX_JWKS_BYTES: u64 = 1024 * 1024;

/// One usable verification key.
#[derive(Clone)]
struct Key {
    /// RSA (RS*) or Ed25519 (EdDSA).
    rsa: bool,
    /// The JWK's `alg`, when it names one.
    alg: Option<String>,
    /// The key.
    key: DecodingKey,
}

/// The current key set, by `kid` (keys without one under "").
#[derive(Default)]
struct KeySet {
    /// Keys by `kid`.
    keys: HashMap<String, Key>,
}

/// A shard's request for a refetch; answered when the fetch ended.
type Refetch = futures_channel::oneshot::Sender<()>;

/// The process-wide key set and the refetch channel, set once at boot.
struct Source {
    /// Current keys; swapped whole by the `jwks` thread.
    keys: ArcSwap<KeySet>,
    /// Refetch requests to the `jwks` thread.
    refetch: Sender<Refetch>,
}

/// Process-wide, not a shard's: the one `jwks` thread fetches for every
/// shard, and a rotated key must reach them all at once.
static SOURCE: OnceLock<Source> = OnceLock::new();

/// Starts the `jwks` thread when `cfg` has a JWKS URL. Call once at boot.
pub fn start(cfg: &AuthConfig) {
    let Some(j) = cfg.jwks.clone() else { return };
    if !cfg.enabled {
        return;
    }
    let (tx, rx) = crossbeam_channel::bounded(REFETCH_QUEUE);
    let source = Source {
        keys: ArcSwap::from_pointee(KeySet::default()),
        refetch: tx,
    };
    if SOURCE.set(source).is_err() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("jwks".into())
        .spawn(move || run(j, rx));
    if let Err(e) = spawned {
        log::error!("JWKS: cannot start the fetch thread: {e}");
    }
}

/// The `jwks` thread: fetch, then serve periodic and requested refetches.
/// Ends when every sender is gone (never, in practice: the process exits).
fn run(cfg: JwksConfig, rx: Receiver<Refetch>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(cfg.timeout))
        .build()
        .into();
    let mut last_attempt = Instant::now();
    fetch_and_store(&agent, &cfg.url);
    let mut next_refresh = Instant::now() + cfg.refresh;
    loop {
        let wait = next_refresh.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(first) => {
                let mut waiting = vec![first];
                waiting.extend(rx.try_iter());
                if last_attempt.elapsed() >= REFETCH_MIN_GAP {
                    last_attempt = Instant::now();
                    fetch_and_store(&agent, &cfg.url);
                }
                for w in waiting {
                    let _ = w.send(());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                last_attempt = Instant::now();
                fetch_and_store(&agent, &cfg.url);
                next_refresh = Instant::now() + cfg.refresh;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One fetch; on success the new set replaces the old one.
fn fetch_and_store(agent: &ureq::Agent, url: &str) {
    let Some(source) = SOURCE.get() else { return };
    match fetch(agent, url) {
        Ok(set) => {
            let mut kids: Vec<&str> = set.keys.keys().map(String::as_str).collect();
            kids.sort_unstable();
            log::info!("JWKS: {} key(s) loaded: {}", kids.len(), kids.join(","));
            source.keys.store(Arc::new(set));
        }
        Err(e) => log::warn!("JWKS: fetch from {url} failed, keeping the previous keys: {e}"),
    }
}

/// Fetches and parses the key set.
fn fetch(agent: &ureq::Agent, url: &str) -> Result<KeySet, String> {
    let mut resp = agent.get(url).call().map_err(|e| e.to_string())?;
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_JWKS_BYTES)
        .read_to_string()
        .map_err(|e| e.to_string())?;
    parse(&text)
}

/// Parses a JWKS document, keeping the usable signature keys.
fn parse(text: &str) -> Result<KeySet, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or("no \"keys\" array")?;
    let mut set = KeySet::default();
    for raw in list {
        // One key we cannot use (another type, an unknown `alg`) does not
        // spoil the others.
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        if matches!(
            jwk.common.public_key_use,
            Some(ref u) if *u != PublicKeyUse::Signature
        ) {
            continue;
        }
        let rsa = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => true,
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => false,
            _ => continue,
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let alg = jwk.common.key_algorithm.map(|a| format!("{a:?}"));
        let kid = jwk.common.key_id.clone().unwrap_or_default();
        set.keys.insert(kid, Key { rsa, alg, key });
    }
    Ok(set)
}

/// The key for a token with `alg` and `kid`, from the current set.
/// `None`: unknown `kid` (or no key of the right type under it).
pub fn key_for(alg: Algorithm, kid: Option<&str>) -> Option<DecodingKey> {
    let set = SOURCE.get()?.keys.load();
    let fits =
        |k: &&Key| k.rsa == is_rsa(alg) && k.alg.as_deref().is_none_or(|a| a == format!("{alg:?}"));
    match kid {
        Some(kid) => set.keys.get(kid).filter(fits).map(|k| k.key.clone()),
        None => {
            let mut usable = set.keys.values().filter(fits);
            match (usable.next(), usable.next()) {
                (Some(k), None) => Some(k.key.clone()),
                _ => None,
            }
        }
    }
}

/// Before the (synchronous) access check: when `token` names a `kid` the
/// current set lacks, asks the `jwks` thread for a refetch and waits for
/// it (bounded by the fetch timeout). Never blocks the shard thread.
pub async fn prepare(cfg: &AuthConfig, token: &str) {
    let (Some(j), Some(source)) = (&cfg.jwks, SOURCE.get()) else {
        return;
    };
    let Ok(header) = jsonwebtoken::decode_header(token) else {
        return;
    };
    if !serves(header.alg) || key_for(header.alg, header.kid.as_deref()).is_some() {
        return;
    }
    let (tx, rx) = futures_channel::oneshot::channel();
    if source.refetch.try_send(tx).is_err() {
        return;
    }
    let timer = async {
        glommio::timer::Timer::new(j.timeout + Duration::from_millis(500)).await;
        Err(futures_channel::oneshot::Canceled)
    };
    let _ = futures_lite::future::or(rx, timer).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_rsa_and_ed25519_signature_keys_only() {
        let doc = r#"{"keys":[
            {"kty":"oct","kid":"sym","k":"c2VjcmV0"},
            {"kty":"OKP","crv":"Ed25519","kid":"ed","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty":"OKP","crv":"Ed25519","kid":"enc","use":"enc","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty":"RSA","kid":"weird","alg":"RSA-OAEP-999","n":"AQAB","e":"AQAB"}
        ]}"#;
        let set = parse(doc).expect("parses");
        let kids: Vec<&String> = set.keys.keys().collect();
        assert_eq!(kids, vec!["ed"]);
        assert!(parse("{}").is_err());
        assert!(parse("nope").is_err());
    }
}
