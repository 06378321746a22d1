//! One shard: the state a glommio executor owns (`Rc`, `RefCell`, `Cell`;
//! nothing here crosses threads) and its methods. Every map a shard keeps is
//! a field of [`Shard`] (or of a struct it holds). The shard's start-up and
//! its tasks are `crate::serve`'s.

pub mod ack_lanes;
pub mod autopilot;
pub mod cache;
pub mod conflation;
pub mod ephemeral;
pub mod fusion;
pub mod kv_switch;
pub mod lanes;
pub mod sweeps;
pub mod waiters;

use crate::auth::TokenCache;
use crate::config::Config;
use crate::mesh::state::MeshState;
use crate::mesh::{Delivered, Notice};
use crate::metrics::dbsnap::SnapshotCache;
use crate::metrics::{Board, ShardCounters};
use crate::spool::Spool;
use crate::store::kv_pool::KvJob;
use crate::store::{DbClient, JobEnvelope};
use crossbeam_channel::Sender;
use shards::inbox::InboxSender;
use shards::shutdown::LocalSignal;
use shards::ShardId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The cross-thread ends a shard is built with (created by main before
/// the executors start).
#[derive(Debug)]
pub struct Links {
    /// The DB job queue.
    pub jobs: Sender<JobEnvelope>,
    /// The KV pool's job queue.
    pub kv_jobs: Sender<KvJob>,
    /// The broker's KV/timers kill switches (process-wide, see [`kv_switch`]).
    pub kv_switch: Arc<kv_switch::KvSwitch>,
    /// The queue to the mesh thread (notices for the peer brokers).
    pub mesh: Sender<Notice>,
    /// Every shard's notice inbox (index = shard id).
    pub siblings: Vec<InboxSender<Delivered>>,
    /// Mesh peer states and counters (atomics written by the mesh threads).
    pub mesh_state: Arc<MeshState>,
    /// Every shard's metrics slot (this shard writes slot `id`).
    pub stats: Arc<Board>,
    /// Ephemeral queues: every shard's hand-over inbox, the broker's byte
    /// count and depths, and this broker as a mesh member.
    pub eph: EphLinks,
}

/// What a shard's ephemeral store is built with (see [`ephemeral`]).
#[derive(Debug)]
pub struct EphLinks {
    /// Every shard's ephemeral inbox (index = shard id).
    pub inboxes: Vec<shards::inbox::InboxSender<ephemeral::handover::Call>>,
    /// Broker-wide bytes and per-shard depths.
    pub gauges: Arc<crate::metrics::ephemeral::EphGauges>,
    /// This broker: server id, HTTP address, boot nonce.
    pub me: ephemeral::owner::Member,
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
    /// Pop lanes whose deep sweep just came back empty (see [`sweeps`]).
    pub sweeps: sweeps::EmptySweeps,
    /// Push lanes by tenant: created by the first push of a tenant, summed
    /// by the metrics sampler ([`Shard::lane_totals`]).
    lanes: RefCell<HashMap<String, Rc<lanes::PushLane>>>,
    /// Ack lanes by tenant (ack requests; see [`ack_lanes`]).
    pub ack_lanes: ack_lanes::AckLanes,
    /// Cached queue settings of the push path; dropped per queue by
    /// configure and its notices (see [`cache`]).
    pub queues: cache::QueueCache,
    /// Validated JWTs (every request's auth check; see `crate::auth`).
    pub tokens: TokenCache,
    /// The pop autopilot's width lanes (pops; see [`autopilot`]).
    pub autopilot: autopilot::WidthLanes,
    /// Groups' cached conflation policies (pops; see [`conflation`]).
    pub conflation: conflation::PolicyCache,
    /// Queue to the mesh thread (for the peer brokers).
    mesh: Sender<Notice>,
    /// Every shard's notice inbox (index = shard id): this broker's other
    /// shards get a notice straight from the shard that sends it.
    siblings: Vec<InboxSender<Delivered>>,
    /// Mesh peer states and counters (read-only here: atomics, no lock).
    pub mesh_state: Arc<MeshState>,
    /// Fired once when shutdown starts; parked pops answer at once. A
    /// shard-local mirror of the process-wide signal, which costs a mutex per poll.
    pub stopping: LocalSignal,
    /// This shard's metrics counters (see `crate::metrics`).
    pub counters: ShardCounters,
    /// The cached DB part of a scrape: read by `GET /metrics/prometheus`,
    /// warmed by the sampler (see `crate::metrics::dbsnap`).
    pub db_snapshot: Rc<SnapshotCache>,
    /// This shard's disk spool and maintenance flags (see `crate::spool`;
    /// shared with its replay task).
    pub spool: Rc<Spool>,
    /// This shard's ephemeral rings, declarations and member table (every
    /// ephemeral route, the hand-over drain and the sweep; see [`ephemeral`]).
    pub eph: ephemeral::EphStore,
    /// The broker's KV/timers kill switches (one per process; see [`kv_switch`]).
    pub kv_switch: Arc<kv_switch::KvSwitch>,
}

impl Shard {
    /// Shard `id`'s state, with its own copy of the configuration.
    pub fn new(id: ShardId, cfg: Rc<Config>, links: Links) -> Rc<Shard> {
        let spool = Spool::new(
            id,
            &cfg.file_buffer_dir,
            cfg.file_buffer_events_per_file,
            cfg.nr_shards,
        );
        Rc::new(Shard {
            id,
            db: Rc::new(DbClient::new(id, links.jobs, links.kv_jobs)),
            waiters: waiters::WaiterSet::default(),
            sweeps: sweeps::EmptySweeps::default(),
            lanes: RefCell::new(HashMap::new()),
            ack_lanes: ack_lanes::AckLanes::default(),
            queues: cache::QueueCache::new(Duration::from_millis(cfg.cache_refresh_ms)),
            tokens: TokenCache::default(),
            autopilot: autopilot::WidthLanes::default(),
            conflation: conflation::PolicyCache::default(),
            mesh: links.mesh,
            siblings: links.siblings,
            mesh_state: links.mesh_state,
            stopping: LocalSignal::new(),
            counters: ShardCounters::new(links.stats, id.0),
            db_snapshot: Rc::new(SnapshotCache::default()),
            spool: Rc::new(spool),
            eph: ephemeral::EphStore::new(
                cfg.ephemeral.clone(),
                links.eph.gauges,
                ephemeral::owner::Members::new(links.eph.me, cfg.mesh.dead_threshold),
                links.eph.inboxes,
            ),
            kv_switch: links.kv_switch,
            cfg,
        })
    }

    /// The push lane of `tenant`, created on first use.
    pub fn lane(self: &Rc<Self>, tenant: &str) -> Rc<lanes::PushLane> {
        self.lanes
            .borrow_mut()
            .entry(tenant.to_string())
            .or_insert_with(|| {
                // Weak: the shard owns its lanes, a lane must not keep it alive.
                let shard = Rc::downgrade(self);
                Rc::new(lanes::PushLane::new(lanes::PushBatch {
                    tenant: tenant.to_string(),
                    db: self.db.clone(),
                    spool: self.spool.clone(),
                    notify: Rc::new(move |n| {
                        if let Some(s) = shard.upgrade() {
                            s.notify(n);
                        }
                    }),
                }))
            })
            .clone()
    }

    /// Push batches flushed and requests fused into them, over every lane.
    pub fn lane_totals(&self) -> (u64, u64) {
        self.lanes.borrow().values().fold((0, 0), |(b, r), l| {
            (b + l.nr_batches.get(), r + l.nr_requests.get())
        })
    }

    /// Publishes a notice: wakes this shard's own waiters now, puts it in
    /// every other shard's inbox, and hands it to the mesh thread for the
    /// peer brokers (only when there are any).
    ///
    /// Why straight to the other shards rather than through the mesh thread
    /// (issue 18): on a busy 2-core box every extra thread a wake passes
    /// through waits for a CPU, and the mesh thread was one more hop between
    /// a commit on one shard and the long poll parked on the other.
    pub fn notify(&self, notice: Notice) {
        self.apply(&notice);
        let sent = std::time::Instant::now();
        for (i, inbox) in self.siblings.iter().enumerate() {
            if i != self.id.0 {
                // A full inbox drops the hint; parked pops recheck on a timer.
                let _ = inbox.try_send((notice.clone(), Some(sent)));
            }
        }
        if self.mesh_state.tcp {
            // A full mesh queue drops the hint, as above.
            let _ = self.mesh.try_send(notice);
        }
    }

    /// Applies a notice to this shard: from its own `notify`, or through the
    /// notice drain from another shard or (via the mesh thread) a peer broker.
    pub fn apply(&self, notice: &Notice) {
        match notice {
            Notice::Pushed { queue } => self.waiters.wake(queue),
            Notice::Configured { tenant, queue } => self.queues.forget(tenant, queue),
            Notice::Maintenance { pop, enabled } => self.spool.set_flag(*pop, *enabled),
            Notice::Ephemeral(n) => self.eph.apply(n),
            Notice::KvSwitch { kv, schedule, fire } => self.kv_switch.apply(kv_switch::Switches {
                kv: *kv,
                schedule: *schedule,
                fire: *fire,
            }),
        }
    }

    /// Whether KV calls and locks are served (the runtime kill switch; three
    /// atomic loads at most, cheap on every request).
    pub fn kv_enabled(&self) -> bool {
        self.kv_switch.kv_enabled()
    }
}
