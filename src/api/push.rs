//! `POST /api/v1/push` (http-api.md §3): validates every item, mints ids
//! (both in `push_items`), and hands the request to the shard's push lane, which fuses it with its
//! neighbours into one transaction and answers it from its own slice.
//!
//! Any invalid item rejects the whole request with a 400 naming the field,
//! before anything reaches PostgreSQL.

use super::push_items;
use super::reply::json;
use crate::error::ApiError;
use crate::metrics::stages::Stage;
use crate::shard::Shard;
use crate::store::{PushItem, PushStatus, StoreError};
use bytes::Bytes;
use serde::Serialize;
use serde_json::json;
use shards::http::{Request, Response};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;
use uuid::Uuid;

/// Handles `POST /api/v1/push`.
pub async fn handle(shard: &Rc<Shard>, req: &mut Request) -> Result<Response, ApiError> {
    let started = Instant::now();
    // Read straight from the body bytes: no JSON tree of the request is
    // ever built, and each payload stays a slice of the body (no copy) while
    // the batch is in flight; the body goes when its last item does.
    let body = Bytes::from(std::mem::take(&mut req.body));
    let raw = push_items::from_body(&body)?;
    drop(body);
    let req: &Request = req;
    if raw.is_empty() {
        return Ok(json(201, &json!([])));
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let mut items = push_items::stored_all(raw)?;
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
    fn of(items: &[PushItem]) -> Echo {
        let mut e = Echo {
            pairs: Vec::new(),
            items: Vec::with_capacity(items.len()),
            counts: Vec::new(),
        };
        // pair index by names; a run of items on one pair skips the lookup
        let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
        let mut last: Option<(&str, &str, usize)> = None;
        for i in items {
            let (queue, partition) = (i.queue.as_str(), i.partition.as_str());
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
            e.items.push((k, i.txid.clone()));
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
