//! Pop settings: the long-poll budget and backoff (`DEFAULT_TIMEOUT`,
//! `POP_WAIT_*`), where a new consumer group starts
//! (`DEFAULT_SUBSCRIPTION_MODE`) and the autopilot (`QUEEN_POP_AUTOPILOT*`,
//! config.md §3; the controller itself is `crate::api::pop_autopilot`).
//!
//! Decisions where config.md is silent: autopilot on/off spellings are
//! `on|true|1|yes` and `off|false|0|no` (case-insensitive), empty = unset;
//! numbers outside their range are fatal, like anything else. Ranges where
//! config.md gives none: target age 1..3,600,000 ms, dwell 0..3,600,000 ms,
//! dwell pops 0..1,000,000, max lanes 1..10,000,000.

use crate::env::{ConfigError, Env};

/// Long-poll budget in ms when a pop says `wait=true` without `timeout`.
pub const DEFAULT_POP_TIMEOUT_MS: u64 = 30_000;
/// Pop batch when the request has none (1.x brokers use 200; the 1.3.0 client omits it).
pub const DEFAULT_POP_BATCH: u32 = 200;
/// First recheck of a parked pop, ms (config.md `POP_WAIT_INITIAL_INTERVAL_MS`):
/// a lost notice costs at most this much latency at first.
pub const DEFAULT_WAIT_INITIAL_MS: u64 = 100;
/// Empty rechecks before the interval starts to grow (config.md).
pub const DEFAULT_WAIT_BACKOFF_THRESHOLD: u32 = 3;
/// Growth of the recheck interval after the threshold (config.md).
pub const DEFAULT_WAIT_BACKOFF_MULTIPLIER: f64 = 2.0;
/// Longest recheck interval, ms (config.md): an idle parked pop costs one
/// DB job a second at most.
pub const DEFAULT_WAIT_MAX_MS: u64 = 1000;

/// Delegated batch (config.md: the later broker's default).
pub const DEFAULT_AUTOPILOT_BATCH: u32 = 100;
/// Largest delegated batch accepted at boot (config.md).
pub const MAX_AUTOPILOT_BATCH: u64 = 10_000;
/// Width controller target age in ms (config.md).
pub const DEFAULT_TARGET_AGE_MS: u64 = 25;
/// Least time between two width changes, ms (config.md).
pub const DEFAULT_DWELL_MS: u64 = 500;
/// Least observations between two width changes (config.md).
pub const DEFAULT_DWELL_POPS: u32 = 16;
/// Most observations a dwell may ask for: past a million pops the
/// controller would never act, which is surely a typo.
pub const MAX_DWELL_POPS: u64 = 1_000_000;
/// One-shot burst width; 0 = off (config.md).
pub const DEFAULT_BURST_CAP: u32 = 0;
/// Lanes one shard keeps (config.md): bounds the controller's memory.
pub const DEFAULT_MAX_LANES: usize = 50_000;
/// Most lanes a shard may be told to keep: ten million lanes are gigabytes.
pub const MAX_MAX_LANES: u64 = 10_000_000;
/// Widest delegated width (semantics.md §18; also pop's own claim limit).
pub const MAX_WIDTH: u32 = 64;
/// Longest target age / dwell accepted, ms (an hour: beyond that the
/// controller would never act, which is surely a typo).
pub const MAX_MS: u64 = 3_600_000;

/// Where a new named consumer group starts when its first pop names no mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionDefault {
    /// From the oldest retained message (the default; see semantics.md §4).
    All,
    /// Only messages created after the group registers.
    New,
}

/// Long-poll and pop defaults (`DEFAULT_*`, `POP_WAIT_*`).
#[derive(Debug, Clone)]
pub struct PopConfig {
    /// `DEFAULT_TIMEOUT` ms.
    pub default_timeout_ms: u64,
    /// Batch when absent.
    pub default_batch: u32,
    /// `DEFAULT_SUBSCRIPTION_MODE`.
    pub default_subscription: SubscriptionDefault,
    /// `POP_WAIT_INITIAL_INTERVAL_MS`.
    pub wait_initial_ms: u64,
    /// `POP_WAIT_BACKOFF_THRESHOLD`.
    pub wait_backoff_threshold: u32,
    /// `POP_WAIT_BACKOFF_MULTIPLIER`.
    pub wait_backoff_multiplier: f64,
    /// `POP_WAIT_MAX_INTERVAL_MS`.
    pub wait_max_ms: u64,
    /// `QUEEN_POP_AUTOPILOT*`.
    pub autopilot: AutopilotConfig,
}

impl PopConfig {
    /// Reads the pop variables. `DEFAULT_TIMEOUT` wins over its older
    /// spelling `POP_DEFAULT_TIMEOUT_MS`.
    pub fn from_env(env: &Env) -> Result<PopConfig, ConfigError> {
        Ok(PopConfig {
            default_timeout_ms: env.parse(
                "DEFAULT_TIMEOUT",
                env.parse("POP_DEFAULT_TIMEOUT_MS", DEFAULT_POP_TIMEOUT_MS)?,
            )?,
            default_batch: DEFAULT_POP_BATCH,
            default_subscription: match env
                .string("DEFAULT_SUBSCRIPTION_MODE")
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
                .as_str()
            {
                "new" | "new-only" | "new_only" | "newonly" => SubscriptionDefault::New,
                _ => SubscriptionDefault::All,
            },
            wait_initial_ms: env
                .parse("POP_WAIT_INITIAL_INTERVAL_MS", DEFAULT_WAIT_INITIAL_MS)?
                .max(1),
            wait_backoff_threshold: env
                .parse("POP_WAIT_BACKOFF_THRESHOLD", DEFAULT_WAIT_BACKOFF_THRESHOLD)?,
            wait_backoff_multiplier: env.parse(
                "POP_WAIT_BACKOFF_MULTIPLIER",
                DEFAULT_WAIT_BACKOFF_MULTIPLIER,
            )?,
            wait_max_ms: env
                .parse("POP_WAIT_MAX_INTERVAL_MS", DEFAULT_WAIT_MAX_MS)?
                .max(1),
            autopilot: AutopilotConfig::from_env(env)?,
        })
    }
}

/// `QUEEN_POP_AUTOPILOT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Controller decides and is applied.
    On,
    /// Controller decides, normal defaults are applied.
    Shadow,
    /// No controller; normal defaults.
    Off,
}

/// The `QUEEN_POP_AUTOPILOT*` settings.
#[derive(Debug, Clone)]
pub struct AutopilotConfig {
    /// `QUEEN_POP_AUTOPILOT`.
    pub mode: Mode,
    /// `QUEEN_POP_AUTOPILOT_BATCH`: batch when the client left it out.
    pub batch: u32,
    /// `QUEEN_POP_AUTOPILOT_TARGET_AGE_MS`.
    pub target_age_ms: u64,
    /// `QUEEN_POP_AUTOPILOT_DWELL_MS`.
    pub dwell_ms: u64,
    /// `QUEEN_POP_AUTOPILOT_DWELL_POPS`.
    pub dwell_pops: u32,
    /// `QUEEN_POP_AUTOPILOT_BURST_CAP` (0 = off).
    pub burst_cap: u32,
    /// `QUEEN_POP_AUTOPILOT_MAX_LANES`.
    pub max_lanes: usize,
}

impl Default for AutopilotConfig {
    fn default() -> Self {
        AutopilotConfig {
            mode: Mode::On,
            batch: DEFAULT_AUTOPILOT_BATCH,
            target_age_ms: DEFAULT_TARGET_AGE_MS,
            dwell_ms: DEFAULT_DWELL_MS,
            dwell_pops: DEFAULT_DWELL_POPS,
            burst_cap: DEFAULT_BURST_CAP,
            max_lanes: DEFAULT_MAX_LANES,
        }
    }
}

impl AutopilotConfig {
    /// Reads and validates the variables; any invalid value is an error naming it.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let set = |var: &str| env.non_empty(var).map(|v| v.trim().to_string());
        let mode = match set("QUEEN_POP_AUTOPILOT").map(|v| v.to_ascii_lowercase()) {
            None => Mode::On,
            Some(v) => match v.as_str() {
                "on" | "true" | "1" | "yes" => Mode::On,
                "shadow" => Mode::Shadow,
                "off" | "false" | "0" | "no" => Mode::Off,
                _ => {
                    return Err(ConfigError::new(
                        "QUEEN_POP_AUTOPILOT",
                        format!("{v:?} is not one of on, shadow, off"),
                    ))
                }
            },
        };
        let num = |var: &'static str, default: u64, lo: u64, hi: u64| -> Result<u64, ConfigError> {
            let Some(v) = set(var) else {
                return Ok(default);
            };
            match v.parse::<u64>() {
                Ok(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(ConfigError::new(
                    var,
                    format!("{v:?} is not a whole number between {lo} and {hi}"),
                )),
            }
        };
        // The `as` casts below are bounded by the ranges just checked.
        Ok(AutopilotConfig {
            mode,
            batch: num(
                "QUEEN_POP_AUTOPILOT_BATCH",
                DEFAULT_AUTOPILOT_BATCH.into(),
                1,
                MAX_AUTOPILOT_BATCH,
            )? as u32,
            target_age_ms: num(
                "QUEEN_POP_AUTOPILOT_TARGET_AGE_MS",
                DEFAULT_TARGET_AGE_MS,
                1,
                MAX_MS,
            )?,
            dwell_ms: num("QUEEN_POP_AUTOPILOT_DWELL_MS", DEFAULT_DWELL_MS, 0, MAX_MS)?,
            dwell_pops: num(
                "QUEEN_POP_AUTOPILOT_DWELL_POPS",
                DEFAULT_DWELL_POPS.into(),
                0,
                MAX_DWELL_POPS,
            )? as u32,
            burst_cap: num(
                "QUEEN_POP_AUTOPILOT_BURST_CAP",
                DEFAULT_BURST_CAP.into(),
                0,
                MAX_WIDTH.into(),
            )? as u32,
            max_lanes: num(
                "QUEEN_POP_AUTOPILOT_MAX_LANES",
                DEFAULT_MAX_LANES as u64,
                1,
                MAX_MAX_LANES,
            )? as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<AutopilotConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AutopilotConfig::from_env(&Env::new(&move |k| m.get(k).cloned()))
    }

    #[test]
    fn modes_and_bounds() {
        assert_eq!(cfg(&[]).unwrap().mode, Mode::On);
        assert_eq!(
            cfg(&[("QUEEN_POP_AUTOPILOT", "FALSE")]).unwrap().mode,
            Mode::Off
        );
        assert_eq!(
            cfg(&[("QUEEN_POP_AUTOPILOT", " shadow ")]).unwrap().mode,
            Mode::Shadow
        );
        assert!(cfg(&[("QUEEN_POP_AUTOPILOT", "auto")]).is_err());
        assert!(cfg(&[("QUEEN_POP_AUTOPILOT_BATCH", "0")]).is_err());
        assert!(cfg(&[("QUEEN_POP_AUTOPILOT_BATCH", "10001")]).is_err());
        assert_eq!(
            cfg(&[("QUEEN_POP_AUTOPILOT_BATCH", "10000")])
                .unwrap()
                .batch,
            10_000
        );
        assert!(cfg(&[("QUEEN_POP_AUTOPILOT_BURST_CAP", "65")]).is_err());
        assert!(cfg(&[("QUEEN_POP_AUTOPILOT_MAX_LANES", "x")]).is_err());
    }
}
