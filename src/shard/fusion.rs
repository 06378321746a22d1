//! Request fusion, the machinery shared by the push lanes ([`super::lanes`])
//! and the ack lanes ([`super::ack_lanes`]): requests that arrive on a shard
//! while earlier batches are in flight are merged into one batch (one DB
//! round trip, one transaction), and each request gets its own answer.
//!
//! Runs on the shard thread only (`Rc`/`Cell`, tasks spawned with
//! `glommio::spawn_local`). A lane flushes at once while fewer than its
//! `max_inflight` batches are in flight, so an idle broker adds no delay;
//! under load, requests queue behind the in-flight batches and leave
//! together, bounded by `max_items` (a single larger request still goes
//! alone, whole: a request is never split across transactions).
//!
//! What a batch does is the [`Batcher`]'s business: it gets the items of
//! every request, request after request, with the count per request, and
//! answers each request. Items are moved, never copied: a batcher that
//! needs a request's items again (a retry, a spool) gets them handed back
//! by the DB thread.

use futures_channel::oneshot;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::rc::Rc;

/// What one kind of lane does with a batch.
pub trait Batcher: 'static {
    /// What a request hands in (one per item).
    type Item: 'static;
    /// What a request gets back.
    type Answer: 'static;
    /// Runs one batch: `items` request after request, `counts[i]` of them
    /// from request i. Resolves with exactly one answer per request, in order.
    fn run(
        &self,
        items: Vec<Self::Item>,
        counts: Vec<usize>,
    ) -> impl Future<Output = Vec<Self::Answer>>;
    /// The answer of a request whose batch ended without one (dropped).
    fn dropped(&self) -> Self::Answer;
}

/// One queued request.
struct Pending<B: Batcher> {
    items: Vec<B::Item>,
    tx: oneshot::Sender<B::Answer>,
}

/// A fusion lane (one per shard and tenant and kind).
pub struct Lane<B: Batcher> {
    /// What runs the batches.
    pub batcher: B,
    /// Requests waiting for a batch.
    queued: RefCell<VecDeque<Pending<B>>>,
    /// Batches in flight.
    inflight: Cell<usize>,
    /// Most batches in flight at once.
    max_inflight: usize,
    /// Largest batch, in items (a larger single request goes alone).
    max_items: usize,
    /// Batches flushed (counter).
    pub nr_batches: Cell<u64>,
    /// Requests fused into those batches (counter).
    pub nr_requests: Cell<u64>,
}

impl<B: Batcher> fmt::Debug for Lane<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lane")
            .field("queued", &self.queued.borrow().len())
            .field("inflight", &self.inflight.get())
            .field("nr_batches", &self.nr_batches.get())
            .field("nr_requests", &self.nr_requests.get())
            .finish()
    }
}

impl<B: Batcher> Lane<B> {
    /// A lane running its batches with `batcher`.
    pub fn with(batcher: B, max_inflight: usize, max_items: usize) -> Lane<B> {
        Lane {
            batcher,
            queued: RefCell::new(VecDeque::new()),
            inflight: Cell::new(0),
            max_inflight,
            max_items,
            nr_batches: Cell::new(0),
            nr_requests: Cell::new(0),
        }
    }

    /// Requests waiting and batches in flight (for debug logs).
    pub fn load(&self) -> (usize, usize) {
        (self.queued.borrow().len(), self.inflight.get())
    }

    /// Queues one request's items; resolves with its answer.
    pub async fn submit(self: &Rc<Self>, items: Vec<B::Item>) -> B::Answer {
        let (tx, rx) = oneshot::channel();
        self.queued.borrow_mut().push_back(Pending { items, tx });
        self.kick();
        match rx.await {
            Ok(a) => a,
            Err(_) => self.batcher.dropped(),
        }
    }

    /// Starts batches while there is room in flight and work queued.
    fn kick(self: &Rc<Self>) {
        while self.inflight.get() < self.max_inflight {
            let batch = self.take_batch();
            if batch.is_empty() {
                return;
            }
            self.inflight.set(self.inflight.get() + 1);
            let lane = self.clone();
            glommio::spawn_local(async move {
                lane.flush(batch).await;
                lane.inflight.set(lane.inflight.get() - 1);
                lane.kick();
            })
            .detach();
        }
    }

    /// Takes the queued requests that fit in one batch (at least one).
    fn take_batch(&self) -> Vec<Pending<B>> {
        let mut queued = self.queued.borrow_mut();
        let mut batch = Vec::new();
        let mut n = 0;
        while let Some(front) = queued.front() {
            if !batch.is_empty() && n + front.items.len() > self.max_items {
                break;
            }
            n += front.items.len();
            // The front exists: checked by the loop condition.
            batch.push(queued.pop_front().expect("front checked"));
        }
        batch
    }

    /// Runs one batch and answers each request.
    async fn flush(&self, batch: Vec<Pending<B>>) {
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
        let answers = self.batcher.run(items, counts).await;
        let mut answers = answers.into_iter();
        for tx in txs {
            // A batcher answers every request; a missing answer is a dropped one.
            let a = answers.next().unwrap_or_else(|| self.batcher.dropped());
            let _ = tx.send(a);
        }
    }
}
