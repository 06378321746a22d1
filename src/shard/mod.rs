//! One shard: the state a glommio executor owns (`Rc`, `RefCell`, `Cell`;
//! nothing here crosses threads) and the tasks it runs.
//!
//! # Tasks on a shard
//! - the HTTP server (`shards::listen::serve`), one task per connection,
//!   each request routed by `crate::api`;
//! - the reply drain: takes DB replies off the shard's inbox and completes
//!   the waiting requests (`crate::store::DbClient`);
//! - the notice drain: takes notices from the mesh thread and wakes parked
//!   pops ([`waiters`]);
//! - push batches spawned by the lanes ([`lanes`]).

pub mod ack_lanes;
pub mod cache;
pub mod fusion;
pub mod lanes;
pub mod waiters;

use crate::config::Config;
use crate::mesh::{Envelope, Notice};
use crate::store::{DbClient, JobEnvelope, ReplyEnvelope};
use crossbeam_channel::Sender;
use shards::inbox::latency_queue;
use shards::inbox::InboxReceiver;
use shards::shutdown::{LocalSignal, ShutdownListener};
use shards::ShardId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// The tenant every request belongs to while native tenancy is off.
pub const DEFAULT_TENANT: &str = "00000000-0000-0000-0000-000000000001";

/// Replies drained per wake-up.
const REPLY_DRAIN_BATCH: usize = 256;

/// What main hands each shard thread before its executor starts.
#[derive(Debug)]
pub struct ShardInit {
    /// Boot configuration (shared read-only; copied into the shard).
    pub cfg: Arc<Config>,
    /// This shard's DB reply inbox.
    pub replies: InboxReceiver<ReplyEnvelope>,
    /// This shard's notice inbox (from the mesh thread).
    pub notices: InboxReceiver<Notice>,
    /// The DB job queue.
    pub jobs: Sender<JobEnvelope>,
    /// The queue to the mesh thread.
    pub mesh: Sender<Envelope>,
    /// Mesh peer states and counters (atomics written by the mesh threads).
    pub mesh_state: Arc<crate::mesh::state::MeshState>,
    /// Shutdown signal.
    pub shutdown: ShutdownListener,
    /// Every shard's metrics slot (this shard writes slot `id`).
    pub stats: Arc<crate::metrics::Board>,
}

/// A shard's state.
#[derive(Debug)]
pub struct Shard {
    /// Which shard.
    pub id: ShardId,
    /// Its copy of the configuration.
    pub cfg: Rc<Config>,
    /// DB hand-off (shared with the shard's own background tasks).
    pub db: Rc<DbClient>,
    /// Parked pops.
    pub waiters: waiters::WaiterSet,
    /// Push lanes by tenant.
    lanes: RefCell<HashMap<String, Rc<lanes::PushLane>>>,
    /// Queue to the mesh thread.
    mesh: Sender<Envelope>,
    /// Mesh peer states and counters (read-only here: atomics, no lock).
    pub mesh_state: Arc<crate::mesh::state::MeshState>,
    /// Fired once when shutdown starts; parked pops answer at once. A
    /// shard-local mirror of the process-wide signal, which costs a mutex per poll.
    pub stopping: LocalSignal,
    /// This shard's metrics counters (see `crate::metrics`).
    pub counters: crate::metrics::ShardCounters,
    /// This shard's disk spool and maintenance flags (see `crate::spool`).
    pub spool: Rc<crate::spool::Spool>,
}

impl Shard {
    /// The push lane of `tenant`, created on first use.
    pub fn lane(self: &Rc<Self>, tenant: &str) -> Rc<lanes::PushLane> {
        self.lanes
            .borrow_mut()
            .entry(tenant.to_string())
            .or_insert_with(|| {
                Rc::new(lanes::PushLane::new(
                    tenant.to_string(),
                    Rc::downgrade(self),
                ))
            })
            .clone()
    }

    /// Push batches flushed and requests fused into them, over every lane.
    pub fn lane_totals(&self) -> (u64, u64) {
        self.lanes.borrow().values().fold((0, 0), |(b, r), l| {
            (b + l.nr_batches.get(), r + l.nr_requests.get())
        })
    }

    /// Publishes a notice: wakes this shard's own waiters now and sends it
    /// through the mesh thread to the others.
    pub fn notify(&self, notice: Notice) {
        match &notice {
            Notice::Pushed { queue } => self.waiters.wake(queue),
            Notice::Configured { tenant, queue } => cache::forget(tenant, queue),
            Notice::Maintenance { pop, enabled } => self.spool.set_flag(*pop, *enabled),
        }
        // A full mesh queue drops the hint; parked pops recheck on a timer.
        let _ = self.mesh.try_send(Envelope {
            from: self.id,
            notice,
        });
    }
}

/// Runs shard `id` until shutdown: the drain tasks and the HTTP server.
pub async fn run(id: ShardId, init: ShardInit) {
    let cfg = Rc::new((*init.cfg).clone());
    let shard = Rc::new(Shard {
        id,
        cfg: cfg.clone(),
        db: Rc::new(DbClient::new(id, init.jobs)),
        waiters: waiters::WaiterSet::default(),
        lanes: RefCell::new(HashMap::new()),
        mesh: init.mesh,
        mesh_state: init.mesh_state,
        stopping: LocalSignal::new(),
        counters: crate::metrics::ShardCounters::new(init.stats.clone(), id.0),
        spool: Rc::new(crate::spool::Spool::new(
            id,
            &cfg.file_buffer_dir,
            cfg.file_buffer_events_per_file,
            cfg.nr_shards,
        )),
    });
    crate::metrics::spawn_sampler(&shard);
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
                s.db.complete(r);
            }
        }
    });
    let s = shard.clone();
    let notices = init.notices;
    spawn_drain(id, queue, async move {
        let mut buf = Vec::with_capacity(REPLY_DRAIN_BATCH);
        while notices.recv_batch(&mut buf, REPLY_DRAIN_BATCH).await > 0 {
            for n in buf.drain(..) {
                match n {
                    Notice::Pushed { queue } => s.waiters.wake(&queue),
                    Notice::Configured { tenant, queue } => cache::forget(&tenant, &queue),
                    Notice::Maintenance { pop, enabled } => s.spool.set_flag(pop, enabled),
                }
            }
        }
    });
    let server = Rc::new(shards::listen::ServerConfig {
        addr: cfg.http_addr,
        max_body_bytes: cfg.max_body_bytes,
        tls: cfg.tls.clone(),
        ..Default::default()
    });
    // Leftover spool segments are adopted before serving, so no new push
    // overtakes an older spooled one of its partition.
    shard.spool.open(cfg.nr_shards).await;
    let s = shard.clone();
    crate::spool::replay::spawn(crate::spool::replay::Replay {
        id,
        spool: shard.spool.clone(),
        db: shard.db.clone(),
        stopping: shard.stopping.clone(),
        notify: Rc::new(move |n| s.notify(n)),
        flush_ms: cfg.file_buffer_flush_ms,
        max_batch: cfg.file_buffer_max_batch,
        refresh_ms: cfg.cache_refresh_ms,
    });
    let handler: Rc<dyn shards::listen::Handler> = Rc::new(crate::api::Router::new(shard.clone()));
    if let Err(e) = shards::listen::serve(server, handler, init.shutdown).await {
        log::error!("shard {id}: HTTP server failed: {e}");
    }
    log::debug!("shard {id}: stopped");
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
