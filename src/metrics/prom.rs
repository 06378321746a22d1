//! Renders a scrape: the JSON of `GET /metrics` and the text exposition of
//! `GET /metrics/prometheus` (through the `prometheus-client` crate, from a
//! registry built per scrape out of the summed shard slots, the process
//! figures and the cached DB snapshot). No series carries a `tenant` label.
//!
//! Mapping decisions (spec http-api.md §1 names; figures this broker has):
//! - "cluster" totals are this broker's shard sums until the mesh shares
//!   counters between brokers; `queen_cluster_db_errors_total` counts 5xx answers.
//! - `queen_worker_*` are per shard, labelled `worker` (WORKER_ID), `host`
//!   (server id) and `shard`; `queen_worker_job_queue_size` is the shard's
//!   jobs handed to the DB threads and not yet answered.
//! - DB pool: `active` = jobs running (in flight minus queued, capped at the
//!   pool size), sampled once a second.
//! - Spool, maintenance, mesh, the extra worker figures and the per-queue
//!   operation rates are registered by [`super::families`] (mapping there).
//! - `queen_cluster_dlq_total` counts acked items this broker dead-lettered.

use super::expo::{counter, family, gauge, labels, Labels, EOF};
use super::scrape::{db_active, Inputs};
use super::{process, Board, ShardStats};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A per-shard series: name, help, and how to read it from a slot.
type ShardFigure<T> = (&'static str, &'static str, fn(&ShardStats) -> T);

fn total(b: &Board, f: impl Fn(&ShardStats) -> &AtomicU64) -> u64 {
    b.sum(f)
}

/// The `GET /metrics` body.
pub fn json(i: &Inputs) -> Value {
    let b = i.board;
    let p = process::read();
    let active = db_active(i);
    let rate = |f: fn(&ShardStats) -> &AtomicU64| total(b, f) as f64 / 1000.0;
    let shards: Vec<Value> = b
        .shards
        .iter()
        .enumerate()
        .map(|(n, s)| {
            json!({
                "shard": n,
                "requests": s.requests.load(Relaxed),
                "pushMessages": s.push_messages.load(Relaxed),
                "popMessages": s.pop_messages.load(Relaxed),
                "ackMessages": s.ack_messages.load(Relaxed),
                "dbJobs": s.db_jobs.load(Relaxed),
                "dbInFlight": s.db_inflight.load(Relaxed),
                "parked": s.parked.load(Relaxed),
                "eventLoopLagMs": s.loop_lag_us.load(Relaxed) as f64 / 1000.0,
            })
        })
        .collect();
    json!({
        "uptime": b.started.elapsed().as_secs(),
        "requests": { "total": total(b, |s| &s.requests), "rate": rate(|s| &s.requests_rate_milli) },
        "messages": {
            "total": total(b, |s| &s.push_messages) + total(b, |s| &s.pop_messages),
            "rate": rate(|s| &s.messages_rate_milli),
        },
        "database": {
            "poolSize": i.cfg.db.pool_size,
            "idleConnections": (i.cfg.db.pool_size as u64).saturating_sub(active),
            "waitingRequests": i.db_queued,
        },
        "memory": { "rss": p.rss, "heapTotal": p.vm, "heapUsed": p.rss, "external": 0, "arrayBuffers": 0 },
        "cpu": { "user": p.cpu_user_us, "system": p.cpu_system_us },
        "push": { "requests": total(b, |s| &s.push_requests), "messages": total(b, |s| &s.push_messages) },
        "pop": {
            "requests": total(b, |s| &s.pop_requests),
            "messages": total(b, |s| &s.pop_messages),
            "empty": total(b, |s| &s.pop_empty),
        },
        "ack": { "requests": total(b, |s| &s.ack_requests), "messages": total(b, |s| &s.ack_messages) },
        "transactions": total(b, |s| &s.transactions),
        "parkedConsumers": total(b, |s| &s.parked),
        "shards": shards,
    })
}

/// The `GET /metrics/prometheus` body.
pub fn text(i: &Inputs) -> String {
    let b = i.board;
    let p = process::read();
    let mut r = Registry::default();
    gauge(
        &mut r,
        "queen_uptime_seconds",
        "Seconds since the broker started",
        b.started.elapsed().as_secs_f64(),
    );
    gauge(
        &mut r,
        "queen_process_resident_memory_bytes",
        "Resident set size",
        p.rss as f64,
    );
    gauge(
        &mut r,
        "queen_process_virtual_memory_bytes",
        "Virtual memory size",
        p.vm as f64,
    );
    counter(
        &mut r,
        "queen_cpu_user_microseconds",
        "CPU time in user mode",
        p.cpu_user_us,
    );
    counter(
        &mut r,
        "queen_cpu_system_microseconds",
        "CPU time in kernel mode",
        p.cpu_system_us,
    );

    let active = db_active(i);
    let pool = i.cfg.db.pool_size as u64;
    gauge(
        &mut r,
        "queen_db_pool_size",
        "PostgreSQL connections of the request DB threads",
        pool as f64,
    );
    gauge(
        &mut r,
        "queen_db_pool_active",
        "DB threads running a job",
        active as f64,
    );
    gauge(
        &mut r,
        "queen_db_pool_idle",
        "DB threads waiting for a job",
        pool.saturating_sub(active) as f64,
    );

    let snap = &i.snap.data;
    super::families::spool(&mut r, i);

    let cluster = [("scope", "cluster")];
    let cluster_counters: [(&str, &str, u64); 10] = [
        (
            "queen_cluster_push_requests",
            "Push requests",
            total(b, |s| &s.push_requests),
        ),
        (
            "queen_cluster_push_messages",
            "Messages pushed",
            total(b, |s| &s.push_messages),
        ),
        (
            "queen_cluster_pop_requests",
            "Pop requests",
            total(b, |s| &s.pop_requests),
        ),
        (
            "queen_cluster_pop_messages",
            "Messages popped",
            total(b, |s| &s.pop_messages),
        ),
        (
            "queen_cluster_ack",
            "Acknowledged messages",
            total(b, |s| &s.ack_messages),
        ),
        (
            "queen_cluster_ack_messages",
            "Acknowledged messages",
            total(b, |s| &s.ack_messages),
        ),
        (
            "queen_cluster_ack_requests",
            "Ack requests",
            total(b, |s| &s.ack_requests),
        ),
        (
            "queen_cluster_transactions",
            "Transactions",
            total(b, |s| &s.transactions),
        ),
        (
            "queen_cluster_dlq",
            "Acked items sent to the dead-letter queue",
            total(b, |s| &s.dlq_messages),
        ),
        (
            "queen_cluster_db_errors",
            "Requests answered 5xx",
            total(b, |s| &s.errors),
        ),
    ];
    for (name, help, v) in cluster_counters {
        let f = Family::<Labels, Counter>::default();
        f.get_or_create(&labels(&cluster)).inc_by(v);
        r.register(name, help, f);
    }

    let age = i.snap.at.map(|t| t.elapsed().as_secs_f64()).unwrap_or(-1.0);
    gauge(
        &mut r,
        "queen_queue_metrics_age_seconds",
        "Age of the per-queue figures (-1: none yet)",
        age,
    );
    let dlq = family(&mut r, "queen_dlq_depth", "Dead letters in the cluster");
    dlq.get_or_create(&labels(&cluster))
        .set(snap.get("dlqTotal").and_then(Value::as_f64).unwrap_or(0.0));

    let per_shard: [ShardFigure<f64>; 8] = [
        (
            "queen_worker_requests_per_minute",
            "Requests in the last minute",
            |s| s.requests_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_messages_per_minute",
            "Messages pushed and popped in the last minute",
            |s| s.messages_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_ack_per_minute",
            "Acknowledged messages in the last minute",
            |s| s.acks_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_db_errors_per_minute",
            "5xx answers in the last minute",
            |s| s.errors_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_jobs_done_per_minute",
            "DB jobs in the last minute",
            |s| s.jobs_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_event_loop_lag_milliseconds",
            "How late the shard's 1 s timer fired",
            |s| s.loop_lag_us.load(Relaxed) as f64 / 1000.0,
        ),
        (
            "queen_worker_job_queue_size",
            "Jobs handed to the DB threads, not yet answered",
            |s| s.db_inflight.load(Relaxed) as f64,
        ),
        (
            "queen_worker_parked_consumers",
            "Pops parked in a long poll",
            |s| s.parked.load(Relaxed) as f64,
        ),
    ];
    let shard_names: Vec<String> = (0..b.shards.len()).map(|n| n.to_string()).collect();
    let worker_labels = |n: usize| {
        labels(&[
            ("worker", &i.cfg.worker_id),
            ("host", &i.cfg.server_id),
            ("shard", &shard_names[n]),
        ])
    };
    for (name, help, get) in per_shard {
        let f = family(&mut r, name, help);
        for (n, s) in b.shards.iter().enumerate() {
            f.get_or_create(&worker_labels(n)).set(get(s));
        }
    }
    let shard_counters: [ShardFigure<u64>; 8] = [
        (
            "queen_shard_requests",
            "Requests routed by the shard",
            |s| s.requests.load(Relaxed),
        ),
        (
            "queen_shard_messages",
            "Messages pushed and popped by the shard",
            |s| s.push_messages.load(Relaxed) + s.pop_messages.load(Relaxed),
        ),
        ("queen_shard_pop_empty", "Pops that found nothing", |s| {
            s.pop_empty.load(Relaxed)
        }),
        (
            "queen_shard_pop_deep_sweeps",
            "Pop attempts sent with the deep backlog sweep allowed (a request's first)",
            |s| s.pop_sweeps.load(Relaxed),
        ),
        (
            "queen_shard_pop_deep_sweeps_skipped",
            "First pop attempts that skipped the sweep (an empty one just before, nothing pushed since)",
            |s| s.pop_sweeps_skipped.load(Relaxed),
        ),
        (
            "queen_shard_db_jobs",
            "Jobs handed to the DB threads",
            |s| s.db_jobs.load(Relaxed),
        ),
        ("queen_shard_push_batches", "Fused push batches", |s| {
            s.push_batches.load(Relaxed)
        }),
        (
            "queen_shard_push_fused_requests",
            "Push requests carried by those batches",
            |s| s.push_fused.load(Relaxed),
        ),
    ];
    for (name, help, get) in shard_counters {
        let f = Family::<Labels, Counter>::default();
        for (n, s) in b.shards.iter().enumerate() {
            f.get_or_create(&labels(&[("shard", &shard_names[n])]))
                .inc_by(get(s));
        }
        r.register(name, help, f);
    }

    super::families::worker(&mut r, i, &worker_labels);
    super::families::mesh(&mut r, i);
    super::families::timers(&mut r, i);
    super::families::ephemeral(&mut r, i);
    super::families::kv(&mut r, i);
    let queue_ops = super::families::queue_ops(i);
    let streams = super::streams::render(b.shards.iter().map(|s| &s.streams));
    let stages = super::stages::render(b.shards.iter().map(|s| &s.stages));

    let mut out = String::with_capacity(8192 + i.snap.queues_text.len() + queue_ops.len());
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &r);
    // The per-queue families, rendered once per snapshot, go before the end marker.
    if let Some(body) = out.strip_suffix(EOF) {
        let body_len = body.len();
        out.truncate(body_len);
    }
    out.push_str(&i.snap.queues_text);
    out.push_str(&queue_ops);
    out.push_str(&streams);
    out.push_str(&stages);
    out.push_str(EOF);
    out
}
