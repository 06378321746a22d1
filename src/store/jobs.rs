//! The typed jobs shards hand to the DB thread group, and their replies.
//!
//! A job carries the asking shard and a per-shard request id; the reply goes
//! back on that shard's reply inbox with the same id (decisions.md, "Runtime
//! hand-offs").

use serde_json::Value;
use shards::ShardId;
use std::fmt;
use std::time::{Duration, Instant};

/// A per-shard request id; unique among the shard's in-flight jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId(pub u64);

/// The stored procedures a [`Job::Call`] may invoke (each `queen.<name>(jsonb) → jsonb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proc {
    /// `queen.configure`: create or update a queue.
    Configure,
    /// `queen.system_state_get`: the maintenance flags (§15).
    SystemStateGet,
    /// `queen.system_state_set`: set one maintenance flag (§15).
    SystemStateSet,
    /// `queen.kv_switch_set`: set the KV/timers kill switches (sql/functions/kv.sql).
    KvSwitchSet,
    /// `queen.kv_namespaces`: live KV keys per namespace (the dashboard's KV browser).
    KvNamespaces,
    /// `queen.kv_list`: a keyset page of one KV namespace (the KV browser).
    KvList,
    /// `queen.metrics_snapshot`: per-queue rates, lag and DLQ depth for the metrics scrape.
    MetricsSnapshot,
    /// `queen.pop`: claim partitions and read a batch.
    Pop,
    /// `queen.pop_conflated`: pop under the group's conflation policy (§17).
    PopConflated,
    /// `queen.extend_lease`.
    ExtendLease,
    /// `queen.transaction`: acks and pushes in one PostgreSQL transaction.
    Transaction,
    /// `queen.dlq_list`.
    DlqList,
    /// `queen.queue_flags`: per-queue flags the shards cache (encryption).
    QueueFlags,
    /// `queen.cg_list`: consumer groups with lag per queue (§11).
    CgList,
    /// `queen.cg_lagging`: lagging partitions of every group (§11).
    CgLagging,
    /// `queen.cg_detail`: one group's partitions by queue (§11).
    CgDetail,
    /// `queen.cg_delete`: delete a group's cursors (and metadata) (§11).
    CgDelete,
    /// `queen.cg_subscription`: rewrite a group's subscription timestamp (§11).
    CgSubscription,
    /// `queen.cg_seek`: move a group's cursors on a queue or partition (§11).
    CgSeek,
    /// `queen.res_queues`: queues catalogue (§8).
    ResQueues,
    /// `queen.res_queue`: one queue with partitions and totals (§8).
    ResQueue,
    /// `queen.res_queue_delete`: delete a queue and everything under it (§8).
    ResQueueDelete,
    /// `queen.res_depth`: pending depth of a queue (§8).
    ResDepth,
    /// `queen.res_namespaces`: namespaces catalogue (§8).
    ResNamespaces,
    /// `queen.res_tasks`: tasks catalogue (§8).
    ResTasks,
    /// `queen.res_overview`: system overview (§8).
    ResOverview,
    /// `queen.res_partitions`: partitions catalogue (§8).
    ResPartitions,
    /// `queen.queue_clear`: delete a queue's messages, keep the queue (§8).
    QueueClear,
    /// `queen.msg_list`: message listing with filters (§9).
    MsgList,
    /// `queen.msg_detail`: one message (§9).
    MsgDetail,
    /// `queen.msg_delete`: delete one message (§9).
    MsgDelete,
    /// `queen.msg_retry`: replay a dead letter by message or DLQ row id (§9).
    MsgRetry,
    /// `queen.msg_to_dlq`: move a message to the DLQ (§9).
    MsgToDlq,
    /// `queen.dlq_delete`: delete DLQ rows of a queue (§9).
    DlqDelete,
    /// `queen.trace_add`: record a trace event (§10).
    TraceAdd,
    /// `queen.trace_by_message`: traces of one message (§10).
    TraceByMessage,
    /// `queen.trace_by_name`: traces by trace name (§10).
    TraceByName,
    /// `queen.trace_names`: trace names with counts (§10).
    TraceNames,
    /// `queen.maintenance`: one bounded background-job round (retention, eviction, lease reclaim) under its advisory lock.
    Maintenance,
    /// `queen.stats_rollup`: one bounded round of the stats roll-up (sql/functions/stats.sql).
    StatsRollup,
    /// `queen.status_view`: one status/analytics view of §12 (sql/functions/status.sql).
    StatusView,
    /// `queen.status_queue`: one queue's status detail, partitions paged (sql/functions/status.sql).
    StatusQueue,
    /// `queen.streams_register`: register or find a stream query (§19).
    StreamsRegister,
    /// `queen.streams_cycle`: a stream cycle's state ops, sink pushes and ack in one transaction (§19).
    StreamsCycle,
    /// `queen.streams_state_get`: a stream partition's state rows (§19).
    StreamsStateGet,
    /// `queen.streams_overview`: the stream queries with partitions, state rows and last cycle (dashboard).
    StreamsOverview,
    /// `queen.cleanup`: one bounded round of inactive-partition and old-metrics cleanup (sql/functions/cleanup.sql).
    Cleanup,
    /// `queen.timers_apply`: schedule/reschedule/cancel ops in one transaction (sql/functions/timers.sql).
    TimersApply,
    /// `queen.timers_peek`: one timer as stored.
    TimersPeek,
    /// `queen.timers_list`: a keyset page of one queue's timers.
    TimersList,
    /// `queen.timers_count`: one queue's timers, optionally by key prefix.
    TimersCount,
    /// `queen.timers_pending`: pending timers per queue of a tenant (dashboard).
    TimersPending,
    /// `queen.timers_fire`: one bounded fire round (the firing job).
    TimersFire,
    /// `queen.eph_declare`: store an ephemeral queue's declaration (sql/functions/ephemeral.sql).
    EphDeclare,
    /// `queen.eph_undeclare`: delete an ephemeral queue's declaration.
    EphUndeclare,
    /// `queen.eph_list`: every ephemeral declaration (each shard's reload).
    EphList,
}

impl Proc {
    /// The SQL statement that calls the procedure.
    pub fn sql(self) -> &'static str {
        match self {
            Proc::Configure => "SELECT queen.configure($1::jsonb)",
            Proc::SystemStateGet => "SELECT queen.system_state_get($1::jsonb)",
            Proc::SystemStateSet => "SELECT queen.system_state_set($1::jsonb)",
            Proc::KvSwitchSet => "SELECT queen.kv_switch_set($1::jsonb)",
            Proc::KvNamespaces => "SELECT queen.kv_namespaces($1::jsonb)",
            Proc::KvList => "SELECT queen.kv_list($1::jsonb)",
            Proc::MetricsSnapshot => "SELECT queen.metrics_snapshot($1::jsonb)",
            Proc::Pop => "SELECT queen.pop($1::jsonb)",
            Proc::PopConflated => "SELECT queen.pop_conflated($1::jsonb)",
            Proc::ExtendLease => "SELECT queen.extend_lease($1::jsonb)",
            Proc::Transaction => "SELECT queen.transaction($1::jsonb)",
            Proc::DlqList => "SELECT queen.dlq_list($1::jsonb)",
            Proc::QueueFlags => "SELECT queen.queue_flags($1::jsonb)",
            Proc::CgList => "SELECT queen.cg_list($1::jsonb)",
            Proc::CgLagging => "SELECT queen.cg_lagging($1::jsonb)",
            Proc::CgDetail => "SELECT queen.cg_detail($1::jsonb)",
            Proc::CgDelete => "SELECT queen.cg_delete($1::jsonb)",
            Proc::CgSubscription => "SELECT queen.cg_subscription($1::jsonb)",
            Proc::CgSeek => "SELECT queen.cg_seek($1::jsonb)",
            Proc::ResQueues => "SELECT queen.res_queues($1::jsonb)",
            Proc::ResQueue => "SELECT queen.res_queue($1::jsonb)",
            Proc::ResQueueDelete => "SELECT queen.res_queue_delete($1::jsonb)",
            Proc::ResDepth => "SELECT queen.res_depth($1::jsonb)",
            Proc::ResNamespaces => "SELECT queen.res_namespaces($1::jsonb)",
            Proc::ResTasks => "SELECT queen.res_tasks($1::jsonb)",
            Proc::ResOverview => "SELECT queen.res_overview($1::jsonb)",
            Proc::ResPartitions => "SELECT queen.res_partitions($1::jsonb)",
            Proc::QueueClear => "SELECT queen.queue_clear($1::jsonb)",
            Proc::MsgList => "SELECT queen.msg_list($1::jsonb)",
            Proc::MsgDetail => "SELECT queen.msg_detail($1::jsonb)",
            Proc::MsgDelete => "SELECT queen.msg_delete($1::jsonb)",
            Proc::MsgRetry => "SELECT queen.msg_retry($1::jsonb)",
            Proc::MsgToDlq => "SELECT queen.msg_to_dlq($1::jsonb)",
            Proc::DlqDelete => "SELECT queen.dlq_delete($1::jsonb)",
            Proc::TraceAdd => "SELECT queen.trace_add($1::jsonb)",
            Proc::TraceByMessage => "SELECT queen.trace_by_message($1::jsonb)",
            Proc::TraceByName => "SELECT queen.trace_by_name($1::jsonb)",
            Proc::TraceNames => "SELECT queen.trace_names($1::jsonb)",
            Proc::Maintenance => "SELECT queen.maintenance($1::jsonb)",
            Proc::StatsRollup => "SELECT queen.stats_rollup($1::jsonb)",
            Proc::StatusView => "SELECT queen.status_view($1::jsonb)",
            Proc::StatusQueue => "SELECT queen.status_queue($1::jsonb)",
            Proc::Cleanup => "SELECT queen.cleanup($1::jsonb)",
            Proc::TimersApply => "SELECT queen.timers_apply($1::jsonb)",
            Proc::TimersPeek => "SELECT queen.timers_peek($1::jsonb)",
            Proc::TimersList => "SELECT queen.timers_list($1::jsonb)",
            Proc::TimersCount => "SELECT queen.timers_count($1::jsonb)",
            Proc::TimersPending => "SELECT queen.timers_pending($1::jsonb)",
            Proc::TimersFire => "SELECT queen.timers_fire($1::jsonb)",
            Proc::StreamsRegister => "SELECT queen.streams_register($1::jsonb)",
            Proc::StreamsCycle => "SELECT queen.streams_cycle($1::jsonb)",
            Proc::StreamsStateGet => "SELECT queen.streams_state_get($1::jsonb)",
            Proc::StreamsOverview => "SELECT queen.streams_overview($1::jsonb)",
            Proc::EphDeclare => "SELECT queen.eph_declare($1::jsonb)",
            Proc::EphUndeclare => "SELECT queen.eph_undeclare($1::jsonb)",
            Proc::EphList => "SELECT queen.eph_list($1::jsonb)",
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
        items: Vec<super::PushItem>,
        /// Items per request.
        counts: Vec<usize>,
    },
    /// A fused ack batch: one `queen.ack_typed` call for the acks of several
    /// requests; answered `StoreReply::Acked` (one result per request, each
    /// the request's slice). A call PostgreSQL rejects is re-run request by
    /// request on these same items, so one bad request fails alone.
    AckBatch {
        /// Tenant of every item (one lane per tenant).
        tenant: String,
        /// The acks, request after request.
        items: Vec<super::ack_fused::AckItem>,
        /// Items per request.
        counts: Vec<usize>,
    },
    /// `SELECT 1`.
    Health,
}

impl Job {
    /// The reply that fails this job as a whole with `err` (a push batch
    /// gives its items back).
    pub fn fail(self, err: StoreError) -> StoreReply {
        match self {
            Job::PushBatch { items, counts, .. } => StoreReply::PushRefused { items, counts, err },
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
    /// A pop attempt's answer (`Proc::Pop`), typed, payloads as JSON text
    /// (boxed: every slot of a reply inbox is as large as the largest variant).
    Popped(Result<Box<super::pop_compact::Popped>, StoreError>),
    /// An ack batch: one result per request, each the request's slice of
    /// per-item answers.
    Acked(Vec<Result<Vec<super::ack_fused::AckAnswer>, StoreError>>),
    /// A push batch: one result per request, each the request's slice of
    /// per-item answers.
    Pushed(Vec<Result<Vec<super::pushed::Pushed>, StoreError>>),
    /// A push batch that never reached PostgreSQL (no connection, job queue
    /// full): its items come back, request after request, so the shard can
    /// spool them without having kept a copy of every push.
    PushRefused {
        /// The batch's items, as sent.
        items: Vec<super::PushItem>,
        /// Items per request, as sent.
        counts: Vec<usize>,
        /// Why the batch did not run.
        err: StoreError,
    },
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
    /// When the shard queued it (for the `db_queue` stage).
    pub sent: Instant,
}

/// A reply on its way back to a shard.
#[derive(Debug)]
pub struct ReplyEnvelope {
    /// The id the shard gave the job.
    pub req: RequestId,
    /// The outcome.
    pub reply: Reply,
    /// How the job's time was spent (request-group jobs only).
    pub timing: Option<Timing>,
}

/// Which kind of job a [`Timing`] is about (its `db_*` stage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A push batch.
    Push,
    /// A pop.
    Pop,
    /// An ack batch.
    Ack,
    /// Any other call or the health probe.
    Call,
}

/// A request-group job's time on the DB side, measured by its DB thread.
/// Compact (µs as `u32`, 32 bytes): every slot of a shard's reply inbox is
/// allocated up front and carries one.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The job's kind.
    pub kind: JobKind,
    /// In the job queue, µs: queued by the shard → taken by a DB thread.
    pub queued_us: u32,
    /// Taken → its reply built (connection checkout, the round trip), µs.
    pub ran_us: u32,
    /// When the reply was built (the shard measures the hop back from it).
    pub done: Instant,
}

impl Timing {
    /// The timing of a job queued at `sent`, taken at `taken`, done at `done`.
    pub fn new(kind: JobKind, sent: Instant, taken: Instant, done: Instant) -> Timing {
        let us = |d: Duration| u32::try_from(d.as_micros()).unwrap_or(u32::MAX);
        Timing {
            kind,
            queued_us: us(taken.saturating_duration_since(sent)),
            ran_us: us(done.saturating_duration_since(taken)),
            done,
        }
    }
}

impl Job {
    /// This job's kind, for its timing.
    pub fn kind(&self) -> JobKind {
        match self {
            Job::PushBatch { .. } => JobKind::Push,
            Job::AckBatch { .. } => JobKind::Ack,
            Job::Call {
                proc: Proc::Pop, ..
            } => JobKind::Pop,
            Job::Call { .. } | Job::Health => JobKind::Call,
        }
    }
}

/// What comes back on a shard's reply inbox.
#[derive(Debug)]
pub enum Reply {
    /// A request-group job's outcome.
    Store(StoreReply),
    /// A KV pool closure's answer (`super::kv_pool`), downcast by
    /// `DbClient::kv_run` to the type the closure returned.
    Closure(Result<Box<dyn std::any::Any + Send>, StoreError>),
}
