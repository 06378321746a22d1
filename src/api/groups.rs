//! Consumer-group administration (http-api.md §11), run on the shards; each
//! call is one `queen.cg_*` procedure (sql/functions/groups.sql) on a DB thread.
//!
//! Decisions where the spec is silent:
//! - The detail lists one page of partitions per queue (`limit` default 1,000,
//!   at most 10,000, `offset`, by partition name) with `pagination{limit,
//!   offset, total}` beside `partitions`: a group on a queue of 10,000
//!   partitions took seconds to answer in full.
//! - An unknown group is a 404 `{"error": "Consumer group not found"}` for the
//!   detail, delete and subscription calls (nothing to show or change). Seek
//!   does not need a known group: an operator may position a group before its
//!   first pop (the cursors it writes are what a later pop reads).
//! - Seek applies to every partition of the queue, also those the group never
//!   consumed (decisions.md); a timestamp seek places the cursor after every
//!   message created at or before the timestamp.
//! - `state` of the list: `Lagging` when `maxTimeLag` > 300 s, `Dead` when
//!   additionally no partition has a live lease and the group consumed nothing
//!   there for an hour, else `Stable`.
//! - `lagging` takes `limit` (default 1000, at most 10,000) and `offset`,
//!   most lagging first; on queues over 1,000 partitions both the list and
//!   `lagging` read the stats roll-up (sql/functions/stats.sql).

use super::reply::ok_json;
use super::{admin, params};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// `minLagSeconds` when absent (the server default of the spec).
const DEFAULT_MIN_LAG_SECONDS: i64 = 3600;
/// Rows of `/consumer-groups/lagging` when `limit` is absent: the most lagging
/// first. Applies when the answer comes from the stats roll-up (over 1,000
/// partitions); 10,000 lagging rows are ~3 MB of JSON and half a second of
/// PostgreSQL time, so an unbounded answer cannot keep the 200 ms bound.
const LAGGING_DEFAULT_LIMIT: i64 = 1000;
/// Largest `limit` of `/consumer-groups/lagging`.
const LAGGING_MAX_LIMIT: i64 = 10_000;

fn not_found_group() -> ApiError {
    ApiError::NotFound("Consumer group not found".into())
}

fn not_found_queue() -> ApiError {
    ApiError::NotFound("Queue not found".into())
}

/// `GET /api/v1/consumer-groups`.
pub async fn list(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let r = shard
        .db
        .call(Proc::CgList, json!({"tenant": admin::tenant(req)}))
        .await?;
    Ok(ok_json(&r))
}

/// `GET /api/v1/consumer-groups/lagging`.
pub async fn lagging(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let min = params::int_in(req, "minLagSeconds", 0, i64::from(i32::MAX))?
        .unwrap_or(DEFAULT_MIN_LAG_SECONDS);
    let (limit, offset) = admin::paging(req, LAGGING_DEFAULT_LIMIT, LAGGING_MAX_LIMIT)?;
    let r = shard
        .db
        .call(
            Proc::CgLagging,
            json!({"tenant": admin::tenant(req), "minLagSeconds": min,
                   "limit": limit, "offset": offset}),
        )
        .await?;
    Ok(ok_json(&r))
}

/// `GET /api/v1/consumer-groups/{group}`.
pub async fn detail(shard: &Rc<Shard>, req: &Request, group: &str) -> Result<Response, ApiError> {
    use super::status::{DETAIL_PARTITIONS_DEFAULT, DETAIL_PARTITIONS_MAX};
    // one page of partitions per queue (`queen.cg_detail`, sql/functions/groups.sql)
    let (limit, offset) = admin::paging(req, DETAIL_PARTITIONS_DEFAULT, DETAIL_PARTITIONS_MAX)?;
    let r = shard
        .db
        .call(
            Proc::CgDetail,
            json!({"tenant": admin::tenant(req), "group": group,
                   "limit": limit, "offset": offset}),
        )
        .await?;
    if r["found"] != true {
        return Err(not_found_group());
    }
    Ok(ok_json(&r["queues"]))
}

/// `DELETE /api/v1/consumer-groups/{group}[/queues/{queue}]`.
pub async fn delete(
    shard: &Rc<Shard>,
    req: &Request,
    group: &str,
    queue: Option<&str>,
) -> Result<Response, ApiError> {
    // The client's default is true; absent means true here as well.
    let meta = req
        .query_param("deleteMetadata")
        .is_none_or(|_| params::flag(req, "deleteMetadata"));
    let r = shard
        .db
        .call(
            Proc::CgDelete,
            json!({"tenant": admin::tenant(req), "group": group, "queue": queue,
                   "deleteMetadata": meta}),
        )
        .await?;
    if r["queueFound"] != true {
        return Err(not_found_queue());
    }
    if r["found"] != true {
        return Err(not_found_group());
    }
    let mut out = json!({"success": true, "consumerGroup": group,
                         "deletedPartitions": r["deletedPartitions"],
                         "metadataDeleted": r["metadataDeleted"]});
    if let Some(q) = queue {
        out["queueName"] = json!(q);
    }
    Ok(ok_json(&out))
}

/// `POST /api/v1/consumer-groups/{group}/subscription`.
pub async fn subscription(
    shard: &Rc<Shard>,
    req: &Request,
    group: &str,
) -> Result<Response, ApiError> {
    let body = params::optional_body(req)?.unwrap_or_default();
    let ts = match body.get("subscriptionTimestamp") {
        Some(Value::String(s)) if admin::is_iso(s) => s.clone(),
        _ => {
            return Err(ApiError::BadRequest(
                "subscriptionTimestamp is required (ISO-8601 timestamp)".into(),
            ))
        }
    };
    let r = shard
        .db
        .call(
            Proc::CgSubscription,
            json!({"tenant": admin::tenant(req), "group": group, "timestamp": ts}),
        )
        .await?;
    if r["rowsUpdated"] == 0 {
        return Err(not_found_group());
    }
    Ok(ok_json(&json!({"success": true, "consumerGroup": group,
                       "newTimestamp": r["newTimestamp"], "rowsUpdated": r["rowsUpdated"]})))
}

/// `POST /api/v1/consumer-groups/{group}/queues/{queue}[/partitions/{partition}]/seek`.
pub async fn seek(
    shard: &Rc<Shard>,
    req: &Request,
    group: &str,
    queue: &str,
    partition: Option<&str>,
) -> Result<Response, ApiError> {
    params::check_group(group)?;
    let body = params::optional_body(req)?.unwrap_or_default();
    let to_end = body.get("toEnd") == Some(&Value::Bool(true));
    let ts = match body.get("timestamp") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if admin::is_iso(s) => Some(s.clone()),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "timestamp must be an ISO-8601 timestamp".into(),
            ))
        }
    };
    if !to_end && ts.is_none() {
        return Err(ApiError::BadRequest(
            "Must specify either 'toEnd': true or 'timestamp'".into(),
        ));
    }
    let r = shard
        .db
        .call(
            Proc::CgSeek,
            json!({"tenant": admin::tenant(req), "group": group, "queue": queue,
                   "partition": partition, "toEnd": to_end,
                   "timestamp": if to_end { None } else { ts.clone() }}),
        )
        .await?;
    if r["queueFound"] != true {
        return Err(not_found_queue());
    }
    if r["partitionFound"] != true {
        return Err(ApiError::NotFound("Partition not found".into()));
    }
    let out = match partition {
        Some(p) => json!({"success": true, "consumerGroup": group, "queueName": queue,
                          "partitionName": p,
                          "updated": r["partitionsUpdated"].as_i64().unwrap_or(0) > 0,
                          "cursorMovedTo": r["cursorMovedTo"]}),
        None => json!({"success": true, "consumerGroup": group, "queueName": queue,
                       "seekToEnd": to_end,
                       "targetTimestamp": if to_end { None } else { ts },
                       "partitionsUpdated": r["partitionsUpdated"]}),
    };
    Ok(ok_json(&out))
}
