//! Timer settings (`QUEEN_TIMERS_*`, `QUEEN_SWEEPER*`; config.md §12): the
//! limits of `POST /api/v1/timers` (`crate::api::timers_ops`) and the
//! cadence and bounds of the firing job (`crate::jobs::timers`). Parsed once
//! at boot; every setting needs a restart.
//!
//! Read here and nowhere else; config.md §12 lists more sweeper knobs
//! (`_LEASE_MS`, `_CYCLE_MAX_ROWS`, `_DUE_CAP`, `_MAX_FIRE_BYTES`,
//! `_PARALLELISM`, `_ISOLATE_ON_PERMANENT`, `_FIRE_RATE_PER_TENANT`,
//! `_IDLE_MAX_SLEEP_MS`) that this broker does not read: the claim is the
//! fire transaction's row lock (no lease), one fire round is one bounded
//! batch, a failed batch is always retried timer by timer, and the job
//! never sleeps longer than `QUEEN_SWEEPER_MAX_SLEEP_MS`, idle or not.

use crate::env::{ConfigError, Env};

/// Largest decoded timer payload, bytes (config.md §12): a timer becomes one
/// message, and a megabyte is already far past what a scheduled message needs.
pub const DEFAULT_TIMERS_MAX_PAYLOAD_BYTES: usize = 1_048_576;
/// Longest delay, seconds (config.md §12: 90 days); beyond it 403
/// `timer_horizon_exceeded`, so a unit mistake (µs for ms) cannot park a row
/// for centuries.
pub const DEFAULT_TIMERS_MAX_HORIZON_S: u64 = 7_776_000;
/// Ops per `POST /api/v1/timers` call (config.md §12): one call is one
/// transaction holding one advisory lock per key.
pub const DEFAULT_TIMERS_MAX_OPS_PER_CALL: usize = 256;
/// `QUEEN_SWEEPER` when unset: the firing job runs (off = timers never fire
/// on this broker; another broker on the database may still fire them).
pub const DEFAULT_SWEEPER: bool = true;
/// Shortest sleep between fire rounds, ms (config.md §12): when the nearest
/// timer is due now but other brokers hold every due row, the job retries
/// after this instead of spinning.
pub const DEFAULT_SWEEPER_MIN_SLEEP_MS: u64 = 5;
/// Longest sleep between fire rounds, ms. config.md gives 1000; we take 50
/// because a timer scheduled while the job sleeps (on any shard of any
/// broker, which the job does not hear of) waits for the next round, and the
/// target is p99 under 200 ms past due. A round with nothing due is one index
/// probe (`min(deliver_at)`) plus an empty `SKIP LOCKED` scan: 20 a second
/// per broker cost PostgreSQL well under 1% of a core.
pub const DEFAULT_SWEEPER_MAX_SLEEP_MS: u64 = 50;
/// Timers claimed per fire transaction (config.md §12): at 1,000 timers/s a
/// 50 ms round carries ~50, so 200 leaves room for bursts while one
/// transaction (and the partition locks it holds) stays a few milliseconds.
pub const DEFAULT_SWEEPER_CLAIM_BATCH: u32 = 200;
/// Failed fires of one timer before it parks (config.md §12 names the DLQ as
/// the end; a DLQ row needs a stored message, so we park it instead).
pub const DEFAULT_SWEEPER_MAX_ATTEMPTS: u32 = 5;
/// First backoff after a failed fire, ms (config.md §12).
pub const DEFAULT_SWEEPER_BACKOFF_MIN_MS: u64 = 1_000;
/// Longest backoff after failed fires, ms (config.md §12).
pub const DEFAULT_SWEEPER_BACKOFF_MAX_MS: u64 = 60_000;

/// Timer limits and the firing job's settings.
#[derive(Debug, Clone)]
pub struct TimersConfig {
    /// `QUEEN_TIMERS_MAX_PAYLOAD_BYTES`: largest decoded payload (413 beyond).
    pub max_payload_bytes: usize,
    /// `QUEEN_TIMERS_MAX_HORIZON_S`: longest delay (403 beyond).
    pub max_horizon_s: u64,
    /// `QUEEN_TIMERS_MAX_OPS_PER_CALL`: ops per call (400 beyond).
    pub max_ops_per_call: usize,
    /// `QUEEN_SWEEPER`: whether this broker runs the firing job.
    pub sweeper: bool,
    /// `QUEEN_SWEEPER_MIN_SLEEP_MS`.
    pub min_sleep_ms: u64,
    /// `QUEEN_SWEEPER_MAX_SLEEP_MS`.
    pub max_sleep_ms: u64,
    /// `QUEEN_SWEEPER_CLAIM_BATCH`: timers per fire transaction.
    pub claim_batch: u32,
    /// `QUEEN_SWEEPER_MAX_ATTEMPTS`.
    pub max_attempts: u32,
    /// `QUEEN_SWEEPER_BACKOFF_MIN_MS`.
    pub backoff_min_ms: u64,
    /// `QUEEN_SWEEPER_BACKOFF_MAX_MS`.
    pub backoff_max_ms: u64,
}

impl TimersConfig {
    /// Reads the timer variables; a contradictory pair fails the boot.
    pub fn from_env(env: &Env) -> Result<TimersConfig, ConfigError> {
        let c = TimersConfig {
            max_payload_bytes: env
                .parse(
                    "QUEEN_TIMERS_MAX_PAYLOAD_BYTES",
                    DEFAULT_TIMERS_MAX_PAYLOAD_BYTES,
                )?
                .max(1),
            max_horizon_s: env.parse("QUEEN_TIMERS_MAX_HORIZON_S", DEFAULT_TIMERS_MAX_HORIZON_S)?,
            max_ops_per_call: env
                .parse(
                    "QUEEN_TIMERS_MAX_OPS_PER_CALL",
                    DEFAULT_TIMERS_MAX_OPS_PER_CALL,
                )?
                .max(1),
            sweeper: env.bool("QUEEN_SWEEPER", DEFAULT_SWEEPER)?,
            min_sleep_ms: env
                .parse("QUEEN_SWEEPER_MIN_SLEEP_MS", DEFAULT_SWEEPER_MIN_SLEEP_MS)?
                .max(1),
            max_sleep_ms: env.parse("QUEEN_SWEEPER_MAX_SLEEP_MS", DEFAULT_SWEEPER_MAX_SLEEP_MS)?,
            claim_batch: env
                .parse("QUEEN_SWEEPER_CLAIM_BATCH", DEFAULT_SWEEPER_CLAIM_BATCH)?
                .clamp(1, 10_000),
            max_attempts: env
                .parse("QUEEN_SWEEPER_MAX_ATTEMPTS", DEFAULT_SWEEPER_MAX_ATTEMPTS)?
                .max(1),
            backoff_min_ms: env
                .parse(
                    "QUEEN_SWEEPER_BACKOFF_MIN_MS",
                    DEFAULT_SWEEPER_BACKOFF_MIN_MS,
                )?
                .max(1),
            backoff_max_ms: env.parse(
                "QUEEN_SWEEPER_BACKOFF_MAX_MS",
                DEFAULT_SWEEPER_BACKOFF_MAX_MS,
            )?,
        };
        if c.max_sleep_ms < c.min_sleep_ms {
            return Err(ConfigError::new(
                "QUEEN_SWEEPER_MAX_SLEEP_MS",
                format!(
                    "{} is below QUEEN_SWEEPER_MIN_SLEEP_MS ({})",
                    c.max_sleep_ms, c.min_sleep_ms
                ),
            ));
        }
        if c.backoff_max_ms < c.backoff_min_ms {
            return Err(ConfigError::new(
                "QUEEN_SWEEPER_BACKOFF_MAX_MS",
                format!(
                    "{} is below QUEEN_SWEEPER_BACKOFF_MIN_MS ({})",
                    c.backoff_max_ms, c.backoff_min_ms
                ),
            ));
        }
        Ok(c)
    }

    /// The longest delay in ms.
    pub fn max_delay_ms(&self) -> i64 {
        i64::try_from(self.max_horizon_s.saturating_mul(1000)).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<TimersConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |k: &str| m.get(k).cloned();
        TimersConfig::from_env(&Env::new(&lookup))
    }

    #[test]
    fn defaults_and_contradictions() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.max_delay_ms(), 7_776_000_000);
        assert!(c.sweeper);
        let e = cfg(&[
            ("QUEEN_SWEEPER_MIN_SLEEP_MS", "100"),
            ("QUEEN_SWEEPER_MAX_SLEEP_MS", "10"),
        ])
        .unwrap_err();
        assert_eq!(e.var, "QUEEN_SWEEPER_MAX_SLEEP_MS");
        let e = cfg(&[("QUEEN_SWEEPER_BACKOFF_MAX_MS", "10")]).unwrap_err();
        assert_eq!(e.var, "QUEEN_SWEEPER_BACKOFF_MAX_MS");
        assert_eq!(
            cfg(&[("QUEEN_SWEEPER", "maybe")]).unwrap_err().var,
            "QUEEN_SWEEPER"
        );
    }
}
