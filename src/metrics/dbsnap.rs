//! The DB part of a scrape (per-queue push rate, lag, DLQ depth, maintenance
//! flags; `queen.metrics_snapshot`), cached per shard so that a Prometheus
//! scrape every few seconds does not query PostgreSQL every time.
//!
//! Policy (stale-while-revalidate): a snapshot younger than [`CACHE_TTL`] is
//! served as is. An older one is served too, and the scrape that finds it
//! stale starts one background refresh (a task on the shard), so a scrape
//! never waits for PostgreSQL once a snapshot exists; only the first scrape
//! on a shard waits, at most [`REFRESH_WAIT`]. At most one refresh per shard
//! is in PostgreSQL at a time, however long it takes. The age of what was
//! served is `queen_queue_metrics_age_seconds`. The per-queue families are rendered to
//! text once per refresh ([`super::expo::queue_block`]), not per scrape.
//! The shard's sampler takes the first snapshot soon after boot
//! ([`SnapshotCache::warm`]). The cache is shard-local (a field of the
//! `Shard`), so two shards may each query once per TTL.

use crate::store::{DbClient, Proc};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a snapshot is served before a scrape refreshes it. Shorter than
/// any sensible scrape interval's multiple, long enough that dashboards
/// polling every second cost one query per shard per TTL.
pub const CACHE_TTL: Duration = Duration::from_secs(5);
/// How long the first scrape on a shard waits for its first snapshot.
pub const REFRESH_WAIT: Duration = Duration::from_secs(2);
/// How often that scrape looks whether the snapshot came.
const WAIT_POLL: Duration = Duration::from_millis(10);
/// Queues listed per snapshot (per-queue series are bounded by this).
pub const MAX_QUEUES: u32 = 10_000;

/// A DB snapshot and when it was taken.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// `queen.metrics_snapshot`'s result (`Null` until a query succeeded).
    pub data: Rc<Value>,
    /// When `data` was read (`None`: never).
    pub at: Option<Instant>,
    /// Whether the last refresh attempt reached PostgreSQL.
    pub db_ok: bool,
    /// The per-queue families of `data`, rendered.
    pub queues_text: Rc<String>,
}

impl Snapshot {
    /// No snapshot yet.
    fn none() -> Snapshot {
        Snapshot {
            data: Rc::new(Value::Null),
            at: None,
            db_ok: false,
            queues_text: Rc::new(String::new()),
        }
    }
}

/// One shard's cached snapshot (a `Shard` field; this shard's thread only).
#[derive(Debug)]
pub struct SnapshotCache {
    /// The last snapshot taken (or none yet).
    current: RefCell<Snapshot>,
    /// A refresh is running; no second one starts.
    refreshing: Cell<bool>,
}

impl Default for SnapshotCache {
    fn default() -> Self {
        SnapshotCache {
            current: RefCell::new(Snapshot::none()),
            refreshing: Cell::new(false),
        }
    }
}

impl SnapshotCache {
    /// The snapshot for a scrape (see the module policy); `db` is the shard's.
    pub async fn get(self: &Rc<Self>, db: &Rc<DbClient>) -> Snapshot {
        let current = self.current.borrow().clone();
        let fresh = current.at.is_some_and(|t| t.elapsed() < CACHE_TTL);
        if !fresh {
            self.start_refresh(db);
        }
        if current.at.is_some() {
            return current;
        }
        // The first snapshot: wait for the refresh, at most REFRESH_WAIT.
        let deadline = Instant::now() + REFRESH_WAIT;
        while self.refreshing.get() && Instant::now() < deadline {
            glommio::timer::sleep(WAIT_POLL).await;
        }
        self.current.borrow().clone()
    }

    /// Starts a refresh when the shard has no snapshot yet and none is running
    /// (called by the shard's sampler every second, so that the first scrape
    /// after boot is served from memory as well).
    pub fn warm(self: &Rc<Self>, db: &Rc<DbClient>) {
        if self.current.borrow().at.is_none() {
            self.start_refresh(db);
        }
    }

    /// Starts a refresh unless one is running. A refresh runs until
    /// PostgreSQL answers: one that only timed out would leave its query
    /// running while the next started, and on a large database (the push
    /// rate counts the last minute's messages, seconds of work at 100k
    /// msg/s) the sampler then stacked a new query every second on each
    /// shard, never getting an answer in time.
    fn start_refresh(self: &Rc<Self>, db: &Rc<DbClient>) {
        if self.refreshing.replace(true) {
            return;
        }
        let (me, db) = (self.clone(), db.clone());
        glommio::spawn_local(async move { me.refresh(&db).await }).detach();
    }

    /// Queries the snapshot and stores it.
    async fn refresh(&self, db: &DbClient) {
        let outcome = db
            .call(Proc::MetricsSnapshot, json!({ "maxQueues": MAX_QUEUES }))
            .await;
        self.refreshing.set(false);
        let mut c = self.current.borrow_mut();
        match outcome {
            Ok(v) => {
                *c = Snapshot {
                    queues_text: Rc::new(super::expo::queue_block(&v)),
                    data: Rc::new(v),
                    at: Some(Instant::now()),
                    db_ok: true,
                }
            }
            Err(e) => {
                log::debug!("metrics snapshot failed: {e}");
                c.db_ok = false;
            }
        }
    }
}
