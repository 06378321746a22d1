//! The DB thread group: the only threads that block on PostgreSQL.
//!
//! # Threads and ownership
//! - `db-boot`: connects with backoff (one log line per failed attempt),
//!   applies `sql/`, then sets `ready`. Until then every job is answered
//!   `StoreError::Unavailable`, so the broker serves (`/health` 503) while
//!   PostgreSQL is down at boot.
//! - `db-<n>` (one per pooled connection): takes jobs from the one bounded
//!   crossbeam queue, runs each as one round trip on a connection checked out
//!   of the r2d2 pool, and sends the reply to the asking shard's inbox. The
//!   inbox wakes the shard once per empty→non-empty transition. Which idle
//!   thread takes the next job is the [`Relay`]'s: the one idle the shortest
//!   time. Its mutex is the DB threads' own (no shard touches it).
//!
//! Every statement is prepared once per connection (`pooled::Conn`), so a
//! job costs one round trip and PostgreSQL neither parses nor plans the
//! call's own statement again.

use super::jobs::*;
use super::pg_tls::Connector;
use super::pooled::{Conn, Manager};
use super::schema;
use super::sql_error::classify;
use super::DbConfig;
use super::{PushItem, Pushed};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use postgres::types::Type;
use r2d2_postgres::PostgresConnectionManager;
use serde_json::Value;
use shards::inbox::InboxSender;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

type Pool = r2d2::Pool<Manager>;

/// How often an idle DB thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The running DB thread group.
#[derive(Debug)]
pub struct DbGroup {
    /// Worker threads and the boot thread.
    threads: Vec<JoinHandle<()>>,
    /// Set by `stop`; DB threads finish the job in hand and end. Detached
    /// shard tasks may still hold job senders, so the channel closing alone
    /// cannot be relied on to end them.
    stop: Arc<AtomicBool>,
    /// The KV pool's threads (`super::kv_pool`), started with the group and
    /// sharing its `ready` flag.
    kv: super::kv_pool::KvPool,
}

impl DbGroup {
    /// Starts the boot thread, `cfg.pool_size` DB threads and the KV pool's
    /// `cfg.kv_pool_size`. Returns the group and the job senders the shards
    /// share (request group, KV pool).
    pub fn start(
        cfg: &DbConfig,
        replies: Vec<InboxSender<ReplyEnvelope>>,
    ) -> (DbGroup, Sender<JobEnvelope>, Sender<super::kv_pool::KvJob>) {
        let (tx, rx) = crossbeam_channel::bounded::<JobEnvelope>(cfg.queue_depth);
        let pg = pg_config(cfg);
        let tls = cfg.pg.tls.connector();
        let manager = Manager(PostgresConnectionManager::new(pg.clone(), tls.clone()));
        let pool: Pool = r2d2::Pool::builder()
            .max_size(cfg.pool_size as u32)
            .min_idle(Some(0))
            .connection_timeout(cfg.pg.connect_timeout.max(Duration::from_millis(100)))
            // A dead connection shows up as an error on use and is dropped
            // then; a probe query on every checkout would double round trips.
            .test_on_check_out(false)
            .build_unchecked(manager);
        let ready = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (kv, kv_tx) = super::kv_pool::KvPool::start(
            cfg.kv_pool_size,
            cfg.kv_group_max,
            pg.clone(),
            tls.clone(),
            cfg.pg.connect_timeout,
            ready.clone(),
            replies.clone(),
        );
        let replies = Arc::new(replies);
        let relay = Arc::new(Relay::default());
        let mut threads = Vec::new();
        let (boot_ready, boot_stop) = (ready.clone(), stop.clone());
        let apply = cfg.apply_schema;
        threads.push(
            std::thread::Builder::new()
                .name("db-boot".into())
                .spawn(move || boot(pg, tls, apply, boot_ready, boot_stop))
                .expect("spawning a thread at boot"),
        );
        for n in 0..cfg.pool_size {
            let worker = Worker {
                rx: rx.clone(),
                pool: pool.clone(),
                ready: ready.clone(),
                replies: replies.clone(),
                stop: stop.clone(),
                relay: relay.clone(),
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("db-{n}"))
                    .spawn(move || worker.serve())
                    .expect("spawning a thread at boot"),
            );
        }
        (DbGroup { threads, stop, kv }, tx, kv_tx)
    }

    /// Stops the group (call after the shards ended) and waits for its threads.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.kv.stop();
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn pg_config(cfg: &DbConfig) -> postgres::Config {
    let mut pg = postgres::Config::new();
    pg.host(&cfg.pg.host)
        .port(cfg.pg.port)
        .user(&cfg.pg.user)
        .password(&cfg.pg.password)
        .dbname(&cfg.pg.dbname)
        .application_name("queen")
        .ssl_mode(cfg.pg.tls.ssl_mode())
        .connect_timeout(cfg.pg.connect_timeout)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(60))
        // jit=off: every statement the broker runs is short, but a plan over a
        // large queen.messages is estimated above jit_above_cost, and PostgreSQL
        // then compiles it with LLVM on every execution (compiled code is not
        // cached): 685 ms of a 924 ms stats rescan of 2,114 partitions here.
        .options(&format!(
            "-c statement_timeout={} -c lock_timeout={} -c jit=off",
            cfg.pg.statement_timeout_ms, cfg.pg.lock_timeout_ms
        ));
    pg
}

/// Connects and applies the schema, retrying with backoff until it works.
fn boot(
    pg: postgres::Config,
    tls: Connector,
    apply: bool,
    ready: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let mut delay = Duration::from_millis(200);
    let mut attempt = 1u32;
    while !stop.load(Ordering::Acquire) {
        let outcome = pg
            .connect(tls.clone())
            .map_err(|e| super::pg_tls::describe(&e))
            .and_then(|mut c| if apply { schema::apply(&mut c) } else { Ok(()) });
        match outcome {
            Ok(()) => {
                log::info!(
                    "PostgreSQL connected{} (attempt {attempt})",
                    if apply { ", schema applied" } else { "" }
                );
                ready.store(true, Ordering::Release);
                return;
            }
            Err(e) => {
                log::warn!(
                    "PostgreSQL not ready (attempt {attempt}, next in {} ms): {e}",
                    delay.as_millis()
                );
                let until = std::time::Instant::now() + delay;
                while std::time::Instant::now() < until && !stop.load(Ordering::Acquire) {
                    std::thread::sleep(STOP_POLL);
                }
                delay = (delay * 2).min(Duration::from_secs(5));
                attempt += 1;
            }
        }
    }
}

/// What one DB thread holds.
struct Worker {
    /// The job queue (every DB thread's).
    rx: Receiver<JobEnvelope>,
    /// The connections.
    pool: Pool,
    /// Set once the schema is applied.
    ready: Arc<AtomicBool>,
    /// Every shard's reply inbox, by shard id.
    replies: Arc<Vec<InboxSender<ReplyEnvelope>>>,
    /// Set by `DbGroup::stop`.
    stop: Arc<AtomicBool>,
    /// Whose turn it is to wait on the job queue.
    relay: Arc<Relay>,
}

impl Worker {
    fn serve(self) {
        let me = Arc::new(Baton {
            thread: std::thread::current(),
            passed: AtomicBool::new(false),
        });
        while self.relay.wait_turn(&me, &self.stop) {
            let env = loop {
                match self.rx.recv_timeout(STOP_POLL) {
                    Ok(env) => break env,
                    Err(RecvTimeoutError::Timeout) if !self.stop.load(Ordering::Acquire) => {}
                    Err(_) => return,
                }
            };
            // The next job may arrive while this one runs: another thread waits for it.
            self.relay.pass_on();
            self.answer(env);
        }
    }

    /// Runs one job and sends its reply.
    fn answer(&self, env: JobEnvelope) {
        let taken = Instant::now();
        let kind = env.job.kind();
        let reply = if self.ready.load(Ordering::Acquire) {
            let reply = run(&self.pool, env.job);
            log_link(&reply);
            reply
        } else {
            unavailable(env.job, "database not connected yet")
        };
        let done = Instant::now();
        let timing = Timing::new(kind, env.sent, taken, done);
        if let Some(inbox) = self.replies.get(env.shard.0) {
            // The shard may be shutting down; a lost reply then only drops an answer nobody awaits.
            let _ = inbox.send_blocking(ReplyEnvelope {
                req: env.req,
                reply: Reply::Store(reply),
                timing: Some(timing),
            });
        }
    }
}

/// Hands the job queue to one idle DB thread at a time, the one idle the
/// shortest time first (a stack), so a load that keeps k jobs running is
/// served by the same k + 1 threads and the others never run.
///
/// Why: crossbeam wakes the receivers waiting on a channel in turn, so every
/// DB thread of the pool ran jobs and kept a warm allocator heap (allocator
/// caches are per thread), its stack and its share of cross-thread frees, and
/// the pool size (DB_POOL_SIZE, 20 in issue 18's runs) set the resident
/// memory rather than the load (issue 18, broker memory). The cost: a job
/// arriving while the new waiter is still being woken (a futex wake, µs)
/// sits in the queue until it is up.
#[derive(Debug, Default)]
struct Relay {
    /// The waiter and the parked threads; held for a few instructions.
    state: Mutex<Turns>,
}

/// The relay's state.
#[derive(Debug, Default)]
struct Turns {
    /// A thread is waiting on the job queue (or has been handed the turn).
    leader: bool,
    /// Parked idle threads, the most recently idle last.
    idle: Vec<Arc<Baton>>,
}

/// One DB thread's place in the relay.
#[derive(Debug)]
struct Baton {
    /// The thread, to unpark.
    thread: Thread,
    /// Set when the turn is handed to it.
    passed: AtomicBool,
}

impl Relay {
    fn turns(&self) -> std::sync::MutexGuard<'_, Turns> {
        // A DB thread that panicked while holding it left nothing half-done
        // (every change under the lock is one push, pop or flag).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until it is `me`'s turn to wait on the job queue; false when
    /// `stop` is set first. Parking, it offers to trim the heap (`heap`:
    /// at most once a second, process-wide).
    fn wait_turn(&self, me: &Arc<Baton>, stop: &AtomicBool) -> bool {
        {
            let mut t = self.turns();
            if !t.leader {
                t.leader = true;
                return true;
            }
            me.passed.store(false, Ordering::Release);
            t.idle.push(me.clone());
        }
        crate::heap::trim_now_and_then();
        loop {
            std::thread::park_timeout(STOP_POLL);
            if me.passed.load(Ordering::Acquire) {
                return true;
            }
            if stop.load(Ordering::Acquire) {
                return false;
            }
        }
    }

    /// The waiter took a job: the most recently idle thread waits next.
    fn pass_on(&self) {
        let mut t = self.turns();
        match t.idle.pop() {
            Some(next) => {
                next.passed.store(true, Ordering::Release);
                next.thread.unpark();
            }
            None => t.leader = false,
        }
    }
}

/// Whether the last job saw PostgreSQL unreachable (for the lost/back log
/// lines). Process-wide, shared by the DB threads: one line per event for
/// the whole group, not one per thread.
static PG_LOST: AtomicBool = AtomicBool::new(false);

/// Logs one line when PostgreSQL becomes unreachable and one when it answers
/// again (issue 7: one line per notable event, not one per failed job).
fn log_link(reply: &StoreReply) {
    let lost = match reply {
        StoreReply::Value(Err(StoreError::Unavailable(m)))
        | StoreReply::Popped(Err(StoreError::Unavailable(m))) => Some(m),
        StoreReply::PushRefused {
            err: StoreError::Unavailable(m),
            ..
        } => Some(m),
        StoreReply::Acked(v) => v.iter().find_map(|r| match r {
            Err(StoreError::Unavailable(m)) => Some(m),
            _ => None,
        }),
        StoreReply::Pushed(v) => v.iter().find_map(|r| match r {
            Err(StoreError::Unavailable(m)) => Some(m),
            _ => None,
        }),
        _ => None,
    };
    if PG_LOST.load(Ordering::Relaxed) == lost.is_some() {
        return;
    }
    match lost {
        Some(m) if !PG_LOST.swap(true, Ordering::Relaxed) => {
            log::warn!("PostgreSQL lost: {m}")
        }
        None if PG_LOST.swap(false, Ordering::Relaxed) => log::info!("PostgreSQL back"),
        _ => {}
    }
}

fn unavailable(job: Job, why: &str) -> StoreReply {
    job.fail(StoreError::Unavailable(why.to_string()))
}

fn run(pool: &Pool, job: Job) -> StoreReply {
    let mut conn = match pool.get() {
        Ok(c) => c,
        Err(e) => return unavailable(job, &e.to_string()),
    };
    match job {
        Job::Health => StoreReply::Value(
            conn.simple_query("SELECT 1")
                .map(|_| Value::Null)
                .map_err(classify),
        ),
        // Pop answers in columns, typed here (src/store/pop_compact.rs).
        Job::Call {
            proc: Proc::Pop,
            arg,
        } => {
            let popped = super::pop_compact::call(&mut conn, &arg);
            if let Ok(p) = &popped {
                conn.retire_if_big(p.texts.bytes().len());
            }
            StoreReply::Popped(popped.map(Box::new))
        }
        Job::Call { proc, arg } => {
            // Serialised once: its length decides retirement (the client's
            // write buffers keep the size of the largest statement sent),
            // and its text is the parameter.
            let arg = super::payload::Payload::of_value(&arg);
            conn.retire_if_big(arg.len());
            StoreReply::Value(
                conn.query_prepared(proc.sql(), &[(&arg, Type::JSONB)])
                    .map_err(classify)
                    .and_then(|rows| conn.first_json(&rows)),
            )
        }
        Job::AckBatch {
            tenant,
            items,
            counts,
        } => StoreReply::Acked(super::ack_fused::run(&mut conn, &tenant, &items, &counts)),
        Job::PushBatch {
            tenant,
            items,
            counts,
        } => {
            // A statement carries one item bigger than a piece whole, and the
            // client's write buffers keep its size (`push_typed::PIECE_BYTES`).
            conn.retire_if_big(items.iter().map(|i| i.payload.len()).max().unwrap_or(0));
            let results = push_batch(&mut conn, &tenant, &items, &counts);
            match results.first() {
                Some(Err(e @ StoreError::Unavailable(_)))
                    if results
                        .iter()
                        .all(|r| matches!(r, Err(StoreError::Unavailable(_)))) =>
                {
                    let err = e.clone();
                    StoreReply::PushRefused { items, counts, err }
                }
                _ => StoreReply::Pushed(results),
            }
        }
    }
}

/// Runs a fused push batch; on a non-connection failure retries request by
/// request so that the bad one fails alone and its neighbours succeed.
fn push_batch(
    c: &mut Conn,
    tenant: &str,
    items: &[PushItem],
    counts: &[usize],
) -> Vec<Result<Vec<Pushed>, StoreError>> {
    match push_call(c, tenant, items) {
        Ok(results) => split(results, counts),
        Err(StoreError::Db(_)) if counts.len() > 1 => {
            let mut out = Vec::with_capacity(counts.len());
            let mut at = 0;
            for &n in counts {
                out.push(push_call(c, tenant, &items[at..at + n]));
                at += n;
            }
            out
        }
        Err(e) => counts.iter().map(|_| Err(e.clone())).collect(),
    }
}

fn split<T>(results: Vec<T>, counts: &[usize]) -> Vec<Result<Vec<T>, StoreError>> {
    let mut it = results.into_iter();
    counts
        .iter()
        .map(|&n| Ok(it.by_ref().take(n).collect()))
        .collect()
}

fn push_call(c: &mut Conn, tenant: &str, items: &[PushItem]) -> Result<Vec<Pushed>, StoreError> {
    // Typed arrays in, compact answer expanded per item (src/store/push_typed.rs).
    super::push_typed::call(c, tenant, items)
}
