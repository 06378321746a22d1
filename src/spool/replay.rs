//! The spool's background tasks on each shard: replay (oldest segment
//! first, in append order per partition, through `Job::PushBatch`) and the
//! maintenance flags' refresh from `queen.system_state`. The shard's start-up
//! (`crate::serve`) spawns them with a [`Replay`]: the parts of the shard they
//! use, passed down, since the spool sits below the shard that holds it.
//!
//! Replay runs only while push maintenance is off and PostgreSQL is
//! believed healthy; after a connection failure a `Job::Health` probe every
//! `FILE_BUFFER_FLUSH_MS` decides when it is back. A segment is deleted
//! only after every record in it committed.
//!
//! # Replay lanes (decision)
//! A segment's records are dealt to `REPLAY_LANES` lanes by a hash of their
//! (tenant, queue, partition); each lane sends its records in append order,
//! one batch (one transaction) in flight at a time, and the lanes run at
//! once on the DB threads. A partition's records thus commit in append
//! order (its lane is sequential) while batches of different partitions
//! overlap: replay is not held to one round trip at a time per shard.
//! Records of different partitions may commit out of append order; nothing
//! promises an order across partitions. A batch that fails (connection
//! lost, rejected) is retried by its lane before that lane's next batch;
//! other lanes carry on (their partitions are disjoint). Live pushes share
//! the DB threads' one FIFO job queue with the lanes, so a replay takes at
//! most `REPLAY_LANES` of the queue's places per shard and never starves
//! them; the push lanes keep their own `MAX_INFLIGHT_BATCHES`.

use super::{parse_record, Key, Spool};
use crate::mesh::Notice;
use crate::store::{DbClient, Job, Proc, PushItem, StoreError, StoreReply};
use futures_lite::future::or;
use serde_json::{json, Value};
use shards::segment::{self, Ending};
use shards::shutdown::LocalSignal;
use shards::ShardId;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a health probe may take before PostgreSQL counts as still down.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Wait before retrying a replay batch PostgreSQL rejected (not a connection
/// error): long enough not to spin on a poison record, short enough that a
/// fixed cause (a restored function, freed space) resumes quickly.
const PARK_RETRY: Duration = Duration::from_secs(1);
/// Consecutive `FILE_BUFFER_MAX_BATCH` batches of one lane sent in one
/// round trip (one transaction), as push fusion does for live pushes: at the
/// default 100 that is 1,000 items, the push lanes' largest batch.
/// bench/spool.sh measured the unfused replay at about a quarter of the
/// normal push inflow.
const REPLAY_FUSED_BATCHES: usize = 10;
/// Replay lanes per shard, i.e. replay batches in flight at once per shard:
/// as many as the push lanes keep (`shard::lanes::MAX_INFLIGHT_BATCHES`, which
/// asserts the two agree), which is what lets live pushes overlap their round
/// trips; with two shards that is 4 replay transactions. One lane (the
/// previous design) drained at 0.46x the normal push rate
/// (bench/history/2026-11-diary.md).
pub const REPLAY_LANES: usize = 2;
/// Records parsed between yields while a segment is decoded, so a 10,000
/// record segment does not hold the shard's live requests for its whole parse.
const PARSE_YIELD_EVERY: usize = 500;
/// Retry cadence of the maintenance-flag read while PostgreSQL is down.
const REFRESH_RETRY: Duration = Duration::from_secs(1);

/// What one shard's spool tasks use of the shard, handed down at start-up.
pub struct Replay {
    /// Which shard (log lines, its spool stats slot).
    pub id: ShardId,
    /// The shard's spool: segments to replay, health, maintenance flags.
    pub spool: Rc<Spool>,
    /// The shard's DB client: replay batches, health probes, flag reads.
    pub db: Rc<DbClient>,
    /// Fired when the shard stops; both tasks end soon after.
    pub stopping: LocalSignal,
    /// Publishes a notice the way the shard does (its own waiters, then the
    /// mesh): a `pushed` notice per queue of each committed replay batch.
    pub notify: Rc<dyn Fn(Notice)>,
    /// `FILE_BUFFER_FLUSH_MS`: the pause between replay attempts.
    pub flush_ms: u64,
    /// `FILE_BUFFER_MAX_BATCH`: records per replayed batch, before fusion.
    pub max_batch: usize,
    /// `QUEEN_CACHE_REFRESH_INTERVAL_MS`: how often the flags are re-read.
    pub refresh_ms: u64,
}

impl fmt::Debug for Replay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("id", &self.id)
            .field("flush_ms", &self.flush_ms)
            .field("max_batch", &self.max_batch)
            .field("refresh_ms", &self.refresh_ms)
            .finish_non_exhaustive()
    }
}

/// Starts the replay and maintenance-refresh tasks of one shard.
pub fn spawn(replay: Replay) {
    let r = Rc::new(replay);
    let s = r.clone();
    glommio::spawn_local(async move { replay_loop(s).await }).detach();
    glommio::spawn_local(async move { refresh_loop(r).await }).detach();
}

async fn nap(shard: &Replay, d: Duration) {
    or(glommio::timer::sleep(d), shard.stopping.wait()).await;
}

/// Probes PostgreSQL; marks the spool's health.
async fn probe(shard: &Replay) -> bool {
    let up = or(
        async { matches!(shard.db.submit(Job::Health).await, StoreReply::Value(Ok(_))) },
        async {
            glommio::timer::sleep(PROBE_TIMEOUT).await;
            false
        },
    )
    .await;
    if up && !shard.spool.pg_healthy.get() {
        log::info!(
            "shard {}: PostgreSQL reachable again; replaying {} spooled record(s)",
            shard.id,
            shard.spool.pending_records()
        );
        shard.spool.pg_healthy.set(true);
        shard.spool.publish();
    }
    up
}

/// Whether replay may run now (probing PostgreSQL when it was down).
async fn may_replay(shard: &Replay) -> bool {
    if shard.spool.push_paused.get() {
        return false;
    }
    shard.spool.pg_healthy.get() || probe(shard).await
}

/// A replay run in progress: from the first record replayed after the spool
/// had work until it is empty (or replay pauses), for the start/end log lines.
#[derive(Debug, Clone, Copy)]
struct Run {
    /// When the run started.
    at: Instant,
    /// The shard's replayed-records counter then.
    replayed_before: u64,
}

/// The shard's replayed-records counter (`stats::replayed`).
fn replayed_so_far(shard: &Replay) -> u64 {
    super::stats::board()
        .get(shard.id.0)
        .map_or(0, |g| g.replayed_total.load(Ordering::Relaxed))
}

/// Logs the end of `run`: `finished` when the spool is empty, else paused.
fn end_run(shard: &Replay, run: Run, finished: bool, peak: usize) {
    let n = replayed_so_far(shard) - run.replayed_before;
    let secs = run.at.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    if finished {
        log::info!(
            "shard {}: spool replay finished: {n} record(s) in {:.1} s ({rate:.0}/s), \
             up to {peak} batch(es) in flight at once",
            shard.id,
            secs
        );
    } else {
        log::info!(
            "shard {}: spool replay paused after {n} record(s) in {:.1} s; {} record(s) left",
            shard.id,
            secs,
            shard.spool.pending_records()
        );
    }
}

async fn replay_loop(shard: Rc<Replay>) {
    let flush = Duration::from_millis(shard.flush_ms);
    let mut run: Option<Run> = None;
    let flight = Rc::new(Flight::default());
    while !shard.stopping.is_fired() {
        let may = may_replay(&shard).await;
        if !may || !shard.spool.has_work() {
            if let Some(r) = run.take() {
                end_run(&shard, r, may, flight.take_peak());
            }
            nap(&shard, flush).await;
            continue;
        }
        if run.is_none() {
            log::info!(
                "shard {}: spool replay started: {} record(s) waiting",
                shard.id,
                shard.spool.pending_records()
            );
            run = Some(Run {
                at: Instant::now(),
                replayed_before: replayed_so_far(&shard),
            });
            flight.take_peak();
        }
        let Some(path) = shard.spool.next_segment().await else {
            nap(&shard, flush).await;
            continue;
        };
        if !replay_segment(&shard, &path, flush, &flight).await {
            nap(&shard, flush).await;
        }
    }
}

/// One spooled record on its way back to PostgreSQL.
#[derive(Debug)]
struct Rec {
    /// Its order-map key (tenant, queue, partition).
    key: Key,
    /// Its tenant (a batch carries one).
    tenant: String,
    /// The stored item; `None` while a batch holding it is in flight.
    item: Option<PushItem>,
    /// The record's bytes on disk, to parse the item again when a rejected
    /// batch did not hand its items back.
    raw: Vec<u8>,
}

/// Replays one segment; true when it is done (deleted or failed).
async fn replay_segment(
    shard: &Rc<Replay>,
    path: &Path,
    flush: Duration,
    flight: &Rc<Flight>,
) -> bool {
    let spool = &shard.spool;
    // One read of the whole file (segments are `FILE_BUFFER_EVENTS_PER_FILE`
    // records, a few MiB), not a read per record.
    let decoded = match segment::read_segment(path).await {
        Ok(d) => d,
        Err(e) => {
            log::error!(
                "shard {}: cannot read spool segment {}: {e}",
                shard.id,
                path.display()
            );
            return false;
        }
    };
    match decoded.ending {
        Ending::Clean => {}
        Ending::TornTail { valid_len } => {
            log::warn!(
                "shard {}: spool segment {} has a torn tail; cut at byte {valid_len}",
                shard.id,
                path.display()
            );
            let _ = segment::truncate_segment(path, valid_len).await;
        }
        Ending::Corrupt { offset } => {
            spool.fail_segment(path, offset).await;
            spool.segment_done(path);
            return true;
        }
    }
    let mut lanes: Vec<Vec<Rec>> = (0..REPLAY_LANES).map(|_| Vec::new()).collect();
    for (n, raw) in decoded.records.into_iter().enumerate() {
        if n % PARSE_YIELD_EVERY == 0 {
            glommio::yield_if_needed().await;
        }
        match parse_record(&raw) {
            Some((key, (tenant, item))) => lanes[lane_of(&key)].push(Rec {
                key,
                tenant,
                item: Some(item),
                raw,
            }),
            None => log::error!(
                "shard {}: skipping an unreadable record in {} (checksum fine, JSON not)",
                shard.id,
                path.display()
            ),
        }
    }
    let path = Rc::new(path.to_path_buf());
    let tasks: Vec<_> = lanes
        .into_iter()
        .filter(|l| !l.is_empty())
        .map(|recs| {
            let (shard, path, flight) = (shard.clone(), path.clone(), flight.clone());
            glommio::spawn_local(
                async move { replay_lane(&shard, &path, recs, flush, &flight).await },
            )
        })
        .collect();
    let mut all = true;
    for t in tasks {
        all &= t.await;
    }
    if !all {
        return false;
    }
    if let Err(e) = glommio::io::remove(path.as_path()).await {
        log::error!(
            "shard {}: cannot delete replayed segment {}: {e}",
            shard.id,
            path.display()
        );
    }
    spool.segment_done(&path);
    true
}

/// The replay lane of a key: a hash of (tenant, queue, partition), so one
/// partition's records always travel through one lane.
fn lane_of(key: &Key) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % REPLAY_LANES as u64) as usize
}

/// Replays one lane's records of a segment in append order, one batch in
/// flight at a time; true when all committed, false when the shard stops.
async fn replay_lane(
    shard: &Replay,
    path: &Path,
    mut recs: Vec<Rec>,
    flush: Duration,
    flight: &Flight,
) -> bool {
    let spool = &shard.spool;
    let max = (shard.max_batch * REPLAY_FUSED_BATCHES).max(1);
    let mut at = 0;
    while at < recs.len() {
        if shard.stopping.is_fired() {
            return false;
        }
        if !may_replay(shard).await {
            nap(shard, flush).await;
            continue;
        }
        let tenant = recs[at].tenant.clone();
        let mut end = at;
        while end < recs.len() && end - at < max && recs[end].tenant == tenant {
            end += 1;
        }
        let batch = &mut recs[at..end];
        // Every item is here: a batch that failed got its items back, from
        // the reply or from the records' bytes.
        let items: Vec<PushItem> = batch.iter_mut().filter_map(|r| r.item.take()).collect();
        let job = Job::PushBatch {
            tenant,
            counts: vec![1; items.len()],
            items,
        };
        flight.start();
        let reply = shard.db.submit(job).await;
        flight.end();
        let results = match reply {
            StoreReply::Pushed(r) => r.into_iter().map(|r| r.map(drop)).collect(),
            StoreReply::PushRefused { err, items, .. } => {
                for (r, i) in batch.iter_mut().zip(items) {
                    r.item = Some(i);
                }
                vec![Err(err)]
            }
            StoreReply::Value(v) => vec![Err(v.err().unwrap_or(StoreError::Busy))],
            StoreReply::Acked(_) | StoreReply::Popped(_) => {
                vec![Err(StoreError::Db(
                    "ack or pop reply to a replay batch".into(),
                ))]
            }
        };
        if let Some(e) = results.iter().find_map(|r| r.as_ref().err()) {
            // Nothing of the batch committed (one transaction): put back any
            // item the reply did not return, from the record's bytes (they
            // parsed before, so they parse again).
            for r in batch.iter_mut().filter(|r| r.item.is_none()) {
                r.item = parse_record(&r.raw).map(|(_, (_, item))| item);
            }
            match e {
                StoreError::Unavailable(m) => {
                    log::warn!(
                        "shard {}: replay paused, PostgreSQL unreachable: {m}",
                        shard.id
                    );
                    spool.pg_down();
                    nap(shard, flush).await;
                }
                StoreError::Busy => nap(shard, flush).await,
                StoreError::Db(m) => {
                    log::error!(
                        "shard {}: replay batch of {} record(s) from {} rejected by PostgreSQL \
                         (parked, retrying in {PARK_RETRY:?}): {m}",
                        shard.id,
                        batch.len(),
                        path.display()
                    );
                    nap(shard, PARK_RETRY).await;
                }
            }
            continue;
        }
        let keys: Vec<_> = batch
            .iter()
            .map(|r| (r.key.clone(), r.raw.len() as u64))
            .collect();
        spool.replayed(&keys);
        super::stats::replayed(shard.id.0, keys.len() as u64);
        let queues: BTreeSet<&str> = batch.iter().map(|r| r.key.1.as_str()).collect();
        for q in queues {
            (shard.notify)(Notice::Pushed {
                queue: q.to_string(),
            });
        }
        at = end;
    }
    true
}

/// Replay batches of this shard in flight, and the most at once in a run
/// (for the finish log line; tests read it to see the lanes overlap).
#[derive(Debug, Default)]
pub struct Flight {
    /// Batches in flight now.
    now: Cell<usize>,
    /// The most in flight at once since the last `take_peak`.
    peak: Cell<usize>,
}

impl Flight {
    fn start(&self) {
        self.now.set(self.now.get() + 1);
        self.peak.set(self.peak.get().max(self.now.get()));
    }
    fn end(&self) {
        self.now.set(self.now.get().saturating_sub(1));
    }
    fn take_peak(&self) -> usize {
        self.peak.replace(self.now.get())
    }
}

/// Reads the maintenance flags at boot and every `QUEEN_CACHE_REFRESH_INTERVAL_MS`,
/// so a missed notice converges.
async fn refresh_loop(shard: Rc<Replay>) {
    let every = Duration::from_millis(shard.refresh_ms.max(100));
    while !shard.stopping.is_fired() {
        match shard.db.call(Proc::SystemStateGet, json!({})).await {
            Ok(v) => {
                apply_flags(&shard.spool, &v);
                nap(&shard, every).await;
            }
            Err(_) => nap(&shard, REFRESH_RETRY).await,
        }
    }
}

/// Applies `{maintenanceMode, popMaintenanceMode}` to this shard's spool.
fn apply_flags(spool: &Spool, v: &Value) {
    if let Some(b) = v.get("maintenanceMode").and_then(Value::as_bool) {
        spool.set_flag(false, b);
    }
    if let Some(b) = v.get("popMaintenanceMode").and_then(Value::as_bool) {
        spool.set_flag(true, b);
    }
}
