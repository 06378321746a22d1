//! Spool replay with several batches in flight per shard (issue 4): every
//! record spooled is stored exactly once, and each partition's records keep
//! their append order although the replay lanes commit batches of different
//! partitions at the same time. Spooling is forced with push maintenance.
mod common;

use common::*;
use std::time::Duration;

/// Partitions written: many more than the replay lanes, so every lane works.
const PARTITIONS: usize = 24;
/// Items per partition in one push request.
const PER_PART: usize = 5;
/// Partitions in one push request (they rotate, so requests interleave them).
const PARTS_PER_REQ: usize = 6;
/// Push requests sent.
const REQUESTS: usize = 80;

fn maintenance(b: &Broker, on: bool) {
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": on}));
    assert_eq!(r.status, 200, "{}", r.text());
    check_for(Duration::from_secs(10), || {
        (0..8)
            .all(|_| b.get("/api/v1/system/maintenance").json()["maintenanceMode"] == on)
            .then_some(())
    });
}

#[test]
fn concurrent_replay_batches_store_every_record_once_in_partition_order() {
    let db = Db::fresh();
    // Small batches (10 x 10 fused = 100 items) and small segments (500
    // records) give many batches and several segments per shard.
    let b = Broker::builder(&db)
        .env("FILE_BUFFER_MAX_BATCH", "10")
        .env("FILE_BUFFER_EVENTS_PER_FILE", "500")
        .start();
    maintenance(&b, true);
    // One connection: its requests stay on one shard, in order.
    let mut conn = b.conn();
    let mut sent: Vec<Vec<i64>> = vec![Vec::new(); PARTITIONS];
    let mut n = 0i64;
    for req in 0..REQUESTS {
        let mut items = Vec::new();
        for k in 0..PARTS_PER_REQ {
            let p = (req * PARTS_PER_REQ + k) % PARTITIONS;
            for _ in 0..PER_PART {
                items.push(json!({"queue": "lanes", "partition": format!("p{p:02}"),
                    "transactionId": format!("t{n}"), "payload": {"n": n}}));
                sent[p].push(n);
                n += 1;
            }
        }
        let r = conn
            .post_json("/api/v1/push", &json!({ "items": items }))
            .expect("push");
        assert_eq!(r.status, 201, "{}", r.text());
        for it in r.json_array() {
            assert_eq!(it["status"], "buffered", "{it}");
        }
    }
    let total = n;
    let pending = b.get("/api/v1/status/buffers").json()["pending"].clone();
    assert_eq!(pending, total, "spooled records");
    maintenance(&b, false);
    check_for(Duration::from_secs(60), || {
        (b.get("/api/v1/status/buffers").json()["pending"] == 0).then_some(())
    });
    let stored = db.count(
        "SELECT count(*)::bigint FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'lanes'",
        &[],
    );
    assert_eq!(stored, total, "records in vs out");
    let txids = db.count(
        "SELECT count(DISTINCT m.transaction_id)::bigint FROM queen.messages m",
        &[],
    );
    assert_eq!(txids, total, "a record stored twice or lost");
    for (p, want) in sent.iter().enumerate() {
        let part = format!("p{p:02}");
        let got: Vec<i64> = db
            .query(
                "SELECT (m.payload->>'n')::bigint FROM queen.messages m JOIN queen.partitions pa \
                 ON pa.id = m.partition_id WHERE pa.name = $1 ORDER BY m.created_at, m.id",
                &[&part],
            )
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(&got, want, "{part}: stored order differs from append order");
    }
    // The lanes did overlap: the finish line reports the most batches in flight.
    let log = b.log();
    let peak = log
        .lines()
        .filter_map(|l| l.split("up to ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse::<usize>().ok())
        .max();
    assert!(
        peak.is_some_and(|p| p >= 2),
        "replay never had two batches in flight (peak {peak:?}):\n{}",
        b.log_tail(30)
    );
}
