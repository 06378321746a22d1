//! Ack fusion: the `POST /api/v1/ack` and `/ack/batch` requests that arrive
//! on a shard while earlier ack batches are in flight are merged into one
//! `queen.ack_typed` call (one DB round trip, one transaction), and each
//! request is answered from its own slice of the per-item results.
//!
//! Runs on the shard thread only. The lanes are [`AckLanes`], a field of the
//! `Shard` (as its push lanes are), one lane per tenant since a call
//! carries one tenant. The lane is [`super::fusion`]'s, as for the push
//! lanes ([`super::lanes`]): a lane
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
//!   PostgreSQL still rejects a fused call, the DB thread runs the batch
//!   again request by request (on the items it holds: no copy is kept), so
//!   only the request that PostgreSQL refuses fails (as for push).
//! - An ack the procedure refuses (unknown message, wrong or expired lease)
//!   is `success: false` in its own slot and does not disturb its neighbours.

use super::fusion::{Batcher, Lane};
use crate::store::ack_fused::{AckAnswer, AckItem};
use crate::store::{DbClient, Job, StoreError, StoreReply};
use std::cell::RefCell;
use std::collections::HashMap;
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
type Answer = Result<Vec<AckAnswer>, StoreError>;

/// What an ack lane's batches do: one `Job::AckBatch` for a tenant (the DB
/// thread re-runs a refused fused call request by request, on the items it
/// already holds, so the lane keeps no copy).
#[derive(Debug)]
struct AckBatch {
    /// Tenant of every item in this lane.
    tenant: String,
    /// The shard's DB client (not the shard, which owns its lanes).
    db: Rc<DbClient>,
}

/// One shard's ack lanes, by tenant (`Shard::ack_lanes`; created on a
/// tenant's first ack, touched by that shard's ack requests only).
#[derive(Debug, Default)]
pub struct AckLanes {
    /// Tenant → its lane.
    lanes: RefCell<HashMap<String, Rc<Lane<AckBatch>>>>,
}

impl AckLanes {
    /// Acknowledges one request's `items` (validated, non-empty) for
    /// `tenant` through `db` (the shard's), fused with its concurrent
    /// neighbours; resolves with the request's own per-item results,
    /// aligned with `items`.
    pub async fn ack(&self, db: &Rc<DbClient>, tenant: &str, items: Vec<AckItem>) -> Answer {
        let lane = self
            .lanes
            .borrow_mut()
            .entry(tenant.to_string())
            .or_insert_with(|| {
                Rc::new(Lane::with(
                    AckBatch {
                        tenant: tenant.to_string(),
                        db: db.clone(),
                    },
                    MAX_INFLIGHT_BATCHES,
                    MAX_BATCH_ITEMS,
                ))
            })
            .clone();
        let (waiting, inflight) = lane.load();
        log::debug!(
            "ack lane: request queued ({} waiting, {inflight} batches in flight)",
            waiting + 1
        );
        lane.submit(items).await
    }
}

impl Batcher for AckBatch {
    type Item = AckItem;
    type Answer = Answer;

    async fn run(&self, items: Vec<AckItem>, counts: Vec<usize>) -> Vec<Answer> {
        let n = counts.len();
        if n > 1 {
            log::debug!(
                "ack lane: fused {n} requests ({} acks) into one batch",
                items.len()
            );
        }
        let job = Job::AckBatch {
            tenant: self.tenant.clone(),
            items,
            counts,
        };
        match self.db.submit(job).await {
            StoreReply::Acked(results) => results,
            StoreReply::PushRefused { err, .. } => (0..n).map(|_| Err(err.clone())).collect(),
            StoreReply::Pushed(_) | StoreReply::Popped(_) => {
                let e = StoreError::Db("push or pop reply to an ack batch".into());
                (0..n).map(|_| Err(e.clone())).collect()
            }
            StoreReply::Value(v) => {
                let e = v
                    .err()
                    .unwrap_or_else(|| StoreError::Db("value reply to an ack batch".into()));
                (0..n).map(|_| Err(e.clone())).collect()
            }
        }
    }

    fn dropped(&self) -> Answer {
        Err(StoreError::Unavailable("ack batch dropped".into()))
    }
}
