//! The stats roll-up job (issue 3; data-model.md "Statistics and metrics
//! tables"): keeps `queen.partition_stats`, the per-queue rows of `queen.stats`
//! and the per-minute `queen.stats_history` current so that the catalogue and
//! status endpoints (http-api.md §8, §12) read a bounded roll-up instead of
//! counting a large queue's messages on the request path.
//!
//! # Threads and ownership
//! Shard 0 owns the schedule (a glommio timer every `STATS_INTERVAL_MS`); each
//! round is one `Proc::StatsRollup` call on the DB thread group, in its own
//! transaction under the try advisory lock 737004 (one broker of a cluster at a
//! time; a busy lock is a skip). A round rescans at most `STATS_BATCH_SIZE`
//! partitions (those a push, pop or ack touched since their last scan, never
//! scanned ones, and any older than `STATS_RECONCILE_INTERVAL_MS`); rounds are
//! chained until one comes back short, at most [`super::MAX_ROUNDS`] per cycle.
//! `POST /api/v1/stats/refresh` runs the same rounds at once with `force`
//! (every partition rescanned), bypassing the interval.

use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::json;
use std::rc::Rc;

/// Starts the roll-up schedule on this shard (call on shard 0 only).
pub fn spawn(shard: &Rc<Shard>) {
    let interval_ms = shard.cfg.jobs.stats_interval_ms;
    super::schedule(shard, "stats", interval_ms, |s| async move {
        if let Err(e) = cycle(&s, false).await {
            log::warn!("background job stats failed: {e}");
        }
    });
}

/// What one cycle did.
#[derive(Debug, Clone, Copy, Default)]
pub struct CycleReport {
    /// Partitions rescanned.
    pub partitions: u64,
    /// Rounds run.
    pub rounds: u32,
    /// Whether the advisory lock was busy (another broker was rolling up).
    pub skipped: bool,
}

/// Runs rounds until one comes back short (or [`super::MAX_ROUNDS`]);
/// `force` first marks every partition stale (one round only does that).
pub async fn cycle(shard: &Rc<Shard>, force: bool) -> Result<CycleReport, StoreError> {
    let cfg = &shard.cfg.jobs;
    let mut report = CycleReport::default();
    for round in 0..super::MAX_ROUNDS {
        let arg = json!({"batchSize": cfg.stats_batch, "reconcileMs": cfg.stats_reconcile_ms,
                         "force": force && round == 0, "broker": shard.cfg.server_id});
        let r = shard.db.call(Proc::StatsRollup, arg).await?;
        report.rounds += 1;
        if r["ran"] != true {
            report.skipped = true;
            break;
        }
        let rows = r["rows"].as_u64().unwrap_or(0);
        report.partitions += rows;
        if rows < u64::from(cfg.stats_batch) || shard.stopping.is_fired() {
            break;
        }
    }
    Ok(report)
}
