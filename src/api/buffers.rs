//! `GET /api/v1/status/buffers` (http-api.md §12): the disk spool of every
//! shard of this broker, read from the gauge board (`crate::spool::stats`).

use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::spool::stats;
use serde_json::{json, Value};
use shards::http::Response;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// Per-shard spool state: pending records and bytes, failed segments,
/// the oldest spooled age, PostgreSQL health.
pub fn snapshot() -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let shards: Vec<Value> = stats::board()
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let oldest = g.oldest_ms.load(Ordering::Relaxed);
            json!({
                "shard": i,
                "pending": g.records.load(Ordering::Relaxed),
                "bytes": g.bytes.load(Ordering::Relaxed),
                "failedSegments": g.failed.load(Ordering::Relaxed),
                "corruptSegmentsSinceBoot": g.corrupt_total.load(Ordering::Relaxed),
                "replayedSinceBoot": g.replayed_total.load(Ordering::Relaxed),
                "oldestAgeMs": if oldest == 0 { Value::Null } else { json!(now.saturating_sub(oldest)) },
                "dbHealthy": g.pg_healthy.load(Ordering::Relaxed),
                "spoolWritable": !g.broken.load(Ordering::Relaxed),
            })
        })
        .collect();
    Value::Array(shards)
}

/// Handles `GET /api/v1/status/buffers`.
pub async fn handle(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let per_shard = snapshot();
    let sum = |k: &str| -> u64 {
        per_shard
            .as_array()
            .map_or(0, |a| a.iter().filter_map(|s| s[k].as_u64()).sum())
    };
    let healthy = per_shard
        .as_array()
        .is_some_and(|a| a.iter().all(|s| s["dbHealthy"] == json!(true)));
    Ok(ok_json(&json!({
        "pending": sum("pending"),
        "failed": sum("failedSegments"),
        "bytes": sum("bytes"),
        "dbHealthy": healthy,
        "worker": shard.cfg.worker_id,
        "maintenanceMode": shard.spool.push_paused.get(),
        "shards": per_shard,
    })))
}
