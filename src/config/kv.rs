//! KV limits (config.md §11, http-api.md §15): value, key and call sizes and
//! the `getPrefix` ceiling. The KV pool's size is the store's
//! (`QUEEN_KV_POOL_SIZE`, `crate::store::config`). Each limit must be at
//! least 1 (0 would refuse every call: a typo, so the boot stops).
//!
//! Not read here (the KV grants, rates and quotas of config.md §11 are not
//! built; see the README's KV section): `QUEEN_KV_REQUIRE_GRANT`, the rate
//! and quota variables.

use crate::env::{ConfigError, Env};

/// `QUEEN_KV_MAX_VALUE_BYTES` default: a value's canonical JSON text.
pub const DEFAULT_KV_MAX_VALUE_BYTES: usize = 65_536;
/// `QUEEN_KV_MAX_KEY_BYTES` default.
pub const DEFAULT_KV_MAX_KEY_BYTES: usize = 512;
/// `QUEEN_KV_MAX_OPS_PER_CALL` default (a transaction's KV riders: 64, fixed).
pub const DEFAULT_KV_MAX_OPS_PER_CALL: usize = 256;
/// KV ops inside one `POST /api/v1/transaction` (http-api.md §15: fixed).
pub const KV_MAX_OPS_IN_TRANSACTION: usize = 64;
/// `QUEEN_KV_MAX_KEYS_PER_CALL` default: keys named across all ops of a call.
pub const DEFAULT_KV_MAX_KEYS_PER_CALL: usize = 1024;
/// `QUEEN_KV_MAX_READ_BYTES` default: value bytes one call may read.
pub const DEFAULT_KV_MAX_READ_BYTES: u64 = 4_194_304;
/// `QUEEN_KV_PREFIX_LIMIT` default: the `getPrefix` limit ceiling (clamped).
pub const DEFAULT_KV_PREFIX_LIMIT: usize = 1000;
/// `getPrefix` limit when the op gives none.
pub const KV_PREFIX_DEFAULT_LIMIT: usize = 100;

/// The KV limits.
#[derive(Debug, Clone)]
pub struct KvConfig {
    /// `QUEEN_KV_MAX_VALUE_BYTES`.
    pub max_value_bytes: usize,
    /// `QUEEN_KV_MAX_KEY_BYTES`.
    pub max_key_bytes: usize,
    /// `QUEEN_KV_MAX_OPS_PER_CALL`.
    pub max_ops: usize,
    /// `QUEEN_KV_MAX_KEYS_PER_CALL`.
    pub max_keys: usize,
    /// `QUEEN_KV_MAX_READ_BYTES`.
    pub max_read_bytes: u64,
    /// `QUEEN_KV_PREFIX_LIMIT`.
    pub prefix_limit: usize,
}

impl KvConfig {
    /// Reads the `QUEEN_KV_*` limits.
    pub fn from_env(env: &Env) -> Result<KvConfig, ConfigError> {
        let positive = |var: &'static str, default: usize| -> Result<usize, ConfigError> {
            let v = env.parse(var, default)?;
            if v == 0 {
                return Err(ConfigError::new(var, "must be at least 1"));
            }
            Ok(v)
        };
        Ok(KvConfig {
            max_value_bytes: positive("QUEEN_KV_MAX_VALUE_BYTES", DEFAULT_KV_MAX_VALUE_BYTES)?,
            max_key_bytes: positive("QUEEN_KV_MAX_KEY_BYTES", DEFAULT_KV_MAX_KEY_BYTES)?,
            max_ops: positive("QUEEN_KV_MAX_OPS_PER_CALL", DEFAULT_KV_MAX_OPS_PER_CALL)?,
            max_keys: positive("QUEEN_KV_MAX_KEYS_PER_CALL", DEFAULT_KV_MAX_KEYS_PER_CALL)?,
            max_read_bytes: positive(
                "QUEEN_KV_MAX_READ_BYTES",
                DEFAULT_KV_MAX_READ_BYTES as usize,
            )? as u64,
            prefix_limit: positive("QUEEN_KV_PREFIX_LIMIT", DEFAULT_KV_PREFIX_LIMIT)?,
        })
    }
}
