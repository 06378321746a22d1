//! `GET /metrics` (JSON, http-api.md §1 keys plus per-operation and per-shard
//! extras) and `GET /metrics/prometheus` (text exposition). Both read every
//! shard's slot without stopping it (see `crate::metrics`); the Prometheus
//! scrape adds the cached per-queue DB snapshot.

use super::reply::ok_json;
use crate::error::ApiError;
use crate::metrics::{dbsnap, prom, scrape};
use crate::shard::Shard;
use shards::http::Response;
use std::rc::Rc;

/// Content type of the text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Handles `GET /metrics`.
pub async fn json(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let snap = dbsnap::Snapshot {
        data: Rc::new(serde_json::Value::Null),
        at: None,
        db_ok: true,
        queues_text: Rc::new(String::new()),
    };
    let inputs = scrape::Inputs {
        board: &shard.counters.board,
        cfg: &shard.cfg,
        db_queued: shard.db.queued(),
        snap: &snap,
        mesh: &shard.mesh_state,
        push_paused: shard.spool.push_paused.get(),
        pop_paused: shard.spool.pop_paused.get(),
        eph: &shard.eph.gauges,
    };
    Ok(ok_json(&prom::json(&inputs)))
}

/// Handles `GET /metrics/prometheus`.
pub async fn prometheus(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let snap = shard.db_snapshot.get(&shard.db).await;
    let inputs = scrape::Inputs {
        board: &shard.counters.board,
        cfg: &shard.cfg,
        db_queued: shard.db.queued(),
        snap: &snap,
        mesh: &shard.mesh_state,
        push_paused: shard.spool.push_paused.get(),
        pop_paused: shard.spool.pop_paused.get(),
        eph: &shard.eph.gauges,
    };
    Ok(Response::text(200, PROMETHEUS_TEXT, prom::text(&inputs)))
}
