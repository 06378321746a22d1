//! `POST /api/v1/ack` and `POST /api/v1/ack/batch` (http-api.md §5). Both
//! go to `queen.ack_typed` through the shard's ack lane, which fuses
//! concurrent requests into one call and answers each from its own slice; a
//! refused ack (unknown message, expired lease) is `success: false` in its
//! slot with HTTP 200.

use super::reply::{ok_json, ok_typed};
use super::{params, pop::QUEUE_MODE};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::ack_fused::AckItem;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::fmt;
use std::rc::Rc;
use uuid::Uuid;

/// Most acknowledgements in one batch request.
const MAX_ACKS: usize = 10_000;
/// The statuses an ack may carry.
const STATUSES: &[&str] = &["completed", "success", "failed", "dlq", "retry"];

/// One validated acknowledgement. `default_group` applies when the item
/// names none; `label` prefixes field names in errors (only built for one).
pub fn parse_ack(
    m: &Map<String, Value>,
    default_group: Option<&str>,
    label: &dyn fmt::Display,
) -> Result<AckItem, ApiError> {
    let bad = |what: &str| ApiError::BadRequest(format!("{label}{what}"));
    let txid = match m.get("transactionId") {
        Some(Value::String(t)) if t.contains('\0') => {
            return Err(bad("transactionId must not contain \\u0000"))
        }
        Some(Value::String(t)) if !t.is_empty() => t,
        _ => return Err(bad("transactionId is required")),
    };
    let pid = match m.get("partitionId") {
        Some(Value::String(p)) if !p.is_empty() => p,
        _ => return Err(bad("partitionId is required to ensure message uniqueness")),
    };
    let pid = uuid_of(pid).ok_or_else(|| bad("partitionId must be a UUID"))?;
    let text = |k: &str| match m.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(bad(&format!("{k} must be a string"))),
    };
    let status = text("status")?.unwrap_or("completed");
    let Some(status) = STATUSES.iter().copied().find(|s| *s == status) else {
        return Err(bad(&format!(
            "status must be one of {}",
            STATUSES.join(", ")
        )));
    };
    let group = text("consumerGroup")?
        .or(default_group)
        .unwrap_or(QUEUE_MODE);
    params::check_group(group)?;
    let lease = match text("leaseId")?.filter(|l| !l.is_empty()) {
        Some(l) => Some(uuid_of(l).ok_or_else(|| bad("leaseId must be a UUID"))?),
        None => None,
    };
    Ok(AckItem {
        txid: txid.clone(),
        pid,
        status,
        group: group.to_string(),
        lease,
        error: text("error")?.map(str::to_string),
    })
}

/// The prefix of a batch item's field names in errors, written only when
/// one is (`acknowledgments[i].`).
struct Label(usize);

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "acknowledgments[{}].", self.0)
    }
}

/// A uuid in its canonical 36-character form (as `crate::ids::is_uuid`).
fn uuid_of(s: &str) -> Option<Uuid> {
    Uuid::parse_str(s).ok().filter(|_| s.len() == 36)
}

/// An acknowledgement as a transaction's `ack` operation names it
/// (`queen.transaction`, sql/functions/txn.sql).
pub fn txn_operation(a: &AckItem) -> Value {
    json!({
        "type": "ack", "transactionId": a.txid, "partitionId": a.pid, "status": a.status,
        "group": a.group, "leaseId": a.lease, "error": a.error,
    })
}

/// Handles `POST /api/v1/ack`.
pub async fn handle_one(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let item = parse_ack(&body, None, &"")?;
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
        items.push(parse_ack(m, group, &Label(i))?);
    }
    if items.is_empty() {
        return Ok(ok_json(&json!([])));
    }
    run(shard, req, items).await
}

async fn run(shard: &Rc<Shard>, req: &Request, items: Vec<AckItem>) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    // Fused with the concurrent acks of this shard (src/shard/ack_lanes.rs).
    let answers = shard.ack_lanes.ack(&shard.db, &tenant, items).await?;
    shard.counters.acked(&answers);
    Ok(ok_typed(&answers))
}
