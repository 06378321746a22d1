//! `POST /streams/v1/queries` (http-api.md §19): register a stream query by
//! name, or find it. A name registered with another `config_hash` is a 409
//! that says so, unless `reset: true`, which stores the new hash and deletes
//! the query's state (only on a mismatch: the SDK documents `reset` as "wipe
//! existing state if config_hash mismatches", so a restart with the same
//! pipeline keeps its state either way).
//!
//! `GET /streams/v1/queries` (our addition, READ_ONLY by the GET rule of
//! §21) lists the tenant's queries with their partitions, state rows and last
//! cycle, for the dashboard's streams view.

use super::super::params;
use super::super::reply::{json, ok_json};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// A required non-empty string field.
fn required<'a>(m: &'a serde_json::Map<String, Value>, f: &str) -> Result<&'a str, ApiError> {
    match m.get(f) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(ApiError::BadRequest(format!("{f} is required")))
        }
        Some(_) => Err(ApiError::BadRequest(format!("{f} must be a string"))),
    }
}

/// Handles `POST /streams/v1/queries`.
pub async fn register(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let name = required(&body, "name")?;
    params::check_name(name, "name")?;
    let source = required(&body, "source_queue")?;
    params::check_name(source, "source_queue")?;
    let hash = required(&body, "config_hash")?;
    if hash.len() > 512 || hash.contains('\0') {
        return Err(ApiError::BadRequest(
            "config_hash must be at most 512 bytes without \\u0000".into(),
        ));
    }
    let sink = params::opt_str(&body, "sink_queue", "sink_queue")?.filter(|s| !s.is_empty());
    if let Some(s) = sink {
        params::check_name(s, "sink_queue")?;
    }
    let reset = match body.get("reset") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::BadRequest("reset must be a boolean".into())),
    };
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let arg = json!({"tenant": tenant, "name": name, "source_queue": source,
                     "sink_queue": sink, "config_hash": hash, "reset": reset});
    let r = match shard.db.call(Proc::StreamsRegister, arg).await {
        Ok(r) => r,
        // the tenant's queen_streams.quota (a grant, not a bad request)
        Err(StoreError::Db(m)) if m.starts_with("streams quota reached") => {
            return Ok(json(403, &json!({"success": false, "error": m})));
        }
        Err(e) => return Err(e.into()),
    };
    if r["conflict"] == true {
        let error = format!(
            "config_hash mismatch: query {name:?} is registered with config_hash {} and this \
             request has {hash}; the stored state belongs to the other pipeline. Send reset: \
             true to store the new hash and delete the query's state, or use another name",
            r["stored_hash"].as_str().unwrap_or("")
        );
        return Ok(json(
            409,
            &json!({"success": false, "query_id": r["query_id"], "name": name, "error": error}),
        ));
    }
    Ok(ok_json(&json!({
        "success": true, "query_id": r["query_id"], "name": r["name"],
        "config_hash": r["config_hash"], "fresh": r["fresh"], "reset": r["reset"],
    })))
}

/// Handles `GET /streams/v1/queries`.
pub async fn list(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let r = shard
        .db
        .call(Proc::StreamsOverview, json!({ "tenant": tenant }))
        .await?;
    Ok(ok_json(&r))
}
