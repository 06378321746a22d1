//! Status and analytics endpoints the dashboard reads (http-api.md §12).
//! Runs on the shards; each view is one `queen.status_view` call
//! (sql/functions/status.sql) on a DB thread, plus the figures only this process
//! knows (request counters, shards, parked pops) read from the metrics board.
//!
//! Decisions: counts come from `queen.pcounts` (live for scopes of at most
//! 1,000 partitions, else the stats roll-up, whose age is `statsAge`); time
//! series come from the roll-up's per-queue, per-minute history, so a series
//! starts with the first roll-up. `GET /status/queues` is paged (`limit`
//! default 100, at most 1000); `/status/queues/{queue}/messages` is the message
//! listing's page for that queue (`limit` default 50) as a bare array. A bad
//! `from`/`to`/`limit`/`offset`/`interval` is a 400 naming it. The
//! `workers` figure is this broker's shards; `queue-parked-replicas` reports
//! this broker's parked long polls (peers report their own).
//! `errors.ackFailed` counts the ack items this broker answered with
//! `success: false` since it started (unknown message, lost lease: the ack
//! itself failed), beside `dbErrors` and `requests`, which are this broker's
//! too; consumer-reported failures are in `dlqMessages` and the series'
//! `failed`. `/status/queues/{queue}` lists one page of partitions (see
//! [`DETAIL_PARTITIONS_DEFAULT`]) with `pagination`; its totals cover the queue.

use super::admin;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;

/// Queues per page of `/status/queues` when `limit` is absent (spec default).
const QUEUES_DEFAULT_LIMIT: i64 = 100;
/// Largest page of `/status/queues` and of the per-queue message page.
const MAX_LIMIT: i64 = 1000;
/// Messages per page of `/status/queues/{queue}/messages` (spec default).
const MESSAGES_DEFAULT_LIMIT: i64 = 50;
/// Partitions per page of a queue's detail views (`/status/queues/{queue}`,
/// `/resources/queues/{queue}`) when `limit` is absent: every partition of an
/// ordinary queue, and ~0.1 s of DB work for the first page of a huge one.
pub const DETAIL_PARTITIONS_DEFAULT: i64 = 1000;
/// Largest partition page of the detail views (as the lagging list).
pub const DETAIL_PARTITIONS_MAX: i64 = 10_000;
/// `interval` values of `/status/analytics`.
const INTERVALS: &[&str] = &["minute", "hour", "day"];

/// The common filters of §12 (`from`, `to`, `queue`, `namespace`, `task`).
fn common(req: &Request, view: &str) -> Result<Map<String, Value>, ApiError> {
    let mut m = Map::new();
    m.insert("view".into(), json!(view));
    m.insert("tenant".into(), json!(admin::tenant(req)));
    m.insert("from".into(), json!(admin::iso_param(req, "from")?));
    m.insert("to".into(), json!(admin::iso_param(req, "to")?));
    for name in ["queue", "namespace", "task", "hostname", "workerId"] {
        m.insert(name.into(), json!(admin::q(req, name)));
    }
    Ok(m)
}

/// Runs one view.
async fn view(shard: &Rc<Shard>, arg: Map<String, Value>) -> Result<Value, ApiError> {
    Ok(shard.db.call(Proc::StatusView, Value::Object(arg)).await?)
}

/// `GET /api/v1/status`.
pub async fn status(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let mut r = view(shard, common(req, "status")?).await?;
    let board = &shard.counters.board;
    let push_req = board.sum(|s| &s.push_requests);
    let push_msgs = board.sum(|s| &s.push_messages);
    if let Some(m) = r.get_mut("messages").and_then(Value::as_object_mut) {
        m.insert(
            "requests".into(),
            json!({"push": push_req, "pop": board.sum(|s| &s.pop_requests),
                   "ack": board.sum(|s| &s.ack_requests)}),
        );
        // messages per push request (how well producers batch)
        let eff = if push_req == 0 {
            0.0
        } else {
            (push_msgs as f64 / push_req as f64 * 100.0).round() / 100.0
        };
        m.insert("batchEfficiency".into(), json!(eff));
    }
    let dlq = r["deadLetterQueue"]["totalMessages"].clone();
    if let Some(o) = r.as_object_mut() {
        o.insert("workers".into(), json!(board.shards.len()));
        o.insert(
            "errors".into(),
            json!({"dbErrors": board.sum(|s| &s.errors),
                   "ackFailed": board.sum(|s| &s.ack_failed),
                   "dlqMessages": dlq}),
        );
    }
    Ok(ok_json(&r))
}

/// `GET /api/v1/status/queues`.
pub async fn queues(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, QUEUES_DEFAULT_LIMIT, MAX_LIMIT)?;
    let mut arg = common(req, "queues")?;
    arg.insert("limit".into(), json!(limit));
    arg.insert("offset".into(), json!(offset));
    Ok(ok_json(&view(shard, arg).await?))
}

/// `GET /api/v1/status/queues/{queue}`: the queue with one page of its
/// partitions (`limit` default [`DETAIL_PARTITIONS_DEFAULT`], `offset`;
/// `queen.status_queue` in sql/functions/status.sql) and whole-queue totals.
pub async fn queue(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, DETAIL_PARTITIONS_DEFAULT, DETAIL_PARTITIONS_MAX)?;
    let arg = json!({"tenant": admin::tenant(req), "queue": queue,
                     "limit": limit, "offset": offset});
    let mut r = shard.db.call(Proc::StatusQueue, arg).await?;
    if r["found"] != true {
        return Err(ApiError::NotFound("Queue not found".into()));
    }
    if let Some(o) = r.as_object_mut() {
        o.remove("found");
    }
    Ok(ok_json(&r))
}

/// `GET /api/v1/status/queues/{queue}/messages`.
pub async fn queue_messages(
    shard: &Rc<Shard>,
    req: &Request,
    queue: &str,
) -> Result<Response, ApiError> {
    let (limit, offset) = admin::paging(req, MESSAGES_DEFAULT_LIMIT, MAX_LIMIT)?;
    let arg = json!({
        "tenant": admin::tenant(req), "queue": queue,
        "from": admin::iso_param(req, "from")?, "to": admin::iso_param(req, "to")?,
        "limit": limit, "offset": offset,
    });
    let r = shard.db.call(Proc::MsgList, arg).await?;
    Ok(ok_json(&r.get("messages").cloned().unwrap_or(json!([]))))
}

/// `GET /api/v1/status/analytics`.
pub async fn analytics(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let mut arg = common(req, "analytics")?;
    let interval = admin::q(req, "interval").unwrap_or_else(|| "hour".into());
    if !INTERVALS.contains(&interval.as_str()) {
        return Err(ApiError::BadRequest(format!(
            "interval must be one of {}",
            INTERVALS.join(", ")
        )));
    }
    arg.insert("interval".into(), json!(interval));
    Ok(ok_json(&view(shard, arg).await?))
}

/// The `GET /api/v1/analytics/*` views answered by SQL alone.
pub async fn analytics_view(
    shard: &Rc<Shard>,
    req: &Request,
    name: &str,
) -> Result<Response, ApiError> {
    let v = match name {
        "system-metrics" => "system_metrics",
        "queue-lag" => "queue_lag",
        "queue-ops" => "queue_ops",
        "retention" => "retention",
        "postgres-stats" => "postgres",
        _ => return Err(ApiError::NoSuchRoute),
    };
    Ok(ok_json(&view(shard, common(req, v)?).await?))
}

/// `GET /api/v1/analytics/worker-metrics`: the roll-up series plus this
/// broker's request counters per shard.
pub async fn worker_metrics(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let mut r = view(shard, common(req, "worker_metrics")?).await?;
    let board = &shard.counters.board;
    let workers: Vec<Value> = board
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({"workerId": format!("{}:{i}", shard.cfg.server_id), "shard": i,
                   "requests": s.requests.load(Relaxed),
                   "pushMessages": s.push_messages.load(Relaxed),
                   "popMessages": s.pop_messages.load(Relaxed),
                   "ackMessages": s.ack_messages.load(Relaxed),
                   "errors": s.errors.load(Relaxed),
                   "parked": s.parked.load(Relaxed)})
        })
        .collect();
    if let Some(o) = r.as_object_mut() {
        if let Some(sum) = o.get_mut("summary").and_then(Value::as_object_mut) {
            sum.insert("requests".into(), json!(board.sum(|s| &s.requests)));
            sum.insert("workers".into(), json!(workers.len()));
        }
        o.insert("workers".into(), Value::Array(workers));
    }
    Ok(ok_json(&r))
}

/// `GET /api/v1/analytics/queue-parked-replicas`: this broker's parked pops.
pub async fn parked_replicas(shard: &Rc<Shard>, _req: &Request) -> Result<Response, ApiError> {
    let board = &shard.counters.board;
    let per_shard: Vec<Value> = board
        .shards
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"shard": i, "parked": s.parked.load(Relaxed)}))
        .collect();
    Ok(ok_json(&json!({
        "replicas": [{"workerId": shard.cfg.server_id, "hostname": shard.cfg.server_id,
                      "port": shard.cfg.http_addr.port(),
                      "parked": board.sum(|s| &s.parked), "shards": per_shard}],
        "replicaCount": 1,
    })))
}
