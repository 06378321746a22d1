//! `latency`: push-to-pop latency at a fixed offered rate (open loop).
//! `--producers` connections each push single messages on a fixed schedule
//! (`--rate` in total); every payload carries `ts`, the unix-ns time of
//! send. `--consumers` connections long-poll (`wait=true`) and ack each
//! batch. Latency = the time the pop answer arrived − `ts`, for messages
//! sent inside the measured window (same host clock). Verified: every
//! message sent in the window was received within `--grace-secs` after it.
//!
//! A producer that falls behind its schedule sends at once to catch up, so
//! the offered rate holds while the broker keeps up; the achieved rate is
//! reported next to the asked one.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{ack, deliveries, partition_names, pop, us, Ctx, Phase, Pusher, WorkerStats};
use crate::http::Client;
use crate::payload::now_unix_ns;
use crate::report::{Report, Verify};

/// Shape of a latency run.
#[derive(Debug, Clone)]
pub struct LatencyOpts {
    /// Offered messages per second, all producers together.
    pub rate: f64,
    /// Messages per push.
    pub batch: usize,
    /// Producer connections.
    pub producers: usize,
    /// Long-polling consumer connections.
    pub consumers: usize,
    /// Partitions the producers rotate over.
    pub partitions: usize,
    /// Measured window.
    pub duration: Duration,
    /// Untimed lead-in.
    pub warmup: Duration,
    /// Pop with `autoAck=true` instead of pop + ack/batch.
    pub auto_ack: bool,
    /// `batch` of each pop.
    pub pop_batch: usize,
    /// Long-poll budget, ms.
    pub wait_ms: u64,
    /// How long after the window messages may still arrive.
    pub grace: Duration,
    /// Approximate JSON payload size.
    pub payload_bytes: usize,
}

/// The measured window as unix-ns bounds, shared by producers and consumers:
/// a message belongs to the window when its `ts` is inside.
#[derive(Debug)]
struct Window {
    start_ns: AtomicU64,
    end_ns: AtomicU64,
}

impl Window {
    fn contains(&self, ts: u64) -> bool {
        ts >= self.start_ns.load(Ordering::SeqCst) && ts < self.end_ns.load(Ordering::SeqCst)
    }
}

/// Runs the scenario and returns its report.
pub fn run(ctx: &Ctx, o: &LatencyOpts) -> Report {
    let queue = ctx.fresh_queue("latency");
    let mut notes = Vec::new();
    if let Err(n) = ctx.configure(&queue) {
        notes.push(n);
    }
    let win = Arc::new(Window {
        start_ns: AtomicU64::new(u64::MAX),
        end_ns: AtomicU64::new(u64::MAX),
    });
    let (produce, consume) = (Phase::default(), Phase::default());
    let received = Arc::new(AtomicU64::new(0));
    let consumers: Vec<_> = (0..o.consumers)
        .map(|i| {
            let mut path = format!(
                "/api/v1/pop/queue/{queue}?batch={}&wait=true&timeout={}",
                o.pop_batch, o.wait_ms
            );
            if let Some(g) = &ctx.group {
                path.push_str(&format!("&consumerGroup={g}"));
            }
            if o.auto_ack {
                path.push_str("&autoAck=true");
            }
            let mut client = Client::new(
                ctx.target.clone(),
                Duration::from_millis(o.wait_ms) + super::HTTP_TIMEOUT,
            );
            let (win, consume, received, group) = (
                win.clone(),
                consume.clone(),
                received.clone(),
                ctx.group.clone(),
            );
            let auto_ack = o.auto_ack;
            thread::Builder::new()
                .name(format!("consume-{i}"))
                .spawn(move || {
                    consume_loop(
                        &mut client,
                        &path,
                        group.as_deref(),
                        auto_ack,
                        &win,
                        &received,
                        &consume,
                    )
                })
                .expect("spawn consumer")
        })
        .collect();
    let parts = partition_names(o.partitions);
    let interval = Duration::from_secs_f64(o.producers as f64 * o.batch as f64 / o.rate.max(1e-3));
    let t_start = Instant::now();
    let producers: Vec<_> = (0..o.producers)
        .map(|i| {
            let mut p = Pusher::new(&ctx.target, parts.clone(), o.payload_bytes, 2000 + i as u64);
            let (win, produce, queue, batch) =
                (win.clone(), produce.clone(), queue.clone(), o.batch);
            // Stagger producers evenly across one interval.
            let first = t_start + interval.mul_f64(i as f64 / o.producers as f64);
            thread::Builder::new()
                .name(format!("produce-{i}"))
                .spawn(move || {
                    produce_loop(&mut p, &queue, batch, i, first, interval, &win, &produce)
                })
                .expect("spawn producer")
        })
        .collect();
    thread::sleep(o.warmup);
    win.start_ns.store(now_unix_ns(), Ordering::SeqCst);
    produce.measure();
    let t0 = Instant::now();
    let window = ctx.watch.start();
    thread::sleep(o.duration);
    win.end_ns.store(now_unix_ns(), Ordering::SeqCst);
    produce.stop();
    let secs = t0.elapsed().as_secs_f64();
    let proc = window.finish();
    let mut st = WorkerStats::default();
    for p in producers {
        if let Ok(s) = p.join() {
            st.merge(&s);
        }
    }
    let sent = st.msgs;
    let deadline = Instant::now() + o.grace;
    while received.load(Ordering::SeqCst) < sent && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    consume.stop();
    let mut e2e = WorkerStats::default();
    let mut seen = HashSet::new();
    let mut deliveries = 0u64;
    for c in consumers {
        if let Ok((s, ids)) = c.join() {
            e2e.merge(&s);
            deliveries += ids.len() as u64;
            seen.extend(ids);
        }
    }
    let offered = sent as f64 / secs;
    if offered < 0.95 * o.rate {
        notes.push(format!(
            "offered only {offered:.0} msg/s of {} asked: producers fell behind (raise --producers)",
            o.rate
        ));
    }
    st.errors.merge(&e2e.errors);
    Report {
        scenario: "latency".into(),
        key: format!("latency r{} b{}", o.rate, o.batch),
        label: ctx.label.clone(),
        queue,
        params: serde_json::json!({
            "rate": o.rate, "batch": o.batch, "producers": o.producers, "consumers": o.consumers,
            "partitions": o.partitions, "auto_ack": o.auto_ack, "pop_batch": o.pop_batch,
            "wait_ms": o.wait_ms, "duration_s": o.duration.as_secs_f64(),
            "warmup_s": o.warmup.as_secs_f64(), "payload_bytes": o.payload_bytes,
            "offered_msg_per_s": offered,
        }),
        duration_s: secs,
        messages: seen.len() as u64,
        msg_per_s: seen.len() as f64 / secs,
        requests: st.reqs,
        req_latency: st.lat.summary(),
        ack_latency: (!o.auto_ack).then(|| e2e.ack_lat.summary()),
        e2e_latency: Some(e2e.e2e.summary()),
        errors: st.errors,
        verify: Some(Verify::new(
            sent,
            seen.len() as u64,
            deliveries - seen.len() as u64,
        )),
        proc,
        notes,
    }
}

#[allow(clippy::too_many_arguments)]
fn produce_loop(
    p: &mut Pusher,
    queue: &str,
    batch: usize,
    id: usize,
    first: Instant,
    interval: Duration,
    win: &Window,
    phase: &Phase,
) -> WorkerStats {
    let mut st = WorkerStats::default();
    let mut next = first;
    let mut seq = (id as u64) << 40;
    let mut k = id;
    while !phase.stopped() {
        let now = Instant::now();
        if next > now {
            thread::sleep(next - now);
        }
        next += interval;
        let ts = now_unix_ns();
        let r = p.push(queue, k, batch, seq, ts, &mut st);
        k += 1;
        seq += batch as u64;
        st.total += r.accepted;
        if win.contains(ts) {
            st.msgs += r.accepted;
            st.reqs += 1;
            st.lat.record_us(us(r.elapsed));
        }
    }
    st
}

fn consume_loop(
    client: &mut Client,
    path: &str,
    group: Option<&str>,
    auto_ack: bool,
    win: &Window,
    received: &AtomicU64,
    phase: &Phase,
) -> (WorkerStats, Vec<String>) {
    let mut st = WorkerStats::default();
    let mut ids = Vec::new();
    let mut ack_buf = Vec::with_capacity(16 * 1024);
    while !phase.stopped() {
        let errors_before = st.errors.total();
        let (body, _) = pop(client, path, &mut st.errors);
        let arrived = now_unix_ns();
        let Some(body) = body.filter(|b| !b.messages.is_empty()) else {
            if st.errors.total() > errors_before {
                thread::sleep(Duration::from_millis(20));
            }
            continue;
        };
        let mut in_window = 0;
        for m in &body.messages {
            let Some(ts) = m.data.as_ref().and_then(|d| d.ts) else {
                continue;
            };
            if win.contains(ts) {
                st.e2e.record_us(arrived.saturating_sub(ts) / 1000);
                ids.push(m.transaction_id.clone());
                in_window += 1;
            }
        }
        received.fetch_add(in_window, Ordering::SeqCst);
        if !auto_ack {
            let (_, elapsed) = ack(
                client,
                &mut ack_buf,
                &deliveries(&body),
                group,
                &mut st.errors,
            );
            st.ack_lat.record_us(us(elapsed));
        }
    }
    (st, ids)
}
