//! `GET/POST /api/v1/system/maintenance` and `.../maintenance/pop`
//! (http-api.md §13, semantics.md §15).
//!
//! A POST writes the flag to `queen.system_state` first (so a restart and
//! every other broker's refresh see it), then applies it on this shard and
//! publishes a `Notice::Maintenance` that the mesh thread fans out to the
//! other shards (and peers). Each shard also re-reads the flags every
//! `QUEEN_CACHE_REFRESH_INTERVAL_MS` (`crate::spool::replay`).
//!
//! The POST answers only once every shard of this broker has applied the
//! switch (each publishes the flag it applied on the spool board), so a
//! client that switched maintenance off is not refused by the next shard it
//! reaches. Peers apply it through the mesh, asynchronously. The wait is
//! bounded ([`APPLY_WAIT`]): a shard that cannot apply it in time still
//! will, from the notice or its periodic re-read.

use super::params;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::mesh::Notice;
use crate::shard::Shard;
use crate::spool::stats;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest a POST waits for the other shards of this broker to apply the
/// switch; a notice normally lands in well under a millisecond, so this only
/// bounds the answer when a shard is stalled.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// How often the wait looks at the board.
const APPLY_POLL: Duration = Duration::from_millis(1);

/// Waits (bounded) until every shard of this broker has applied the switch.
async fn wait_applied(pop: bool, enabled: bool) {
    let deadline = Instant::now() + APPLY_WAIT;
    while !stats::all_applied(pop, enabled) && Instant::now() < deadline {
        glommio::timer::sleep(APPLY_POLL).await;
    }
}

/// Records spooled on every shard, and whether every spool is usable.
fn buffer_totals() -> (u64, bool) {
    stats::board().iter().fold((0, true), |(n, ok), g| {
        (
            n + g.records.load(Ordering::Relaxed),
            ok && !g.broken.load(Ordering::Relaxed),
        )
    })
}

/// `GET /api/v1/system/maintenance`.
pub async fn get_push(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let (buffered, healthy) = buffer_totals();
    Ok(ok_json(&json!({
        "maintenanceMode": shard.spool.push_paused.get(),
        "popMaintenanceMode": shard.spool.pop_paused.get(),
        "bufferedMessages": buffered,
        "bufferHealthy": healthy,
        "bufferStats": super::buffers::snapshot(),
    })))
}

/// `GET /api/v1/system/maintenance/pop`.
pub async fn get_pop(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let on = shard.spool.pop_paused.get();
    Ok(ok_json(&json!({
        "popMaintenanceMode": on,
        "message": pop_message(on),
    })))
}

fn pop_message(on: bool) -> &'static str {
    if on {
        "Pop maintenance mode enabled: every pop answers empty with paused=true"
    } else {
        "Pop maintenance mode disabled: pops are served"
    }
}

/// `POST /api/v1/system/maintenance` (`pop` false) or `.../maintenance/pop`.
pub async fn set(shard: &Rc<Shard>, req: &Request, pop: bool) -> Result<Response, ApiError> {
    let body = params::object_body(req)
        .map_err(|_| ApiError::BadRequest("enabled (boolean) is required".into()))?;
    let Some(Value::Bool(enabled)) = body.get("enabled") else {
        return Err(ApiError::BadRequest("enabled (boolean) is required".into()));
    };
    let enabled = *enabled;
    let key = if pop {
        "pop_maintenance_mode"
    } else {
        "maintenance_mode"
    };
    shard
        .db
        .call(
            Proc::SystemStateSet,
            json!({"key": key, "enabled": enabled}),
        )
        .await?;
    shard.spool.set_flag(pop, enabled);
    shard.notify(Notice::Maintenance { pop, enabled });
    wait_applied(pop, enabled).await;
    log::info!(
        "{} maintenance switched {} (shard {})",
        if pop { "pop" } else { "push" },
        if enabled { "on" } else { "off" },
        shard.id
    );
    if pop {
        return Ok(ok_json(&json!({
            "popMaintenanceMode": enabled,
            "message": pop_message(enabled),
        })));
    }
    let (buffered, healthy) = buffer_totals();
    Ok(ok_json(&json!({
        "maintenanceMode": enabled,
        "bufferedMessages": buffered,
        "bufferHealthy": healthy,
        "message": if enabled {
            "Maintenance mode enabled: pushes are written to the disk spool"
        } else {
            "Maintenance mode disabled: the spool is being replayed"
        },
    })))
}
