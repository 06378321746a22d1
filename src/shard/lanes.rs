//! Push fusion: the push requests that arrive on a shard while earlier
//! batches are in flight are merged into one DB round trip (one
//! transaction), and each request is answered from its own slice.
//!
//! A lane flushes at once when fewer than `MAX_INFLIGHT_BATCHES` batches are
//! in flight, so an idle broker adds no delay; under load, requests queue
//! behind the in-flight batches and leave together (size-bounded by
//! `MAX_BATCH_ITEMS`). One lane per tenant, since a batch carries one tenant.
//! The lane machinery is [`super::fusion`]; this file says what a push batch
//! does (one `Job::PushBatch`, spool on a refused batch, `pushed` notices).
//! A lane holds the parts of the shard it uses, not the `Shard` (which owns
//! the lanes).

use super::fusion::{Batcher, Lane};
use crate::mesh::Notice;
use crate::spool::Spool;
use crate::store::{DbClient, Job, PushItem, Pushed, StoreError, StoreReply};
use std::collections::BTreeSet;
use std::fmt;
use std::rc::Rc;

/// Push batches a shard keeps in flight at once. With two shards this puts
/// up to 4 push transactions in PostgreSQL at a time: on a 2-core box that
/// is enough for group commit to pay, and batches grow under load instead of
/// more small ones contending (4 in flight: push b10 0.83x, p1000 0.92x,
/// bench/results/2026-12-02-9be8ff8-vs-adee85d.md).
pub const MAX_INFLIGHT_BATCHES: usize = 2;
// The spool replays through as many lanes as a push lane keeps batches in
// flight (see `REPLAY_LANES`); the spool cannot name this constant (it sits
// below the shard), so the tie is checked here, at compile time.
const _: () = assert!(crate::spool::replay::REPLAY_LANES == MAX_INFLIGHT_BATCHES);
/// Largest fused batch, in items. A single request larger than this still
/// goes alone, whole (a request is never split across transactions).
pub const MAX_BATCH_ITEMS: usize = 1000;

type Answer = Result<Vec<Pushed>, StoreError>;

/// How a request's batch ended.
#[derive(Debug)]
pub enum Outcome {
    /// PostgreSQL answered (per-item results or this request's error).
    Done(Answer),
    /// The batch never ran; the request's items come back with the reason.
    Refused(Vec<PushItem>, StoreError),
}

/// What a push lane's batches do: one `Job::PushBatch` for a tenant.
pub struct PushBatch {
    /// Tenant of every item in this lane.
    pub tenant: String,
    /// The shard's DB client.
    pub db: Rc<DbClient>,
    /// The shard's spool: where a request goes when it cannot be stored now.
    pub spool: Rc<Spool>,
    /// Publishes a `pushed` notice as the shard does (`Shard::notify`,
    /// holding the shard weakly: the shard owns its lanes).
    pub notify: Rc<dyn Fn(Notice)>,
}

impl fmt::Debug for PushBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushBatch")
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

/// A tenant's push lane on one shard.
pub type PushLane = Lane<PushBatch>;

impl Lane<PushBatch> {
    /// A push lane whose batches `batch` describes.
    pub fn new(batch: PushBatch) -> PushLane {
        Lane::with(batch, MAX_INFLIGHT_BATCHES, MAX_BATCH_ITEMS)
    }

    /// Pushes one request's items; resolves with its per-item results.
    ///
    /// The request goes to the shard's disk spool instead (answered
    /// `buffered`) when the spool says so (maintenance, PostgreSQL known
    /// down, older records of its partitions spooled), or when its batch
    /// fails for want of a connection (the DB thread hands the items back,
    /// so no copy is kept on the hot path).
    pub async fn push(self: &Rc<Self>, items: Vec<PushItem>) -> Answer {
        let tenant = &self.batcher.tenant;
        let spool = &self.batcher.spool;
        if spool.must_spool(tenant, &items) {
            return spool.append(tenant, items).await;
        }
        match self.submit(items).await {
            Outcome::Refused(items, StoreError::Unavailable(why)) => {
                log::debug!("push spooled: {why}");
                spool.pg_down();
                spool.append(tenant, items).await
            }
            Outcome::Refused(_, err) => Err(err),
            Outcome::Done(answer) => answer,
        }
    }
}

impl Batcher for PushBatch {
    type Item = PushItem;
    type Answer = Outcome;

    async fn run(&self, items: Vec<PushItem>, counts: Vec<usize>) -> Vec<Outcome> {
        let queues: BTreeSet<String> = items.iter().map(|i| i.queue.clone()).collect();
        let n = counts.len();
        let job = Job::PushBatch {
            tenant: self.tenant.clone(),
            items,
            counts,
        };
        let mut any_ok = false;
        let out: Vec<Outcome> = match self.db.submit(job).await {
            StoreReply::Pushed(results) => {
                any_ok = results.iter().any(Result::is_ok);
                results.into_iter().map(Outcome::Done).collect()
            }
            StoreReply::PushRefused { items, counts, err } => {
                let mut items = items.into_iter();
                counts
                    .into_iter()
                    .map(|c| Outcome::Refused(items.by_ref().take(c).collect(), err.clone()))
                    .collect()
            }
            StoreReply::Acked(_) | StoreReply::Popped(_) => {
                let e = StoreError::Db("ack or pop reply to a push".into());
                (0..n).map(|_| Outcome::Done(Err(e.clone()))).collect()
            }
            StoreReply::Value(v) => {
                let e = v
                    .err()
                    .unwrap_or_else(|| StoreError::Db("value reply to a push".into()));
                (0..n).map(|_| Outcome::Done(Err(e.clone()))).collect()
            }
        };
        if any_ok {
            for q in queues {
                (self.notify)(Notice::Pushed { queue: q });
            }
        }
        out
    }

    fn dropped(&self) -> Outcome {
        Outcome::Done(Err(StoreError::Unavailable("push batch dropped".into())))
    }
}
