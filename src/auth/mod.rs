//! Authentication and tenancy at the HTTP boundary (security.md B1 and B5).
//! Runs on the shards: [`check`] is called once per request by
//! `api::route`, before dispatch; handlers ask [`sub`] and [`tenant`] for
//! the caller's identity.
//!
//! - JWT (SEC-05..16): the route's [`levels::Level`] is looked up; PUBLIC
//!   routes and `JWT_SKIP_PATHS` (exact raw path, decisions.md) pass; else
//!   the token is taken from `Authorization` (`Bearer <t>`, scheme
//!   case-insensitive, or a bare token), validated (signature, algorithm,
//!   `exp`/`nbf` with skew, `iss`/`aud` when configured) and its roles
//!   compared with the level. Validated tokens are kept in a per-shard
//!   [`TokenCache`] (a field of the `Shard`, touched only by its thread),
//!   keyed by the token text and bounded by the token's `exp`, so the hot
//!   path is one hash lookup. Only successes are cached.
//! - Tenancy (SEC-18..20): with `QUEEN_TENANCY_HEADER` on, `x-queen-tenant`
//!   (a UUID, lower-cased) names the request's tenant; the nil UUID is
//!   reserved (403 `reserved_tenant`). Shape only, never authority.

pub mod config;
pub mod jwks;
pub mod levels;

use crate::error::ApiError;
use jsonwebtoken::{decode, decode_header, errors::ErrorKind, Validation};
pub use levels::Level;
use levels::Roles;
use serde_json::{Map, Value};
use shards::http::Request;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

pub use config::AuthConfig;

/// The tenant every request belongs to while native tenancy is off (and
/// when the tenancy header is absent); decisions.md: in the schema and in
/// every in-memory key from the foundation on.
pub const DEFAULT_TENANT: &str = "00000000-0000-0000-0000-000000000001";

/// Validated tokens a shard remembers. Past this the expired ones are
/// dropped, and if that is not enough the cache starts over: a bound on
/// memory that costs one re-validation per live token.
const MAX_CACHED_TOKENS: usize = 10_000;
/// How long a token without `exp` stays cached before it is validated
/// again (bounds the life of a cached entry when the token sets none).
const NO_EXP_CACHE_S: u64 = 300;

/// The 401 texts (SEC-11).
pub mod reason {
    /// No token.
    pub const MISSING: &str = "Authentication required";
    /// Bad signature, algorithm or shape.
    pub const SIGNATURE: &str = "Invalid token signature";
    /// `exp` passed.
    pub const EXPIRED: &str = "Token has expired";
    /// `nbf` not reached.
    pub const NOT_YET: &str = "Token not yet valid";
    /// `iss` mismatch.
    pub const ISSUER: &str = "Invalid token issuer";
    /// `aud` mismatch.
    pub const AUDIENCE: &str = "Invalid token audience";
    /// `exp`, `nbf` or `iat` present but not a time.
    pub const BAD_TIME: &str = "Invalid token time claim";
    /// No `exp` while `JWT_REQUIRE_EXP` is on.
    pub const NO_EXP: &str = "Token has no expiry";
    /// `kid` not in the JWKS, even after a refetch.
    pub const UNKNOWN_KID: &str = "Unknown key ID";
}

/// What a validated token grants.
#[derive(Debug, Clone)]
struct Grant {
    /// Its roles.
    roles: Roles,
    /// Its `sub`, if a string.
    sub: Option<String>,
    /// Unix second after which the cached entry is stale.
    stale_at: u64,
}

/// One shard's validated tokens, by token text (a `Shard` field; read and
/// filled by that shard's requests only). Bounded by [`MAX_CACHED_TOKENS`].
#[derive(Debug, Default)]
pub struct TokenCache {
    /// Token text → what it grants, until its `stale_at`.
    grants: RefCell<HashMap<String, Grant>>,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The token in `Authorization`, if any (SEC-07).
fn bearer(req: &Request) -> Option<&str> {
    let v = req.header("authorization")?.trim();
    let t = match v.split_once(|c: char| c.is_ascii_whitespace()) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => v,
    };
    (!t.is_empty()).then_some(t)
}

/// Validates `token` (no cache).
fn validate(cfg: &AuthConfig, token: &str) -> Result<Grant, &'static str> {
    let header = decode_header(token).map_err(|_| reason::SIGNATURE)?;
    if !cfg.algorithms.contains(&header.alg) {
        return Err(reason::SIGNATURE);
    }
    let from_jwks = match cfg.jwks.is_some() && jwks::serves(header.alg) {
        true => jwks::key_for(header.alg, header.kid.as_deref()),
        false => None,
    };
    let key = match (&from_jwks, cfg.keys.for_alg(header.alg)) {
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) if cfg.jwks.is_some() && jwks::serves(header.alg) => {
            return Err(reason::UNKNOWN_KID)
        }
        (None, None) => return Err(reason::SIGNATURE),
    };
    let mut v = Validation::new(header.alg);
    v.leeway = cfg.clock_skew_s;
    v.required_spec_claims.clear();
    v.validate_exp = true;
    v.validate_nbf = true;
    match &cfg.issuer {
        Some(i) => v.set_issuer(&[i]),
        None => v.iss = None,
    }
    match &cfg.audience {
        Some(a) => v.set_audience(&[a]),
        None => v.validate_aud = false,
    }
    let data = decode::<Map<String, Value>>(token, key, &v).map_err(|e| match e.kind() {
        ErrorKind::ExpiredSignature => reason::EXPIRED,
        ErrorKind::ImmatureSignature => reason::NOT_YET,
        ErrorKind::InvalidIssuer => reason::ISSUER,
        ErrorKind::InvalidAudience => reason::AUDIENCE,
        _ => reason::SIGNATURE,
    })?;
    let claims = data.claims;
    check_times(cfg, &claims)?;
    if cfg.issuer.is_some() && !claims.contains_key("iss") {
        return Err(reason::ISSUER);
    }
    if cfg.audience.is_some() && !claims.contains_key("aud") {
        return Err(reason::AUDIENCE);
    }
    let names = &cfg.role_names;
    let mut roles = Roles::default();
    let mut grant = |name: &str| {
        for (n, r) in [
            (&names.admin, Roles::ADMIN),
            (&names.read_write, Roles::READ_WRITE),
            (&names.read_only, Roles::READ_ONLY),
            (&names.write_only, Roles::WRITE_ONLY),
        ] {
            if n == name {
                roles.add(r);
            }
        }
    };
    if let Some(Value::String(r)) = claims.get(&cfg.roles_claim) {
        grant(r);
    }
    if let Some(Value::Array(rs)) = claims.get(&cfg.roles_array_claim) {
        rs.iter().filter_map(Value::as_str).for_each(&mut grant);
    }
    let stale_at = match claims.get("exp").and_then(Value::as_u64) {
        Some(exp) => exp.saturating_add(cfg.clock_skew_s),
        None => now_s() + NO_EXP_CACHE_S,
    };
    Ok(Grant {
        roles,
        sub: claims
            .get("sub")
            .and_then(Value::as_str)
            .map(str::to_string),
        stale_at,
    })
}

/// Latest time claim accepted, in seconds since the epoch: the end of year
/// 9999, as far as any date format goes. Above it a claim is not a time.
const MAX_TIME_CLAIM_S: u64 = 253_402_300_799;

/// The time claims the decoder let through (issue 17): it treats an `exp` or
/// `nbf` that is not a number in range (`-1`, `"never"`, `true`, `2^63`,
/// `1e300`) as absent, so such a token never expired. Here a present time
/// claim must be a whole number from 0 to [`MAX_TIME_CLAIM_S`] (the decoder
/// compares whole seconds only, so a fractional `exp` would go unchecked
/// too), and `exp` must be present unless `JWT_REQUIRE_EXP=false`. In range,
/// the decoder's own `exp`/`nbf` checks (with the skew) stand.
fn check_times(cfg: &AuthConfig, claims: &Map<String, Value>) -> Result<(), &'static str> {
    for name in ["exp", "nbf", "iat"] {
        match claims.get(name) {
            None => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|t| t <= MAX_TIME_CLAIM_S) => {}
            Some(_) => return Err(reason::BAD_TIME),
        }
    }
    if cfg.require_exp && !claims.contains_key("exp") {
        return Err(reason::NO_EXP);
    }
    Ok(())
}

/// The grant of `token`, from this shard's cache or validated and cached.
fn grant_of(cfg: &AuthConfig, tokens: &TokenCache, token: &str) -> Result<Grant, &'static str> {
    let now = now_s();
    let hit = tokens
        .grants
        .borrow()
        .get(token)
        .filter(|g| now < g.stale_at)
        .cloned();
    if let Some(g) = hit {
        return Ok(g);
    }
    let g = validate(cfg, token)?;
    if now >= g.stale_at {
        return Err(reason::EXPIRED);
    }
    let mut c = tokens.grants.borrow_mut();
    if c.len() >= MAX_CACHED_TOKENS {
        c.retain(|_, g| now < g.stale_at);
        if c.len() >= MAX_CACHED_TOKENS {
            c.clear();
        }
    }
    c.insert(token.to_string(), g.clone());
    Ok(g)
}

/// Runs before [`check`]: with `JWT_JWKS_URL`, a token not yet validated
/// on this shard whose `kid` the key set lacks waits for one refetch (see
/// `jwks.rs`), so a key rotated in at the issuer is picked up at once.
pub async fn prepare(auth: &AuthConfig, tokens: &TokenCache, req: &Request) {
    if !auth.enabled || auth.jwks.is_none() {
        return;
    }
    let Some(token) = bearer(req) else { return };
    if tokens.grants.borrow().contains_key(token) {
        return;
    }
    jwks::prepare(auth, token).await;
}

/// Checks that `req` may use its route: the tenant header's shape, then
/// the JWT access level. Called once per request, before dispatch.
pub fn check(
    auth: &AuthConfig,
    tokens: &TokenCache,
    req: &Request,
    segs: &[&str],
) -> Result<(), ApiError> {
    tenant(auth, req)?;
    if !auth.enabled {
        return Ok(());
    }
    let level = levels::route_level(&req.method, segs);
    if level == Level::Public || auth.skip_paths.contains(&req.path) {
        return Ok(());
    }
    let token = bearer(req).ok_or(ApiError::Unauthorized(reason::MISSING))?;
    let g = grant_of(auth, tokens, token).map_err(ApiError::Unauthorized)?;
    if g.roles.satisfy(level) {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

/// Whether `req` may act at `level` (always with JWT off), for a handler
/// whose demand depends on its body: a timer batch holding a cancel needs
/// READ_WRITE on a WRITE_ONLY route (http-api.md §16).
pub fn allows(auth: &AuthConfig, tokens: &TokenCache, req: &Request, level: Level) -> bool {
    if !auth.enabled || auth.skip_paths.contains(&req.path) {
        return true;
    }
    bearer(req)
        .and_then(|t| grant_of(auth, tokens, t).ok())
        .is_some_and(|g| g.roles.satisfy(level))
}

/// The validated token's `sub` (SEC-16), or `None` with JWT off, no
/// token or no `sub`. Never taken from a request body.
pub fn sub(auth: &AuthConfig, tokens: &TokenCache, req: &Request) -> Option<String> {
    if !auth.enabled {
        return None;
    }
    grant_of(auth, tokens, bearer(req)?).ok()?.sub
}

/// The request's tenant (SEC-18..20).
pub fn tenant<'a>(auth: &AuthConfig, req: &'a Request) -> Result<Cow<'a, str>, ApiError> {
    if !auth.tenancy_header {
        return Ok(Cow::Borrowed(DEFAULT_TENANT));
    }
    // Issue 17: the proxy sets exactly one tenant. Two headers, or a list in
    // one, mean a client's own header got past it, and taking either would be
    // a guess about whose request this is.
    let nr_headers = req
        .headers
        .iter()
        .filter(|(n, _)| n == "x-queen-tenant")
        .count();
    if nr_headers > 1
        || req
            .header("x-queen-tenant")
            .is_some_and(|v| v.contains(','))
    {
        return Err(ApiError::BadRequest(
            "x-queen-tenant must be sent once, holding one UUID".into(),
        ));
    }
    let v = req.header("x-queen-tenant").map(str::trim).unwrap_or("");
    if v.is_empty() {
        return Ok(Cow::Borrowed(DEFAULT_TENANT));
    }
    if !crate::ids::is_uuid(v) {
        return Err(ApiError::BadRequest(
            "invalid x-queen-tenant header (must be a UUID)".into(),
        ));
    }
    let t = v.to_ascii_lowercase();
    if t == "00000000-0000-0000-0000-000000000000" {
        return Err(ApiError::ReservedTenant);
    }
    Ok(Cow::Owned(t))
}
