//! Authentication and tenancy settings (`JWT_*`, config.md §5;
//! `QUEEN_TENANCY_HEADER`, config.md §10), parsed from the leaf `crate::env`
//! and checked once at boot on the main thread. Key material is decoded
//! here, so a broker with `JWT_ENABLED=true` and no usable key for its
//! algorithm never starts (SEC-08); shards get a clone.
//!
//! Decisions (inferred): `JWT_PUBLIC_KEY` may carry literal `\n` escapes
//! (as env files often do) and they are turned into newlines; `auto`
//! accepts every algorithm the configured material supports (HS* with a
//! secret, RS* with an RSA key, EdDSA with an Ed25519 key) and never uses a
//! public key as an HMAC secret. `JWT_JWKS_URL` (see `jwks.rs`) is key
//! material for RS*/EdDSA; with `JWT_PUBLIC_KEY` as well, a token whose
//! `kid` the JWKS lacks falls back to the static key.

use crate::env::{secret_label, ConfigError, Env};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::fmt;

/// `JWT_ENABLED` when unset (config.md §5): off, every route open, as the
/// Queen broker ships; the boot line says so (SEC-06).
pub const DEFAULT_JWT_ENABLED: bool = false;
/// `QUEEN_TENANCY_HEADER` when unset (config.md §10): off, every request in
/// the default tenant.
pub const DEFAULT_TENANCY_HEADER: bool = false;
/// `JWT_REQUIRE_EXP` when unset: a token that never expires is a key that
/// cannot be taken back, so one without `exp` is refused unless the operator
/// says otherwise (issue 17).
pub const DEFAULT_REQUIRE_EXP: bool = true;
/// Tolerance for `exp`/`nbf` when `JWT_CLOCK_SKEW` is unset (config.md §5).
pub const DEFAULT_CLOCK_SKEW_S: u64 = 30;
/// `JWT_SKIP_PATHS` when unset (config.md §5).
pub const DEFAULT_SKIP_PATHS: &str = "/health,/metrics/prometheus,/metrics,/";
/// `JWT_ALGORITHM` when unset (config.md §5): HMAC, which `JWT_SECRET` alone serves.
pub const DEFAULT_ALGORITHM: &str = "HS256";
/// `JWT_ROLES_CLAIM` when unset (config.md §5): the claim holding one role.
pub const DEFAULT_ROLES_CLAIM: &str = "role";
/// `JWT_ROLES_ARRAY_CLAIM` when unset (config.md §5): the claim holding a list.
pub const DEFAULT_ROLES_ARRAY_CLAIM: &str = "roles";
/// `JWT_ROLE_ADMIN` when unset (config.md §5).
pub const DEFAULT_ROLE_ADMIN: &str = "admin";
/// `JWT_ROLE_READ_WRITE` when unset (config.md §5).
pub const DEFAULT_ROLE_READ_WRITE: &str = "read-write";
/// `JWT_ROLE_READ_ONLY` when unset (config.md §5).
pub const DEFAULT_ROLE_READ_ONLY: &str = "read-only";
/// `JWT_ROLE_WRITE_ONLY` when unset (config.md §5).
pub const DEFAULT_ROLE_WRITE_ONLY: &str = "write-only";

/// The verification keys, by family.
#[derive(Clone, Default)]
pub struct Keys {
    /// HMAC key from `JWT_SECRET` (HS*).
    pub hmac: Option<DecodingKey>,
    /// RSA public key from `JWT_PUBLIC_KEY` (RS*).
    pub rsa: Option<DecodingKey>,
    /// Ed25519 public key from `JWT_PUBLIC_KEY` (EdDSA).
    pub ed: Option<DecodingKey>,
}

/// Role names of the four roles (`JWT_ROLE_*`).
#[derive(Debug, Clone)]
pub struct RoleNames {
    /// `JWT_ROLE_ADMIN`.
    pub admin: String,
    /// `JWT_ROLE_READ_WRITE`.
    pub read_write: String,
    /// `JWT_ROLE_READ_ONLY`.
    pub read_only: String,
    /// `JWT_ROLE_WRITE_ONLY`.
    pub write_only: String,
}

/// The JWT and tenancy configuration.
#[derive(Clone)]
pub struct AuthConfig {
    /// `QUEEN_TENANCY_HEADER`: honour `x-queen-tenant` (config.md §10; off
    /// by default, and `crate::config` refuses it without
    /// `QUEEN_KV_TRUSTED_PROXY`).
    pub tenancy_header: bool,
    /// `JWT_ENABLED`.
    pub enabled: bool,
    /// Algorithms a token may use (one, or several with `auto`).
    pub algorithms: Vec<Algorithm>,
    /// Whether `JWT_ALGORITHM=auto`.
    pub auto: bool,
    /// Decoded key material.
    pub keys: Keys,
    /// `JWT_SECRET` length, for the boot line (the secret itself is not kept).
    secret_chars: usize,
    /// `JWT_ISSUER`.
    pub issuer: Option<String>,
    /// `JWT_AUDIENCE`.
    pub audience: Option<String>,
    /// `JWT_CLOCK_SKEW` in seconds.
    pub clock_skew_s: u64,
    /// `JWT_REQUIRE_EXP`: a token without `exp` is refused.
    pub require_exp: bool,
    /// `JWT_SKIP_PATHS`, exact raw paths.
    pub skip_paths: Vec<String>,
    /// `JWT_ROLES_CLAIM`.
    pub roles_claim: String,
    /// `JWT_ROLES_ARRAY_CLAIM`.
    pub roles_array_claim: String,
    /// `JWT_ROLE_*`.
    pub role_names: RoleNames,
    /// `JWT_JWKS_URL` and its refresh/timeout settings.
    pub jwks: Option<JwksConfig>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthConfig")
            .field("enabled", &self.enabled)
            .field("algorithms", &self.algorithms)
            .field("secret", &format!("<set:{} chars>", self.secret_chars))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("clock_skew_s", &self.clock_skew_s)
            .field("require_exp", &self.require_exp)
            .field("skip_paths", &self.skip_paths)
            .field("tenancy_header", &self.tenancy_header)
            .finish()
    }
}

fn err(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

fn parse_algorithm(name: &str) -> Option<Algorithm> {
    Some(match name {
        "HS256" => Algorithm::HS256,
        "HS384" => Algorithm::HS384,
        "HS512" => Algorithm::HS512,
        "RS256" => Algorithm::RS256,
        "RS384" => Algorithm::RS384,
        "RS512" => Algorithm::RS512,
        "EdDSA" => Algorithm::EdDSA,
        _ => return None,
    })
}

/// Whether `alg` is an HMAC algorithm.
pub fn is_hmac(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// `JWT_JWKS_REFRESH_INTERVAL` default, seconds (config.md §5).
pub const DEFAULT_JWKS_REFRESH_S: u64 = 3600;
/// `JWT_JWKS_TIMEOUT_MS` default (config.md §5).
pub const DEFAULT_JWKS_TIMEOUT_MS: u64 = 5000;

/// The JWKS settings (`crate::auth::jwks` fetches and serves the keys).
#[derive(Debug, Clone)]
pub struct JwksConfig {
    /// `JWT_JWKS_URL`.
    pub url: String,
    /// `JWT_JWKS_REFRESH_INTERVAL`.
    pub refresh: std::time::Duration,
    /// `JWT_JWKS_TIMEOUT_MS`.
    pub timeout: std::time::Duration,
}

/// Whether JWKS keys are the source for `alg` (RS* and EdDSA).
pub fn serves(alg: Algorithm) -> bool {
    is_rsa(alg) || alg == Algorithm::EdDSA
}

/// Whether `alg` is an RSA PKCS#1 algorithm.
pub fn is_rsa(alg: Algorithm) -> bool {
    matches!(alg, Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512)
}

impl AuthConfig {
    /// Reads the `JWT_*` variables and `QUEEN_TENANCY_HEADER`.
    pub fn from_env(env: &Env) -> Result<AuthConfig, ConfigError> {
        let get = |var: &str| env.non_empty(var);
        let enabled = env.bool("JWT_ENABLED", DEFAULT_JWT_ENABLED)?;
        let alg_name = get("JWT_ALGORITHM").unwrap_or_else(|| DEFAULT_ALGORITHM.into());
        let alg_name = alg_name.trim();
        let auto = alg_name.eq_ignore_ascii_case("auto");
        let configured = if auto {
            None
        } else {
            Some(parse_algorithm(alg_name).ok_or_else(|| {
                err(
                    "JWT_ALGORITHM",
                    format!("{alg_name:?} is not HS256/HS384/HS512/RS256/RS384/RS512/EdDSA/auto"),
                )
            })?)
        };
        let secret = get("JWT_SECRET").unwrap_or_default();
        let mut keys = Keys::default();
        if !secret.is_empty() {
            keys.hmac = Some(DecodingKey::from_secret(secret.as_bytes()));
        }
        if let Some(pem) = get("JWT_PUBLIC_KEY") {
            let pem = pem.replace("\\n", "\n");
            keys.rsa = DecodingKey::from_rsa_pem(pem.as_bytes()).ok();
            keys.ed = DecodingKey::from_ed_pem(pem.as_bytes()).ok();
            if enabled && keys.rsa.is_none() && keys.ed.is_none() {
                return Err(err(
                    "JWT_PUBLIC_KEY",
                    "is not a PEM RSA or Ed25519 public key",
                ));
            }
        }
        let jwks = match get("JWT_JWKS_URL") {
            None => None,
            Some(url) => {
                let url = url.trim().to_string();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(err(
                        "JWT_JWKS_URL",
                        format!("{url:?} is not an http(s) URL"),
                    ));
                }
                let num = |var: &'static str, default: u64| match get(var) {
                    None => Ok(default),
                    Some(v) => v
                        .trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| err(var, format!("{v:?} is not a positive number"))),
                };
                Some(JwksConfig {
                    url,
                    refresh: std::time::Duration::from_secs(num(
                        "JWT_JWKS_REFRESH_INTERVAL",
                        DEFAULT_JWKS_REFRESH_S,
                    )?),
                    timeout: std::time::Duration::from_millis(num(
                        "JWT_JWKS_TIMEOUT_MS",
                        DEFAULT_JWKS_TIMEOUT_MS,
                    )?),
                })
            }
        };
        let has_key = |a: Algorithm| keys.for_alg(a).is_some() || (jwks.is_some() && serves(a));
        let all = [
            Algorithm::HS256,
            Algorithm::HS384,
            Algorithm::HS512,
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::EdDSA,
        ];
        let algorithms: Vec<Algorithm> = match configured {
            Some(a) => vec![a],
            None => all.into_iter().filter(|a| has_key(*a)).collect(),
        };
        if enabled {
            match configured {
                Some(a) if !has_key(a) => {
                    let var = if is_hmac(a) {
                        "JWT_SECRET"
                    } else {
                        "JWT_PUBLIC_KEY"
                    };
                    let or_jwks = if is_hmac(a) { "" } else { " or JWT_JWKS_URL" };
                    return Err(err(
                        var,
                        format!("JWT_ENABLED=true with JWT_ALGORITHM={a:?} needs {var}{or_jwks}"),
                    ));
                }
                None if algorithms.is_empty() => return Err(err(
                    "JWT_SECRET",
                    "JWT_ENABLED=true with JWT_ALGORITHM=auto needs JWT_SECRET, JWT_PUBLIC_KEY or JWT_JWKS_URL",
                )),
                _ => {}
            }
        }
        let clock_skew_s = match get("JWT_CLOCK_SKEW") {
            None => DEFAULT_CLOCK_SKEW_S,
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| err("JWT_CLOCK_SKEW", format!("{v:?} is not a valid number")))?,
        };
        let skip_paths = get("JWT_SKIP_PATHS")
            .unwrap_or_else(|| DEFAULT_SKIP_PATHS.into())
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect();
        let named = |var: &str, default: &str| get(var).unwrap_or_else(|| default.to_string());
        Ok(AuthConfig {
            tenancy_header: env.bool("QUEEN_TENANCY_HEADER", DEFAULT_TENANCY_HEADER)?,
            enabled,
            algorithms,
            auto,
            keys,
            secret_chars: secret.chars().count(),
            issuer: get("JWT_ISSUER"),
            audience: get("JWT_AUDIENCE"),
            clock_skew_s,
            require_exp: env.bool("JWT_REQUIRE_EXP", DEFAULT_REQUIRE_EXP)?,
            skip_paths,
            roles_claim: named("JWT_ROLES_CLAIM", DEFAULT_ROLES_CLAIM),
            roles_array_claim: named("JWT_ROLES_ARRAY_CLAIM", DEFAULT_ROLES_ARRAY_CLAIM),
            role_names: RoleNames {
                admin: named("JWT_ROLE_ADMIN", DEFAULT_ROLE_ADMIN),
                read_write: named("JWT_ROLE_READ_WRITE", DEFAULT_ROLE_READ_WRITE),
                read_only: named("JWT_ROLE_READ_ONLY", DEFAULT_ROLE_READ_ONLY),
                write_only: named("JWT_ROLE_WRITE_ONLY", DEFAULT_ROLE_WRITE_ONLY),
            },
            jwks,
        })
    }

    /// `JWT_SECRET` as `<unset>` or `<set:N chars>` (SEC-37).
    pub fn secret_label(&self) -> String {
        secret_label(&"x".repeat(self.secret_chars))
    }

    /// The one boot line stating the mode (SEC-06); never the secret.
    pub fn boot_line(&self) -> String {
        if !self.enabled {
            return "Authentication: disabled (JWT_ENABLED=false: every route is open)".into();
        }
        let mut sources = Vec::new();
        if self.keys.hmac.is_some() {
            sources.push(format!("JWT_SECRET {}", self.secret_label()));
        }
        if self.keys.rsa.is_some() {
            sources.push("JWT_PUBLIC_KEY (RSA)".to_string());
        }
        if self.keys.ed.is_some() {
            sources.push("JWT_PUBLIC_KEY (Ed25519)".to_string());
        }
        if let Some(j) = &self.jwks {
            sources.push(format!(
                "JWT_JWKS_URL {} (refresh {} s, timeout {} ms)",
                j.url,
                j.refresh.as_secs(),
                j.timeout.as_millis()
            ));
        }
        let algs: Vec<String> = self.algorithms.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "Authentication: enabled (JWT, algorithm {}{}, key from {})",
            if self.auto { "auto: " } else { "" },
            algs.join("/"),
            sources.join(" + ")
        )
    }
}

impl Keys {
    /// The key that verifies `alg`, if that family is configured.
    pub fn for_alg(&self, alg: Algorithm) -> Option<&DecodingKey> {
        if is_hmac(alg) {
            self.hmac.as_ref()
        } else if is_rsa(alg) {
            self.rsa.as_ref()
        } else if alg == Algorithm::EdDSA {
            self.ed.as_ref()
        } else {
            None
        }
    }
}
