//! Message traces (http-api.md §10): record an event on a message, read a
//! message's events, events by trace name, and the names with counts. Runs on
//! the shards; each call is one procedure of sql/functions/traces.sql.
//!
//! Decisions: an unknown message is a 404 `{"success": false, "error":
//! "Message not found"}` (the spec allows it; the client only logs it).
//! Paging of the name listings is validated like every listing (400 naming
//! the parameter).

use super::reply::{json as json_status, ok_json};
use super::{admin, params};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Page size of `by-name` when `limit` is absent (the spec's default).
const BY_NAME_DEFAULT_LIMIT: i64 = 100;
/// Page size of `names` when `limit` is absent (the spec's default).
const NAMES_DEFAULT_LIMIT: i64 = 50;
/// Largest page of either listing.
const MAX_LIMIT: i64 = 1000;

/// `POST /api/v1/traces`.
pub async fn add(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let txid = params::opt_str(&body, "transactionId", "transactionId")?;
    let pid = params::opt_str(&body, "partitionId", "partitionId")?;
    let (Some(txid), Some(pid)) = (txid, pid) else {
        return Err(ApiError::BadRequest(
            "transactionId and partitionId are required".into(),
        ));
    };
    let data = match body.get("data") {
        None | Some(Value::Null) => return Err(ApiError::BadRequest("data is required".into())),
        Some(d) => d.clone(),
    };
    params::check_storable(&data, "data")?;
    let names: Vec<Value> = match body.get("traceNames") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![json!(s)],
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a.clone(),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "traceNames must be a string or an array of strings".into(),
            ))
        }
    };
    let arg = json!({
        "tenant": admin::tenant(req), "transactionId": txid, "partitionId": pid,
        "consumerGroup": params::opt_str(&body, "consumerGroup", "consumerGroup")?,
        "traceNames": names,
        "eventType": params::opt_str(&body, "eventType", "eventType")?.unwrap_or("info"),
        "workerId": params::opt_str(&body, "workerId", "workerId")?,
        "data": data,
    });
    let r = shard.db.call(Proc::TraceAdd, arg).await?;
    if r["found"] != true {
        return Ok(json_status(
            404,
            &json!({"success": false, "error": "Message not found"}),
        ));
    }
    Ok(json_status(
        201,
        &json!({"success": true, "traceId": r["traceId"]}),
    ))
}

/// `GET /api/v1/traces/{partitionId}/{transactionId}`.
pub async fn by_message(
    shard: &Rc<Shard>,
    req: &Request,
    pid: &str,
    txid: &str,
) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req), "partitionId": pid, "transactionId": txid});
    Ok(ok_json(&shard.db.call(Proc::TraceByMessage, arg).await?))
}

/// `GET /api/v1/traces/by-name/{traceName}`.
pub async fn by_name(shard: &Rc<Shard>, req: &Request, name: &str) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, BY_NAME_DEFAULT_LIMIT, MAX_LIMIT)?;
    let arg = json!({"tenant": admin::tenant(req), "name": name, "limit": limit,
                     "offset": offset});
    let mut r = shard.db.call(Proc::TraceByName, arg).await?;
    // semantics.md §13: the message payload is decrypted on every read path
    // (the row carries no flag here, so the envelope's shape decides).
    if let Some(traces) = r.get_mut("traces").and_then(Value::as_array_mut) {
        for t in traces {
            if let Some(payload) = t.get_mut("message_payload") {
                crate::crypto::open_in_place(crate::crypto::cipher(), payload, false);
            }
        }
    }
    Ok(ok_json(&r))
}

/// `GET /api/v1/traces/names`.
pub async fn names(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, NAMES_DEFAULT_LIMIT, MAX_LIMIT)?;
    let arg = json!({"tenant": admin::tenant(req), "limit": limit, "offset": offset});
    Ok(ok_json(&shard.db.call(Proc::TraceNames, arg).await?))
}
