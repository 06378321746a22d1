//! `POST /api/v1/push` (http-api.md §3): validates every item, mints ids,
//! and hands the request to the shard's push lane, which fuses it with its
//! neighbours into one transaction and answers it from its own slice.
//!
//! Any invalid item rejects the whole request with a 400 naming the field,
//! before anything reaches PostgreSQL.

use super::params;
use super::reply::json;
use crate::error::ApiError;
use crate::ids::uuid_v7;
use crate::metrics::stages::Stage;
use crate::shard::Shard;
use crate::store::{PushStatus, StoreError};
use serde::Serialize;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;
use uuid::Uuid;

/// Name of the partition an item without one goes to.
pub const DEFAULT_PARTITION: &str = "Default";

/// One validated item, as the store takes it: `{queue, partition, id, txid,
/// payload}` plus `traceId` when given (`encrypted` and `sub` are set by
/// `seal` only; absent means false / none everywhere downstream).
///
/// Consumes the raw item and keeps its map: the payload is not copied (a
/// fused batch keeps thousands of items alive while it is in flight, and a
/// second copy of every payload tree was most of the broker's peak RSS), and
/// the keys the client sent are reused rather than allocated again.
pub fn stored_item(item: Value, index: usize) -> Result<Value, ApiError> {
    let Value::Object(mut m) = item else {
        return Err(ApiError::BadRequest(format!(
            "items[{index}] must be an object"
        )));
    };
    // Only what the store reads stays; a client's own `encrypted`, `sub`,
    // `id` or `txid` never does.
    m.retain(|k, _| {
        matches!(
            k.as_str(),
            "queue" | "partition" | "transactionId" | "traceId" | "payload"
        )
    });
    match m.get("queue") {
        Some(Value::String(q)) => params::check_name(q, "queue")?,
        _ => return Err(ApiError::BadRequest("Queue must be a string".into())),
    }
    match m.get("partition") {
        None | Some(Value::Null) => {
            m.insert("partition".into(), DEFAULT_PARTITION.into());
        }
        Some(Value::String(p)) => params::check_name(p, "partition")?,
        Some(_) => return Err(ApiError::BadRequest("Partition must be a string".into())),
    }
    let id = uuid_v7();
    let txid = match m.remove("transactionId") {
        None | Some(Value::Null) => id.clone(),
        Some(Value::String(t)) if t.is_empty() => id.clone(),
        Some(Value::String(t)) => {
            if t.len() > 512 || t.contains('\0') {
                return Err(ApiError::BadRequest(
                    "TransactionId must be at most 512 bytes without \\u0000".into(),
                ));
            }
            t
        }
        Some(_) => {
            return Err(ApiError::BadRequest(
                "TransactionId must be a string".into(),
            ))
        }
    };
    match m.get("traceId") {
        None => {}
        Some(Value::Null) => {
            m.remove("traceId");
        }
        Some(Value::String(t)) if crate::ids::is_uuid(t) => {}
        Some(Value::String(_)) => {
            return Err(ApiError::BadRequest("TraceId must be a UUID".into()))
        }
        Some(_) => return Err(ApiError::BadRequest("TraceId must be a string".into())),
    }
    match m.get("payload") {
        Some(payload) => params::check_storable(payload, "payload")?,
        None => {
            m.insert("payload".into(), Value::Object(Map::new()));
        }
    }
    m.insert("id".into(), Value::String(id));
    m.insert("txid".into(), Value::String(txid));
    Ok(Value::Object(m))
}

/// Validates a list of raw items, consuming them.
pub fn stored_items(items: Vec<Value>) -> Result<Vec<Value>, ApiError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, it)| stored_item(it, i))
        .collect()
}

/// Handles `POST /api/v1/push`.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let started = Instant::now();
    // Take the items out of the parsed body and drop the rest, so nothing
    // of the raw request stays alive while the batch is in flight.
    let Some(Value::Array(raw)) = params::object_body(req)?.remove("items") else {
        return Err(ApiError::BadRequest("items array is required".into()));
    };
    if raw.is_empty() {
        return Ok(json(201, &json!([])));
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let mut items = stored_items(raw)?;
    super::seal::seal(shard, req, &tenant, &mut items).await;
    let echo = Echo::of(&items);
    let results = match shard.lane(&tenant).push(items).await {
        Ok(r) => r,
        Err(StoreError::Db(m)) => return Err(ApiError::Internal(m)),
        Err(e) => return Err(e.into()),
    };
    shard.counters.pushed_to(echo.per_pair());
    let out: Vec<ItemAnswer<'_>> = results
        .iter()
        .zip(&echo.items)
        .enumerate()
        .map(|(index, (r, (k, txid)))| {
            let (queue, partition) = &echo.pairs[*k];
            // http-api.md §3: no partition_id / trace_id before PostgreSQL has it.
            let stored = r.status != PushStatus::Buffered;
            ItemAnswer {
                index,
                transaction_id: txid,
                message_id: r.message_id,
                status: r.status.as_str(),
                partition_id: stored.then_some(r.partition_id),
                trace_id: stored.then_some(r.trace_id),
                queue,
                partition,
            }
        })
        .collect();
    let body = serde_json::to_vec(&out).map_err(|e| ApiError::Internal(e.to_string()))?;
    shard.counters.pushed(out.len());
    shard.counters.stage(Stage::Push, started.elapsed());
    Ok(Response::json(201, body))
}

/// One item of the push answer (http-api.md §3), serialised straight from
/// the typed result (no JSON tree per item).
#[derive(Serialize)]
struct ItemAnswer<'a> {
    index: usize,
    transaction_id: &'a str,
    message_id: Option<Uuid>,
    status: &'static str,
    /// Absent (not null) for a buffered item.
    #[serde(skip_serializing_if = "Option::is_none")]
    partition_id: Option<Option<Uuid>>,
    /// Absent (not null) for a buffered item.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<Option<Uuid>>,
    queue: &'a str,
    partition: &'a str,
}

/// What the answer repeats from the request, kept while the items are in
/// flight: each distinct (queue, partition) once (a request's items mostly
/// share one) and each item's transaction id.
struct Echo {
    /// Distinct (queue, partition) pairs, in first-seen order.
    pairs: Vec<(String, String)>,
    /// Per item: its pair and transaction id.
    items: Vec<(usize, String)>,
    /// Per pair: how many items it has.
    counts: Vec<u64>,
}

impl Echo {
    fn of(items: &[Value]) -> Echo {
        let mut e = Echo {
            pairs: Vec::new(),
            items: Vec::with_capacity(items.len()),
            counts: Vec::new(),
        };
        // pair index by names; a run of items on one pair skips the lookup
        let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
        let mut last: Option<(&str, &str, usize)> = None;
        for i in items {
            let queue = i["queue"].as_str().unwrap_or("");
            let partition = i["partition"].as_str().unwrap_or("");
            let k = match last {
                Some((q, p, k)) if q == queue && p == partition => k,
                _ => *seen.entry((queue, partition)).or_insert_with(|| {
                    e.pairs.push((queue.to_string(), partition.to_string()));
                    e.counts.push(0);
                    e.pairs.len() - 1
                }),
            };
            e.counts[k] += 1;
            last = Some((queue, partition, k));
            let txid = i["txid"].as_str().unwrap_or("").to_string();
            e.items.push((k, txid));
        }
        e
    }

    /// Each pair's queue name and item count (for the per-queue counters).
    fn per_pair(&self) -> impl Iterator<Item = (&str, u64)> {
        self.pairs
            .iter()
            .zip(&self.counts)
            .map(|((q, _), n)| (q.as_str(), *n))
    }
}
