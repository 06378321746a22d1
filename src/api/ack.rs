//! `POST /api/v1/ack` and `POST /api/v1/ack/batch` (http-api.md §5). Both
//! go to `queen.ack_typed` through the shard's ack lane, which fuses
//! concurrent requests into one call and answers each from its own slice; a
//! refused ack (unknown message, expired lease) is `success: false` in its
//! slot with HTTP 200.

use super::reply::ok_json;
use super::{params, pop::QUEUE_MODE};
use crate::error::ApiError;
use crate::shard::Shard;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Most acknowledgements in one batch request.
const MAX_ACKS: usize = 10_000;
/// The statuses an ack may carry.
const STATUSES: &[&str] = &["completed", "success", "failed", "dlq", "retry"];

/// One validated acknowledgement, as `queen.ack_batch` takes one (sent to `queen.ack_typed` as arrays). `default_group`
/// applies when the item names none; `label` prefixes field names in errors.
pub fn parse_ack(
    m: &Map<String, Value>,
    default_group: Option<&str>,
    label: &str,
) -> Result<Value, ApiError> {
    let txid = match m.get("transactionId") {
        Some(Value::String(t)) if t.contains('\0') => {
            return Err(ApiError::BadRequest(format!(
                "{label}transactionId must not contain \\u0000"
            )))
        }
        Some(Value::String(t)) if !t.is_empty() => t,
        _ => {
            return Err(ApiError::BadRequest(format!(
                "{label}transactionId is required"
            )))
        }
    };
    let pid = match m.get("partitionId") {
        Some(Value::String(p)) if !p.is_empty() => p,
        _ => {
            return Err(ApiError::BadRequest(format!(
                "{label}partitionId is required to ensure message uniqueness"
            )))
        }
    };
    if !crate::ids::is_uuid(pid) {
        return Err(ApiError::BadRequest(format!(
            "{label}partitionId must be a UUID"
        )));
    }
    let status = params::opt_str(m, "status", &format!("{label}status"))?.unwrap_or("completed");
    if !STATUSES.contains(&status) {
        return Err(ApiError::BadRequest(format!(
            "{label}status must be one of {}",
            STATUSES.join(", ")
        )));
    }
    let group = params::opt_str(m, "consumerGroup", &format!("{label}consumerGroup"))?
        .or(default_group)
        .unwrap_or(QUEUE_MODE);
    params::check_group(group)?;
    let lease =
        params::opt_str(m, "leaseId", &format!("{label}leaseId"))?.filter(|l| !l.is_empty());
    if lease.is_some_and(|l| !crate::ids::is_uuid(l)) {
        return Err(ApiError::BadRequest(format!(
            "{label}leaseId must be a UUID"
        )));
    }
    let error = params::opt_str(m, "error", &format!("{label}error"))?;
    Ok(json!({
        "transactionId": txid, "partitionId": pid, "status": status,
        "group": group, "leaseId": lease, "error": error,
    }))
}

/// Handles `POST /api/v1/ack`.
pub async fn handle_one(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let item = parse_ack(&body, None, "")?;
    run(shard, req, vec![item]).await
}

/// Handles `POST /api/v1/ack/batch`.
pub async fn handle_batch(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let Some(Value::Array(acks)) = body.get("acknowledgments") else {
        return Err(ApiError::BadRequest(
            "acknowledgments array is required".into(),
        ));
    };
    if acks.len() > MAX_ACKS {
        return Err(ApiError::BadRequest(format!(
            "acknowledgments must hold at most {MAX_ACKS} items"
        )));
    }
    let group = params::opt_str(&body, "consumerGroup", "consumerGroup")?;
    let mut items = Vec::with_capacity(acks.len());
    for (i, a) in acks.iter().enumerate() {
        let Value::Object(m) = a else {
            return Err(ApiError::BadRequest(format!(
                "acknowledgments[{i}] must be an object"
            )));
        };
        items.push(parse_ack(m, group, &format!("acknowledgments[{i}]."))?);
    }
    if items.is_empty() {
        return Ok(ok_json(&json!([])));
    }
    run(shard, req, items).await
}

async fn run(shard: &Rc<Shard>, req: &Request, items: Vec<Value>) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    // Fused with the concurrent acks of this shard (src/shard/ack_lanes.rs).
    let result = shard.ack_lanes.ack(&shard.db, &tenant, items).await?;
    shard.counters.acked(&result);
    let Value::Array(results) = result else {
        return Err(ApiError::Internal(
            "ack_batch returned an unexpected shape".into(),
        ));
    };
    let out: Vec<Value> = results
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            if let Value::Object(o) = &mut r {
                o.insert("index".into(), json!(i));
            }
            r
        })
        .collect();
    Ok(ok_json(&Value::Array(out)))
}
