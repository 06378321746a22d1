//! `GET /api/v1/system/shared-state`: a free-form snapshot of the mesh
//! (peers alive/dead, heartbeats, rejection counters) and of this broker's
//! shards. Read on the shard from atomics the mesh threads write; no lock.

use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use shards::http::Response;
use std::rc::Rc;

/// Handles `GET /api/v1/system/shared-state`.
pub async fn handle(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    let mut v = shard.mesh_state.snapshot();
    v["serverId"] = shard.cfg.server_id.clone().into();
    v["shards"] = shard.cfg.nr_shards.into();
    Ok(ok_json(&v))
}
