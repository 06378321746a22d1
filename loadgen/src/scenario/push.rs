//! `push`: closed-loop push throughput. `--conns` connections each send one
//! `POST /api/v1/push` of `--batch` items at a time, as fast as answers come.
//! With `--rate N` the run is open loop instead: each connection sends on a
//! fixed schedule so that N msg/s are offered in total (a connection behind
//! its schedule sends at once to catch up; the achieved rate is reported).
//! Every request's items share one partition and partitions rotate across
//! requests (one global counter), as the original's producer spreads load.
//! Counted: items accepted in responses that complete inside the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{join_stats, partition_names, us, Ctx, Phase, Pusher, WorkerStats};
use crate::payload::now_unix_ns;
use crate::report::Report;

/// Pause after a failed request so a dead broker is not hammered in a loop.
const ERROR_BACKOFF: Duration = Duration::from_millis(20);

/// Shape of a push run.
#[derive(Debug, Clone)]
pub struct PushOpts {
    /// Items per request.
    pub batch: usize,
    /// Concurrent connections (= requests in flight).
    pub conns: usize,
    /// Partitions to rotate over.
    pub partitions: usize,
    /// Measured window.
    pub duration: Duration,
    /// Untimed lead-in on the same queue.
    pub warmup: Duration,
    /// Approximate JSON payload size.
    pub payload_bytes: usize,
    /// Offered msg/s over all connections (open loop); `None` = closed loop.
    pub rate: Option<f64>,
}

/// Runs the scenario and returns its report.
pub fn run(ctx: &Ctx, o: &PushOpts) -> Report {
    let queue = ctx.fresh_queue("push");
    let mut notes = Vec::new();
    if let Err(n) = ctx.configure(&queue) {
        notes.push(n);
    }
    let phase = Phase::default();
    let next_part = Arc::new(AtomicU64::new(0));
    let parts = partition_names(o.partitions);
    // Open loop: one request per connection every `interval`, staggered.
    let interval = o
        .rate
        .map(|r| Duration::from_secs_f64(o.conns as f64 * o.batch as f64 / r.max(1e-3)));
    let t_start = Instant::now();
    let workers: Vec<_> = (0..o.conns)
        .map(|i| {
            let (phase, next_part, queue) = (phase.clone(), next_part.clone(), queue.clone());
            let mut pusher = Pusher::new(&ctx.target, parts.clone(), o.payload_bytes, i as u64);
            let batch = o.batch;
            let sched = interval.map(|iv| (t_start + iv.mul_f64(i as f64 / o.conns as f64), iv));
            thread::Builder::new()
                .name(format!("push-{i}"))
                .spawn(move || {
                    push_loop(
                        &mut pusher,
                        &queue,
                        batch,
                        i as u64,
                        &next_part,
                        &phase,
                        sched,
                    )
                })
                .expect("spawn push worker")
        })
        .collect();
    let (secs, proc) = phase.run_window(&ctx.watch, o.warmup, o.duration);
    let st = join_stats(workers);
    if st.duplicates > 0 {
        notes.push(format!("{} items answered duplicate", st.duplicates));
    }
    Report {
        scenario: "push".into(),
        key: match o.rate {
            None => format!("push b{} p{} c{}", o.batch, o.partitions, o.conns),
            Some(r) => format!(
                "push b{} p{} c{} at {r} msg/s",
                o.batch, o.partitions, o.conns
            ),
        },
        label: ctx.label.clone(),
        queue,
        params: serde_json::json!({
            "batch": o.batch, "conns": o.conns, "partitions": o.partitions, "rate": o.rate,
            "duration_s": o.duration.as_secs_f64(), "warmup_s": o.warmup.as_secs_f64(),
            "payload_bytes": o.payload_bytes,
        }),
        duration_s: secs,
        messages: st.msgs,
        msg_per_s: st.msgs as f64 / secs,
        requests: st.reqs,
        req_latency: st.lat.summary(),
        errors: st.errors,
        proc,
        notes,
        ..Report::default()
    }
}

/// `sched`: (first send, interval) for the open loop; `None` = closed loop.
fn push_loop(
    p: &mut Pusher,
    queue: &str,
    batch: usize,
    id: u64,
    next_part: &AtomicU64,
    phase: &Phase,
    sched: Option<(Instant, Duration)>,
) -> WorkerStats {
    let mut st = WorkerStats::default();
    // Sequence numbers are unique per connection: the id in the high bits.
    let mut seq = id << 40;
    let mut due = sched.map(|(first, _)| first);
    while !phase.stopped() {
        if let (Some(at), Some((_, iv))) = (due, sched) {
            let now = Instant::now();
            if at > now {
                thread::sleep(at - now);
            }
            due = Some(at + iv);
        }
        let part = next_part.fetch_add(1, Ordering::Relaxed) as usize % p.nr_partitions();
        let r = p.push(queue, part, batch, seq, now_unix_ns(), &mut st);
        seq += batch as u64;
        st.total += r.accepted;
        if phase.measuring() {
            st.msgs += r.accepted;
            st.reqs += 1;
            st.lat.record_us(us(r.elapsed));
        }
        if r.accepted == 0 {
            thread::sleep(ERROR_BACKOFF);
        }
    }
    st
}
