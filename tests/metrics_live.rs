//! `GET /metrics/prometheus` families read live (per-queue operation rates,
//! long-poll and backoff gauges, the disk spool per shard, maintenance, mesh
//! peers), checked after a known workload. The exposition is parsed by a
//! third-party parser (`prometheus-parse`), and every sample line must come
//! out of it as a sample, so a malformed line fails the test.
//! (tests/metrics.rs holds the counter families and a strict parser of its own.)

mod common;

use common::*;
use prometheus_parse::{Scrape, Value as PValue};
use std::time::Duration;

/// Generous deadline for figures published by a 1 s sampler on a loaded box.
const SETTLE: Duration = Duration::from_secs(20);

/// Scrapes and parses; panics when a sample line does not parse.
fn scrape(b: &Broker) -> Scrape {
    let r = b.get("/metrics/prometheus");
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let lines: Vec<std::io::Result<String>> = text.lines().map(|l| Ok(l.to_string())).collect();
    let s = Scrape::parse(lines.into_iter()).expect("exposition parses");
    // The parser folds a histogram's `_bucket` lines into one sample per
    // label set (without `le`); every other line is one sample.
    let mut bucket_sets = std::collections::HashSet::new();
    let mut sample_lines = 0;
    for l in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match l.split_once("_bucket{") {
            Some((name, rest)) => {
                let labels: Vec<&str> = rest
                    .split('}')
                    .next()
                    .unwrap_or("")
                    .split(',')
                    .filter(|kv| !kv.starts_with("le="))
                    .collect();
                if bucket_sets.insert(format!("{name}{labels:?}")) {
                    sample_lines += 1;
                }
            }
            None => sample_lines += 1,
        }
    }
    assert_eq!(
        s.samples.len(),
        sample_lines,
        "every sample line parses:\n{text}"
    );
    s
}

fn num(v: &PValue) -> f64 {
    match v {
        PValue::Counter(x) | PValue::Gauge(x) | PValue::Untyped(x) => *x,
        other => panic!("not a scalar: {other:?}"),
    }
}

/// Values of `name` whose labels include `want`.
fn values(s: &Scrape, name: &str, want: &[(&str, &str)]) -> Vec<f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == name && want.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| num(&x.value))
        .collect()
}

/// The one value of `name` with labels `want` (`None`: no such series).
fn one(s: &Scrape, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let v = values(s, name, want);
    assert!(v.len() <= 1, "{name}{want:?} is ambiguous: {v:?}");
    v.first().copied()
}

/// Sum of every series of `name`.
fn total(s: &Scrape, name: &str) -> f64 {
    values(s, name, &[]).iter().sum()
}

/// Scrapes until `f` holds; returns that scrape.
fn until(b: &Broker, what: &str, f: impl Fn(&Scrape) -> bool) -> Scrape {
    try_check_for(SETTLE, || {
        let s = scrape(b);
        f(&s).then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "{what} within {SETTLE:?}; last scrape:\n{}",
            b.get("/metrics/prometheus").text()
        )
    })
}

fn q(name: &str) -> [(&str, &str); 1] {
    [("queue", name)]
}

#[test]
fn per_queue_rates_count_pushes_pops_acks_and_transactions() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("mq", "p", "m", 10);
    // one request over two partitions of one queue counts once for that queue
    b.push(json!([{"queue": "mq2", "partition": "a", "payload": 1},
                  {"queue": "mq2", "partition": "b", "payload": 2},
                  {"queue": "mq2", "partition": "a", "payload": 3}]));
    let mut popped = 0;
    for _ in 0..2 {
        let pop = b.pop("/api/v1/pop/queue/mq?batch=3").expect("messages");
        let lease = pop["leaseId"].as_str().unwrap().to_string();
        for m in messages(&pop) {
            popped += 1;
            let status = if popped == 6 { "dlq" } else { "completed" };
            let r = b.ack(json!({"transactionId": m["transactionId"],
                "partitionId": m["partitionId"], "leaseId": lease, "status": status}));
            assert_eq!(r["success"], true, "{r}");
        }
    }
    assert!(b.pop("/api/v1/pop/queue/empty?batch=1").is_none());
    let r = b.post_json(
        "/api/v1/transaction",
        &json!({"operations": [{"type": "push",
            "items": [{"queue": "tq", "payload": {"k": 1}}, {"queue": "tq", "payload": {"k": 2}}]}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let s = until(&b, "per-queue rates of the workload", |s| {
        one(s, "queen_queue_ack_per_minute", &q("mq")) == Some(6.0)
            && one(s, "queen_queue_transactions_per_minute", &q("tq")) == Some(1.0)
            && one(s, "queen_queue_pop_empty_per_minute", &q("empty")) == Some(1.0)
    });
    assert_eq!(
        one(&s, "queen_queue_push_requests_per_minute", &q("mq")),
        Some(1.0)
    );
    assert_eq!(
        one(&s, "queen_queue_push_requests_per_minute", &q("mq2")),
        Some(1.0)
    );
    assert_eq!(
        one(&s, "queen_queue_pop_messages_per_minute", &q("mq")),
        Some(6.0)
    );
    assert_eq!(
        one(&s, "queen_queue_pop_empty_per_minute", &q("mq")),
        Some(0.0)
    );
    assert_eq!(
        one(&s, "queen_queue_pop_messages_per_minute", &q("empty")),
        Some(0.0)
    );
    assert_eq!(
        one(&s, "queen_queue_transactions_per_minute", &q("mq")),
        Some(0.0)
    );
    // One item went to the DLQ: the worker rate and the cluster counter say so.
    let dlq: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.metric.contains("dlq"))
        .collect();
    assert_eq!(total(&s, "queen_worker_dlq_per_minute"), 1.0, "{dlq:#?}");
    assert_eq!(
        one(&s, "queen_cluster_dlq_total", &[("scope", "cluster")]),
        Some(1.0)
    );
    // Per-worker extras exist once per shard, with worker/host/shard labels.
    let shards = values(&s, "queen_worker_requests_per_minute", &[]).len();
    assert!(shards >= 1);
    for name in [
        "queen_worker_dlq_per_minute",
        "queen_worker_lag_milliseconds",
        "queen_worker_db_connections",
        "queen_worker_free_slots",
        "queen_worker_backoff_size",
        "queen_worker_metrics_age_seconds",
    ] {
        let series: Vec<_> = s.samples.iter().filter(|x| x.metric == name).collect();
        assert_eq!(series.len(), shards, "{name}");
        for x in series {
            for l in ["worker", "host", "shard"] {
                assert!(x.labels.get(l).is_some(), "{name} lacks {l}");
            }
        }
    }
    let age = values(&s, "queen_worker_metrics_age_seconds", &[]);
    assert!(age.iter().all(|&a| (0.0..10.0).contains(&a)), "{age:?}");
    assert!(s.samples.iter().all(|x| x.labels.get("tenant").is_none()));
}

#[test]
fn parked_pops_and_their_backoff_show_per_queue() {
    let db = Db::fresh();
    // Backoff after 2 empty rechecks of 50 ms: a 6 s long poll is backed off within a second.
    let b = Broker::builder(&db)
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "50")
        .env("POP_WAIT_BACKOFF_THRESHOLD", "2")
        .env("POP_WAIT_MAX_INTERVAL_MS", "400")
        .start();
    let port = b.port;
    let waiter = std::thread::spawn(move || {
        let mut c = Conn::connect(port).expect("connect");
        c.set_timeout(Duration::from_secs(30));
        c.get("/api/v1/pop/queue/lp?wait=true&timeout=6000")
            .expect("pop answers")
            .status
    });
    let s = until(&b, "a backed-off parked pop on lp", |s| {
        one(s, "queen_queue_backoff_consumers", &q("lp")) == Some(1.0)
    });
    assert_eq!(one(&s, "queen_queue_parked_consumers", &q("lp")), Some(1.0));
    let interval = one(&s, "queen_queue_backoff_interval_milliseconds", &q("lp")).unwrap();
    assert!(
        (100.0..=400.0).contains(&interval),
        "backed-off interval: {interval}"
    );
    assert_eq!(total(&s, "queen_worker_backoff_size"), 1.0);
    assert_eq!(waiter.join().unwrap(), 204);
    let s = until(&b, "the parked gauge drops", |s| {
        one(s, "queen_queue_parked_consumers", &q("lp")).unwrap_or(0.0) == 0.0
    });
    assert_eq!(total(&s, "queen_worker_backoff_size"), 0.0);
    assert_eq!(
        one(&s, "queen_queue_pop_empty_per_minute", &q("lp")),
        Some(1.0),
        "one long poll is one empty pop"
    );
}

#[test]
fn spool_and_maintenance_figures_follow_push_maintenance() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let s = scrape(&b);
    let shards = values(&s, "queen_file_buffer_shard_pending_records", &[]).len();
    assert!(shards >= 1, "one spool series per shard");
    assert_eq!(one(&s, "queen_file_buffer_pending", &[]), Some(0.0));
    assert_eq!(one(&s, "queen_file_buffer_db_healthy", &[]), Some(1.0));
    assert_eq!(total(&s, "queen_file_buffer_shard_writable"), shards as f64);
    assert_eq!(one(&s, "queen_maintenance_mode_enabled", &[]), Some(0.0));

    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    // Every shard applies the flag (through the notice path) before pushes are spooled.
    check_for(SETTLE, || {
        (0..8)
            .all(|_| one(&scrape(&b), "queen_maintenance_mode_enabled", &[]) == Some(1.0))
            .then_some(())
    });
    for r in b.push_n("sq", "p", "m", 7) {
        assert_eq!(r["status"], "buffered", "{r}");
    }
    let s = scrape(&b);
    assert_eq!(one(&s, "queen_file_buffer_pending", &[]), Some(7.0));
    assert_eq!(total(&s, "queen_file_buffer_shard_pending_records"), 7.0);
    let bytes = one(&s, "queen_file_buffer_bytes", &[]).unwrap();
    assert!(bytes > 7.0 * 20.0, "7 records take bytes: {bytes}");
    assert_eq!(total(&s, "queen_file_buffer_shard_bytes"), bytes);
    let ages = values(&s, "queen_file_buffer_shard_oldest_age_seconds", &[]);
    assert!(
        ages.iter().any(|&a| a > 0.0) && ages.iter().all(|&a| a < 60.0),
        "the shard holding records reports their age: {ages:?} {}",
        b.get("/api/v1/status/buffers").text()
    );
    assert_eq!(total(&s, "queen_file_buffer_replayed_records_total"), 0.0);

    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    let s = until(&b, "the spool drains", |s| {
        one(s, "queen_file_buffer_pending", &[]) == Some(0.0)
            && total(s, "queen_file_buffer_replayed_records_total") == 7.0
    });
    assert_eq!(total(&s, "queen_file_buffer_shard_bytes"), 0.0);
    assert_eq!(total(&s, "queen_file_buffer_shard_oldest_age_seconds"), 0.0);
    // The replay's start and end are logged with their counts.
    check_for(SETTLE, || {
        let log = b.log();
        (log.contains("spool replay started: 7 record(s) waiting")
            && log.contains("spool replay finished: 7 record(s)"))
        .then_some(())
    });
}

#[test]
fn spool_replay_log_lines_respect_log_level() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("LOG_LEVEL", "warn").start();
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    check_for(SETTLE, || {
        (0..8)
            .all(|_| b.get("/api/v1/system/maintenance").json()["maintenanceMode"] == true)
            .then_some(())
    });
    b.push_n("wq", "p", "m", 3);
    b.post_json("/api/v1/system/maintenance", &json!({"enabled": false}));
    until(&b, "the spool drains", |s| {
        total(s, "queen_file_buffer_replayed_records_total") == 3.0
    });
    assert!(
        !b.log().contains("spool replay"),
        "info lines hidden at LOG_LEVEL=warn:\n{}",
        b.log_tail(20)
    );
}

#[test]
fn mesh_peer_figures_and_log_lines_follow_a_peer_up_and_down() {
    let db = Db::fresh();
    let (pa, pb) = (free_port(), free_port());
    let member = |me: u16, peer: u16| {
        Broker::builder(&db)
            .env("QUEEN_MESH_PORT", &me.to_string())
            .env("QUEEN_MESH_PEERS", &format!("127.0.0.1:{peer}"))
            .env("QUEEN_MESH_ADVERTISE_HOST", "127.0.0.1")
            .env(
                "QUEEN_SYNC_SECRET",
                "6d65736874657374736563726574303132333435363738396162636465663031",
            )
            .env("QUEEN_SYNC_HEARTBEAT_MS", "200")
            .env("QUEEN_SYNC_DEAD_THRESHOLD_MS", "1500")
            .env("DB_POOL_SIZE", "4")
    };
    let a = member(pa, pb).start();
    let mut b = member(pb, pa).start();
    let peer = format!("127.0.0.1:{pb}");
    let p = [("peer", peer.as_str())];
    let s = until(&a, "peer b up", |s| {
        one(s, "queen_mesh_peer_up", &p) == Some(1.0) && one(s, "queen_servers", &[]) == Some(2.0)
    });
    assert_eq!(one(&s, "queen_shared_state_enabled", &[]), Some(1.0));
    assert_eq!(one(&s, "queen_mesh_peers_configured", &[]), Some(1.0));
    assert_eq!(one(&s, "queen_mesh_peer_connected", &p), Some(1.0));
    assert!(one(&s, "queen_mesh_peer_connects_total", &p).unwrap() >= 1.0);
    let silent = one(&s, "queen_mesh_peer_silence_seconds", &p).unwrap();
    assert!((0.0..1.5).contains(&silent), "{silent}");
    // A push on a wakes nothing on b, but heartbeats and notices count as frames.
    a.push_n("mx", "p", "m", 1);
    // The local count can be scraped before the dialer has written its frame,
    // so both are waited for (seen once on a loaded box).
    until(&a, "frames counted and the notice of the push sent", |s| {
        one(s, "queen_transport_messages_total", &[]).unwrap_or(0.0) > 0.0
            && one(s, "queen_mesh_frames_total", &[("direction", "out")]).unwrap_or(0.0) >= 1.0
    });
    assert!(a
        .log()
        .contains(&format!("mesh: peer up: connected to peer {peer}")));

    b.signal(libc_sigkill());
    b.wait_exit(Duration::from_secs(10));
    let s = until(&a, "peer b down", |s| {
        one(s, "queen_mesh_peer_up", &p) == Some(0.0) && one(s, "queen_servers", &[]) == Some(1.0)
    });
    assert_eq!(one(&s, "queen_mesh_peer_connected", &p), Some(0.0));
    check_for(SETTLE, || {
        a.log()
            .contains(&format!("mesh: peer down: peer {peer}"))
            .then_some(())
    });
}

/// SIGKILL's number (the harness takes raw signal numbers).
fn libc_sigkill() -> i32 {
    9
}
