//! Cluster API keys (proxy.md §3): `qk_<env>_<43 base64url chars>`, the 43
//! characters being 32 random bytes. The key is printed once, at issue; the
//! control database keeps only the SHA-256 hex digest of the whole text
//! (PX-14), and a request's key is found by hashing what it presents.
//! Pure; runs on the admin command line and on every shard.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Random bytes in a key (256 bits).
const KEY_BYTES: usize = 32;
/// base64url characters of [`KEY_BYTES`] without padding.
const KEY_CHARS: usize = 43;
/// Longest environment label (`live`, `test`, `dev`, ...), as the schema checks.
const MAX_ENV: usize = 16;

/// A fresh key for environment `env`.
pub fn generate(env: &str) -> String {
    let mut raw = [0u8; KEY_BYTES];
    rand::thread_rng().fill_bytes(&mut raw);
    let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    format!("qk_{env}_{body}")
}

/// True for a well-formed environment label.
pub fn valid_env(env: &str) -> bool {
    !env.is_empty()
        && env.len() <= MAX_ENV
        && env
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// True when `s` has the shape of a key (checked before hashing, so junk
/// never costs a lookup).
pub fn well_formed(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("qk_") else {
        return false;
    };
    let Some((env, body)) = rest.split_once('_') else {
        return false;
    };
    valid_env(env)
        && body.len() == KEY_CHARS
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The stored form: lower-case hex SHA-256 of the whole key text.
pub fn digest(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate("live");
        assert!(well_formed(&a), "{a}");
        assert_eq!(a.len(), "qk_live_".len() + KEY_CHARS);
        assert_ne!(a, generate("live"));
        assert_eq!(digest(&a).len(), 64);
        assert!(!digest(&a).contains(&a[8..]));
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in [
            "",
            "qk_",
            "qk_live",
            "qk_LIVE_aaaa",
            "xk_live_aaaa",
            "qk_live_short",
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
        let long = format!("qk_live_{}", "a".repeat(44));
        assert!(!well_formed(&long));
        let bad_char = format!("qk_live_{}!", "a".repeat(42));
        assert!(!well_formed(&bad_char));
    }
}
