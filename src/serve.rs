//! A shard's start-up and its life: builds the [`Shard`] from what `main`
//! made for it, spawns its tasks, and serves HTTP until shutdown. Runs on
//! the shard's own thread (one glommio executor, pinned to its core).
//!
//! This is the top of the shard's side: it reaches every layer (the API
//! router, the background jobs, the metrics sampler, the spool's replay),
//! so that none of them, nor `shard` itself, has to reach up.
//!
//! # Tasks on a shard, in start order
//! - the metrics sampler (once a second; [`metrics::Sampler`]);
//! - on shard 0, the background job schedule (`crate::jobs`, with the
//!   recheck of the KV/timers switches and the KV expiry sweep);
//! - the stop watch: fires `Shard::stopping` when shutdown starts;
//! - the reply drain: takes DB replies off the shard's inbox and completes
//!   the waiting requests (`crate::store::DbClient::complete`);
//! - the notice drain: takes notices from the other shards (and, from peer
//!   brokers, the mesh thread) and applies them (`Shard::apply`);
//! - the ephemeral drain: takes hand-overs from other shards and runs each
//!   in a task of its own (`crate::shard::ephemeral::exec::serve`), and the
//!   ephemeral sweep, declaration reload and (shard 0) member beacon
//!   (`crate::shard::ephemeral::tasks`);
//! - after the spool adopted its leftover segments, its replay and the
//!   maintenance-flag refresh (`crate::spool::replay`);
//! - the HTTP server (`shards::listen::serve`), one task per connection,
//!   each request routed by `crate::api`;
//! - and, spawned as they go, push and ack batches (`crate::shard::lanes`).

use crate::config::Config;
use crate::mesh::{Delivered, Notice};
use crate::metrics;
use crate::metrics::stages::Stage;
use crate::shard::ephemeral::{self, handover::Call};
use crate::shard::{Links, Shard};
use crate::store::jobs::{JobKind, Timing};
use crate::store::{JobEnvelope, ReplyEnvelope};
use crossbeam_channel::Sender;
use shards::inbox::{latency_queue, InboxReceiver, InboxSender};
use shards::shutdown::ShutdownListener;
use shards::ShardId;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Replies (and notices) drained per wake-up.
const REPLY_DRAIN_BATCH: usize = 256;

/// What main hands each shard thread before its executor starts.
#[derive(Debug)]
pub struct ShardInit {
    /// Boot configuration (shared read-only; copied into the shard).
    pub cfg: Arc<Config>,
    /// This shard's DB reply inbox.
    pub replies: InboxReceiver<ReplyEnvelope>,
    /// This shard's notice inbox (from the other shards and, for peers, the mesh thread).
    pub notices: InboxReceiver<Delivered>,
    /// The DB job queue.
    pub jobs: Sender<JobEnvelope>,
    /// The KV pool's job queue.
    pub kv_jobs: Sender<crate::store::kv_pool::KvJob>,
    /// The broker's KV/timers kill switches.
    pub kv_switch: Arc<crate::shard::kv_switch::KvSwitch>,
    /// The queue to the mesh thread.
    pub mesh: Sender<Notice>,
    /// Every shard's notice inbox (index = shard id).
    pub siblings: Vec<InboxSender<Delivered>>,
    /// Mesh peer states and counters (atomics written by the mesh threads).
    pub mesh_state: Arc<crate::mesh::state::MeshState>,
    /// Shutdown signal.
    pub shutdown: ShutdownListener,
    /// Every shard's metrics slot (this shard writes slot `id`).
    pub stats: Arc<metrics::Board>,
    /// This shard's ephemeral hand-over inbox.
    pub eph_inbox: InboxReceiver<Call>,
    /// The store's links: every shard's inbox, the gauges, this broker.
    pub eph: crate::shard::EphLinks,
}

/// Runs shard `id` until shutdown: its tasks and the HTTP server.
pub async fn run(id: ShardId, init: ShardInit) {
    let cfg = Rc::new((*init.cfg).clone());
    let shard = Shard::new(
        id,
        cfg.clone(),
        Links {
            jobs: init.jobs,
            kv_jobs: init.kv_jobs,
            kv_switch: init.kv_switch,
            mesh: init.mesh,
            siblings: init.siblings,
            mesh_state: init.mesh_state,
            stats: init.stats,
            eph: init.eph,
        },
    );
    spawn_sampler(&shard);
    if id.0 == 0 {
        // Shard 0 owns the background job schedule (src/jobs).
        crate::jobs::spawn(&shard);
    }
    // Inbox drains run in the latency queue: a busy shard otherwise only
    // notices a wake from another thread at its next preemption (~100 ms).
    let queue = latency_queue("inbox");
    let s = shard.clone();
    let shutdown = init.shutdown.clone();
    spawn_drain(id, queue, async move {
        shutdown.wait().await;
        s.stopping.fire();
    });
    let s = shard.clone();
    let replies = init.replies;
    spawn_drain(id, queue, async move {
        let mut buf = Vec::with_capacity(REPLY_DRAIN_BATCH);
        while replies.recv_batch(&mut buf, REPLY_DRAIN_BATCH).await > 0 {
            for r in buf.drain(..) {
                if let Some(t) = &r.timing {
                    job_stages(&s, t);
                }
                s.db.complete(r);
            }
        }
    });
    let s = shard.clone();
    let notices = init.notices;
    spawn_drain(id, queue, async move {
        let mut buf = Vec::with_capacity(REPLY_DRAIN_BATCH);
        while notices.recv_batch(&mut buf, REPLY_DRAIN_BATCH).await > 0 {
            for (n, sent) in buf.drain(..) {
                if let Some(sent) = sent {
                    s.counters.stage(Stage::Notice, sent.elapsed());
                }
                s.apply(&n);
            }
        }
    });
    let s = shard.clone();
    let eph_inbox = init.eph_inbox;
    spawn_drain(id, queue, async move {
        let mut buf = Vec::with_capacity(REPLY_DRAIN_BATCH);
        while eph_inbox.recv_batch(&mut buf, REPLY_DRAIN_BATCH).await > 0 {
            for call in buf.drain(..) {
                glommio::spawn_local(ephemeral::exec::serve(s.clone(), call)).detach();
            }
        }
    });
    crate::shard::ephemeral::tasks::spawn(&shard);
    let server = Rc::new(shards::listen::ServerConfig {
        addr: cfg.http_addr,
        max_body_bytes: cfg.max_body_bytes,
        tls: cfg.tls.clone(),
        ..Default::default()
    });
    // Leftover spool segments are adopted before serving, so no new push
    // overtakes an older spooled one of its partition.
    shard.spool.open(cfg.nr_shards).await;
    spawn_replay(&shard);
    let handler: Rc<dyn shards::listen::Handler> = Rc::new(crate::api::Router::new(shard.clone()));
    if let Err(e) = shards::listen::serve(server, handler, init.shutdown).await {
        log::error!("shard {id}: HTTP server failed: {e}");
    }
    log::debug!("shard {id}: stopped");
}

/// Counts a DB job's time in the job queue, on its DB thread, and on its
/// way back (the `db_*` stages of `crate::metrics::stages`).
fn job_stages(shard: &Shard, t: &Timing) {
    let run = match t.kind {
        JobKind::Push => Stage::DbPush,
        JobKind::Pop => Stage::DbPop,
        JobKind::Ack => Stage::DbAck,
        JobKind::Call => Stage::DbCall,
    };
    let us = |n: u32| std::time::Duration::from_micros(n.into());
    shard.counters.stage(Stage::DbQueue, us(t.queued_us));
    shard.counters.stage(run, us(t.ran_us));
    shard.counters.stage(Stage::DbReply, t.done.elapsed());
}

/// Starts the spool's replay and flag refresh with the parts of `shard`
/// they use; their notices go out through `Shard::notify`.
fn spawn_replay(shard: &Rc<Shard>) {
    let s = shard.clone();
    crate::spool::replay::spawn(crate::spool::replay::Replay {
        id: shard.id,
        spool: shard.spool.clone(),
        db: shard.db.clone(),
        stopping: shard.stopping.clone(),
        notify: Rc::new(move |n| s.notify(n)),
        flush_ms: shard.cfg.file_buffer_flush_ms,
        max_batch: shard.cfg.file_buffer_max_batch,
        refresh_ms: shard.cfg.cache_refresh_ms,
    });
}

/// Starts the shard's sampler: every [`metrics::SAMPLE_EVERY`] it warms the
/// DB snapshot, measures loop lag, copies the DB and lane counters into the
/// shard's slot and publishes rates. Ends when the shard stops or is dropped
/// (it holds the shard weakly).
fn spawn_sampler(shard: &Rc<Shard>) {
    let weak = Rc::downgrade(shard);
    glommio::spawn_local(async move {
        let mut sampler = metrics::Sampler::default();
        loop {
            let asked = Instant::now();
            glommio::timer::sleep(metrics::SAMPLE_EVERY).await;
            let late = asked.elapsed().saturating_sub(metrics::SAMPLE_EVERY);
            let Some(shard) = weak.upgrade() else { return };
            if shard.stopping.is_fired() {
                return;
            }
            shard.db_snapshot.warm(&shard.db);
            let (push_batches, push_fused) = shard.lane_totals();
            let copied = metrics::Copied {
                loop_lag: late,
                db_jobs: shard.db.nr_jobs.get(),
                db_inflight: shard.db.in_flight() as u64,
                push_batches,
                push_fused,
            };
            sampler.sample(&shard.counters, copied);
        }
    })
    .detach();
}

fn spawn_drain(
    id: ShardId,
    queue: glommio::TaskQueueHandle,
    f: impl std::future::Future<Output = ()> + 'static,
) {
    match glommio::spawn_local_into(f, queue) {
        Ok(t) => {
            t.detach();
        }
        Err(e) => log::error!("shard {id}: cannot spawn an inbox drain: {e}"),
    }
}
