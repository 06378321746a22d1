//! `drain`: pre-fill a fresh queue with N messages (untimed), then empty it
//! with `--conns` consumers, each looping pop(batch) + `ack/batch` (or one
//! `autoAck=true` pop with `--auto-ack`). The rate is messages confirmed
//! over the time from the first pop to the last confirmation; the run ends
//! when all N are confirmed, when nothing arrived for `--idle-secs`, or at
//! `--max-secs`. Verified: every pre-filled message acked exactly once.
//! Warm-up: a small separate queue is filled and drained first, untimed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{ack, deliveries, partition_names, pop, us, Ctx, Phase, Pusher, WorkerStats};
use crate::http::Client;
use crate::payload::now_unix_ns;
use crate::report::{Report, Verify};

/// Items per pre-fill request.
const PREFILL_BATCH: usize = 100;
/// Pause after a failed request.
const ERROR_BACKOFF: Duration = Duration::from_millis(20);
/// How often the main thread checks for the end.
const CHECK_EVERY: Duration = Duration::from_millis(10);

/// Shape of a drain run.
#[derive(Debug, Clone)]
pub struct DrainOpts {
    /// Messages pre-filled before timing.
    pub prefill: u64,
    /// Partitions the pre-fill spreads over.
    pub partitions: usize,
    /// Connections used to pre-fill.
    pub prefill_conns: usize,
    /// `batch` of each pop.
    pub batch: usize,
    /// Consumer connections.
    pub conns: usize,
    /// Pop with `autoAck=true` instead of pop + ack/batch.
    pub auto_ack: bool,
    /// Long-poll budget of each pop, ms.
    pub wait_ms: u64,
    /// Stop when nothing arrived for this long.
    pub idle: Duration,
    /// Hard limit on the drain.
    pub max: Duration,
    /// Messages in the warm-up queue (0 = no warm-up).
    pub warmup_msgs: u64,
    /// Approximate JSON payload size.
    pub payload_bytes: usize,
    /// Pre-fill request items go to consecutive partitions (one request
    /// spans up to 100 of them) instead of all into one: with it, N
    /// messages reach min(N, partitions) partitions.
    pub spread: bool,
    /// `partitions` of each pop: how many partitions one pop may claim
    /// (1, the API's default, leases one). A consumer draining many small
    /// partitions asks for more so a pop of `batch` is not cut short by
    /// the first partition's few messages.
    pub claim: usize,
}

/// Runs the scenario and returns its report.
pub fn run(ctx: &Ctx, o: &DrainOpts) -> Report {
    let queue = ctx.fresh_queue(if o.auto_ack { "drain-auto" } else { "drain" });
    let mut notes = Vec::new();
    let mut st = WorkerStats::default();
    if o.warmup_msgs > 0 {
        let warm = format!("{queue}-warm");
        let _ = ctx.configure(&warm);
        let n = prefill(ctx, &warm, o.warmup_msgs, o, &mut WorkerStats::default());
        drain(ctx, &warm, n, o, false);
    }
    if let Err(n) = ctx.configure(&queue) {
        notes.push(n);
    }
    let t = Instant::now();
    let expected = prefill(ctx, &queue, o.prefill, o, &mut st);
    notes.push(format!(
        "pre-filled {expected} of {} in {:.1}s",
        o.prefill,
        t.elapsed().as_secs_f64()
    ));
    let d = drain(ctx, &queue, expected, o, true);
    st.merge(&d.stats);
    notes.extend(d.notes);
    let confirmed = d.stats.total;
    Report {
        scenario: "drain".into(),
        key: format!(
            "drain b{} c{} {}{}",
            o.batch,
            o.conns,
            if o.auto_ack { "auto" } else { "ack" },
            // the scale runs (issue 18) compare drains over partition counts
            if o.spread || ctx.group.is_some() {
                format!(
                    " p{}{}",
                    o.partitions,
                    if ctx.group.is_some() { " group" } else { "" }
                )
            } else {
                String::new()
            }
        ),
        label: ctx.label.clone(),
        queue,
        params: serde_json::json!({
            "prefill": o.prefill, "partitions": o.partitions, "batch": o.batch, "conns": o.conns,
            "auto_ack": o.auto_ack, "wait_ms": o.wait_ms, "payload_bytes": o.payload_bytes,
            "spread": o.spread, "claim": o.claim, "group": ctx.group,
        }),
        duration_s: d.secs,
        messages: confirmed,
        msg_per_s: confirmed as f64 / d.secs.max(1e-9),
        requests: d.stats.reqs,
        req_latency: d.stats.lat.summary(),
        ack_latency: (!o.auto_ack).then(|| d.stats.ack_lat.summary()),
        errors: st.errors,
        verify: Some(Verify::new(
            expected,
            d.unique.min(confirmed),
            d.deliveries - d.unique,
        )),
        proc: d.proc,
        notes,
        ..Report::default()
    }
}

/// Pushes `n` messages in batches of 100 over the partitions; returns how
/// many the broker accepted.
fn prefill(ctx: &Ctx, queue: &str, n: u64, o: &DrainOpts, st: &mut WorkerStats) -> u64 {
    let claimed = Arc::new(AtomicU64::new(0));
    let parts = partition_names(o.partitions);
    let spread = o.spread;
    let workers: Vec<_> = (0..o.prefill_conns.max(1))
        .map(|i| {
            let (claimed, queue) = (claimed.clone(), queue.to_string());
            let mut p = Pusher::new(&ctx.target, parts.clone(), o.payload_bytes, 1000 + i as u64);
            p.spread = spread;
            thread::spawn(move || {
                let mut st = WorkerStats::default();
                loop {
                    let from = claimed.fetch_add(PREFILL_BATCH as u64, Ordering::Relaxed);
                    if from >= n {
                        return st;
                    }
                    let take = (n - from).min(PREFILL_BATCH as u64) as usize;
                    let part = if spread {
                        from as usize
                    } else {
                        (from / PREFILL_BATCH as u64) as usize
                    };
                    let r = p.push(&queue, part, take, from, now_unix_ns(), &mut st);
                    st.total += r.accepted;
                    if r.accepted == 0 {
                        thread::sleep(ERROR_BACKOFF);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        if let Ok(s) = w.join() {
            st.merge(&s);
        }
    }
    st.total
}

/// What one drain produced.
struct Drained {
    stats: WorkerStats,
    secs: f64,
    unique: u64,
    deliveries: u64,
    proc: crate::procstat::ProcReport,
    notes: Vec<String>,
}

/// Shared progress between the drain workers and the main thread.
#[derive(Debug, Default)]
struct Progress {
    /// Messages confirmed (acked, or delivered with autoAck).
    confirmed: AtomicU64,
    /// Time of the last confirmation, µs after the start.
    last_us: AtomicU64,
}

fn drain(ctx: &Ctx, queue: &str, expected: u64, o: &DrainOpts, timed: bool) -> Drained {
    let phase = Phase::default();
    phase.measure();
    let progress = Arc::new(Progress::default());
    let t0 = Instant::now();
    let window = ctx.watch.start();
    let mut path = format!(
        "/api/v1/pop/queue/{queue}?batch={}&wait=true&timeout={}",
        o.batch, o.wait_ms
    );
    if let Some(g) = &ctx.group {
        path.push_str(&format!("&consumerGroup={g}"));
    }
    if o.claim > 1 {
        path.push_str(&format!("&partitions={}", o.claim));
    }
    if o.auto_ack {
        path.push_str("&autoAck=true");
    }
    let workers: Vec<_> = (0..o.conns)
        .map(|i| {
            let (phase, progress, path) = (phase.clone(), progress.clone(), path.clone());
            let mut client = Client::new(
                ctx.target.clone(),
                Duration::from_millis(o.wait_ms) + super::HTTP_TIMEOUT,
            );
            let (group, auto_ack) = (ctx.group.clone(), o.auto_ack);
            thread::Builder::new()
                .name(format!("drain-{i}"))
                .spawn(move || {
                    drain_loop(
                        &mut client,
                        &path,
                        group.as_deref(),
                        auto_ack,
                        t0,
                        &progress,
                        &phase,
                    )
                })
                .expect("spawn drain worker")
        })
        .collect();
    let mut notes = Vec::new();
    loop {
        thread::sleep(CHECK_EVERY);
        let done = progress.confirmed.load(Ordering::Relaxed);
        let last = Duration::from_micros(progress.last_us.load(Ordering::Relaxed));
        if done >= expected {
            break;
        }
        if t0.elapsed() > last + o.idle {
            notes.push(format!(
                "stopped: nothing confirmed for {:?} ({done} of {expected})",
                o.idle
            ));
            break;
        }
        if t0.elapsed() > o.max {
            notes.push(format!(
                "stopped: --max-secs reached ({done} of {expected})"
            ));
            break;
        }
    }
    phase.stop();
    let proc = window.finish();
    let secs = Duration::from_micros(progress.last_us.load(Ordering::Relaxed)).as_secs_f64();
    let mut stats = WorkerStats::default();
    let mut seen: HashSet<String> = HashSet::with_capacity(expected as usize);
    let mut deliveries = 0u64;
    for w in workers {
        if let Ok((s, ids)) = w.join() {
            stats.merge(&s);
            deliveries += ids.len() as u64;
            seen.extend(ids);
        }
    }
    if !timed {
        notes.clear();
    }
    Drained {
        stats,
        secs,
        unique: seen.len() as u64,
        deliveries,
        proc,
        notes,
    }
}

fn drain_loop(
    client: &mut Client,
    path: &str,
    group: Option<&str>,
    auto_ack: bool,
    t0: Instant,
    progress: &Progress,
    phase: &Phase,
) -> (WorkerStats, Vec<String>) {
    let mut st = WorkerStats::default();
    let mut ids = Vec::new();
    let mut ack_buf = Vec::with_capacity(32 * 1024);
    while !phase.stopped() {
        let errors_before = st.errors.total();
        let (body, elapsed) = pop(client, path, &mut st.errors);
        st.reqs += 1;
        let Some(body) = body.filter(|b| !b.messages.is_empty()) else {
            if st.errors.total() > errors_before {
                thread::sleep(ERROR_BACKOFF);
            }
            continue;
        };
        // Only pops that delivered: an empty long poll at the end of the
        // drain waits out its timeout and says nothing about the broker.
        st.lat.record_us(us(elapsed));
        let ds = deliveries(&body);
        let confirmed = if auto_ack {
            ds.len() as u64
        } else {
            let (ok, elapsed) = ack(client, &mut ack_buf, &ds, group, &mut st.errors);
            st.ack_lat.record_us(us(elapsed));
            ok
        };
        ids.extend(ds.into_iter().map(|d| d.transaction_id));
        st.msgs += confirmed;
        st.total += confirmed;
        progress.confirmed.fetch_add(confirmed, Ordering::Relaxed);
        progress
            .last_us
            .fetch_max(us(t0.elapsed()), Ordering::Relaxed);
    }
    (st, ids)
}
