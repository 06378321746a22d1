//! The KV pool: PostgreSQL connections and threads of their own for the
//! key/value store, locks and timers (issue 14), apart from the request
//! group (`db_group`), so a queue backlog cannot starve the KV and the KV
//! cannot starve the queues.
//!
//! # Threads and ownership
//! `kv-<n>` (one per connection, `QUEEN_KV_POOL_SIZE`): takes a [`KvJob`]
//! off the pool's own bounded queue, runs its closure on a connection
//! checked out of the pool's own r2d2 pool, and sends the closure's answer
//! to the asking shard's reply inbox (the same inbox and drain as the
//! request group's replies: `Reply::Closure`). A shard reaches the
//! pool through `DbClient::kv_run`.
//!
//! # Never a hang
//! A full pool answers, it does not queue without bound: a job that finds
//! the queue full fails at once, and a job no thread has started within
//! [`KV_QUEUE_PATIENCE`] is abandoned by the asking shard and never run,
//! both answered `StoreError::Busy` (the API turns it into 503
//! `kv_unavailable` with `Retry-After`). The job's [`JobState`] decides that
//! race: the thread moves it queued → started, the shard queued → abandoned,
//! and only one of them can; so a 503 always means "not applied" and a retry
//! is safe, and a job already running is waited for (its statement is bounded
//! by `DB_STATEMENT_TIMEOUT` / `DB_LOCK_TIMEOUT`). Until the request group's
//! boot thread has applied the schema, jobs are answered `Unavailable`.
//!
//! # Connection budget
//! The default is `clamp(DB_POOL_SIZE / 10, 4, 32)` (config.md): 4 beside the
//! request group's 16, so 20 long-lived connections plus the boot thread's
//! short-lived one, under the 25 of decisions.md.

use super::jobs::{Reply, ReplyEnvelope, RequestId, StoreError};
use super::pg_tls::Connector;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use r2d2_postgres::PostgresConnectionManager;
use shards::inbox::InboxSender;
use shards::ShardId;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

type Pool = r2d2::Pool<PostgresConnectionManager<Connector>>;

/// Jobs the KV queue holds per connection: enough for a burst from every
/// shard, small enough that a job at its tail is run within the patience.
pub const KV_QUEUE_PER_CONN: usize = 64;

/// Longest a KV job waits in the queue for a thread before the asking shard
/// abandons it and answers 503: a KV call is short, one waiting this long
/// means the pool is saturated and the client does better retrying.
pub const KV_QUEUE_PATIENCE: Duration = Duration::from_secs(1);

/// How often an idle KV thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The work a KV thread runs: a closure on a connection; its boxed answer
/// goes back to the asking shard.
pub type KvWork = Box<dyn FnOnce(&mut postgres::Client) -> Box<dyn Any + Send> + Send>;

/// Who owns a queued job: the thread that starts it or the shard that gives
/// up on it (see "Never a hang").
#[derive(Debug, Default)]
pub struct JobState(AtomicU8);

const QUEUED: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

impl JobState {
    /// The KV thread takes the job; false if the shard gave up on it.
    pub fn start(&self) -> bool {
        self.0
            .compare_exchange(QUEUED, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The shard gives up on the job; false if a thread already runs it.
    pub fn abandon(&self) -> bool {
        self.0
            .compare_exchange(QUEUED, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// A closure on its way to a KV thread.
pub struct KvJob {
    /// The shard to answer.
    pub shard: ShardId,
    /// The shard's id for this request.
    pub req: RequestId,
    /// Started or abandoned (shared with the asking shard).
    pub state: Arc<JobState>,
    /// The work.
    pub work: KvWork,
}

impl std::fmt::Debug for KvJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvJob")
            .field("shard", &self.shard)
            .field("req", &self.req)
            .finish()
    }
}

/// The running KV pool.
#[derive(Debug)]
pub struct KvPool {
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl KvPool {
    /// Starts `size` KV threads on `pg`. `ready` is the request group's
    /// schema-applied flag. Returns the pool and the job sender the shards share.
    pub fn start(
        size: usize,
        pg: postgres::Config,
        tls: Connector,
        connect_timeout: Duration,
        ready: Arc<AtomicBool>,
        replies: Vec<InboxSender<ReplyEnvelope>>,
    ) -> (KvPool, Sender<KvJob>) {
        let (tx, rx) = crossbeam_channel::bounded::<KvJob>(size * KV_QUEUE_PER_CONN);
        let mut pg = pg;
        pg.application_name("queen-kv");
        let pool: Pool = r2d2::Pool::builder()
            .max_size(size as u32)
            .min_idle(Some(0))
            .connection_timeout(connect_timeout.max(Duration::from_millis(100)))
            .test_on_check_out(false)
            .build_unchecked(PostgresConnectionManager::new(pg, tls));
        let stop = Arc::new(AtomicBool::new(false));
        let replies = Arc::new(replies);
        let threads = (0..size)
            .map(|n| {
                let (rx, pool, ready, replies, stop) = (
                    rx.clone(),
                    pool.clone(),
                    ready.clone(),
                    replies.clone(),
                    stop.clone(),
                );
                std::thread::Builder::new()
                    .name(format!("kv-{n}"))
                    .spawn(move || serve(rx, pool, ready, replies, stop))
                    .expect("spawning a thread at boot")
            })
            .collect();
        (KvPool { threads, stop }, tx)
    }

    /// Stops the pool (after the shards ended) and waits for its threads.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn serve(
    rx: Receiver<KvJob>,
    pool: Pool,
    ready: Arc<AtomicBool>,
    replies: Arc<Vec<InboxSender<ReplyEnvelope>>>,
    stop: Arc<AtomicBool>,
) {
    loop {
        let job = match rx.recv_timeout(STOP_POLL) {
            Ok(j) => j,
            Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Acquire) => continue,
            Err(_) => return,
        };
        if !job.state.start() {
            continue; // the shard gave up on it and answered 503
        }
        let reply = if !ready.load(Ordering::Acquire) {
            Err(StoreError::Unavailable("database not connected yet".into()))
        } else {
            match pool.get() {
                Ok(mut c) => Ok((job.work)(&mut c)),
                Err(e) => Err(StoreError::Unavailable(e.to_string())),
            }
        };
        if let Some(inbox) = replies.get(job.shard.0) {
            // A shard shutting down drops an answer nobody awaits.
            let _ = inbox.send_blocking(ReplyEnvelope {
                req: job.req,
                reply: Reply::Closure(reply),
                timing: None,
            });
        }
    }
}
