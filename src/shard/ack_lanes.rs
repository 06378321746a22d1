//! Ack fusion: the `POST /api/v1/ack` and `/ack/batch` requests that arrive
//! on a shard while earlier ack batches are in flight are merged into one
//! `queen.ack_batch` call (one DB round trip, one transaction), and each
//! request is answered from its own slice of the per-item results.
//!
//! Runs on the shard thread only. The lanes are a thread-local (one shard =
//! one thread, as in [`super::cache`]), one lane per tenant since a call
//! carries one tenant. Like the push lanes ([`super::lanes`]): a lane
//! flushes at once while fewer than [`MAX_INFLIGHT_BATCHES`] batches are in
//! flight, so an idle broker adds no delay; under load, requests queue
//! behind the in-flight batches and leave together, bounded by
//! [`MAX_BATCH_ITEMS`] (a single larger request still goes alone, whole).
//!
//! # Decisions
//! - Fused acks run in the order the requests arrived; `queen.ack_items`
//!   orders them by message position inside the call, exactly as it does for
//!   the items of one `ack/batch` request. Two requests acknowledging the same
//!   message in one batch behave as two items of one request (the second is
//!   an idempotent success), as they would one after the other.
//! - A request that fails validation never joins a lane (400 before). If
//!   PostgreSQL still rejects a fused call, the lane runs the batch again
//!   request by request, so only the request that PostgreSQL refuses fails
//!   (as the push lanes do).
//! - An ack the procedure refuses (unknown message, wrong or expired lease)
//!   is `success: false` in its own slot and does not disturb its neighbours.

use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use futures_channel::oneshot;
use serde_json::{Map, Value};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Ack batches a shard keeps in flight per tenant. Four per shard (eight on
/// two shards) keeps PostgreSQL's group commit busy while leaving room for
/// requests to pile up and fuse under load, the same trade as push fusion.
pub const MAX_INFLIGHT_BATCHES: usize = 4;
/// Largest fused batch, in acknowledgements. The per-item work in
/// `queen.ack_items` is small; 2,000 keeps one transaction (and the advisory
/// locks it holds) short, well under a tenth of a second.
pub const MAX_BATCH_ITEMS: usize = 2_000;

/// One request's outcome: its slice of results (a JSON array), or the error.
type Answer = Result<Value, StoreError>;

/// One queued ack request.
#[derive(Debug)]
struct Pending {
    /// Its validated items, as `queen.ack_batch` takes them.
    items: Vec<Value>,
    /// Where its answer goes.
    tx: oneshot::Sender<Answer>,
}

/// A tenant's ack lane on one shard.
#[derive(Debug)]
struct AckLane {
    /// Tenant of every item in this lane.
    tenant: String,
    /// Requests waiting for a batch.
    queued: RefCell<VecDeque<Pending>>,
    /// Batches in flight.
    inflight: Cell<usize>,
}

thread_local! {
    /// This shard's ack lanes, by tenant.
    static LANES: RefCell<HashMap<String, Rc<AckLane>>> = RefCell::new(HashMap::new());
}

/// Acknowledges one request's `items` (validated, non-empty) for `tenant`,
/// fused with its concurrent neighbours; resolves with the request's own
/// per-item results, aligned with `items`.
pub async fn ack(shard: &Rc<Shard>, tenant: &str, items: Vec<Value>) -> Answer {
    let lane = LANES.with(|l| {
        l.borrow_mut()
            .entry(tenant.to_string())
            .or_insert_with(|| {
                Rc::new(AckLane {
                    tenant: tenant.to_string(),
                    queued: RefCell::new(VecDeque::new()),
                    inflight: Cell::new(0),
                })
            })
            .clone()
    });
    let (tx, rx) = oneshot::channel();
    lane.queued.borrow_mut().push_back(Pending { items, tx });
    log::debug!(
        "ack lane: request queued ({} waiting, {} batches in flight)",
        lane.queued.borrow().len(),
        lane.inflight.get()
    );
    lane.kick(shard);
    rx.await
        .unwrap_or_else(|_| Err(StoreError::Unavailable("ack batch dropped".into())))
}

impl AckLane {
    /// Starts batches while there is room in flight and work queued.
    fn kick(self: &Rc<Self>, shard: &Rc<Shard>) {
        while self.inflight.get() < MAX_INFLIGHT_BATCHES {
            let batch = self.take_batch();
            if batch.is_empty() {
                return;
            }
            self.inflight.set(self.inflight.get() + 1);
            let (lane, shard) = (self.clone(), shard.clone());
            glommio::spawn_local(async move {
                lane.flush(&shard, batch).await;
                lane.inflight.set(lane.inflight.get() - 1);
                lane.kick(&shard);
            })
            .detach();
        }
    }

    /// Takes the queued requests that fit in one batch (at least one).
    fn take_batch(&self) -> Vec<Pending> {
        let mut queued = self.queued.borrow_mut();
        let mut batch = Vec::new();
        let mut n = 0;
        while let Some(front) = queued.front() {
            if !batch.is_empty() && n + front.items.len() > MAX_BATCH_ITEMS {
                break;
            }
            n += front.items.len();
            // The front exists: checked by the loop condition.
            batch.push(queued.pop_front().expect("front checked"));
        }
        batch
    }

    /// Runs one batch and answers each request from its slice.
    async fn flush(&self, shard: &Rc<Shard>, batch: Vec<Pending>) {
        if batch.len() == 1 {
            // Alone: no copy of the items is needed for a retry.
            let Some(p) = batch.into_iter().next() else {
                return;
            };
            let n = p.items.len();
            let answer = self.call(shard, p.items, n).await;
            let _ = p.tx.send(answer.map(Value::Array));
            return;
        }
        let counts: Vec<usize> = batch.iter().map(|p| p.items.len()).collect();
        let total: usize = counts.iter().sum();
        log::debug!(
            "ack lane: fused {} requests ({total} acks) into one batch",
            batch.len()
        );
        let items: Vec<Value> = batch.iter().flat_map(|p| p.items.clone()).collect();
        match self.call(shard, items, total).await {
            Ok(results) => {
                let mut results = results.into_iter();
                for (p, n) in batch.into_iter().zip(counts) {
                    let mine: Vec<Value> = results.by_ref().take(n).collect();
                    let _ = p.tx.send(Ok(Value::Array(mine)));
                }
            }
            Err(StoreError::Db(why)) => {
                // PostgreSQL refused the fused call: run each request alone so
                // that only the request it refuses fails.
                log::debug!("ack lane: fused batch refused ({why}); retrying request by request");
                for p in batch {
                    let n = p.items.len();
                    let answer = self.call(shard, p.items, n).await;
                    let _ = p.tx.send(answer.map(Value::Array));
                }
            }
            Err(e) => {
                for p in batch {
                    let _ = p.tx.send(Err(e.clone()));
                }
            }
        }
    }

    /// One `queen.ack_batch` round trip; checks that `n` results came back.
    async fn call(
        &self,
        shard: &Rc<Shard>,
        items: Vec<Value>,
        n: usize,
    ) -> Result<Vec<Value>, StoreError> {
        let mut arg = Map::new();
        arg.insert("tenant".into(), Value::String(self.tenant.clone()));
        arg.insert("txn".into(), Value::Bool(false));
        arg.insert("items".into(), Value::Array(items));
        match shard.db.call(Proc::AckBatch, Value::Object(arg)).await? {
            Value::Array(a) if a.len() == n => Ok(a),
            other => Err(StoreError::Db(format!(
                "ack_batch returned an unexpected shape: {}",
                other.to_string().chars().take(200).collect::<String>()
            ))),
        }
    }
}
