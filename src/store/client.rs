//! The shard's side of the DB hand-off: submit a typed job on the bounded
//! queue, park the asking task on a oneshot, and complete it when the shard's
//! reply drain (`crate::serve`) takes the id-tagged reply off its inbox.
//! Lives in `store`, below every shard-side module that talks to PostgreSQL
//! (the spool's replay, the metrics snapshot), so none of them needs `Shard`.
//!
//! A full job queue leaves the job with the shard for up to
//! `SUBMIT_PATIENCE`, retrying every millisecond, then answers `Busy` (503).

use super::jobs::{
    Job, JobEnvelope, Proc, Reply, ReplyEnvelope, RequestId, StoreError, StoreReply,
};
use super::kv_group::{CallAnswer, KvCall};
use super::kv_pool::{JobState, KvJob, KvWork, KV_QUEUE_PATIENCE};
use super::pooled::Conn;
use super::pop_compact::Popped;
use crossbeam_channel::{Sender, TrySendError};
use futures_channel::oneshot;
use serde_json::Value;
use shards::ShardId;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a job may wait for room in the DB job queue before the request
/// answers 503. Long enough to ride out a burst, short against client timeouts.
const SUBMIT_PATIENCE: Duration = Duration::from_secs(2);

/// A KV closure's boxed answer, as a KV thread sends it.
type KvAnswer = Result<Box<dyn Any + Send>, StoreError>;

/// Per-shard DB client. Owned by the shard (`Rc`, shared with the shard's
/// own background tasks), never crosses threads.
#[derive(Debug)]
pub struct DbClient {
    /// This shard, so replies come back here.
    shard: ShardId,
    /// The shared bounded job queue into the DB thread group.
    jobs: Sender<JobEnvelope>,
    /// The KV pool's own bounded queue (`super::kv_pool`).
    kv: Sender<KvJob>,
    /// Requests waiting for a reply, by id. Touched by submitters and the drain task.
    pending: RefCell<HashMap<u64, oneshot::Sender<StoreReply>>>,
    /// KV pool closures waiting for their answer, by id (same id sequence).
    kv_pending: RefCell<HashMap<u64, oneshot::Sender<KvAnswer>>>,
    /// Next request id.
    next_id: Cell<u64>,
    /// Jobs submitted (per-shard counter, summed by metrics).
    pub nr_jobs: Cell<u64>,
}

impl DbClient {
    /// A client for `shard` sending on `jobs` (and KV work on `kv`).
    pub fn new(shard: ShardId, jobs: Sender<JobEnvelope>, kv: Sender<KvJob>) -> DbClient {
        DbClient {
            shard,
            jobs,
            kv,
            pending: RefCell::new(HashMap::new()),
            kv_pending: RefCell::new(HashMap::new()),
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
            sent: Instant::now(),
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
        self.pending.borrow().len() + self.kv_pending.borrow().len()
    }

    /// Jobs waiting in the shared queue for a DB thread (all shards).
    pub fn queued(&self) -> usize {
        self.jobs.len()
    }

    /// Calls one procedure and returns its jsonb result.
    pub async fn call(&self, proc: Proc, arg: Value) -> Result<Value, StoreError> {
        match self.submit(Job::Call { proc, arg }).await {
            StoreReply::Value(v) => v,
            StoreReply::Popped(_) => Err(StoreError::Db("pop reply to a call".into())),
            StoreReply::Acked(_) | StoreReply::Pushed(_) | StoreReply::PushRefused { .. } => {
                Err(StoreError::Db("push reply to a call".into()))
            }
        }
    }

    /// One pop attempt (`queen.pop_compact`), answered typed with each
    /// payload as its JSON text (`super::pop_compact`).
    pub async fn pop(&self, arg: Value) -> Result<Box<Popped>, StoreError> {
        match self
            .submit(Job::Call {
                proc: Proc::Pop,
                arg,
            })
            .await
        {
            StoreReply::Popped(p) => p,
            // a job that never ran (queue full, shutting down, lost reply)
            StoreReply::Value(Err(e)) => Err(e),
            _ => Err(StoreError::Db("not a pop reply".into())),
        }
    }

    /// Runs `work` on a connection of the KV pool (KV, locks, timers) and
    /// returns its answer. Never waits for room: a full KV queue, or a job
    /// no KV thread started within `KV_QUEUE_PATIENCE` (it then never runs),
    /// answers `StoreError::Busy` (503 `kv_unavailable`); a job that started
    /// is waited for. `work` runs on a KV thread, so it may block on
    /// PostgreSQL; it should be one short transaction. It runs alone (its
    /// transactions are its own); KV and lock calls go through
    /// [`DbClient::kv_group_call`] instead.
    pub async fn kv_run<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Conn) -> Result<R, StoreError> + Send + 'static,
    {
        self.kv_submit(KvWork::Closure(Box::new(move |c| Box::new(work(c)))))
            .await
    }

    /// Runs one KV or lock call on the KV pool, where it may share its
    /// commit with the calls queued beside it (`super::kv_group`); answered
    /// after that commit. Full pool: as [`DbClient::kv_run`].
    pub async fn kv_group_call(&self, call: KvCall) -> Result<CallAnswer, StoreError> {
        self.kv_submit(KvWork::Call(call)).await
    }

    /// Queues `work` on the KV pool and waits for its answer of type `R`
    /// (the never-a-hang rules of [`DbClient::kv_run`]).
    async fn kv_submit<R: 'static>(&self, work: KvWork) -> Result<R, StoreError> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (tx, rx) = oneshot::channel();
        self.kv_pending.borrow_mut().insert(id, tx);
        let state = Arc::new(JobState::default());
        let job = KvJob {
            shard: self.shard,
            req: RequestId(id),
            state: state.clone(),
            work,
        };
        if let Err(e) = self.kv.try_send(job) {
            self.kv_pending.borrow_mut().remove(&id);
            return Err(match e {
                TrySendError::Full(_) => StoreError::Busy,
                TrySendError::Disconnected(_) => StoreError::Unavailable("shutting down".into()),
            });
        }
        self.nr_jobs.set(self.nr_jobs.get() + 1);
        let mut rx = rx;
        let answer = futures_lite::future::or(async { Some((&mut rx).await) }, async {
            glommio::timer::sleep(KV_QUEUE_PATIENCE).await;
            None
        })
        .await;
        let answer = match answer {
            Some(a) => a,
            None if state.abandon() => {
                self.kv_pending.borrow_mut().remove(&id);
                return Err(StoreError::Busy);
            }
            None => rx.await,
        };
        match answer {
            Ok(Ok(any)) => match any.downcast::<Result<R, StoreError>>() {
                Ok(r) => *r,
                Err(_) => Err(StoreError::Db("KV answer of another type".into())),
            },
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StoreError::Unavailable("reply lost".into())),
        }
    }

    /// Calls one `queen.<name>(jsonb) -> jsonb` procedure on the KV pool (the
    /// timers' calls: issue 14 gives KV and timers connections of their own),
    /// with [`DbClient::kv_run`]'s never-a-hang answer when the pool is full.
    pub async fn kv_call(&self, proc: Proc, arg: Value) -> Result<Value, StoreError> {
        self.kv_run(move |c| {
            let rows = c
                .query_prepared(proc.sql(), &[(&arg, postgres::types::Type::JSONB)])
                .map_err(super::sql_error::classify)?;
            c.first_json(&rows)
        })
        .await
    }

    /// Hands a reply to the task waiting for it (called by the drain task).
    /// A reply whose request was cancelled (client gone) is dropped here.
    pub fn complete(&self, env: ReplyEnvelope) {
        match env.reply {
            Reply::Store(r) => {
                if let Some(tx) = self.pending.borrow_mut().remove(&env.req.0) {
                    let _ = tx.send(r);
                }
            }
            Reply::Closure(r) => {
                if let Some(tx) = self.kv_pending.borrow_mut().remove(&env.req.0) {
                    let _ = tx.send(r);
                }
            }
        }
    }
}
