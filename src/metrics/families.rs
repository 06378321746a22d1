//! The Prometheus families read live at scrape time besides the shard
//! counters of [`super::prom`]: the disk spool per shard, maintenance state,
//! mesh peers, the extra per-worker figures, and the per-queue operation
//! rates and long-poll gauges of [`super::queues`]. Runs on the scraping
//! shard; everything read here is an atomic or a published pointer.
//!
//! Mapping decisions (http-api.md §1 names where the spec has them):
//! - `queen_file_buffer_pending` / `_failed` (no labels) are the sums over
//!   shards of spooled records and of segments moved to `failed/`; the
//!   `queen_file_buffer_shard_*{shard}` families give each shard's pending
//!   records, bytes, failed segments, oldest spooled age, PostgreSQL health
//!   and whether its spool directory is writable.
//! - `queen_file_buffer_db_healthy` is 1 only when every shard believes
//!   PostgreSQL reachable and the last metrics query reached it.
//! - Maintenance gauges are the flags as applied on this broker (what pushes
//!   and pops obey now), not the stored row.
//! - `queen_servers` counts this broker plus the peers alive now;
//!   `queen_transport_messages_total` is mesh frames sent plus received.
//! - `queen_worker_lag_milliseconds` is the shard's scheduling lag (how late
//!   its 1 s timer fired: what a request waits before the shard runs it);
//!   `queen_worker_db_connections` is the shared pool's size and
//!   `queen_worker_free_slots` its idle connections (the pool is shared by
//!   every shard); `queen_worker_backoff_size` counts the shard's queues with
//!   a parked pop whose recheck interval backed off.
//! - `queen_timers_pending` is the database's pending timers (all tenants,
//!   from the cached DB snapshot, so as old as
//!   `queen_queue_metrics_age_seconds`); `queen_timers_fired_total` counts
//!   the timers this broker's firing job turned into messages.
//! - `queen_queue_backoff_consumers` / `queen_queue_backoff_interval_milliseconds`
//!   are the parked pops past the backoff threshold and their mean interval.

use super::expo::{counter, family, gauge, labels, Labels, EOF};
use super::queues::{self, QueueFigures};
use super::scrape::{db_active, Inputs};
use crate::spool::stats;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{SystemTime, UNIX_EPOCH};

/// Registers the timer families.
pub fn timers(r: &mut Registry, i: &Inputs) {
    let pending = i.snap.data.get("timersPending").and_then(|v| v.as_f64());
    gauge(
        r,
        "queen_timers_pending",
        "Timers waiting to fire (database-wide, from the cached DB snapshot)",
        pending.unwrap_or(0.0),
    );
    counter(
        r,
        "queen_timers_fired",
        "Timers this broker turned into messages",
        i.board.sum(|s| &s.timers_fired),
    );
}

/// Registers the ephemeral families: `queen_ephemeral_bytes` (accounted
/// bytes over every ring of this broker) and `queen_ephemeral_depth{queue}`
/// (messages in the rings this broker owns, as of each shard's last sweep,
/// a quarter second at most).
pub fn ephemeral(r: &mut Registry, i: &Inputs) {
    gauge(
        r,
        "queen_ephemeral_bytes",
        "Accounted bytes of ephemeral queue contents in this broker's RAM",
        i.eph.bytes.load(Relaxed) as f64,
    );
    let f = family(
        r,
        "queen_ephemeral_depth",
        "Messages in the ephemeral queue's rings on this broker",
    );
    for (q, n) in i.eph.depths() {
        f.get_or_create(&labels(&[("queue", &q)])).set(n as f64);
    }
}

/// Registers `queen_kv_ops_total{op}`: KV ops served by this broker (a
/// transaction's KV riders included), summed over shards.
pub fn kv(r: &mut Registry, i: &Inputs) {
    let f = Family::<Labels, Counter>::default();
    for (k, op) in super::KV_OPS.iter().enumerate() {
        let n: u64 = i
            .board
            .shards
            .iter()
            .map(|s| s.kv_ops[k].load(Relaxed))
            .sum();
        f.get_or_create(&labels(&[("op", op)])).inc_by(n);
    }
    r.register("queen_kv_ops", "KV ops served, by op", f);
    counter(
        r,
        "queen_kv_grouped_calls",
        "KV and lock calls that shared their commit with other calls (group commit)",
        i.board.sum(|s| &s.kv_grouped),
    );
}

/// Registers the spool and maintenance families.
pub fn spool(r: &mut Registry, i: &Inputs) {
    let board = stats::board();
    let sum = |f: fn(&stats::Gauges) -> u64| -> f64 { board.iter().map(f).sum::<u64>() as f64 };
    gauge(
        r,
        "queen_file_buffer_pending",
        "Spooled pushes waiting for PostgreSQL",
        sum(|g| g.records.load(Relaxed)),
    );
    gauge(
        r,
        "queen_file_buffer_failed",
        "Spool segments moved to failed/ (corrupt)",
        sum(|g| g.failed.load(Relaxed)),
    );
    gauge(
        r,
        "queen_file_buffer_bytes",
        "Bytes of spooled pushes waiting for PostgreSQL",
        sum(|g| g.bytes.load(Relaxed)),
    );
    let healthy = i.snap.db_ok && board.iter().all(|g| g.pg_healthy.load(Relaxed));
    gauge(
        r,
        "queen_file_buffer_db_healthy",
        "Whether PostgreSQL is reachable (every shard and the last metrics query)",
        f64::from(u8::from(healthy)),
    );
    gauge(
        r,
        "queen_maintenance_mode_enabled",
        "Push maintenance mode (pushes spooled, replay paused)",
        f64::from(u8::from(i.push_paused)),
    );
    gauge(
        r,
        "queen_pop_maintenance_mode_enabled",
        "Pop maintenance mode (pops answer empty at once)",
        f64::from(u8::from(i.pop_paused)),
    );
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    type Read = fn(&stats::Gauges, u64) -> f64;
    let per_shard: [(&str, &str, Read); 6] = [
        (
            "queen_file_buffer_shard_pending_records",
            "Spooled records waiting for replay on the shard",
            |g, _| g.records.load(Relaxed) as f64,
        ),
        (
            "queen_file_buffer_shard_bytes",
            "Bytes of those records",
            |g, _| g.bytes.load(Relaxed) as f64,
        ),
        (
            "queen_file_buffer_shard_failed_segments",
            "Segments in the shard's failed/ directory",
            |g, _| g.failed.load(Relaxed) as f64,
        ),
        (
            "queen_file_buffer_shard_oldest_age_seconds",
            "Age of the shard's oldest spooled record (0: none)",
            |g, now| match g.oldest_ms.load(Relaxed) {
                0 => 0.0,
                // At least 1 ms while a record is held, so that 0 keeps meaning "none"
                // even when the scrape lands in the same millisecond as the append.
                t => now.saturating_sub(t).max(1) as f64 / 1000.0,
            },
        ),
        (
            "queen_file_buffer_shard_db_healthy",
            "Whether the shard believes PostgreSQL reachable",
            |g, _| f64::from(u8::from(g.pg_healthy.load(Relaxed))),
        ),
        (
            "queen_file_buffer_shard_writable",
            "Whether the shard's spool directory accepts appends",
            |g, _| f64::from(u8::from(!g.broken.load(Relaxed))),
        ),
    ];
    let shard = |n: usize| labels(&[("shard", &n.to_string())]);
    for (name, help, read) in per_shard {
        let f = family(r, name, help);
        for (n, g) in board.iter().enumerate() {
            f.get_or_create(&shard(n)).set(read(g, now_ms));
        }
    }
    type Count = fn(&stats::Gauges) -> u64;
    let counters: [(&str, &str, Count); 2] = [
        (
            "queen_file_buffer_replayed_records",
            "Spooled records replayed into PostgreSQL since boot",
            |g| g.replayed_total.load(Relaxed),
        ),
        (
            "queen_file_buffer_corrupt_segments",
            "Corrupt spool segments met since boot",
            |g| g.corrupt_total.load(Relaxed),
        ),
    ];
    for (name, help, read) in counters {
        let f = Family::<Labels, Counter>::default();
        for (n, g) in board.iter().enumerate() {
            f.get_or_create(&shard(n)).inc_by(read(g));
        }
        r.register(name, help, f);
    }
}

/// Registers the mesh families.
pub fn mesh(r: &mut Registry, i: &Inputs) {
    let m = i.mesh;
    let others: Vec<usize> = (0..m.peers.len())
        .filter(|&p| !m.peers[p].is_self.load(Relaxed))
        .collect();
    let alive = others.iter().filter(|&&p| m.alive(p)).count();
    gauge(
        r,
        "queen_servers",
        "Brokers in the mesh alive now, this one included",
        (1 + alive) as f64,
    );
    gauge(
        r,
        "queen_shared_state_enabled",
        "Whether this broker runs the TCP mesh with peers",
        f64::from(u8::from(m.tcp)),
    );
    gauge(
        r,
        "queen_mesh_peers_configured",
        "Peers in QUEEN_MESH_PEERS, this broker excluded",
        others.len() as f64,
    );
    gauge(
        r,
        "queen_mesh_inbound_connections",
        "Authenticated inbound mesh connections open now",
        m.nr_inbound.load(Relaxed) as f64,
    );
    let c = &m.counters;
    let frames_out: u64 = m.peers.iter().map(|p| p.nr_frames_out.load(Relaxed)).sum();
    let frames_in = c.nr_frames_in.load(Relaxed);
    counter(
        r,
        "queen_transport_messages",
        "Mesh notice frames sent plus valid frames received",
        frames_out + frames_in,
    );
    let frames = Family::<Labels, Counter>::default();
    frames
        .get_or_create(&labels(&[("direction", "out")]))
        .inc_by(frames_out);
    frames
        .get_or_create(&labels(&[("direction", "in")]))
        .inc_by(frames_in);
    r.register("queen_mesh_frames", "Mesh frames by direction", frames);
    let rejected = Family::<Labels, Counter>::default();
    for (reason, v) in [
        ("bad_handshake", &c.nr_bad_handshake),
        ("bad_mac", &c.nr_bad_mac),
        ("bad_sequence", &c.nr_bad_sequence),
        ("oversized", &c.nr_oversized),
        ("malformed", &c.nr_malformed),
        ("refused_connection", &c.nr_refused),
        ("notice_dropped", &c.nr_notices_dropped),
    ] {
        rejected
            .get_or_create(&labels(&[("reason", reason)]))
            .inc_by(v.load(Relaxed));
    }
    r.register(
        "queen_mesh_rejected",
        "Mesh frames, connections and notices refused or dropped, by reason",
        rejected,
    );
    let up = family(
        r,
        "queen_mesh_peer_up",
        "Whether the peer spoke within the dead threshold",
    );
    let connected = family(
        r,
        "queen_mesh_peer_connected",
        "Whether this broker's connection to the peer is established",
    );
    let silence = family(
        r,
        "queen_mesh_peer_silence_seconds",
        "Seconds since the peer last spoke (-1: never)",
    );
    let connects = Family::<Labels, Counter>::default();
    for &p in &others {
        let peer = &m.peers[p];
        let l = labels(&[("peer", &peer.addr)]);
        up.get_or_create(&l).set(f64::from(u8::from(m.alive(p))));
        connected
            .get_or_create(&l)
            .set(f64::from(u8::from(peer.connected.load(Relaxed))));
        silence
            .get_or_create(&l)
            .set(m.silence(p).map_or(-1.0, |d| d.as_secs_f64()));
        connects
            .get_or_create(&l)
            .inc_by(peer.nr_connects.load(Relaxed));
    }
    r.register(
        "queen_mesh_peer_connects",
        "Successful handshakes with the peer",
        connects,
    );
}

/// Registers the per-worker families not read from the counters in `prom`.
pub fn worker(r: &mut Registry, i: &Inputs, worker_labels: &dyn Fn(usize) -> Labels) {
    let b = i.board;
    let pool = i.cfg.db.pool_size as f64;
    let idle = pool - db_active(i) as f64;
    let now_ms = b.started.elapsed().as_millis() as u64 + 1;
    type Read = fn(&super::ShardStats, f64, f64, u64) -> f64;
    let figures: [(&str, &str, Read); 6] = [
        (
            "queen_worker_dlq_per_minute",
            "Acked items sent to the dead-letter queue in the last minute",
            |s, _, _, _| s.dlq_pm.load(Relaxed) as f64,
        ),
        (
            "queen_worker_lag_milliseconds",
            "How late the shard's 1 s timer fired (scheduling lag)",
            |s, _, _, _| s.loop_lag_us.load(Relaxed) as f64 / 1000.0,
        ),
        (
            "queen_worker_db_connections",
            "PostgreSQL connections of the DB threads (shared by every shard)",
            |_, pool, _, _| pool,
        ),
        (
            "queen_worker_free_slots",
            "Idle DB connections (shared by every shard)",
            |_, _, idle, _| idle,
        ),
        (
            "queen_worker_backoff_size",
            "Queues with a parked pop whose recheck interval backed off",
            |s, _, _, _| s.backoff_queues.load(Relaxed) as f64,
        ),
        (
            "queen_worker_metrics_age_seconds",
            "Seconds since the shard last sampled its figures (-1: never)",
            |s, _, _, now| match s.sampled_ms.load(Relaxed) {
                0 => -1.0,
                // At least 1 ms while a record is held, so that 0 keeps meaning "none"
                // even when the scrape lands in the same millisecond as the append.
                t => now.saturating_sub(t).max(1) as f64 / 1000.0,
            },
        ),
    ];
    for (name, help, read) in figures {
        let f = family(r, name, help);
        for (n, s) in b.shards.iter().enumerate() {
            f.get_or_create(&worker_labels(n))
                .set(read(s, pool, idle, now_ms));
        }
    }
}

/// The per-queue operation families as exposition text without the end
/// marker: this broker's active queues summed over shards.
pub fn queue_ops(i: &Inputs) -> String {
    let active: Vec<QueueFigures> = queues::sum(i.board.shards.iter().map(|s| &s.queues));
    let mut r = Registry::default();
    let rates: [(&str, &str, usize); 5] = [
        (
            "queen_queue_push_requests_per_minute",
            "Push requests that carried items of the queue in the last minute",
            queues::PUSH_REQUESTS,
        ),
        (
            "queen_queue_pop_messages_per_minute",
            "Messages popped from the queue in the last minute",
            queues::POP_MESSAGES,
        ),
        (
            "queen_queue_pop_empty_per_minute",
            "Pops of the queue that found nothing in the last minute",
            queues::POP_EMPTY,
        ),
        (
            "queen_queue_ack_per_minute",
            "Acknowledged items of the queue in the last minute",
            queues::ACKS,
        ),
        (
            "queen_queue_transactions_per_minute",
            "Transactions that pushed to the queue in the last minute",
            queues::TRANSACTIONS,
        ),
    ];
    for (name, help, op) in rates {
        let f = family(&mut r, name, help);
        for q in &active {
            f.get_or_create(&labels(&[("queue", &q.queue)]))
                .set(q.per_minute[op] as f64);
        }
    }
    type Read = fn(&QueueFigures) -> f64;
    let gauges: [(&str, &str, Read); 3] = [
        (
            "queen_queue_parked_consumers",
            "Pops parked in a long poll on the queue",
            |q| q.parked as f64,
        ),
        (
            "queen_queue_backoff_consumers",
            "Parked pops whose recheck interval backed off",
            |q| q.backed_off as f64,
        ),
        (
            "queen_queue_backoff_interval_milliseconds",
            "Mean recheck interval of those pops (0: none)",
            |q| match q.backed_off {
                0 => 0.0,
                n => q.backoff_ms_sum as f64 / n as f64,
            },
        ),
    ];
    for (name, help, read) in gauges {
        let f = family(&mut r, name, help);
        for q in &active {
            f.get_or_create(&labels(&[("queue", &q.queue)]))
                .set(read(q));
        }
    }
    let mut out = String::with_capacity(1024 + active.len() * 600);
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &r);
    let body_len = out.strip_suffix(EOF).map_or(out.len(), str::len);
    out.truncate(body_len);
    out
}
