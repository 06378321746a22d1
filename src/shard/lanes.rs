//! Push fusion: the push requests that arrive on a shard while earlier
//! batches are in flight are merged into one DB round trip (one
//! transaction), and each request is answered from its own slice.
//!
//! A lane flushes at once when fewer than `MAX_INFLIGHT_BATCHES` batches are
//! in flight, so an idle broker adds no delay; under load, requests queue
//! behind the in-flight batches and leave together (size-bounded by
//! `MAX_BATCH_ITEMS`). One lane per tenant, since a batch carries one tenant.

use crate::mesh::Notice;
use crate::shard::Shard;
use crate::store::{Job, StoreError, StoreReply};
use futures_channel::oneshot;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, VecDeque};
use std::rc::{Rc, Weak};

/// Push batches a shard keeps in flight at once. With two shards this puts
/// up to 8 push transactions in PostgreSQL at a time: enough for group
/// commit to pay, few enough that batches grow under load.
pub const MAX_INFLIGHT_BATCHES: usize = 4;
/// Largest fused batch, in items. A single request larger than this still
/// goes alone, whole (a request is never split across transactions).
pub const MAX_BATCH_ITEMS: usize = 1000;

type Answer = Result<Vec<Value>, StoreError>;

/// How a queued request's batch ended.
#[derive(Debug)]
enum Outcome {
    /// PostgreSQL answered (per-item results or this request's error).
    Done(Answer),
    /// The batch never ran; the request's items come back with the reason.
    Refused(Vec<Value>, StoreError),
}

/// One queued push request.
#[derive(Debug)]
struct Pending {
    /// Its items, ready for `queen.push_batch`.
    items: Vec<Value>,
    /// Where its outcome goes.
    tx: oneshot::Sender<Outcome>,
}

/// A tenant's push lane on one shard.
#[derive(Debug)]
pub struct PushLane {
    /// Tenant of every item in this lane.
    tenant: String,
    /// The owning shard (weak: the shard owns its lanes).
    shard: Weak<Shard>,
    /// Requests waiting for a batch.
    queued: RefCell<VecDeque<Pending>>,
    /// Batches in flight.
    inflight: Cell<usize>,
    /// Batches flushed (counter).
    pub nr_batches: Cell<u64>,
    /// Requests fused into those batches (counter).
    pub nr_requests: Cell<u64>,
}

impl PushLane {
    /// A lane for `tenant` on `shard`.
    pub fn new(tenant: String, shard: Weak<Shard>) -> PushLane {
        PushLane {
            tenant,
            shard,
            queued: RefCell::new(VecDeque::new()),
            inflight: Cell::new(0),
            nr_batches: Cell::new(0),
            nr_requests: Cell::new(0),
        }
    }

    /// Pushes one request's items; resolves with its per-item results.
    ///
    /// The request goes to the shard's disk spool instead (answered
    /// `buffered`) when the spool says so (maintenance, PostgreSQL known
    /// down, older records of its partitions spooled), or when its batch
    /// fails for want of a connection (the DB thread hands the items back,
    /// so no copy is kept on the hot path).
    pub async fn push(self: &Rc<Self>, items: Vec<Value>) -> Answer {
        let Some(spool) = self.shard.upgrade().map(|s| s.spool.clone()) else {
            return Err(StoreError::Unavailable("shutting down".into()));
        };
        if spool.must_spool(&self.tenant, &items) {
            return spool.append(&self.tenant, items).await;
        }
        let (tx, rx) = oneshot::channel();
        self.queued.borrow_mut().push_back(Pending { items, tx });
        self.kick();
        let outcome = rx.await.unwrap_or_else(|_| {
            Outcome::Done(Err(StoreError::Unavailable("push batch dropped".into())))
        });
        match outcome {
            Outcome::Refused(items, StoreError::Unavailable(why)) => {
                log::debug!("push spooled: {why}");
                spool.pg_down();
                spool.append(&self.tenant, items).await
            }
            Outcome::Refused(_, err) => Err(err),
            Outcome::Done(answer) => answer,
        }
    }

    /// Starts batches while there is room in flight and work queued.
    fn kick(self: &Rc<Self>) {
        while self.inflight.get() < MAX_INFLIGHT_BATCHES {
            let batch = self.take_batch();
            if batch.is_empty() {
                return;
            }
            self.inflight.set(self.inflight.get() + 1);
            let lane = self.clone();
            glommio::spawn_local(async move { lane.flush(batch).await }).detach();
        }
    }

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

    async fn flush(self: Rc<Self>, batch: Vec<Pending>) {
        let Some(shard) = self.shard.upgrade() else {
            return;
        };
        let queues: BTreeSet<String> = batch
            .iter()
            .flat_map(|p| p.items.iter())
            .filter_map(|i| i.get("queue").and_then(Value::as_str).map(str::to_string))
            .collect();
        let mut counts = Vec::with_capacity(batch.len());
        let mut items = Vec::new();
        let mut txs = Vec::with_capacity(batch.len());
        for p in batch {
            counts.push(p.items.len());
            items.extend(p.items);
            txs.push(p.tx);
        }
        self.nr_batches.set(self.nr_batches.get() + 1);
        self.nr_requests
            .set(self.nr_requests.get() + txs.len() as u64);
        let job = Job::PushBatch {
            tenant: self.tenant.clone(),
            items,
            counts,
        };
        let mut any_ok = false;
        match shard.db.submit(job).await {
            StoreReply::Push(results) => {
                any_ok = results.iter().any(Result::is_ok);
                for (tx, r) in txs.into_iter().zip(results) {
                    let _ = tx.send(Outcome::Done(r));
                }
            }
            StoreReply::PushRefused { items, counts, err } => {
                let mut items = items.into_iter();
                for (tx, n) in txs.into_iter().zip(counts) {
                    let mine: Vec<Value> = items.by_ref().take(n).collect();
                    let _ = tx.send(Outcome::Refused(mine, err.clone()));
                }
            }
            StoreReply::Value(v) => {
                let e = v
                    .err()
                    .unwrap_or_else(|| StoreError::Db("value reply to a push".into()));
                for tx in txs {
                    let _ = tx.send(Outcome::Done(Err(e.clone())));
                }
            }
        }
        if any_ok {
            for q in queues {
                shard.notify(Notice::Pushed { queue: q });
            }
        }
        self.inflight.set(self.inflight.get() - 1);
        self.kick();
    }
}
