//! Messages and dead letters (http-api.md §9): listing, detail, delete, retry
//! from the DLQ, manual move to the DLQ, DLQ delete and replay by row id.
//! Runs on the shards; each call is one procedure of sql/functions/messages.sql.
//!
//! Decisions: `limit` is 1..=1000 (default 200), `offset` ≥ 0; a bad value is
//! a 400 naming it, as is an unknown `status` or a malformed `from`/`to`. A
//! replay mints a fresh UUIDv7 here and re-pushes under `dlq:<row id>` in the
//! same transaction that deletes the DLQ row, so a repeated replay of the same
//! row finds nothing (404) and a replay racing it is a `duplicate`.

use super::admin;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Page size of the message listing when `limit` is absent (the spec's default).
const LIST_DEFAULT_LIMIT: i64 = 200;
/// Largest page of the message listing (bounded work per request).
const LIST_MAX_LIMIT: i64 = 1000;
/// Statuses the listing can filter on.
const STATUSES: &[&str] = &["pending", "processing", "completed", "dead_letter"];

fn message_not_found() -> ApiError {
    ApiError::NotFound("Message not found".into())
}

fn strip_found(mut r: Value) -> Value {
    if let Value::Object(o) = &mut r {
        o.remove("found");
    }
    r
}

/// `GET /api/v1/messages`.
pub async fn list(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT)?;
    let status = admin::q(req, "status");
    if let Some(s) = &status {
        if !STATUSES.contains(&s.as_str()) {
            return Err(ApiError::BadRequest(format!(
                "status must be one of {}",
                STATUSES.join(", ")
            )));
        }
    }
    let arg = json!({
        "tenant": admin::tenant(req), "queue": admin::q(req, "queue"),
        "partition": admin::q(req, "partition"),
        "namespace": admin::q(req, "ns").or_else(|| admin::q(req, "namespace")),
        "task": admin::q(req, "task"), "status": status,
        "from": admin::iso_param(req, "from")?, "to": admin::iso_param(req, "to")?,
        "limit": limit, "offset": offset,
    });
    Ok(ok_json(&shard.db.call(Proc::MsgList, arg).await?))
}

fn msg_arg(req: &Request, pid: &str, txid: &str) -> Value {
    json!({"tenant": admin::tenant(req), "partitionId": pid, "transactionId": txid})
}

/// Runs `proc` on one message (by partition id and transaction id) and
/// answers 404 when the procedure did not find it.
async fn on_message(
    shard: &Rc<Shard>,
    req: &Request,
    proc: Proc,
    pid: &str,
    txid: &str,
) -> Result<Value, ApiError> {
    let r = shard.db.call(proc, msg_arg(req, pid, txid)).await?;
    if r["found"] != true {
        return Err(message_not_found());
    }
    Ok(r)
}

/// `GET /api/v1/messages/{partitionId}/{transactionId}`.
pub async fn detail(
    shard: &Rc<Shard>,
    req: &Request,
    pid: &str,
    txid: &str,
) -> Result<Response, ApiError> {
    let mut r = strip_found(on_message(shard, req, Proc::MsgDetail, pid, txid).await?);
    // semantics.md §13: decrypted on every read path; `isEncrypted` stays
    // (the detail reports how the row is stored).
    let flagged = r["isEncrypted"] == true;
    for field in ["payload", "data"] {
        if let Some(v) = r.get_mut(field) {
            crate::crypto::open_in_place(crate::crypto::cipher(), v, flagged);
        }
    }
    Ok(ok_json(&r))
}

/// `DELETE /api/v1/messages/{partitionId}/{transactionId}`.
pub async fn delete(
    shard: &Rc<Shard>,
    req: &Request,
    pid: &str,
    txid: &str,
) -> Result<Response, ApiError> {
    on_message(shard, req, Proc::MsgDelete, pid, txid).await?;
    Ok(ok_json(
        &json!({"success": true, "partitionId": pid, "transactionId": txid,
                       "message": "Message deleted"}),
    ))
}

/// `POST /api/v1/messages/{partitionId}/{transactionId}/retry`.
pub async fn retry(
    shard: &Rc<Shard>,
    req: &Request,
    pid: &str,
    txid: &str,
) -> Result<Response, ApiError> {
    if let Some(paused) = maintenance_refusal(shard) {
        return Ok(paused);
    }
    let mut arg = msg_arg(req, pid, txid);
    arg["newId"] = json!(crate::ids::uuid_v7());
    replay(shard, arg).await
}

/// The spec's 503 answer to a replay during push maintenance (http-api.md §9,
/// semantics.md §15): a replay is a push PostgreSQL must take now and is
/// never spooled.
fn maintenance_refusal(shard: &Shard) -> Option<Response> {
    shard.spool.push_paused.get().then(|| {
        super::reply::json(
            503,
            &json!({"success": false, "result": "maintenance",
                    "error": "Push maintenance is on: DLQ replay is paused"}),
        )
        .with_header("Retry-After", "1")
    })
}

/// `POST /api/v1/dlq/{id}/replay`.
pub async fn replay_by_id(
    shard: &Rc<Shard>,
    req: &Request,
    id: &str,
) -> Result<Response, ApiError> {
    if let Some(paused) = maintenance_refusal(shard) {
        return Ok(paused);
    }
    let arg = json!({"tenant": admin::tenant(req), "dlqId": id,
                     "newId": crate::ids::uuid_v7()});
    replay(shard, arg).await
}

async fn replay(shard: &Rc<Shard>, arg: Value) -> Result<Response, ApiError> {
    let r = shard.db.call(Proc::MsgRetry, arg).await?;
    if r["found"] != true {
        return Err(ApiError::NotFound("Dead letter not found".into()));
    }
    let mut out = strip_found(r);
    out["success"] = json!(true);
    Ok(ok_json(&out))
}

/// `POST /api/v1/messages/{partitionId}/{transactionId}/dlq`.
pub async fn to_dlq(
    shard: &Rc<Shard>,
    req: &Request,
    pid: &str,
    txid: &str,
) -> Result<Response, ApiError> {
    on_message(shard, req, Proc::MsgToDlq, pid, txid).await?;
    Ok(ok_json(
        &json!({"success": true, "partitionId": pid, "transactionId": txid,
                       "dlq": true}),
    ))
}

/// `DELETE /api/v1/dlq`.
pub async fn dlq_delete(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let Some(queue) = admin::q(req, "queue") else {
        return Err(ApiError::BadRequest("queue is required".into()));
    };
    let group = admin::q(req, "consumerGroup");
    let arg = json!({"tenant": admin::tenant(req), "queue": queue, "consumerGroup": group});
    let r = shard.db.call(Proc::DlqDelete, arg).await?;
    if r["found"] != true {
        return Err(ApiError::NotFound("Queue not found".into()));
    }
    Ok(ok_json(
        &json!({"success": true, "deleted": r["deleted"], "queue": queue,
                       "consumerGroup": group}),
    ))
}
