//! `POST /streams/v1/cycle` (http-api.md §19): one step of a stream on one
//! source partition, all or nothing, in one DB round trip and one
//! transaction (`queen.streams_cycle`): the (query, partition) advisory lock,
//! the state upserts and deletes, the sink pushes, then the source ack.
//!
//! Sink pushes go the way of every push (`push_items` mints UUIDv7
//! ids and checks the item, `seal` stamps the token's subject and encrypts
//! payloads of encrypted queues, `queen.push_items` stores them with the
//! transactionId dedup), and after the commit each sink queue gets the
//! `pushed` notice that wakes its long-polling consumers on every shard and
//! peer. Any failure answers 200 `{success: false, error}` with nothing
//! applied: a bad field here, or the procedure's RAISE (a foreign or expired
//! lease, an unknown query) rolling the statement back. An unreachable
//! PostgreSQL is a 503, which the SDK retries.

use super::super::{params, push_items, seal};
use super::{check_key, partition_id, query_id, refused};
use crate::error::ApiError;
use crate::mesh::Notice;
use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Instant;

/// Most state ops in one cycle.
const MAX_STATE_OPS: usize = 10_000;
/// Most sink pushes in one cycle (as many as a transaction's operations).
const MAX_PUSH_ITEMS: usize = 10_000;

/// Handles `POST /streams/v1/cycle`; counts the cycle and its latency.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let started = Instant::now();
    let out = run(shard, req).await;
    if let Ok((_, applied)) = &out {
        shard
            .counters
            .mine()
            .streams
            .observe(*applied, started.elapsed());
    }
    out.map(|(r, _)| r)
}

/// The cycle; the answer and whether it applied.
async fn run(shard: &Rc<Shard>, req: &Request) -> Result<(Response, bool), ApiError> {
    let mut body = params::object_body(req)?;
    // Taken out, not copied: the items are the bulk of the body.
    let raw_items = body.remove("push_items");
    let mut arg = match parse(&body) {
        Ok(a) => a,
        Err(e) => return Ok((refused(e), false)),
    };
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let mut items = match raw_items {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() <= MAX_PUSH_ITEMS => match push_items::from_values(a) {
            Ok(items) => items,
            Err(e) => return Ok((refused(format!("push_items: {e}")), false)),
        },
        Some(Value::Array(_)) => {
            return Ok((
                refused(format!("push_items holds at most {MAX_PUSH_ITEMS} items")),
                false,
            ))
        }
        Some(_) => return Ok((refused("push_items must be an array"), false)),
    };
    if !items.is_empty() && shard.spool.push_paused.get() {
        // A cycle cannot be spooled (its pushes commit with its state and
        // ack), and push maintenance keeps pushes out of PostgreSQL.
        return Ok((
            refused("push maintenance is on: cycles with sink pushes wait until it ends"),
            false,
        ));
    }
    seal::seal(shard, req, &tenant, &mut items).await;
    let sinks: BTreeSet<String> = items.iter().map(|i| i.queue.clone()).collect();
    arg["tenant"] = json!(tenant);
    arg["push_items"] = json!(items);
    match shard.db.call(Proc::StreamsCycle, arg).await {
        Ok(mut r) => {
            for q in sinks {
                shard.notify(Notice::Pushed { queue: q });
            }
            count_pushes(shard, &r["push_results"]);
            r["success"] = json!(true);
            Ok((super::super::reply::ok_json(&r), true))
        }
        Err(StoreError::Db(m)) => Ok((refused(m), false)),
        Err(e) => Err(e.into()),
    }
}

/// The per-queue push counters for the sink pushes a cycle stored.
fn count_pushes(shard: &Shard, results: &Value) {
    let results = results.as_array().map_or(&[][..], Vec::as_slice);
    let queued = results.iter().filter(|r| r["status"] == "queued");
    shard.counters.pushed(queued.clone().count());
    shard
        .counters
        .pushed_to(queued.filter_map(|r| r["queue"].as_str().map(|q| (q, 1))));
}

/// Checks everything of the body but the push items and builds the
/// procedure's argument (without tenant and items).
fn parse(body: &Map<String, Value>) -> Result<Value, String> {
    let qid = query_id(body)?;
    let pid = partition_id(body)?;
    let group = match body.get("consumer_group") {
        None | Some(Value::Null) => "__QUEUE_MODE__",
        Some(Value::String(g)) => {
            params::check_group(g).map_err(|e| format!("consumer_group: {e}"))?;
            g.as_str()
        }
        Some(_) => return Err("consumer_group must be a string".into()),
    };
    let ops = match body.get("state_ops") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() <= MAX_STATE_OPS => a.clone(),
        Some(Value::Array(_)) => {
            return Err(format!("state_ops holds at most {MAX_STATE_OPS} ops"))
        }
        Some(_) => return Err("state_ops must be an array".into()),
    };
    for (i, op) in ops.iter().enumerate() {
        check_op(op).map_err(|e| format!("state_ops[{i}]: {e}"))?;
    }
    let ack = match body.get("ack") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Object(a)) => check_ack(a)?,
        Some(_) => return Err("ack must be an object or null".into()),
    };
    let release = match body.get("release_lease") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("release_lease must be a boolean".into()),
    };
    Ok(json!({"query_id": qid, "partition_id": pid, "group": group,
              "state_ops": ops, "ack": ack, "release_lease": release}))
}

/// One state op: `{type: "upsert", key, value}` or `{type: "delete", key}`.
fn check_op(op: &Value) -> Result<(), String> {
    let Value::Object(m) = op else {
        return Err("must be an object".into());
    };
    match m.get("key") {
        Some(Value::String(k)) => check_key(k, "key")?,
        _ => return Err("key must be a string".into()),
    }
    match m.get("type").and_then(Value::as_str) {
        Some("upsert") => match m.get("value") {
            None => Err("an upsert needs a value".into()),
            Some(v) => params::check_storable(v, "value").map_err(|e| e.to_string()),
        },
        Some("delete") => Ok(()),
        _ => Err("type must be \"upsert\" or \"delete\"".into()),
    }
}

/// The source ack: `{transactionId, leaseId, status?, count?}`.
fn check_ack(a: &Map<String, Value>) -> Result<Value, String> {
    let txid = match a.get("transactionId") {
        Some(Value::String(t)) if !t.is_empty() && t.len() <= 512 && !t.contains('\0') => t,
        _ => return Err("ack.transactionId must be a non-empty string".into()),
    };
    let lease = match a.get("leaseId") {
        Some(Value::String(l)) if crate::ids::is_uuid(l) => l,
        _ => return Err("ack.leaseId must be the lease's UUID".into()),
    };
    let status = match a.get("status") {
        None | Some(Value::Null) => "completed",
        Some(Value::String(s)) => match s.as_str() {
            "completed" | "success" | "failed" | "dlq" => s.as_str(),
            _ => return Err("ack.status must be completed, success, failed or dlq".into()),
        },
        Some(_) => return Err("ack.status must be a string".into()),
    };
    let count = match a.get("count") {
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_u64() {
            Some(n @ 1..=100_000) => n,
            _ => return Err("ack.count must be an integer from 1 to 100000".into()),
        },
    };
    Ok(json!({"transactionId": txid, "leaseId": lease, "status": status, "count": count}))
}
