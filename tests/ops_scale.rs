//! First-page latency of the operator listings on a large queue (10,000
//! partitions). Ignored by default (seeding takes a while); run with
//! `cargo test --release --test ops_scale -- --ignored --nocapture`.
//! Messages per partition: `QUEEN_SCALE_MSGS` (default 20 → 200,000 rows).
//! Each path is timed three times after a warm-up request; the median is shown.
mod common;

use common::*;
use std::time::{Duration, Instant};

/// The bound for a first page.
const FIRST_PAGE_BUDGET: Duration = Duration::from_millis(200);

#[test]
#[ignore]
fn listings_answer_a_first_page_fast_on_ten_thousand_partitions() {
    let per: i32 = std::env::var("QUEEN_SCALE_MSGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("big", json!({}));
    let seed = Instant::now();
    db.client()
        .execute(
            "INSERT INTO queen.partitions (queue_id, name) \
             SELECT q.id, 'p' || g FROM queen.queues q, generate_series(1, 10000) g \
             WHERE q.name = 'big'",
            &[],
        )
        .unwrap();
    db.exec(
        "INSERT INTO queen.partition_lookup (partition_id, queue_id) \
         SELECT p.id, p.queue_id FROM queen.partitions p \
         ON CONFLICT DO NOTHING",
    );
    db.client()
        .execute(
            "INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at) \
             SELECT gen_random_uuid(), 't' || g, p.id, '{\"x\": 1}', \
                    now() - interval '30 minutes' + g * interval '1 ms' \
             FROM queen.partitions p, generate_series(1, $1) g",
            &[&per],
        )
        .unwrap();
    db.exec(
        "UPDATE queen.partition_lookup pl SET last_message_id = x.id, \
                last_message_created_at = x.created_at \
         FROM (SELECT DISTINCT ON (partition_id) partition_id, id, created_at \
               FROM queen.messages ORDER BY partition_id, created_at DESC, id DESC) x \
         WHERE x.partition_id = pl.partition_id; ANALYZE;",
    );
    // What autovacuum does soon after a bulk insert on a live system: sets the
    // visibility map, so the listings' index-only scans skip the heap.
    db.exec("VACUUM (ANALYZE) queen.messages");
    eprintln!("seeded {} messages in {:?}", 10_000 * per, seed.elapsed());
    b.pop("/api/v1/pop/queue/big?batch=10&consumerGroup=g&autoAck=true")
        .expect("a batch");
    // The stats roll-up (src/jobs/stats.rs) runs every STATS_INTERVAL_MS; a
    // refresh makes this run independent of where its interval stands.
    let t = Instant::now();
    let r = b.post_empty("/api/v1/stats/refresh");
    assert_eq!(r.status, 200, "{}", r.text());
    eprintln!(
        "stats refresh (full roll-up): {:?} {}",
        t.elapsed(),
        r.text()
    );
    let mut slow = Vec::new();
    for path in [
        "/api/v1/resources/partitions?queue=big&limit=100",
        "/api/v1/messages?queue=big&limit=200",
        "/api/v1/messages?queue=big&partition=p77&limit=200",
        "/api/v1/messages?queue=big&status=pending&limit=50",
        "/api/v1/messages?queue=big&status=completed&limit=50",
        "/api/v1/consumer-groups/g",
        "/api/v1/dlq?queue=big",
        "/api/v1/traces/names",
        "/api/v1/consumer-groups",
        "/api/v1/consumer-groups/lagging?minLagSeconds=60",
        "/api/v1/resources/queues",
        "/api/v1/resources/queues/big/depth?group=g",
        "/api/v1/resources/overview",
        "/api/v1/resources/namespaces",
        "/api/v1/resources/queues/big",
        "/api/v1/status",
        "/api/v1/status/queues",
        "/api/v1/status/queues/big",
        "/api/v1/status/queues/big/messages",
        "/api/v1/status/analytics",
        "/api/v1/analytics/queue-ops",
    ] {
        // warm up, then the median of three (one sample on a shared box is noise)
        b.get(path);
        let mut times = Vec::new();
        for _ in 0..3 {
            let t = Instant::now();
            let r = b.get(path);
            times.push(t.elapsed());
            assert_eq!(r.status, 200, "{path}: {}", r.text());
        }
        times.sort();
        let took = times[1];
        eprintln!("{took:>12?}  {path}");
        if took > FIRST_PAGE_BUDGET {
            slow.push((path, took));
        }
    }
    eprintln!("over {FIRST_PAGE_BUDGET:?}: {slow:?}");
}
