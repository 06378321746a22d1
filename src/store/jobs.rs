//! The typed jobs shards hand to the DB thread group, and their replies.
//!
//! A job carries the asking shard and a per-shard request id; the reply goes
//! back on that shard's reply inbox with the same id (decisions.md, "Runtime
//! hand-offs").

use serde_json::Value;
use shards::ShardId;
use std::fmt;

/// A per-shard request id; unique among the shard's in-flight jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

/// The stored procedures a [`Job::Call`] may invoke (each `queen.<name>(jsonb) → jsonb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proc {
    /// `queen.configure`: create or update a queue.
    Configure,
    /// `queen.pop`: claim partitions and read a batch.
    Pop,
    /// `queen.ack_batch`: apply acknowledgements.
    AckBatch,
    /// `queen.extend_lease`.
    ExtendLease,
    /// `queen.transaction`: acks and pushes in one PostgreSQL transaction.
    Transaction,
    /// `queen.dlq_list`.
    DlqList,
}

impl Proc {
    /// The SQL statement that calls the procedure.
    pub fn sql(self) -> &'static str {
        match self {
            Proc::Configure => "SELECT queen.configure($1::jsonb)",
            Proc::Pop => "SELECT queen.pop($1::jsonb)",
            Proc::AckBatch => "SELECT queen.ack_batch($1::jsonb)",
            Proc::ExtendLease => "SELECT queen.extend_lease($1::jsonb)",
            Proc::Transaction => "SELECT queen.transaction($1::jsonb)",
            Proc::DlqList => "SELECT queen.dlq_list($1::jsonb)",
        }
    }
}

/// Work for a DB thread.
#[derive(Debug)]
pub enum Job {
    /// Call one procedure with one argument.
    Call {
        /// Which procedure.
        proc: Proc,
        /// Its jsonb argument.
        arg: Value,
    },
    /// A fused push batch: the items of several requests in one transaction.
    /// `counts[i]` is how many items request i contributed, in order. If the
    /// batch fails for a reason other than the connection, the DB thread
    /// retries request by request so that one bad request fails alone.
    PushBatch {
        /// Tenant of every item (one lane per tenant).
        tenant: String,
        /// The items, request after request.
        items: Vec<Value>,
        /// Items per request.
        counts: Vec<usize>,
    },
    /// `SELECT 1`.
    Health,
}

impl Job {
    /// The reply that fails this job as a whole with `err` (one error per
    /// request of a push batch).
    pub fn fail(self, err: StoreError) -> StoreReply {
        match self {
            Job::PushBatch { counts, .. } => {
                StoreReply::Push(counts.iter().map(|_| Err(err.clone())).collect())
            }
            _ => StoreReply::Value(Err(err)),
        }
    }
}

/// What went wrong in the store.
#[derive(Debug, Clone)]
pub enum StoreError {
    /// PostgreSQL could not be reached (connect, reset, timeout) or is not ready.
    Unavailable(String),
    /// PostgreSQL answered with an error (the message as PostgreSQL gave it).
    Db(String),
    /// The job queue to the DB threads is full.
    Busy,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Unavailable(m) => write!(f, "database unavailable: {m}"),
            StoreError::Db(m) => write!(f, "{m}"),
            StoreError::Busy => write!(f, "database job queue is full"),
        }
    }
}

/// The outcome of a job.
#[derive(Debug)]
pub enum StoreReply {
    /// A procedure's jsonb result (or `Health`'s `null`).
    Value(Result<Value, StoreError>),
    /// A push batch: one result per request, each the request's slice of
    /// per-item results.
    Push(Vec<Result<Vec<Value>, StoreError>>),
}

/// A job on its way to the DB threads.
#[derive(Debug)]
pub struct JobEnvelope {
    /// The shard to answer.
    pub shard: ShardId,
    /// The shard's id for this request.
    pub req: RequestId,
    /// The work.
    pub job: Job,
}

/// A reply on its way back to a shard.
#[derive(Debug)]
pub struct ReplyEnvelope {
    /// The id the shard gave the job.
    pub req: RequestId,
    /// The outcome.
    pub reply: StoreReply,
}
