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
//! pool through `DbClient::kv_run` (a closure, run alone) and
//! `DbClient::kv_group_call` (a KV or lock call, which may share its commit).
//!
//! # Group commit
//! A thread whose next job is a [`KvCall`] also takes the calls queued
//! behind it, without waiting for more (up to `QUEEN_KV_GROUP_MAX` calls and
//! [`KV_GROUP_MAX_OPS`] ops), and runs them as one group: one statement, one
//! commit, each call under its own savepoint (`super::kv_group`). Every call
//! of the group is started (its shard waits for it) before the group runs,
//! and answered only after the group's commit. A closure met while taking
//! calls, a call past the caps, or one whose first write is the row a
//! member's first write locks (a hot key: `KvCall::same_first_row`), is kept
//! and run next, by this thread.
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
use super::kv_group::{self, KvCall, KV_GROUP_MAX_OPS};
use super::pg_tls::Connector;
use super::pooled::{Conn, Manager};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use r2d2_postgres::PostgresConnectionManager;
use shards::inbox::InboxSender;
use shards::ShardId;
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

// Connections that carried a big result are closed, as the request group's
// are (`super::pooled`).
type Pool = r2d2::Pool<Manager>;

/// Jobs the KV queue holds per connection: enough for a burst from every
/// shard, small enough that a job at its tail is run within the patience.
pub const KV_QUEUE_PER_CONN: usize = 64;

/// Longest a KV job waits in the queue for a thread before the asking shard
/// abandons it and answers 503: a KV call is short, one waiting this long
/// means the pool is saturated and the client does better retrying.
pub const KV_QUEUE_PATIENCE: Duration = Duration::from_secs(1);

/// How often an idle KV thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// A closure on a connection; its boxed answer goes back to the asking shard.
pub type KvClosure = Box<dyn FnOnce(&mut Conn) -> Box<dyn Any + Send> + Send>;

/// The work a KV thread runs.
pub enum KvWork {
    /// Anything on a connection, run alone (timers, the sweep, the switch).
    Closure(KvClosure),
    /// A KV or lock call, which may share a commit with others queued
    /// beside it; answered `Result<CallAnswer, StoreError>`.
    Call(KvCall),
}

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

/// Work on its way to a KV thread.
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
        group_max: usize,
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
            .build_unchecked(Manager(PostgresConnectionManager::new(pg, tls)));
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
                    .spawn(move || {
                        let t = Thread {
                            pool,
                            ready,
                            replies,
                            group_max: group_max.max(1),
                        };
                        t.serve(rx, stop)
                    })
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

/// One KV thread's shared handles.
struct Thread {
    pool: Pool,
    ready: Arc<AtomicBool>,
    replies: Arc<Vec<InboxSender<ReplyEnvelope>>>,
    group_max: usize,
}

/// A started call and whom to answer.
struct Member {
    shard: ShardId,
    req: RequestId,
    call: KvCall,
}

impl Thread {
    fn serve(&self, rx: Receiver<KvJob>, stop: Arc<AtomicBool>) {
        let mut kept: Option<KvJob> = None;
        loop {
            let job = match kept.take() {
                Some(j) => j,
                None => match rx.recv_timeout(STOP_POLL) {
                    Ok(j) => j,
                    Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Acquire) => continue,
                    Err(_) => return,
                },
            };
            if !job.state.start() {
                continue; // the shard gave up on it and answered 503
            }
            match job.work {
                KvWork::Closure(work) => {
                    let reply = self.connection().map(|mut c| work(&mut c));
                    self.send(job.shard, job.req, reply);
                }
                KvWork::Call(call) => {
                    let mut group = vec![Member {
                        shard: job.shard,
                        req: job.req,
                        call,
                    }];
                    kept = self.gather(&rx, &mut group);
                    self.run_group(group);
                }
            }
        }
    }

    /// Takes the calls queued now behind the group's first, within the caps;
    /// returns the job that stopped it (a closure, a call past the caps).
    fn gather(&self, rx: &Receiver<KvJob>, group: &mut Vec<Member>) -> Option<KvJob> {
        let mut ops: usize = group.iter().map(|m| m.call.len()).sum();
        while group.len() < self.group_max {
            let job = match rx.try_recv() {
                Ok(j) => j,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return None,
            };
            let fits = matches!(&job.work, KvWork::Call(c)
                if ops + c.len() <= KV_GROUP_MAX_OPS
                    && !group.iter().any(|m| m.call.same_first_row(c)));
            if !fits {
                return Some(job);
            }
            if !job.state.start() {
                continue;
            }
            let KvWork::Call(call) = job.work else {
                unreachable!("checked above")
            };
            ops += call.len();
            group.push(Member {
                shard: job.shard,
                req: job.req,
                call,
            });
        }
        None
    }

    /// Runs a group's calls and answers each after its commit.
    fn run_group(&self, group: Vec<Member>) {
        let (who, calls): (Vec<_>, Vec<_>) = group
            .into_iter()
            .map(|m| ((m.shard, m.req), m.call))
            .unzip();
        match self.connection() {
            Ok(mut c) => kv_group::run(&mut c, &calls, |i, r| {
                self.send(who[i].0, who[i].1, Ok(Box::new(r)));
            }),
            Err(e) => {
                for (shard, req) in who {
                    self.send(shard, req, Err(e.clone()));
                }
            }
        }
    }

    /// A connection, once the schema is applied.
    fn connection(&self) -> Result<r2d2::PooledConnection<Manager>, StoreError> {
        if !self.ready.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable("database not connected yet".into()));
        }
        self.pool
            .get()
            .map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    fn send(&self, shard: ShardId, req: RequestId, reply: Result<Box<dyn Any + Send>, StoreError>) {
        if let Some(inbox) = self.replies.get(shard.0) {
            // A shard shutting down drops an answer nobody awaits.
            let _ = inbox.send_blocking(ReplyEnvelope {
                req,
                reply: Reply::Closure(reply),
                timing: None,
            });
        }
    }
}
