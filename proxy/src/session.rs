//! Human session tokens (proxy.md §3): JWTs the proxy mints and verifies,
//! HS256 with `QUEEN_PROXY_JWT_SECRET` (dev) or EdDSA with
//! `QUEEN_PROXY_JWT_ED25519_PEM` (a PKCS#8 private key; its public half is
//! derived to verify), or verify-only with `QUEEN_PROXY_JWT_ED25519_PUB_PEM`.
//!
//! Loaded once in `main`; verifying runs on every shard (the keys are
//! immutable). Decisions (inferred): the token proves who the user is
//! (`sub` = a `queen_proxy.users` id); the roles come from the control
//! database (`cluster_roles`, `users.is_operator`), not from claims, so a
//! role change takes effect without re-issuing tokens. `iss` must equal
//! `QUEEN_PROXY_JWT_ISS`; `exp` and `jti` are required.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Default session-token issuer.
pub const DEFAULT_JWT_ISS: &str = "queen-proxy";
/// Default session-token lifetime (1 day), in seconds; `admin mint-session`.
pub const DEFAULT_JWT_TTL_S: u64 = 86_400;

/// The claims of a session token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user id.
    pub sub: String,
    /// Issuer.
    pub iss: String,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Token id, checked against `revoked_tokens`.
    pub jti: String,
    /// Optional cluster slug the session is limited to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
}

/// The configured session-token keys.
#[derive(Clone)]
pub struct SessionKeys {
    /// Signing key, when this host mints.
    encode: Option<EncodingKey>,
    /// Verifying key, when sessions are on at all.
    decode: Option<DecodingKey>,
    /// The algorithm both use.
    alg: Algorithm,
    /// Required issuer.
    pub iss: String,
    /// Lifetime of minted tokens, in seconds.
    pub ttl_s: u64,
}

impl fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// PEM text from a variable (literal `\n` escapes accepted, as one-line
/// environment files write them).
fn pem_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.replace("\\n", "\n"))
}

/// The DER inside a one-block PEM text.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let b64: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

impl SessionKeys {
    /// Reads the key variables (PX-06: material that cannot serve its mode
    /// is an error; absent material means API keys only).
    pub fn from_env() -> Result<SessionKeys, String> {
        let iss = std::env::var("QUEEN_PROXY_JWT_ISS")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_JWT_ISS.into());
        let ttl_s = match std::env::var("QUEEN_PROXY_JWT_TTL_S")
            .ok()
            .filter(|v| !v.is_empty())
        {
            None => DEFAULT_JWT_TTL_S,
            Some(v) => v.trim().parse().ok().filter(|n| *n > 0).ok_or(format!(
                "QUEEN_PROXY_JWT_TTL_S={v:?} is not a positive number of seconds"
            ))?,
        };
        let secret = std::env::var("QUEEN_PROXY_JWT_SECRET")
            .ok()
            .filter(|v| !v.is_empty());
        let private = pem_var("QUEEN_PROXY_JWT_ED25519_PEM");
        let public = pem_var("QUEEN_PROXY_JWT_ED25519_PUB_PEM");
        let (encode, decode, alg) = match (secret, private, public) {
            (None, None, None) => (None, None, Algorithm::HS256),
            (Some(s), None, None) => (
                Some(EncodingKey::from_secret(s.as_bytes())),
                Some(DecodingKey::from_secret(s.as_bytes())),
                Algorithm::HS256,
            ),
            (None, Some(pem), None) => {
                let enc = EncodingKey::from_ed_pem(pem.as_bytes()).map_err(|_| {
                    "QUEEN_PROXY_JWT_ED25519_PEM is not a PEM Ed25519 (PKCS#8) private key".to_string()
                })?;
                let der = pem_der(&pem).ok_or("QUEEN_PROXY_JWT_ED25519_PEM is not valid PEM")?;
                let pair = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
                    .map_err(|_| "QUEEN_PROXY_JWT_ED25519_PEM is not an Ed25519 PKCS#8 key")?;
                use ring::signature::KeyPair;
                let dec = DecodingKey::from_ed_der(pair.public_key().as_ref());
                (Some(enc), Some(dec), Algorithm::EdDSA)
            }
            (None, None, Some(pem)) => {
                let dec = DecodingKey::from_ed_pem(pem.as_bytes()).map_err(|_| {
                    "QUEEN_PROXY_JWT_ED25519_PUB_PEM is not a PEM Ed25519 public key".to_string()
                })?;
                (None, Some(dec), Algorithm::EdDSA)
            }
            _ => {
                return Err("set only one of QUEEN_PROXY_JWT_SECRET, QUEEN_PROXY_JWT_ED25519_PEM and QUEEN_PROXY_JWT_ED25519_PUB_PEM".into())
            }
        };
        let keys = SessionKeys {
            encode,
            decode,
            alg,
            iss,
            ttl_s,
        };
        keys.self_check()?;
        Ok(keys)
    }

    /// A signer must verify what it mints (PX-06).
    fn self_check(&self) -> Result<(), String> {
        if self.encode.is_none() {
            return Ok(());
        }
        let token = self.mint("00000000-0000-0000-0000-000000000000", None, 60)?;
        self.verify(&token)
            .map(|_| ())
            .map_err(|_| "the session-token signer cannot verify the tokens it mints".into())
    }

    /// True when session tokens are accepted at all.
    pub fn enabled(&self) -> bool {
        self.decode.is_some()
    }

    /// For the boot log.
    pub fn describe(&self) -> String {
        match (&self.encode, &self.decode, self.alg) {
            (_, None, _) => "off (API keys only)".into(),
            (None, Some(_), _) => "EdDSA, verify only".into(),
            (Some(_), Some(_), Algorithm::HS256) => "HS256".into(),
            (Some(_), Some(_), _) => "EdDSA".into(),
        }
    }

    /// Mints a token for `user` valid `ttl_s` seconds.
    pub fn mint(&self, user: &str, cluster: Option<&str>, ttl_s: u64) -> Result<String, String> {
        let key = self
            .encode
            .as_ref()
            .ok_or("no session-token signing key is configured (QUEEN_PROXY_JWT_SECRET or QUEEN_PROXY_JWT_ED25519_PEM)")?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let claims = Claims {
            sub: user.to_string(),
            iss: self.iss.clone(),
            exp: now + ttl_s,
            jti: uuid::Uuid::new_v4().to_string(),
            cluster: cluster.map(str::to_string),
        };
        jsonwebtoken::encode(&Header::new(self.alg), &claims, key).map_err(|e| e.to_string())
    }

    /// The claims of a valid, unexpired token of our issuer.
    pub fn verify(&self, token: &str) -> Result<Claims, ()> {
        let key = self.decode.as_ref().ok_or(())?;
        let mut v = Validation::new(self.alg);
        v.set_issuer(&[self.iss.as_str()]);
        v.set_required_spec_claims(&["exp", "iss", "sub"]);
        v.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, key, &v).map_err(|_| ())?;
        if data.claims.jti.is_empty() {
            return Err(());
        }
        Ok(data.claims)
    }
}
