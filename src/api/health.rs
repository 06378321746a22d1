//! `GET /health`: 200 when PostgreSQL answers `SELECT 1` within
//! `HEALTH_TIMEOUT`, 503 otherwise.

use super::reply::json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::{Job, StoreReply};
use serde_json::json;
use shards::http::Response;
use std::rc::Rc;
use std::time::Duration;

/// How long the database may take to answer before the broker calls itself unhealthy.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Handles `GET /health`.
pub async fn handle(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let probe = async { matches!(shard.db.submit(Job::Health).await, StoreReply::Value(Ok(_))) };
    let timeout = async {
        glommio::timer::sleep(HEALTH_TIMEOUT).await;
        false
    };
    let up = futures_lite::future::or(probe, timeout).await;
    let body = json!({
        "status": if up { "healthy" } else { "unhealthy" },
        "database": if up { "connected" } else { "disconnected" },
        "server": "Queen (Rust)",
        "worker_id": shard.cfg.worker_id,
        "server_id": shard.cfg.server_id,
        "version": env!("CARGO_PKG_VERSION"),
        "shared_state": { "shards": shard.cfg.nr_shards, "shard": shard.id.0 },
    });
    Ok(json(if up { 200 } else { 503 }, &body))
}
