//! The spool's background tasks on each shard: replay (oldest segment
//! first, in append order, through `Job::PushBatch`) and the maintenance
//! flags' refresh from `queen.system_state`.
//!
//! Replay runs only while push maintenance is off and PostgreSQL is
//! believed healthy; after a connection failure a `Job::Health` probe every
//! `FILE_BUFFER_FLUSH_MS` decides when it is back. A segment is deleted
//! only after every record in it committed.

use super::parse_record;
use crate::mesh::Notice;
use crate::shard::Shard;
use crate::store::{Job, Proc, StoreError, StoreReply};
use futures_lite::future::or;
use serde_json::{json, Value};
use shards::segment::{self, Ending};
use std::collections::BTreeSet;
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
/// Consecutive `FILE_BUFFER_MAX_BATCH` batches of one segment sent in one
/// round trip (one transaction), as push fusion does for live pushes: at the
/// default 100 that is 1,000 items, the push lanes' largest batch. Append
/// order is kept (one job in flight per shard); bench/spool.sh measured the
/// unfused replay at about a quarter of the normal push inflow.
const REPLAY_FUSED_BATCHES: usize = 10;
/// Retry cadence of the maintenance-flag read while PostgreSQL is down.
const REFRESH_RETRY: Duration = Duration::from_secs(1);

/// Starts the replay and maintenance-refresh tasks of `shard`.
pub fn spawn(shard: &Rc<Shard>) {
    let s = shard.clone();
    glommio::spawn_local(async move { replay_loop(s).await }).detach();
    let s = shard.clone();
    glommio::spawn_local(async move { refresh_loop(s).await }).detach();
}

async fn nap(shard: &Shard, d: Duration) {
    or(glommio::timer::sleep(d), shard.stopping.wait()).await;
}

/// Probes PostgreSQL; marks the spool's health.
async fn probe(shard: &Shard) -> bool {
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
async fn may_replay(shard: &Shard) -> bool {
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
fn replayed_so_far(shard: &Shard) -> u64 {
    super::stats::board()
        .get(shard.id.0)
        .map_or(0, |g| g.replayed_total.load(Ordering::Relaxed))
}

/// Logs the end of `run`: `finished` when the spool is empty, else paused.
fn end_run(shard: &Shard, run: Run, finished: bool) {
    let n = replayed_so_far(shard) - run.replayed_before;
    let secs = run.at.elapsed().as_secs_f64();
    let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
    if finished {
        log::info!(
            "shard {}: spool replay finished: {n} record(s) in {:.1} s ({rate:.0}/s)",
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

async fn replay_loop(shard: Rc<Shard>) {
    let flush = Duration::from_millis(shard.cfg.file_buffer_flush_ms);
    let mut run: Option<Run> = None;
    while !shard.stopping.is_fired() {
        let may = may_replay(&shard).await;
        if !may || !shard.spool.has_work() {
            if let Some(r) = run.take() {
                end_run(&shard, r, may);
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
        }
        let Some(path) = shard.spool.next_segment().await else {
            nap(&shard, flush).await;
            continue;
        };
        if !replay_segment(&shard, &path, flush).await {
            nap(&shard, flush).await;
        }
    }
}

/// Replays one segment; true when it is done (deleted or failed).
async fn replay_segment(shard: &Shard, path: &Path, flush: Duration) -> bool {
    let spool = &shard.spool;
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
    let mut recs = Vec::with_capacity(decoded.records.len());
    for r in &decoded.records {
        match parse_record(r) {
            Some((key, (tenant, item))) => recs.push((key, tenant, item, r.len() as u64)),
            None => log::error!(
                "shard {}: skipping an unreadable record in {} (checksum fine, JSON not)",
                shard.id,
                path.display()
            ),
        }
    }
    let max = (shard.cfg.file_buffer_max_batch * REPLAY_FUSED_BATCHES).max(1);
    let mut at = 0;
    while at < recs.len() {
        if shard.stopping.is_fired() {
            return false;
        }
        if !may_replay(shard).await {
            nap(shard, flush).await;
            continue;
        }
        let tenant = recs[at].1.clone();
        let mut end = at;
        while end < recs.len() && end - at < max && recs[end].1 == tenant {
            end += 1;
        }
        let batch = &recs[at..end];
        let items: Vec<Value> = batch.iter().map(|r| r.2.clone()).collect();
        let job = Job::PushBatch {
            tenant,
            counts: vec![1; items.len()],
            items,
        };
        let results = match shard.db.submit(job).await {
            StoreReply::Push(r) => r,
            StoreReply::PushRefused { err, .. } => vec![Err(err)],
            StoreReply::Value(v) => vec![Err(v.err().unwrap_or(StoreError::Busy))],
        };
        if let Some(e) = results.iter().find_map(|r| r.as_ref().err()) {
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
        let keys: Vec<_> = batch.iter().map(|r| (r.0.clone(), r.3)).collect();
        spool.replayed(&keys);
        super::stats::replayed(shard.id.0, keys.len() as u64);
        let queues: BTreeSet<&str> = batch.iter().map(|r| r.0 .1.as_str()).collect();
        for q in queues {
            shard.notify(Notice::Pushed {
                queue: q.to_string(),
            });
        }
        at = end;
    }
    if let Err(e) = glommio::io::remove(path).await {
        log::error!(
            "shard {}: cannot delete replayed segment {}: {e}",
            shard.id,
            path.display()
        );
    }
    spool.segment_done(path);
    true
}

/// Reads the maintenance flags at boot and every `QUEEN_CACHE_REFRESH_INTERVAL_MS`,
/// so a missed notice converges.
async fn refresh_loop(shard: Rc<Shard>) {
    let every = Duration::from_millis(shard.cfg.cache_refresh_ms.max(100));
    while !shard.stopping.is_fired() {
        match shard.db.call(Proc::SystemStateGet, json!({})).await {
            Ok(v) => {
                apply_flags(&shard, &v);
                nap(&shard, every).await;
            }
            Err(_) => nap(&shard, REFRESH_RETRY).await,
        }
    }
}

/// Applies `{maintenanceMode, popMaintenanceMode}` to this shard.
pub fn apply_flags(shard: &Shard, v: &Value) {
    if let Some(b) = v.get("maintenanceMode").and_then(Value::as_bool) {
        shard.spool.set_flag(false, b);
    }
    if let Some(b) = v.get("popMaintenanceMode").and_then(Value::as_bool) {
        shard.spool.set_flag(true, b);
    }
}
