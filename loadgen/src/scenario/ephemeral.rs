//! `ephemeral`: RAM-only queue throughput (issue 14's target: push b100 +
//! pop b100). `--conns` connections push batches of `--batch` messages to
//! `POST /api/v1/ephemeral/push` (partitions rotating), as many pop
//! `--pop-batch` with `autoAck` from `GET /api/v1/ephemeral/pop` over all
//! partitions, closed loop. A push answered 429 (`queue_full`) or 503 (RAM
//! ceiling) backs off a millisecond and counts as backpressure, not an error.
//!
//! Counted: messages popped inside the window (the report's `msg_per_s`;
//! the push rate is in the notes). After the window the poppers drain the
//! queue, and the check compares every message pushed over the whole run
//! with every message popped, each message carrying a unique sequence number
//! so a duplicate is seen.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{join_stats, us, Ctx, Phase, WorkerStats, HTTP_TIMEOUT};
use crate::http::{self, Client};
use crate::report::{Report, Verify};

/// Pause after backpressure (429/503) or an error.
const BACKOFF: Duration = Duration::from_millis(1);
/// Longest drain after the window.
const DRAIN_MAX: Duration = Duration::from_secs(30);

/// Shape of an ephemeral run.
#[derive(Debug, Clone)]
pub struct EphemeralOpts {
    /// Messages per push.
    pub batch: usize,
    /// Messages per pop.
    pub pop_batch: usize,
    /// Pushing connections; as many pop.
    pub conns: usize,
    /// Partitions to rotate pushes over.
    pub partitions: usize,
    /// Measured window.
    pub duration: Duration,
    /// Untimed lead-in.
    pub warmup: Duration,
    /// Approximate payload size.
    pub payload_bytes: usize,
}

/// What a popper saw.
#[derive(Default)]
struct Popped {
    stats: WorkerStats,
    seqs: Vec<u64>,
}

/// Runs the scenario.
pub fn run(ctx: &Ctx, o: &EphemeralOpts) -> Report {
    let queue = ctx.fresh_queue("eph");
    let mut notes = Vec::new();
    let mut c = Client::new(ctx.target.clone(), HTTP_TIMEOUT);
    let cfg = serde_json::json!({"queue": queue, "options": ctx.queue_options}).to_string();
    match c.post("/api/v1/ephemeral/configure", cfg.as_bytes()) {
        Ok(201) => {}
        Ok(s) => notes.push(format!("configure: HTTP {s} (queue left implicit)")),
        Err(e) => notes.push(format!("configure: {e}")),
    }
    let phase = Phase::default();
    let next_seq = Arc::new(AtomicU64::new(0));
    let pushed_window = Arc::new(AtomicU64::new(0));
    let backpressure = Arc::new(AtomicU64::new(0));
    let pushers: Vec<_> = (0..o.conns)
        .map(|i| {
            let (phase, q, o) = (phase.clone(), queue.clone(), o.clone());
            let (seq, win, bp) = (
                next_seq.clone(),
                pushed_window.clone(),
                backpressure.clone(),
            );
            let target = ctx.target.clone();
            thread::spawn(move || {
                push_loop(
                    Client::new(target, HTTP_TIMEOUT),
                    &q,
                    &o,
                    i,
                    &phase,
                    &seq,
                    &win,
                    &bp,
                )
            })
        })
        .collect();
    let pop_phase = Phase::default();
    let phase_push = phase.clone();
    let poppers: Vec<_> = (0..o.conns)
        .map(|_| {
            let (phase, q, o) = (pop_phase.clone(), queue.clone(), o.clone());
            let target = ctx.target.clone();
            let window = phase_push.clone();
            thread::spawn(move || {
                pop_loop(Client::new(target, HTTP_TIMEOUT), &q, &o, &window, &phase)
            })
        })
        .collect();
    let (secs, proc) = phase.run_window(&ctx.watch, o.warmup, o.duration);
    let push_stats = join_stats(pushers);
    // Pushers are done: poppers drain what is left (they stop on an empty pop).
    pop_phase.stop();
    let mut st = WorkerStats::default();
    let mut seen = HashSet::new();
    let mut dups = 0u64;
    for p in poppers {
        if let Ok(got) = p.join() {
            st.merge(&got.stats);
            for s in got.seqs {
                if !seen.insert(s) {
                    dups += 1;
                }
            }
        }
    }
    st.errors.merge(&push_stats.errors);
    let pl = push_stats.lat.summary();
    notes.push(format!(
        "pushed {:.0} msg/s in the window (push p50 {:.2} p99 {:.2} ms); {} pushes met backpressure (429/503)",
        pushed_window.load(Ordering::Relaxed) as f64 / secs,
        pl.p50_ms,
        pl.p99_ms,
        backpressure.load(Ordering::Relaxed)
    ));
    let verify = Verify::new(push_stats.total, seen.len() as u64, dups);
    Report {
        scenario: "ephemeral".into(),
        key: format!(
            "ephemeral push b{} + pop b{} p{} c{}",
            o.batch, o.pop_batch, o.partitions, o.conns
        ),
        label: ctx.label.clone(),
        queue,
        params: serde_json::json!({
            "batch": o.batch, "pop_batch": o.pop_batch, "conns": o.conns,
            "partitions": o.partitions, "duration_s": o.duration.as_secs_f64(),
            "warmup_s": o.warmup.as_secs_f64(), "payload_bytes": o.payload_bytes,
        }),
        duration_s: secs,
        messages: st.msgs,
        msg_per_s: st.msgs as f64 / secs,
        requests: st.reqs,
        req_latency: st.lat.summary(),
        errors: st.errors,
        verify: Some(verify),
        proc,
        notes,
        ..Report::default()
    }
}

/// Writes a push body of `n` messages with sequence numbers from `seq`.
fn body(out: &mut Vec<u8>, queue: &str, partition: &str, seq: u64, n: usize, pad: usize) {
    out.clear();
    out.extend_from_slice(
        format!("{{\"queue\":\"{queue}\",\"partition\":\"{partition}\",\"messages\":[").as_bytes(),
    );
    let padding = "x".repeat(pad.saturating_sub(24));
    for i in 0..n as u64 {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(
            format!("{{\"payload\":{{\"s\":{},\"p\":\"{padding}\"}}}}", seq + i).as_bytes(),
        );
    }
    out.extend_from_slice(b"]}");
}

#[allow(clippy::too_many_arguments)]
fn push_loop(
    mut c: Client,
    queue: &str,
    o: &EphemeralOpts,
    id: usize,
    phase: &Phase,
    next_seq: &AtomicU64,
    window: &AtomicU64,
    backpressure: &AtomicU64,
) -> WorkerStats {
    let mut st = WorkerStats::default();
    let mut buf = Vec::with_capacity(o.batch * (o.payload_bytes + 32));
    let mut k = id;
    while !phase.stopped() {
        let seq = next_seq.fetch_add(o.batch as u64, Ordering::Relaxed);
        body(
            &mut buf,
            queue,
            &format!("p{}", k % o.partitions),
            seq,
            o.batch,
            o.payload_bytes,
        );
        k += 1;
        let t = Instant::now();
        match c.post("/api/v1/ephemeral/push", &buf) {
            Ok(201) => {
                st.total += o.batch as u64;
                if phase.measuring() {
                    window.fetch_add(o.batch as u64, Ordering::Relaxed);
                    st.lat.record_us(us(t.elapsed()));
                }
            }
            Ok(429 | 503) => {
                backpressure.fetch_add(1, Ordering::Relaxed);
                thread::sleep(BACKOFF);
            }
            Ok(s) => {
                st.errors.status("ephemeral push", s, c.body());
                thread::sleep(BACKOFF);
            }
            Err(e) => {
                st.errors.transport("ephemeral push", &e);
                thread::sleep(BACKOFF);
            }
        }
    }
    st
}

/// `window`: the pushers' phase (what counts); `phase`: when to drain and stop.
fn pop_loop(
    mut c: Client,
    queue: &str,
    o: &EphemeralOpts,
    window: &Phase,
    phase: &Phase,
) -> Popped {
    let mut got = Popped::default();
    let path = format!(
        "/api/v1/ephemeral/pop?queue={queue}&batch={}&autoAck=true",
        o.pop_batch
    );
    let drain_until = std::cell::Cell::new(None::<Instant>);
    loop {
        let stopped = phase.stopped();
        if stopped && drain_until.get().is_none() {
            drain_until.set(Some(Instant::now() + DRAIN_MAX));
        }
        let t = Instant::now();
        match c.get(&path) {
            Ok(200) => {
                let b = c.body();
                let n = http::count(b, b"\"attempts\":") as u64;
                collect_seqs(b, &mut got.seqs);
                if window.measuring() {
                    got.stats.msgs += n;
                    got.stats.reqs += 1;
                    got.stats.lat.record_us(us(t.elapsed()));
                }
                let over = drain_until.get().is_some_and(|d| Instant::now() > d);
                if (stopped && n == 0) || over {
                    break;
                }
            }
            Ok(s) => {
                got.stats.errors.status("ephemeral pop", s, c.body());
                thread::sleep(BACKOFF);
            }
            Err(e) => {
                got.stats.errors.transport("ephemeral pop", &e);
                thread::sleep(BACKOFF);
                if stopped {
                    break;
                }
            }
        }
    }
    got
}

/// Appends every `{"s":N` sequence number of a pop body.
fn collect_seqs(b: &[u8], out: &mut Vec<u64>) {
    let mut rest = b;
    while let Some(i) = http::find(rest, b"{\"s\":") {
        rest = &rest[i + 5..];
        let end = rest
            .iter()
            .position(|c| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if let Some(n) = std::str::from_utf8(&rest[..end])
            .ok()
            .and_then(|s| s.parse().ok())
        {
            out.push(n);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bodies_and_sequence_numbers_round_trip() {
        let mut b = Vec::new();
        super::body(&mut b, "q", "p0", 7, 3, 100);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
        let mut seqs = Vec::new();
        super::collect_seqs(&b, &mut seqs);
        assert_eq!(seqs, [7, 8, 9]);
    }
}
