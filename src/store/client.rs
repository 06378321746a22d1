//! The shard's side of the DB hand-off: submit a typed job on the bounded
//! queue, park the asking task on a oneshot, and complete it when the shard's
//! reply drain (`crate::serve`) takes the id-tagged reply off its inbox.
//! Lives in `store`, below every shard-side module that talks to PostgreSQL
//! (the spool's replay, the metrics snapshot), so none of them needs `Shard`.
//!
//! A full job queue leaves the job with the shard for up to
//! `SUBMIT_PATIENCE`, retrying every millisecond, then answers `Busy` (503).

use super::jobs::{Job, JobEnvelope, Proc, ReplyEnvelope, RequestId, StoreError, StoreReply};
use crossbeam_channel::{Sender, TrySendError};
use futures_channel::oneshot;
use serde_json::Value;
use shards::ShardId;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a job may wait for room in the DB job queue before the request
/// answers 503. Long enough to ride out a burst, short against client timeouts.
const SUBMIT_PATIENCE: Duration = Duration::from_secs(2);

/// Per-shard DB client. Owned by the shard (`Rc`, shared with the shard's
/// own background tasks), never crosses threads.
#[derive(Debug)]
pub struct DbClient {
    /// This shard, so replies come back here.
    shard: ShardId,
    /// The shared bounded job queue into the DB thread group.
    jobs: Sender<JobEnvelope>,
    /// Requests waiting for a reply, by id. Touched by submitters and the drain task.
    pending: RefCell<HashMap<u64, oneshot::Sender<StoreReply>>>,
    /// Next request id.
    next_id: Cell<u64>,
    /// Jobs submitted (per-shard counter, summed by metrics).
    pub nr_jobs: Cell<u64>,
}

impl DbClient {
    /// A client for `shard` sending on `jobs`.
    pub fn new(shard: ShardId, jobs: Sender<JobEnvelope>) -> DbClient {
        DbClient {
            shard,
            jobs,
            pending: RefCell::new(HashMap::new()),
            next_id: Cell::new(1),
            nr_jobs: Cell::new(0),
        }
    }

    /// Runs `job` on a DB thread and waits for its reply.
    pub async fn submit(&self, job: Job) -> StoreReply {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.pending.borrow_mut().insert(id, tx);
        let mut env = JobEnvelope {
            shard: self.shard,
            req: RequestId(id),
            job,
        };
        let started = Instant::now();
        loop {
            match self.jobs.try_send(env) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) if started.elapsed() < SUBMIT_PATIENCE => {
                    env = back;
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                }
                Err(TrySendError::Full(back)) => {
                    self.pending.borrow_mut().remove(&id);
                    return back.job.fail(StoreError::Busy);
                }
                Err(TrySendError::Disconnected(back)) => {
                    self.pending.borrow_mut().remove(&id);
                    return back
                        .job
                        .fail(StoreError::Unavailable("shutting down".into()));
                }
            }
        }
        self.nr_jobs.set(self.nr_jobs.get() + 1);
        rx.await.unwrap_or_else(|_| {
            StoreReply::Value(Err(StoreError::Unavailable("reply lost".into())))
        })
    }

    /// Jobs of this shard submitted and not answered yet (queued or running).
    pub fn in_flight(&self) -> usize {
        self.pending.borrow().len()
    }

    /// Jobs waiting in the shared queue for a DB thread (all shards).
    pub fn queued(&self) -> usize {
        self.jobs.len()
    }

    /// Calls one procedure and returns its jsonb result.
    pub async fn call(&self, proc: Proc, arg: Value) -> Result<Value, StoreError> {
        match self.submit(Job::Call { proc, arg }).await {
            StoreReply::Value(v) => v,
            StoreReply::Push(_) | StoreReply::Pushed(_) | StoreReply::PushRefused { .. } => {
                Err(StoreError::Db("push reply to a call".into()))
            }
        }
    }

    /// Hands a reply to the task waiting for it (called by the drain task).
    /// A reply whose request was cancelled (client gone) is dropped here.
    pub fn complete(&self, env: ReplyEnvelope) {
        if let Some(tx) = self.pending.borrow_mut().remove(&env.req.0) {
            let _ = tx.send(env.reply);
        }
    }
}
