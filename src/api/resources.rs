//! Resource catalogue (http-api.md §8): queues, one queue, depth, delete,
//! namespaces, tasks, overview, partitions and clear. Runs on the shards;
//! each call is one `queen.res_*` / `queen.queue_clear` procedure
//! (sql/functions/resources.sql) on a DB thread.
//!
//! Decisions: counts come from index-only ranges per partition, relative to
//! the queue-mode cursor (else the furthest-behind group), for scopes of at
//! most 1,000 partitions; larger scopes read the stats roll-up (sql/functions/stats.sql,
//! src/jobs/stats.rs) and report its age as `statsAge` (0 when live). `GET /resources/partitions` is paged (`limit`
//! default 100, at most 1000) and a bad `limit`/`offset` is a 400 naming it.
//! `GET /resources/queues/{queue}` lists one page of partitions (`limit`
//! default 1,000, at most 10,000, `offset`; the spec is silent) with
//! `pagination{limit, offset, total}`; its `totals` cover the whole queue.
//! Deleting a queue is one cascading statement; a later push to the same name
//! creates a fresh queue (push resolves names in SQL, shards cache no ids).
//! The deletion is broadcast with the existing notices (`Configured`: drop
//! cached settings; `Pushed`: parked pops recheck), so peers of any version
//! understand it and no new mesh frame kind is needed.

use super::admin;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Partitions per page when `limit` is absent.
const PARTITIONS_DEFAULT_LIMIT: i64 = 100;
/// Largest partitions page (bounded work per request).
const PARTITIONS_MAX_LIMIT: i64 = 1000;

fn queue_not_found() -> ApiError {
    ApiError::NotFound("Queue not found".into())
}

/// Drops the procedure's `found` flag (404 when false).
fn found(mut r: Value) -> Result<Value, ApiError> {
    if r["found"] != true {
        return Err(queue_not_found());
    }
    if let Value::Object(o) = &mut r {
        o.remove("found");
        o.remove("partitionFound");
    }
    Ok(r)
}

/// `GET /api/v1/resources/queues`.
pub async fn queues(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req), "namespace": admin::q(req, "namespace"),
                     "task": admin::q(req, "task")});
    Ok(ok_json(&shard.db.call(Proc::ResQueues, arg).await?))
}

/// `GET /api/v1/resources/queues/{queue}`: one page of partitions (`limit`,
/// `offset`, `queen.res_queue` in sql/functions/resources.sql) and whole-queue totals.
pub async fn queue(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    use super::status::{DETAIL_PARTITIONS_DEFAULT, DETAIL_PARTITIONS_MAX};
    let (limit, offset) = admin::paging(req, DETAIL_PARTITIONS_DEFAULT, DETAIL_PARTITIONS_MAX)?;
    let arg = json!({"tenant": admin::tenant(req), "queue": queue,
                     "limit": limit, "offset": offset});
    Ok(ok_json(&found(shard.db.call(Proc::ResQueue, arg).await?)?))
}

/// `DELETE /api/v1/resources/queues/{queue}`.
pub async fn delete_queue(
    shard: &Rc<Shard>,
    req: &Request,
    queue: &str,
) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req), "queue": queue});
    let r = shard.db.call(Proc::ResQueueDelete, arg).await?;
    let existed = r["existed"] == true;
    if existed {
        // Broadcast (http-api.md §8): every shard and mesh peer drops its cached
        // settings of the queue (a later push re-creates it with defaults), and
        // pops parked on it recheck now instead of on their timer.
        shard.notify(crate::mesh::Notice::Configured {
            tenant: admin::tenant(req),
            queue: queue.to_string(),
        });
        shard.notify(crate::mesh::Notice::Pushed {
            queue: queue.to_string(),
        });
    }
    // The delete is idempotent (issue 15): a queue that was not there is
    // deleted too; `existed` says whether there was one (the JS client's
    // `delete()` checks `deleted === true`).
    Ok(ok_json(
        &json!({"deleted": true, "queue": queue, "existed": existed}),
    ))
}

/// `GET /api/v1/resources/queues/{queue}/depth`.
pub async fn depth(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req), "queue": queue,
                     "group": admin::q(req, "group")});
    Ok(ok_json(&found(shard.db.call(Proc::ResDepth, arg).await?)?))
}

/// `GET /api/v1/resources/namespaces`.
pub async fn namespaces(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req)});
    Ok(ok_json(&shard.db.call(Proc::ResNamespaces, arg).await?))
}

/// `GET /api/v1/resources/tasks`.
pub async fn tasks(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req)});
    Ok(ok_json(&shard.db.call(Proc::ResTasks, arg).await?))
}

/// `GET /api/v1/resources/overview`.
pub async fn overview(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let arg = json!({"tenant": admin::tenant(req)});
    Ok(ok_json(&shard.db.call(Proc::ResOverview, arg).await?))
}

/// `GET /api/v1/resources/partitions`.
pub async fn partitions(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, PARTITIONS_DEFAULT_LIMIT, PARTITIONS_MAX_LIMIT)?;
    let arg = json!({"tenant": admin::tenant(req), "queue": admin::q(req, "queue"),
                     "limit": limit, "offset": offset});
    Ok(ok_json(&shard.db.call(Proc::ResPartitions, arg).await?))
}

/// `DELETE /api/v1/queues/{queue}/clear`.
pub async fn clear(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    let partition = admin::q(req, "partition");
    let arg = json!({"tenant": admin::tenant(req), "queue": queue, "partition": partition});
    let r = shard.db.call(Proc::QueueClear, arg).await?;
    if r["found"] != true {
        return Err(queue_not_found());
    }
    if r["partitionFound"] != true {
        return Err(ApiError::NotFound("Partition not found".into()));
    }
    Ok(ok_json(
        &json!({"success": true, "queue": queue, "partition": partition,
                       "deleted": r["deleted"]}),
    ))
}

/// `POST /api/v1/stats/refresh`: rescans every partition into the stats
/// roll-up now (bounded rounds, src/jobs/stats.rs), bypassing its interval.
pub async fn stats_refresh(shard: &Rc<Shard>, _req: &Request) -> Result<Response, ApiError> {
    let r = crate::jobs::stats::cycle(shard, true).await?;
    Ok(ok_json(
        &json!({"success": true, "partitions": r.partitions,
                       "rounds": r.rounds, "skipped": r.skipped}),
    ))
}
