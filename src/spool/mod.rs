//! The per-shard disk spool: pushes that cannot reach PostgreSQL (or arrive
//! during push maintenance) are appended here, fsync'd, answered `buffered`,
//! and replayed later through `Job::PushBatch` (semantics.md §14; the file
//! layout is issue 4's, per decisions.md "Spool").
//!
//! # Threads and ownership
//! Everything here runs on the owning shard's executor: the appends (from
//! the push lane), the replay task and the maintenance refresh task
//! ([`replay`]). The only cross-thread state is the gauge board
//! ([`stats`]), atomics read by `GET /api/v1/status/buffers` on any shard.
//!
//! # Layout
//! `FILE_BUFFER_DIR/shard-<i>/seg-<seq>.log`: `shards::segment` files whose
//! records are JSON `{"t": tenant, "i": item}`, `item` being exactly what
//! `queen.push_batch` takes (queue, partition, id, txid, traceId, payload as
//! stored, encrypted, sub). Damaged segments go to `shard-<i>/failed/`.
//! At boot shard i also adopts every `shard-k/` with `k mod N == i`, so a
//! smaller `NUM_WORKERS` strands nothing.
//!
//! # Decisions
//! - Order: while this shard's spool holds records of a (tenant, queue,
//!   partition), new pushes touching it are spooled behind them, so a
//!   producer connection's order survives an outage.
//! - A replayed item keeps its message id and transaction id, so a replay
//!   that repeats (crash after commit, before the segment was deleted) stores
//!   nothing twice: PostgreSQL finds the item's own id under its transaction
//!   id and answers it as stored (`queued`, not `duplicate`), without moving
//!   the partition's newest-message pointer (`queen.push_typed`, sql/functions/push.sql).
//! - Events of a queue deleted while spooled are replayed like any push:
//!   a push (re)creates its queue, and the spool cannot tell "deleted while
//!   down" from "first push to a new queue during the outage". Nothing is
//!   dropped.
//! - A replay batch PostgreSQL rejects (not a connection error) is retried
//!   after `PARK_RETRY`, with a log line; it is never dropped.
//! - Disk errors (unwritable directory, disk full, fsync failure) answer
//!   503: nothing is acknowledged that is not on disk.

pub mod replay;
pub mod stats;

use crate::store::{PushItem, StoreError};
use serde::{Deserialize, Serialize};
use shards::segment::{self, Ending, SegmentWriter};
use shards::ShardId;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

/// A (tenant, queue, partition) key of the order map.
type Key = (String, String, String);

/// A sealed segment waiting for replay.
#[derive(Debug)]
pub struct Sealed {
    /// Its file.
    pub path: PathBuf,
    /// When its first record was appended (approximately: file creation).
    pub since: SystemTime,
}

/// Mutable spool state.
#[derive(Debug, Default)]
struct State {
    /// Sealed segments, oldest first.
    sealed: VecDeque<Sealed>,
    /// The segment being appended to.
    active: Option<(Rc<SegmentWriter>, SystemTime)>,
    /// Next segment sequence number in this shard's own directory.
    next_seq: u64,
    /// Spooled, not yet replayed records per key.
    pending: HashMap<Key, u64>,
    /// Totals of `pending`.
    records: u64,
    /// Bytes of the pending records.
    bytes: u64,
    /// Segments in `failed/`.
    failed: u64,
}

/// One shard's spool.
#[derive(Debug)]
pub struct Spool {
    /// Owning shard.
    shard: ShardId,
    /// `FILE_BUFFER_DIR/shard-<i>`.
    dir: PathBuf,
    /// `FILE_BUFFER_DIR`.
    root: PathBuf,
    /// Records per segment before rotating.
    per_file: u64,
    /// Set when the spool cannot be used (why); appends answer 503.
    broken: RefCell<Option<String>>,
    /// Segments and counts.
    state: RefCell<State>,
    /// Serialises segment creation so appends keep their order.
    rotate: glommio::sync::Semaphore,
    /// Push maintenance: every push is spooled, replay pauses.
    pub push_paused: Cell<bool>,
    /// Pop maintenance: every pop answers empty with `paused: true`.
    pub pop_paused: Cell<bool>,
    /// Whether PostgreSQL is believed reachable (false after a connection
    /// failure until the replay task's probe succeeds).
    pub pg_healthy: Cell<bool>,
}

impl Spool {
    /// A spool for `shard` under `root` (nothing touches the disk before [`Spool::open`]).
    pub fn new(shard: ShardId, root: &str, per_file: u64, nr_shards: usize) -> Spool {
        stats::init(nr_shards);
        let root = PathBuf::from(root);
        Spool {
            shard,
            dir: root.join(format!("shard-{}", shard.0)),
            root,
            per_file,
            broken: RefCell::new(Some("spool not opened yet".into())),
            state: RefCell::new(State::default()),
            rotate: glommio::sync::Semaphore::new(1),
            push_paused: Cell::new(false),
            pop_paused: Cell::new(false),
            pg_healthy: Cell::new(true),
        }
    }

    /// Creates the directories and adopts the segments left by earlier
    /// processes (truncating torn tails, moving corrupt ones to `failed/`).
    pub async fn open(&self, nr_shards: usize) {
        // Owner only, like the segment files inside (issue 17). The mode
        // applies to every directory this creates, FILE_BUFFER_DIR included;
        // an existing directory keeps the mode its operator gave it.
        let made = std::os::unix::fs::DirBuilderExt::mode(
            std::fs::DirBuilder::new().recursive(true),
            0o700,
        )
        .create(self.dir.join("failed"));
        if let Err(e) = made {
            let why = format!("spool directory {} unusable: {e}", self.dir.display());
            log::error!("shard {}: {why}", self.shard);
            *self.broken.borrow_mut() = Some(why);
            if let Some(g) = stats::board().get(self.shard.0) {
                g.set_broken(true);
            }
            return;
        }
        *self.broken.borrow_mut() = None;
        let mut found: Vec<(usize, u64, PathBuf)> = Vec::new();
        for k in adopted_dirs(&self.root, self.shard.0, nr_shards) {
            let dir = self.root.join(format!("shard-{k}"));
            for (seq, path) in segments_in(&dir) {
                found.push((k, seq, path));
            }
        }
        found.sort_by_key(|(k, seq, _)| (*k != self.shard.0, *k, *seq));
        let mut max_own = 0;
        for (k, seq, path) in found {
            if k == self.shard.0 {
                max_own = max_own.max(seq);
            }
            self.adopt(&path).await;
        }
        let failed = std::fs::read_dir(self.dir.join("failed"))
            .map(|d| d.count() as u64)
            .unwrap_or(0);
        let mut st = self.state.borrow_mut();
        st.next_seq = max_own + 1;
        st.failed = failed;
        let n = st.sealed.len();
        drop(st);
        if n > 0 {
            log::info!(
                "shard {}: spool adopted {n} segment(s) holding {} record(s) for replay",
                self.shard,
                self.state.borrow().records
            );
        }
        self.publish();
    }

    /// Reads one leftover segment into the replay queue.
    async fn adopt(&self, path: &Path) {
        let decoded = match segment::read_segment(path).await {
            Ok(d) => d,
            Err(e) => {
                log::error!(
                    "shard {}: cannot read spool segment {}: {e}",
                    self.shard,
                    path.display()
                );
                return;
            }
        };
        match decoded.ending {
            Ending::Clean => {}
            Ending::TornTail { valid_len } => {
                log::warn!(
                    "shard {}: spool segment {} has a torn tail (crash mid-write); cut at byte {valid_len}",
                    self.shard,
                    path.display()
                );
                if let Err(e) = segment::truncate_segment(path, valid_len).await {
                    log::error!(
                        "shard {}: cannot truncate {}: {e}",
                        self.shard,
                        path.display()
                    );
                }
            }
            Ending::Corrupt { offset } => {
                self.fail_segment(path, offset).await;
                return;
            }
        }
        if decoded.records.is_empty() {
            let _ = glommio::io::remove(path).await;
            return;
        }
        let since = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .unwrap_or_else(|_| SystemTime::now());
        let mut st = self.state.borrow_mut();
        for r in &decoded.records {
            if let Some((key, _)) = parse_record(r) {
                *st.pending.entry(key).or_insert(0) += 1;
                st.records += 1;
                st.bytes += r.len() as u64;
            }
        }
        st.sealed.push_back(Sealed {
            path: path.to_path_buf(),
            since,
        });
    }

    /// Moves a corrupt segment to `failed/` with a log line and a count.
    async fn fail_segment(&self, path: &Path, offset: u64) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parent = path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let to = self.dir.join("failed").join(format!("{parent}-{name}"));
        log::error!(
            "shard {}: spool segment {} is corrupt at byte {offset}; moved to {} (not replayed)",
            self.shard,
            path.display(),
            to.display()
        );
        if let Err(e) = glommio::io::rename(path, &to).await {
            log::error!("shard {}: cannot move {}: {e}", self.shard, path.display());
        }
        self.state.borrow_mut().failed += 1;
        stats::corrupt_seen(self.shard.0);
    }

    /// Whether a push of `items` for `tenant` must be spooled instead of
    /// going to PostgreSQL: maintenance, PostgreSQL known down, or records
    /// of one of its partitions still waiting here.
    pub fn must_spool(&self, tenant: &str, items: &[PushItem]) -> bool {
        if self.push_paused.get() || !self.pg_healthy.get() {
            return true;
        }
        let st = self.state.borrow();
        if st.pending.is_empty() {
            return false;
        }
        items
            .iter()
            .any(|i| st.pending.contains_key(&key_of(tenant, i)))
    }

    /// Appends `items` durably and answers them `buffered`; 503 when the
    /// disk refuses.
    pub async fn append(
        &self,
        tenant: &str,
        items: Vec<PushItem>,
    ) -> Result<Vec<crate::store::Pushed>, StoreError> {
        if let Some(why) = self.broken.borrow().clone() {
            return Err(StoreError::Unavailable(format!("spool unavailable: {why}")));
        }
        let records: Vec<Vec<u8>> = items
            .iter()
            .map(|i| record(tenant, i))
            .collect::<Result<_, _>>()
            .map_err(|e| StoreError::Unavailable(format!("spool record: {e}")))?;
        let writer = {
            let _permit = self.rotate.acquire_permit(1).await;
            self.writer()
                .await
                .map_err(|e| StoreError::Unavailable(format!("spool write failed: {e}")))?
        };
        let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
        self.count(tenant, &items, bytes, true);
        if let Err(e) = writer.append(&records).await {
            self.count(tenant, &items, bytes, false);
            log::error!("shard {}: spool append failed: {e}", self.shard);
            return Err(StoreError::Unavailable(format!("spool write failed: {e}")));
        }
        Ok(items
            .iter()
            .map(|i| crate::store::Pushed::buffered(Some(i.id)))
            .collect())
    }

    /// The active writer, rotating when it is full or broken.
    async fn writer(&self) -> std::io::Result<Rc<SegmentWriter>> {
        {
            let mut st = self.state.borrow_mut();
            if let Some((w, since)) = st.active.take() {
                if w.broken().is_none() && w.records() < self.per_file {
                    st.active = Some((w.clone(), since));
                    return Ok(w);
                }
                st.sealed.push_back(Sealed {
                    path: w.path().to_path_buf(),
                    since,
                });
            }
        }
        let seq = {
            let mut st = self.state.borrow_mut();
            st.next_seq += 1;
            st.next_seq - 1
        };
        let path = self.dir.join(format!("seg-{seq:020}.log"));
        let w = SegmentWriter::create(&path).await?;
        // The new name must survive a crash as well as the bytes.
        let dir = glommio::io::Directory::open(&self.dir).await?;
        dir.sync().await?;
        let _ = dir.close().await;
        self.state.borrow_mut().active = Some((w.clone(), SystemTime::now()));
        Ok(w)
    }

    /// Adds (or, with `add` false, removes) items to the order map and totals.
    fn count(&self, tenant: &str, items: &[PushItem], bytes: u64, add: bool) {
        let mut st = self.state.borrow_mut();
        for i in items {
            let k = key_of(tenant, i);
            if add {
                *st.pending.entry(k).or_insert(0) += 1;
            } else {
                uncount(&mut st.pending, k);
            }
        }
        let n = items.len() as u64;
        if add {
            st.records += n;
            st.bytes += bytes;
        } else {
            st.records = st.records.saturating_sub(n);
            st.bytes = st.bytes.saturating_sub(bytes);
        }
        drop(st);
        self.publish();
    }

    /// Marks replayed records as gone from the spool.
    pub fn replayed(&self, records: &[(Key, u64)]) {
        let mut st = self.state.borrow_mut();
        for (k, len) in records {
            uncount(&mut st.pending, k.clone());
            st.records = st.records.saturating_sub(1);
            st.bytes = st.bytes.saturating_sub(*len);
        }
        drop(st);
        self.publish();
    }

    /// The oldest segment to replay: the oldest sealed one, else the active
    /// one sealed now (appends then start a new segment).
    pub async fn next_segment(&self) -> Option<PathBuf> {
        if let Some(s) = self.state.borrow().sealed.front() {
            return Some(s.path.clone());
        }
        let writer = {
            let _permit = self.rotate.acquire_permit(1).await;
            let mut st = self.state.borrow_mut();
            let (w, since) = st.active.take()?;
            st.sealed.push_back(Sealed {
                path: w.path().to_path_buf(),
                since,
            });
            w
        };
        writer.settle().await;
        Some(writer.path().to_path_buf())
    }

    /// Drops the oldest sealed segment from the queue (its file is gone or failed).
    pub fn segment_done(&self, path: &Path) {
        let mut st = self.state.borrow_mut();
        if st.sealed.front().is_some_and(|s| s.path == path) {
            st.sealed.pop_front();
        }
        let idle = st.sealed.is_empty() && st.active.as_ref().is_none_or(|(w, _)| w.records() == 0);
        if idle && (st.records > 0 || !st.pending.is_empty()) {
            // Everything on disk is replayed: counts left over (records lost to
            // a corrupt segment written by this process) must not keep
            // partitions on the spool path forever.
            st.pending.clear();
            st.records = 0;
            st.bytes = 0;
        }
        drop(st);
        self.publish();
    }

    /// Whether anything waits for replay (sealed segments or appended records).
    pub fn has_work(&self) -> bool {
        let st = self.state.borrow();
        !st.sealed.is_empty() || st.active.as_ref().is_some_and(|(w, _)| w.records() > 0)
    }

    /// Marks PostgreSQL unreachable (one log line per transition).
    pub fn pg_down(&self) {
        if self.pg_healthy.replace(false) {
            log::warn!(
                "shard {}: PostgreSQL unreachable; pushes go to the disk spool",
                self.shard
            );
            self.publish();
        }
    }

    /// Applies a maintenance notice: pop (`pop`) or push maintenance.
    pub fn set_flag(&self, pop: bool, enabled: bool) {
        if pop {
            self.pop_paused.set(enabled);
        } else {
            self.set_push_paused(enabled);
        }
        // Published so that the shard that took the POST can wait for every
        // shard of this broker to have applied it (`api::maintenance`).
        if let Some(g) = stats::board().get(self.shard.0) {
            let flag = if pop { &g.pop_paused } else { &g.push_paused };
            flag.store(enabled, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Turns push maintenance on or off on this shard.
    fn set_push_paused(&self, on: bool) {
        if self.push_paused.replace(on) != on {
            log::info!(
                "shard {}: push maintenance {}",
                self.shard,
                if on {
                    "on: pushes are spooled, replay paused"
                } else {
                    "off: replaying the spool"
                }
            );
        }
    }

    /// Records waiting for replay.
    pub fn pending_records(&self) -> u64 {
        self.state.borrow().records
    }

    /// Publishes the gauges of this shard.
    pub fn publish(&self) {
        let st = self.state.borrow();
        // Counted records not in a sealed segment are in the active one (its
        // own record count grows only once the append is on disk). With no
        // record counted there is no age: a sealed segment whose records are
        // all replayed waits only for its file to be removed.
        let oldest = (st.records > 0)
            .then(|| {
                st.sealed
                    .front()
                    .map(|s| s.since)
                    .or_else(|| st.active.as_ref().map(|(_, t)| *t))
            })
            .flatten();
        if let Some(g) = stats::board().get(self.shard.0) {
            g.set(
                st.records,
                st.bytes,
                st.failed,
                oldest,
                self.pg_healthy.get(),
            );
        }
    }
}

/// The order-map key of a stored item.
fn key_of(tenant: &str, item: &PushItem) -> Key {
    (
        tenant.to_string(),
        item.queue.clone(),
        item.partition.clone(),
    )
}

/// A spool record as written: `{"t": tenant, "i": item}` on one line.
#[derive(Serialize)]
struct RecordOut<'a> {
    t: &'a str,
    i: &'a PushItem,
}

/// A spool record as read back.
#[derive(Deserialize)]
struct RecordIn {
    t: String,
    i: PushItem,
}

/// The bytes of one spool record.
fn record(tenant: &str, item: &PushItem) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&RecordOut { t: tenant, i: item })
}

fn uncount(pending: &mut HashMap<Key, u64>, k: Key) {
    if let Some(n) = pending.get_mut(&k) {
        *n -= 1;
        if *n == 0 {
            pending.remove(&k);
        }
    }
}

/// Parses a spool record into its key and (tenant, item).
pub fn parse_record(r: &[u8]) -> Option<(Key, (String, PushItem))> {
    let RecordIn { t, i } = serde_json::from_slice(r).ok()?;
    Some((key_of(&t, &i), (t, i)))
}

/// The `shard-k` directories shard `me` of `n` adopts (`k mod n == me`).
fn adopted_dirs(root: &Path, me: usize, n: usize) -> Vec<usize> {
    let mut ks: Vec<usize> = std::fs::read_dir(root)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|s| s.strip_prefix("shard-"))
                        .and_then(|k| k.parse().ok())
                })
                .filter(|k: &usize| k % n == me)
                .collect()
        })
        .unwrap_or_default();
    ks.sort_unstable();
    ks
}

/// The segment files of `dir`, by sequence number.
fn segments_in(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut segs: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.to_string();
                    let seq = name
                        .strip_prefix("seg-")?
                        .strip_suffix(".log")?
                        .parse()
                        .ok()?;
                    Some((seq, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    segs.sort();
    segs
}
