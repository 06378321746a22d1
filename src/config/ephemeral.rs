//! Ephemeral-queue settings (config.md §13): the broker-wide RAM ceiling, the
//! per-queue defaults and ceilings of `maxBytes` / `maxLength`, the default
//! lease and retry limit, and the idle collection of implicit queues. Parsed
//! once at boot; every setting needs a restart.
//!
//! Decisions where config.md is silent or where this broker differs:
//! - `QUEEN_EPHEMERAL_MAX_BYTES` defaults to 64 MiB, not the 256 MiB of the
//!   original: this broker targets a small RSS on 2-core machines (tens of
//!   MiB idle), and a RAM-only queue that may hold four times the process's
//!   whole working set by default is the wrong surprise. Operators raise it.
//! - The variables the spec lists for tenancy grants and per-tenant rates
//!   (`QUEEN_EPHEMERAL_REQUIRE_GRANT`, `QUEEN_EPHEMERAL_RATE` / `_BURST`) are
//!   not read: grants and quotas are not built yet (README "Not built yet").

use crate::env::{ConfigError, Env};

/// `QUEEN_EPHEMERAL_MAX_BYTES` default, bytes (64 MiB): the whole broker's
/// ephemeral RAM (accounted bytes over every queue and shard); past it a
/// push answers 503 `ephemeral_unavailable`. See the module doc for why it
/// is smaller than the original's 256 MiB.
pub const DEFAULT_EPH_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// `QUEEN_EPHEMERAL_QUEUE_MAX_BYTES` default, bytes (config.md: 16 MiB): the
/// default and the ceiling of a queue's `maxBytes`.
pub const DEFAULT_EPH_QUEUE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// `QUEEN_EPHEMERAL_QUEUE_MAX_LENGTH` default (config.md: 10,000 messages):
/// the default and the ceiling of a queue's `maxLength`.
pub const DEFAULT_EPH_QUEUE_MAX_LENGTH: u64 = 10_000;
/// `QUEEN_EPHEMERAL_LEASE_S` default, seconds (config.md: 30, as durable pops).
pub const DEFAULT_EPH_LEASE_S: u64 = 30;
/// Longest lease, seconds (config.md: 86,400, one day).
pub const MAX_EPH_LEASE_S: u64 = 86_400;
/// `QUEEN_EPHEMERAL_RETRY_LIMIT` default (config.md: 5 deliveries, then drop).
pub const DEFAULT_EPH_RETRY_LIMIT: u64 = 5;
/// Largest retry limit (config.md: 1,000).
pub const MAX_EPH_RETRY_LIMIT: u64 = 1_000;
/// `QUEEN_EPHEMERAL_IMPLICIT_IDLE_S` default, seconds (config.md: 300): an
/// implicit (undeclared) queue empty and untouched this long is forgotten;
/// 0 keeps them for ever.
pub const DEFAULT_EPH_IMPLICIT_IDLE_S: u64 = 300;

/// The ephemeral-queue settings.
#[derive(Debug, Clone)]
pub struct EphemeralConfig {
    /// Whole-broker ceiling of accounted bytes (`QUEEN_EPHEMERAL_MAX_BYTES`).
    pub max_bytes: u64,
    /// Default and ceiling of `maxBytes` (`QUEEN_EPHEMERAL_QUEUE_MAX_BYTES`).
    pub queue_max_bytes: u64,
    /// Default and ceiling of `maxLength` (`QUEEN_EPHEMERAL_QUEUE_MAX_LENGTH`).
    pub queue_max_length: u64,
    /// Default `leaseSeconds` (`QUEEN_EPHEMERAL_LEASE_S`).
    pub lease_s: u64,
    /// Default `retryLimit` (`QUEEN_EPHEMERAL_RETRY_LIMIT`).
    pub retry_limit: u64,
    /// Idle time before an empty implicit queue is forgotten, seconds; 0 never
    /// (`QUEEN_EPHEMERAL_IMPLICIT_IDLE_S`).
    pub implicit_idle_s: u64,
}

impl EphemeralConfig {
    /// Reads the `QUEEN_EPHEMERAL_*` variables; an out-of-range value stops
    /// the boot naming it.
    pub fn from_env(env: &Env) -> Result<EphemeralConfig, ConfigError> {
        let min1 = |var: &'static str, default: u64| -> Result<u64, ConfigError> {
            let v = env.parse(var, default)?;
            if v == 0 {
                return Err(ConfigError::new(var, "must be at least 1"));
            }
            Ok(v)
        };
        let ranged = |var: &'static str, default: u64, hi: u64| -> Result<u64, ConfigError> {
            let v = min1(var, default)?;
            if v > hi {
                return Err(ConfigError::new(var, format!("{v} is above {hi}")));
            }
            Ok(v)
        };
        let c = EphemeralConfig {
            max_bytes: min1("QUEEN_EPHEMERAL_MAX_BYTES", DEFAULT_EPH_MAX_BYTES)?,
            queue_max_bytes: min1(
                "QUEEN_EPHEMERAL_QUEUE_MAX_BYTES",
                DEFAULT_EPH_QUEUE_MAX_BYTES,
            )?,
            queue_max_length: min1(
                "QUEEN_EPHEMERAL_QUEUE_MAX_LENGTH",
                DEFAULT_EPH_QUEUE_MAX_LENGTH,
            )?,
            lease_s: ranged(
                "QUEEN_EPHEMERAL_LEASE_S",
                DEFAULT_EPH_LEASE_S,
                MAX_EPH_LEASE_S,
            )?,
            retry_limit: ranged(
                "QUEEN_EPHEMERAL_RETRY_LIMIT",
                DEFAULT_EPH_RETRY_LIMIT,
                MAX_EPH_RETRY_LIMIT,
            )?,
            implicit_idle_s: env.parse(
                "QUEEN_EPHEMERAL_IMPLICIT_IDLE_S",
                DEFAULT_EPH_IMPLICIT_IDLE_S,
            )?,
        };
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<EphemeralConfig, ConfigError> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| map.get(k).cloned();
        EphemeralConfig::from_env(&Env::new(&lookup))
    }

    #[test]
    fn defaults_and_bounds() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.max_bytes, DEFAULT_EPH_MAX_BYTES);
        assert_eq!(c.queue_max_length, 10_000);
        assert_eq!(
            parse(&[("QUEEN_EPHEMERAL_MAX_BYTES", "0")])
                .unwrap_err()
                .var,
            "QUEEN_EPHEMERAL_MAX_BYTES"
        );
        assert_eq!(
            parse(&[("QUEEN_EPHEMERAL_LEASE_S", "86401")])
                .unwrap_err()
                .var,
            "QUEEN_EPHEMERAL_LEASE_S"
        );
        assert_eq!(
            parse(&[("QUEEN_EPHEMERAL_IMPLICIT_IDLE_S", "0")])
                .unwrap()
                .implicit_idle_s,
            0
        );
    }
}
