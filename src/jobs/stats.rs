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
//! scanned ones, and any older than `STATS_RECONCILE_INTERVAL_MS`); a cycle
//! chains as many rounds as the partitions stale at its start need (the first
//! round reports that count), at most [`super::schedule::MAX_ROUNDS`]. A rescan adds the
//! rows appended since the previous one (which are also the queue's "ingested"),
//! moves the pending count by the rows the reference cursor passed, and counts
//! from scratch only when rows were deleted or the reconcile interval passed
//! (sql/functions/stats.sql).
//! `POST /api/v1/stats/refresh` runs the same rounds at once with `force`
//! (every partition rescanned), bypassing the interval.

use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::json;
use std::rc::Rc;

/// Starts the roll-up schedule on this shard (call on shard 0 only).
pub fn spawn(shard: &Rc<Shard>) {
    let interval_ms = shard.cfg.jobs.stats_interval_ms;
    super::schedule::schedule(shard, "stats", interval_ms, |s| async move {
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

/// Runs the rounds the partitions stale at the start need (fewer when one
/// comes back short; at most [`super::schedule::MAX_ROUNDS`]); `force` first marks every
/// partition stale (one round only does that).
pub async fn cycle(shard: &Rc<Shard>, force: bool) -> Result<CycleReport, StoreError> {
    let cfg = &shard.cfg.jobs;
    let mut report = CycleReport::default();
    // Rounds this cycle needs: the partitions stale when it began, a batch a round.
    // Chaining "until a round comes back short" never ended under steady push,
    // because a partition pushed to within the stats margin is stale again right
    // after its scan; those wait for the next cycle.
    let mut budget = super::schedule::MAX_ROUNDS;
    for round in 0..super::schedule::MAX_ROUNDS {
        // `last`: roll the queue rows up even when this round comes back full
        // (round 0 decides that itself from the stale count)
        let arg = json!({"batchSize": cfg.stats_batch, "reconcileMs": cfg.stats_reconcile_ms,
                         "force": force && round == 0, "broker": shard.cfg.server_id,
                         "last": round > 0 && round + 1 >= budget});
        let r = shard.db.call(Proc::StatsRollup, arg).await?;
        report.rounds += 1;
        if r["ran"] != true {
            report.skipped = true;
            break;
        }
        let rows = r["rows"].as_u64().unwrap_or(0);
        report.partitions += rows;
        if round == 0 {
            let stale = r["stale"].as_u64().unwrap_or(0);
            let batch = u64::from(cfg.stats_batch.max(1));
            budget = u32::try_from(stale.div_ceil(batch)).map_or(budget, |n| n.clamp(1, budget));
        }
        if rows < u64::from(cfg.stats_batch) || round + 1 >= budget || shard.stopping.is_fired() {
            break;
        }
    }
    Ok(report)
}
