//! Background jobs (semantics.md §12): retention and completed retention,
//! max-wait eviction, expired-lease reclaim, and the stats roll-up
//! ([`stats`]), and the cleanup of idle partitions and old metrics rows
//! ([`cleanup`]), the recheck of the KV/timers kill switches
//! ([`kv_switch`]) and the KV expiry sweep ([`kv_sweep`]), both on the KV pool.
//!
//! # Threads and ownership
//! Shard 0 owns the schedule: one glommio task per job sleeps its interval
//! (glommio timer), then sends `Proc::Maintenance` rounds to the DB thread
//! group like any request. The SQL side (`queen.maintenance`,
//! sql/functions/jobs.sql) does one bounded round per call in its own
//! transaction under a try advisory lock per job, so one broker of a cluster
//! runs a job at a time and a busy lock is a skip. A round deletes its victims
//! by primary key and commits asynchronously (a round lost in a crash is
//! redone by the next: its rows are still eligible), so at 5,000 msg/s the
//! job's rounds cost push little (bench/history/2026-11-diary.md, session 4). A round that hit its batch size is repeated at once (up to
//! [`MAX_ROUNDS`]) so the job keeps up with inflow without long transactions.
//! Expired-lease reclaim runs on the eviction interval.

pub mod cleanup;
pub mod kv_sweep;
pub mod kv_switch;
pub mod schedule;
pub mod stats;

use crate::shard::Shard;
use crate::store::Proc;
use schedule::{schedule, MAX_ROUNDS};
use serde_json::json;
use std::rc::Rc;

/// Starts the job schedule on this shard (call on shard 0 only).
pub fn spawn(shard: &Rc<Shard>) {
    stats::spawn(shard);
    cleanup::spawn(shard);
    kv_switch::spawn(shard);
    kv_sweep::spawn(shard);
    let cfg = &shard.cfg.jobs;
    let jobs = [
        ("retention", cfg.retention_interval_ms, cfg.retention_batch),
        ("eviction", cfg.eviction_interval_ms, cfg.eviction_batch),
        (
            "lease_reclaim",
            cfg.eviction_interval_ms,
            cfg.eviction_batch,
        ),
    ];
    for (job, interval_ms, batch) in jobs {
        schedule(shard, job, interval_ms, move |s| async move {
            rounds(&s, job, batch).await
        });
    }
}

/// One cycle of a `queen.maintenance` job: rounds until one comes back short
/// (or [`MAX_ROUNDS`]).
async fn rounds(shard: &Rc<Shard>, job: &'static str, batch: u32) {
    for _ in 0..MAX_ROUNDS {
        let arg = json!({"job": job, "batchSize": batch, "broker": shard.cfg.server_id});
        match shard.db.call(Proc::Maintenance, arg).await {
            Ok(r) => {
                let rows = r["rows"].as_u64().unwrap_or(0);
                if rows > 0 {
                    log::debug!("background job {job}: {rows} rows");
                }
                if r["ran"] != true || rows < u64::from(batch) || shard.stopping.is_fired() {
                    return;
                }
            }
            Err(e) => {
                log::warn!("background job {job} failed: {e}");
                return;
            }
        }
    }
}
