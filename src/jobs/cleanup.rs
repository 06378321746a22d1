//! The cleanup job (semantics.md §12 steps 3 and 4): deletes partitions that
//! are empty and idle for `PARTITION_CLEANUP_DAYS` (unless
//! `QUEEN_PARTITION_CLEANUP_ENABLED` is off) and metrics/history rows
//! (`retention_history`, `messages_consumed`, `system_metrics`) older than
//! `METRICS_RETENTION_DAYS`.
//!
//! # Threads and ownership
//! Shard 0 owns the schedule (a glommio timer every `CLEANUP_INTERVAL`); each
//! round is one `Proc::Cleanup` call on the DB thread group (`queen.cleanup`,
//! sql/functions/cleanup.sql) in its own transaction under the try advisory lock 737005, at most
//! `RETENTION_BATCH_SIZE` partitions and rows per table; full rounds are chained
//! up to [`super::schedule::MAX_ROUNDS`] per cycle like the other jobs.
//!
//! Decision (the spec runs steps 3-4 in the retention cycle): cleanup has its
//! own interval, one minute by default, because idleness is counted in days and
//! each round reads the partition catalogue; retention itself stays on the short
//! `RETENTION_INTERVAL` so that it keeps up with inflow.

use crate::shard::Shard;
use crate::store::Proc;
use serde_json::json;
use std::rc::Rc;

/// Starts the cleanup schedule on this shard (call on shard 0 only).
pub fn spawn(shard: &Rc<Shard>) {
    let interval_ms = shard.cfg.jobs.cleanup_interval_ms;
    super::schedule::schedule(
        shard,
        "cleanup",
        interval_ms,
        |s| async move { cycle(&s).await },
    );
}

/// Runs rounds until one comes back short (or [`super::schedule::MAX_ROUNDS`]).
async fn cycle(shard: &Rc<Shard>) {
    let cfg = &shard.cfg.jobs;
    for _ in 0..super::schedule::MAX_ROUNDS {
        let arg = json!({"days": cfg.partition_cleanup_days,
                         "partitions": cfg.partition_cleanup,
                         "metricsDays": cfg.metrics_retention_days,
                         "batchSize": cfg.retention_batch, "broker": shard.cfg.server_id});
        match shard.db.call(Proc::Cleanup, arg).await {
            Ok(r) => {
                let (parts, metrics) = (r["partitions"].as_u64(), r["metrics"].as_u64());
                let (parts, metrics) = (parts.unwrap_or(0), metrics.unwrap_or(0));
                if parts + metrics > 0 {
                    log::info!(
                        "background job cleanup: {parts} partitions, {metrics} metrics rows"
                    );
                }
                let full = u64::from(cfg.retention_batch);
                if r["ran"] != true || (parts < full && metrics < full) || shard.stopping.is_fired()
                {
                    return;
                }
            }
            Err(e) => {
                log::warn!("background job cleanup failed: {e}");
                return;
            }
        }
    }
}
