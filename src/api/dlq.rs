//! `GET /api/v1/dlq` (http-api.md §9), the foundation's listing: filters by
//! queue, consumer group, partition and time, with paging. The operations
//! issue completes the DLQ surface (delete, replay).

use super::params;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Page size when `limit` is absent.
const DEFAULT_LIMIT: i64 = 100;
/// Largest page.
const MAX_LIMIT: i64 = 1000;

/// Handles `GET /api/v1/dlq`.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let limit = params::int_in(req, "limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT);
    let offset = params::int_in(req, "offset", 0, i64::from(i32::MAX))?.unwrap_or(0);
    let q = |n: &str| req.query_param(n).filter(|s| !s.is_empty());
    let (from, to) = (q("from"), q("to"));
    for (name, v) in [("from", &from), ("to", &to)] {
        if v.as_deref()
            .is_some_and(|s| s.len() < 10 || !s.as_bytes()[..4].iter().all(u8::is_ascii_digit))
        {
            return Err(ApiError::BadRequest(format!(
                "{name} must be an ISO-8601 timestamp"
            )));
        }
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let arg = json!({
        "tenant": tenant, "queue": q("queue"), "consumerGroup": q("consumerGroup"),
        "partition": q("partition"), "from": from, "to": to, "limit": limit, "offset": offset,
    });
    let mut r = shard.db.call(Proc::DlqList, arg).await?;
    if let Some(Value::Array(ms)) = r.get_mut("messages") {
        for m in ms {
            if let Value::Object(o) = m {
                crate::crypto::open_message(o);
            }
        }
    }
    Ok(ok_json(&r))
}
