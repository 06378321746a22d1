//! Ephemeral (RAM-only) queues: a shard's share of them. Contents live only
//! in this process's memory and survive nothing: not a restart, not a
//! crash, not an ownership move when a broker joins or leaves the mesh. Only
//! declarations (`configure`) are durable, in `queen.ephemeral_queues`; no
//! PostgreSQL call is on the push, pop or ack path.
//!
//! # Layout
//! - `mod.rs` (this file): [`EphStore`], the shard's rings by queue and
//!   partition, its copy of the declarations, its member table; the
//!   synchronous operations on them.
//! - `ring`: one partition's ring and its groups' cursors, leases, retries.
//! - `options`: a queue's options, parsed and bounded.
//! - `owner`: rendezvous hashing over mesh members; the owning shard.
//! - `handover`: [`handover::Op`], the work one shard hands the owning
//!   shard, and its answer; `exec`: running it on the owner.
//! - `id`: message ids (incarnation, seq, attempt, partition).
//! - `error`: [`EphError`], every refusal with its code.
//!
//! # Threads and ownership
//! A partition belongs to one shard (`owner::shard_of`); only that shard's
//! `EphStore` ever holds it, so no lock guards a ring. A request arriving
//! on another shard is handed over on the ephemeral inbox of the owner
//! (bounded, created by main before the executors start) with a oneshot for
//! the answer; payloads travel as `Bytes` and are parsed and serialised on
//! the arriving shard. The one cross-shard value is the broker's byte
//! count (`metrics::ephemeral::EphGauges`), an atomic.
//!
//! # Decisions (inferred where §18 is thin)
//! - Bounds (`maxLength`, `maxBytes`) apply to each partition's ring; with
//!   one partition (the common case) that is the queue.
//! - A push without `partition` goes to `Default` (the durable default).
//! - Listings and depth are this broker's view (the rings it owns).

pub mod error;
pub mod exec;
pub mod handover;
pub mod id;
pub mod options;
pub mod owner;
pub mod ring;
pub mod tasks;

use crate::config::ephemeral::EphemeralConfig;
use crate::metrics::ephemeral::EphGauges;
use crate::shard::waiters::{Signal, WaiterSet};
use bytes::Bytes;
pub use error::EphError;
use options::{Options, Policy};
use ring::{AckStatus, Delivery, Drops, Outcome, Partition};
use shards::inbox::InboxSender;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The partition of a push that names none.
pub const DEFAULT_PARTITION: &str = "Default";
/// The group of a pop or ack that names none (queue mode).
pub const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";

/// (tenant, queue).
pub type QKey = (String, String);

/// One partition on this shard.
#[derive(Debug, Default)]
struct PartState {
    /// The ring.
    ring: Partition,
    /// Fired by pushes and by leases coming due: wakes parked pops.
    signal: Rc<Signal>,
}

/// One queue's partitions on this shard.
#[derive(Debug)]
struct QueueState {
    /// Partitions by name.
    parts: HashMap<String, PartState>,
    /// Last push or pop (idle collection of implicit queues).
    touched: Instant,
    /// Where a pop over all partitions starts (fairness).
    rotor: usize,
    /// Groups that popped the queue on this shard: every partition here
    /// keeps messages for each of them, including partitions made later.
    groups: HashSet<String>,
}

impl QueueState {
    fn new() -> QueueState {
        QueueState {
            parts: HashMap::new(),
            touched: Instant::now(),
            rotor: 0,
            groups: HashSet::new(),
        }
    }

    /// Records `group` on the queue and every partition of it here.
    fn add_group(&mut self, group: &str) {
        if self.groups.insert(group.to_string()) {
            for p in self.parts.values_mut() {
                p.ring.add_group(group);
            }
        }
    }
}

/// One queue's figures on this shard (listing and depth).
#[derive(Debug, Clone, Default)]
pub struct QueueStat {
    /// Queue name.
    pub queue: String,
    /// Messages in its rings.
    pub depth: u64,
    /// Accounted bytes.
    pub bytes: u64,
    /// Per partition: (name, pending for the asked group).
    pub partitions: Vec<(String, u64)>,
    /// Group names seen.
    pub groups: Vec<String>,
    /// Drops by cause.
    pub drops: Drops,
}

/// A shard's ephemeral queues.
#[derive(Debug)]
pub struct EphStore {
    /// Its copy of the settings.
    pub cfg: EphemeralConfig,
    /// Rings by queue (this shard's partitions only).
    queues: RefCell<HashMap<QKey, QueueState>>,
    /// Declared queues' options (every shard holds all of them).
    decls: RefCell<HashMap<QKey, Options>>,
    /// Next message sequence number on this shard.
    next_seq: Cell<u64>,
    /// Broker-wide bytes and published depths.
    pub gauges: Arc<EphGauges>,
    /// Live mesh members (beacons), for ownership.
    pub members: RefCell<owner::Members>,
    /// Pops over all partitions parked on this shard, by `tenant\0queue`;
    /// fired by `EphNotice::Pushed`.
    pub waiters: WaiterSet,
    /// Every shard's ephemeral inbox (index = shard id), for hand-overs.
    pub links: Vec<InboxSender<handover::Call>>,
}

/// The `waiters` key of a queue.
pub fn wait_key(tenant: &str, queue: &str) -> String {
    format!("{tenant}\0{queue}")
}

impl EphStore {
    /// An empty store.
    pub fn new(
        cfg: EphemeralConfig,
        gauges: Arc<EphGauges>,
        members: owner::Members,
        links: Vec<InboxSender<handover::Call>>,
    ) -> EphStore {
        EphStore {
            cfg,
            queues: RefCell::new(HashMap::new()),
            decls: RefCell::new(HashMap::new()),
            next_seq: Cell::new(1),
            gauges,
            members: RefCell::new(members),
            waiters: WaiterSet::default(),
            links,
        }
    }

    /// The effective options of a queue, and whether it is declared.
    pub fn options(&self, key: &QKey) -> (Options, bool) {
        match self.decls.borrow().get(key) {
            Some(o) => (o.clone(), true),
            None => (Options::defaults(&self.cfg), false),
        }
    }

    /// Declared queue names of `tenant` with their options.
    pub fn declared(&self, tenant: &str) -> Vec<(String, Options)> {
        let d = self.decls.borrow();
        d.iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|((_, q), o)| (q.clone(), o.clone()))
            .collect()
    }

    /// Sets (or with `None` removes) a declaration.
    pub fn declare(&self, key: QKey, options: Option<Options>) {
        match options {
            Some(o) => self.decls.borrow_mut().insert(key, o),
            None => self.decls.borrow_mut().remove(&key),
        };
    }

    /// Replaces every declaration (the periodic reload from PostgreSQL).
    pub fn replace_decls(&self, all: HashMap<QKey, Options>) {
        *self.decls.borrow_mut() = all;
    }

    fn with_part<R>(&self, key: &QKey, partition: &str, f: impl FnOnce(&mut PartState) -> R) -> R {
        let mut qs = self.queues.borrow_mut();
        let q = qs.entry(key.clone()).or_insert_with(QueueState::new);
        q.touched = Instant::now();
        let known = &q.groups;
        let p = q.parts.entry(partition.to_string()).or_insert_with(|| {
            let mut p = PartState::default();
            for g in known {
                p.ring.add_group(g);
            }
            p
        });
        f(p)
    }

    /// Records `group` on the queue (created if new) on this shard.
    fn add_group(&self, key: &QKey, group: &str) {
        let mut qs = self.queues.borrow_mut();
        qs.entry(key.clone())
            .or_insert_with(QueueState::new)
            .add_group(group);
    }

    /// The wake signal of a partition (created with it).
    pub fn signal(&self, key: &QKey, partition: &str) -> Rc<Signal> {
        self.with_part(key, partition, |p| p.signal.clone())
    }

    /// Pushes `payloads` all or nothing under the queue's bounds and the
    /// broker ceiling.
    pub fn push(
        &self,
        key: &QKey,
        partition: &str,
        payloads: Vec<Bytes>,
    ) -> Result<usize, EphError> {
        let (o, _) = self.options(key);
        let n = payloads.len();
        let now = Instant::now();
        let gauges = self.gauges.clone();
        let ceiling = self.cfg.max_bytes;
        self.with_part(key, partition, |p| {
            if let Some(ttl) = o.ttl() {
                gauges.release(p.ring.expire_ttl(ttl, now));
            }
            let (drop_n, freed, in_bytes) = p.ring.overflow(&payloads, o.max_length, o.max_bytes);
            if drop_n > 0 && o.policy == Policy::Reject {
                if drop_n > p.ring.len() {
                    return Err(EphError::BadRequest(format!(
                        "{n} messages exceed the queue's bounds (maxLength {}, maxBytes {}) on their own",
                        o.max_length, o.max_bytes
                    )));
                }
                return Err(EphError::QueueFull { queue: key.1.clone() });
            }
            let net = in_bytes.saturating_sub(freed);
            if !gauges.reserve(net, ceiling) {
                return Err(EphError::Unavailable("the broker's ephemeral memory ceiling is reached"));
            }
            let mut seq = self.next_seq.get();
            let (added, dropped) = p.ring.push(payloads, &mut seq, now, drop_n);
            self.next_seq.set(seq);
            // `net` was reserved; settle the difference (none unless sizes moved).
            gauges.release((net + dropped).saturating_sub(added));
            p.signal.fire();
            Ok(n)
        })
    }

    /// Takes up to `max` deliveries from one partition for `group`.
    pub fn take(
        &self,
        key: &QKey,
        partition: &str,
        group: &str,
        max: usize,
        auto_ack: bool,
    ) -> Vec<Delivery> {
        let (o, _) = self.options(key);
        let now = Instant::now();
        let gauges = self.gauges.clone();
        self.add_group(key, group);
        self.with_part(key, partition, |p| {
            if let Some(ttl) = o.ttl() {
                gauges.release(p.ring.expire_ttl(ttl, now));
            }
            let d = p.ring.take(group, max, auto_ack, o.rules(), now);
            gauges.release(p.ring.trim());
            d
        })
    }

    /// Takes up to `max` deliveries from any of the queue's partitions on
    /// this shard, starting after the one the last such pop started at.
    pub fn take_any(
        &self,
        key: &QKey,
        group: &str,
        max: usize,
        auto_ack: bool,
    ) -> Vec<(String, Delivery)> {
        self.add_group(key, group);
        let names: Vec<String> = {
            let mut qs = self.queues.borrow_mut();
            let Some(q) = qs.get_mut(key) else {
                return Vec::new();
            };
            let mut names: Vec<String> = q.parts.keys().cloned().collect();
            names.sort();
            q.rotor = q.rotor.wrapping_add(1);
            let k = names.len().max(1);
            names.rotate_left(q.rotor % k);
            names
        };
        let mut out = Vec::new();
        for name in names {
            if out.len() >= max {
                break;
            }
            for d in self.take(key, &name, group, max - out.len(), auto_ack) {
                out.push((name.clone(), d));
            }
        }
        out
    }

    /// Gives back deliveries whose answer could not be sent.
    pub fn untake(&self, key: &QKey, group: &str, taken: &[(String, Delivery)]) {
        let mut qs = self.queues.borrow_mut();
        let Some(q) = qs.get_mut(key) else { return };
        for (name, d) in taken {
            if let Some(p) = q.parts.get_mut(name) {
                p.ring.untake(group, std::slice::from_ref(d));
                p.signal.fire();
            }
        }
    }

    /// Settles one delivery.
    pub fn ack(
        &self,
        key: &QKey,
        partition: &str,
        group: &str,
        seq: u64,
        attempt: u32,
        status: AckStatus,
    ) -> Outcome {
        let (o, _) = self.options(key);
        let mut qs = self.queues.borrow_mut();
        let Some(p) = qs.get_mut(key).and_then(|q| q.parts.get_mut(partition)) else {
            return Outcome::Unknown;
        };
        let out = p.ring.ack(group, seq, attempt, status, o.rules());
        if out == Outcome::Redelivered {
            p.signal.fire();
        }
        self.gauges.release(p.ring.trim());
        out
    }

    /// Empties a queue's rings and forgets its groups; messages dropped.
    pub fn reset(&self, key: &QKey) -> usize {
        let mut qs = self.queues.borrow_mut();
        let Some(q) = qs.get_mut(key) else { return 0 };
        q.groups.clear();
        let mut n = 0;
        for p in q.parts.values_mut() {
            let (m, b) = p.ring.clear();
            n += m;
            self.gauges.release(b);
            p.signal.fire();
        }
        n
    }

    /// Forgets a queue's contents (delete); whether it had any state here.
    pub fn drop_queue(&self, key: &QKey) -> bool {
        let Some(mut q) = self.queues.borrow_mut().remove(key) else {
            return false;
        };
        for p in q.parts.values_mut() {
            self.gauges.release(p.ring.clear().1);
            p.signal.fire();
        }
        true
    }

    /// This shard's figures of `tenant`'s queues (all, or only `queue`),
    /// with pending counted for `group`.
    pub fn stats(&self, tenant: &str, queue: Option<&str>, group: &str) -> Vec<QueueStat> {
        let qs = self.queues.borrow();
        let mut out = Vec::new();
        for ((t, name), q) in qs.iter() {
            if t != tenant || queue.is_some_and(|w| w != name) {
                continue;
            }
            let mut s = QueueStat {
                queue: name.clone(),
                groups: q.groups.iter().cloned().collect(),
                ..Default::default()
            };
            for (pname, p) in &q.parts {
                s.depth += p.ring.len() as u64;
                s.bytes += p.ring.bytes();
                s.partitions.push((pname.clone(), p.ring.pending(group)));
                s.groups.extend(p.ring.groups().cloned());
                s.drops.bounds += p.ring.drops.bounds;
                s.drops.ttl += p.ring.drops.ttl;
                s.drops.retry += p.ring.drops.retry;
            }
            out.push(s);
        }
        out
    }

    /// The periodic round: TTL drops, lease expiry (waking parked pops),
    /// rings this broker no longer owns (dropped), idle implicit queues
    /// (forgotten), and the published depths.
    pub fn sweep(&self, shard: usize, nr_shards: usize, now: Instant) {
        let idle = Duration::from_secs(self.cfg.implicit_idle_s);
        let members = self.members.borrow();
        let decls = self.decls.borrow();
        let mut qs = self.queues.borrow_mut();
        let mut depths = Vec::new();
        qs.retain(|key, q| {
            let o = decls
                .get(key)
                .cloned()
                .unwrap_or_else(|| Options::defaults(&self.cfg));
            q.parts.retain(|name, p| {
                if let Some(ttl) = o.ttl() {
                    self.gauges.release(p.ring.expire_ttl(ttl, now));
                }
                if p.ring.expire_leases(o.rules(), now) {
                    p.signal.fire();
                }
                self.gauges.release(p.ring.trim());
                let moved = members.owner(&key.0, &key.1, name, now).is_some()
                    || owner::shard_of(&key.0, &key.1, name, nr_shards) != shard;
                if moved {
                    // Ownership moved (a broker joined): the contents survive nothing.
                    self.gauges.release(p.ring.clear().1);
                    p.signal.fire();
                }
                !moved
            });
            let depth: u64 = q.parts.values().map(|p| p.ring.len() as u64).sum();
            depths.push((key.1.clone(), depth));
            let forgotten = !decls.contains_key(key)
                && idle > Duration::ZERO
                && depth == 0
                && now.duration_since(q.touched) >= idle;
            !forgotten
        });
        self.gauges.publish(shard, depths);
    }
}

/// Parses an ack status (`completed` when absent).
pub fn ack_status(s: Option<&str>) -> Result<AckStatus, EphError> {
    match s {
        None | Some("completed") => Ok(AckStatus::Completed),
        Some("failed") | Some("retry") => Ok(AckStatus::Failed),
        Some(other) => Err(EphError::BadRequest(format!(
            "acks[].status must be completed, failed or retry, not {other:?}"
        ))),
    }
}

impl EphStore {
    /// Applies a mesh notice about ephemeral queues to this shard.
    pub fn apply(&self, n: &crate::mesh::EphNotice) {
        use crate::mesh::EphNotice;
        let me = self.members.borrow().me.id.clone();
        match n {
            EphNotice::Member { id, http, boot } => {
                let m = owner::Member {
                    id: id.clone(),
                    http: http.clone(),
                    boot: *boot,
                };
                self.members.borrow_mut().heard(m, Instant::now());
            }
            EphNotice::Pushed { tenant, queue } => self.waiters.wake(&wait_key(tenant, queue)),
            EphNotice::Declared {
                from,
                tenant,
                queue,
                options,
            } if *from != me => {
                let key = (tenant.clone(), queue.clone());
                let parsed = options.as_deref().map(|o| self.parse_stored(o));
                self.declare(key, parsed);
            }
            EphNotice::Dropped {
                from,
                tenant,
                queue,
                undeclare,
            } if *from != me => {
                let key = (tenant.clone(), queue.clone());
                if *undeclare {
                    self.declare(key.clone(), None);
                    self.drop_queue(&key);
                } else {
                    self.reset(&key);
                }
            }
            EphNotice::Declared { .. } | EphNotice::Dropped { .. } => {}
        }
    }

    /// Options stored by `configure` (JSON text), as this broker's limits
    /// read them; what no longer parses (a lower ceiling here) falls back
    /// to the defaults, with a log line.
    pub fn parse_stored(&self, text: &str) -> Options {
        let parsed = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .map(|m| Options::parse(&m, &self.cfg));
        match parsed {
            Some(Ok(o)) => o,
            other => {
                log::warn!("ephemeral: stored options {text:?} do not parse here ({other:?}); using defaults");
                Options::defaults(&self.cfg)
            }
        }
    }
}
