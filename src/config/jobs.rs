//! Background job settings (`RETENTION_*`, `EVICTION_*`, `STATS_*`,
//! `CLEANUP_INTERVAL`, `PARTITION_CLEANUP_DAYS`, `METRICS_RETENTION_DAYS`;
//! semantics.md §12). The jobs themselves are `crate::jobs`. An interval of
//! 0 disables its job; a batch or day count below 1 is raised to 1.

use crate::env::{ConfigError, Env};

/// Retention cycle in ms when `RETENTION_INTERVAL` is unset (the later broker's 5 s:
/// short rounds keep up with inflow without long deletes).
pub const DEFAULT_RETENTION_INTERVAL_MS: u64 = 5_000;
/// Eviction (and expired-lease reclaim) cycle in ms when `EVICTION_INTERVAL` is unset (spec).
pub const DEFAULT_EVICTION_INTERVAL_MS: u64 = 60_000;
/// Rows per retention/eviction delete round (spec default; bounds lock time).
pub const DEFAULT_JOB_BATCH_SIZE: u32 = 1_000;
/// Stats roll-up cycle, ms (spec `STATS_INTERVAL_MS` default).
pub const DEFAULT_STATS_INTERVAL_MS: u64 = 10_000;
/// Longest time a partition's roll-up row may go unrescanned, ms (spec
/// `STATS_RECONCILE_INTERVAL_MS`; catches deletes that stamp nothing).
pub const DEFAULT_STATS_RECONCILE_INTERVAL_MS: u64 = 120_000;
/// Partitions rescanned per roll-up round: ~0.1–0.3 s of DB time at 100
/// messages per partition, so a round never holds a DB thread for long.
pub const DEFAULT_STATS_BATCH_SIZE: u32 = 1_000;
/// Cleanup cycle (inactive partitions, old metrics rows), ms, when
/// `CLEANUP_INTERVAL` is unset: idleness is measured in days, so a minute loses
/// nothing, and each cycle reads the partition catalogue once.
pub const DEFAULT_CLEANUP_INTERVAL_MS: u64 = 60_000;
/// Days an empty partition stays idle before cleanup deletes it (spec default).
pub const DEFAULT_PARTITION_CLEANUP_DAYS: u32 = 30;
/// `QUEEN_PARTITION_CLEANUP_ENABLED` when unset (config.md): on, as
/// `PARTITION_CLEANUP_DAYS` already keeps a month of idleness.
pub const DEFAULT_PARTITION_CLEANUP_ENABLED: bool = true;
/// Days metrics and history rows are kept (spec `METRICS_RETENTION_DAYS`).
pub const DEFAULT_METRICS_RETENTION_DAYS: u32 = 90;

/// Background job settings; an interval of 0 disables the job.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// `RETENTION_INTERVAL` ms (retention and completed retention).
    pub retention_interval_ms: u64,
    /// `RETENTION_BATCH_SIZE`.
    pub retention_batch: u32,
    /// `EVICTION_INTERVAL` ms (max-wait eviction and expired-lease reclaim).
    pub eviction_interval_ms: u64,
    /// `EVICTION_BATCH_SIZE`.
    pub eviction_batch: u32,
    /// `STATS_INTERVAL_MS`: stats roll-up cycle (0 disables it).
    pub stats_interval_ms: u64,
    /// `STATS_RECONCILE_INTERVAL_MS`: a partition is rescanned at least this often.
    pub stats_reconcile_ms: u64,
    /// `STATS_BATCH_SIZE`: partitions rescanned per roll-up round.
    pub stats_batch: u32,
    /// `CLEANUP_INTERVAL` ms: inactive-partition and metrics cleanup (0 disables it).
    pub cleanup_interval_ms: u64,
    /// `PARTITION_CLEANUP_DAYS` (at least 1).
    pub partition_cleanup_days: u32,
    /// `QUEEN_PARTITION_CLEANUP_ENABLED`: whether cleanup deletes idle partitions.
    pub partition_cleanup: bool,
    /// `METRICS_RETENTION_DAYS` (0 keeps metrics rows forever).
    pub metrics_retention_days: u32,
}

impl JobsConfig {
    /// Reads the job variables.
    pub fn from_env(env: &Env) -> Result<JobsConfig, ConfigError> {
        Ok(JobsConfig {
            retention_interval_ms: env
                .parse("RETENTION_INTERVAL", DEFAULT_RETENTION_INTERVAL_MS)?,
            retention_batch: env
                .parse("RETENTION_BATCH_SIZE", DEFAULT_JOB_BATCH_SIZE)?
                .max(1),
            eviction_interval_ms: env.parse("EVICTION_INTERVAL", DEFAULT_EVICTION_INTERVAL_MS)?,
            eviction_batch: env
                .parse("EVICTION_BATCH_SIZE", DEFAULT_JOB_BATCH_SIZE)?
                .max(1),
            stats_interval_ms: env.parse("STATS_INTERVAL_MS", DEFAULT_STATS_INTERVAL_MS)?,
            stats_reconcile_ms: env.parse(
                "STATS_RECONCILE_INTERVAL_MS",
                DEFAULT_STATS_RECONCILE_INTERVAL_MS,
            )?,
            stats_batch: env
                .parse("STATS_BATCH_SIZE", DEFAULT_STATS_BATCH_SIZE)?
                .max(1),
            cleanup_interval_ms: env.parse("CLEANUP_INTERVAL", DEFAULT_CLEANUP_INTERVAL_MS)?,
            partition_cleanup_days: env
                .parse("PARTITION_CLEANUP_DAYS", DEFAULT_PARTITION_CLEANUP_DAYS)?
                .max(1),
            partition_cleanup: env.bool(
                "QUEEN_PARTITION_CLEANUP_ENABLED",
                DEFAULT_PARTITION_CLEANUP_ENABLED,
            )?,
            metrics_retention_days: env
                .parse("METRICS_RETENTION_DAYS", DEFAULT_METRICS_RETENTION_DAYS)?,
        })
    }
}
