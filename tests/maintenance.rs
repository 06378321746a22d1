//! Maintenance modes (semantics.md §15, http-api.md §13): push maintenance
//! spools every push and pauses replay; pop maintenance answers every pop
//! empty with `paused: true`; turning them off drains the spool.
mod common;

use common::*;
use std::time::Duration;

fn count_queue(db: &Db, queue: &str) -> i64 {
    db.count(
        "SELECT count(*)::bigint FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
}

/// Waits until `n` fresh connections in a row (landing on any shard) see `key == want`
/// on `path`: the flag reaches the other shards through the mesh thread.
fn until_every_shard(b: &Broker, path: &str, key: &str, want: bool) {
    check_for(Duration::from_secs(10), || {
        (0..8)
            .all(|_| b.get(path).json()[key] == want)
            .then_some(())
    });
}

#[test]
fn push_maintenance_buffers_pushes_and_off_drains_them() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["maintenanceMode"], true);
    until_every_shard(&b, "/api/v1/system/maintenance", "maintenanceMode", true);
    let res = b.push_n("mq", "p1", "m-", 20);
    for (i, r) in res.iter().enumerate() {
        assert_eq!(r["status"], "buffered", "{r}");
        assert_eq!(r["index"], i);
        assert_eq!(r["queue"], "mq");
        assert_eq!(r["partition"], "p1");
        assert!(r["message_id"].is_string(), "{r}");
        assert!(r.get("partition_id").is_none(), "{r}");
    }
    let st = b.get("/api/v1/system/maintenance").json();
    assert_eq!(st["maintenanceMode"], true);
    assert_eq!(st["bufferedMessages"], 20, "{st}");
    // Replay is paused: nothing reaches PostgreSQL while maintenance is on.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(count_queue(&db, "mq"), 0);
    let stored: String = db.query(
        "SELECT value::text FROM queen.system_state WHERE key = 'maintenance_mode'",
        &[],
    )[0]
    .get(0);
    assert!(stored.contains("true"), "{stored}");

    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    check_for(Duration::from_secs(20), || {
        (count_queue(&db, "mq") == 20).then_some(())
    });
    let order: Vec<i64> = db
        .query(
            "SELECT (m.payload->>'n')::bigint FROM queen.messages m JOIN queen.partitions p \
             ON p.id = m.partition_id WHERE p.name = 'p1' ORDER BY m.created_at, m.id",
            &[],
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(order, (0..20).collect::<Vec<i64>>());
    check_for(Duration::from_secs(10), || {
        (b.get("/api/v1/status/buffers").json()["pending"] == 0).then_some(())
    });
    // After the drain, pushes go straight to PostgreSQL again.
    let res = b.push_n("mq", "p1", "after-", 1);
    assert_eq!(res[0]["status"], "queued", "{}", res[0]);
}

#[test]
fn pop_maintenance_answers_paused_at_once_and_off_serves_again() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("pq", "Default", "x-", 3);
    let r = b.post_json("/api/v1/system/maintenance/pop", &json!({"enabled": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["popMaintenanceMode"], true);
    until_every_shard(
        &b,
        "/api/v1/system/maintenance/pop",
        "popMaintenanceMode",
        true,
    );
    let started = std::time::Instant::now();
    let r = b.get("/api/v1/pop/queue/pq?wait=true&timeout=10000");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"messages": [], "paused": true}));
    assert!(started.elapsed() < Duration::from_secs(5), "pop waited");
    assert_eq!(
        b.get("/api/v1/system/maintenance/pop").json()["popMaintenanceMode"],
        true
    );
    let r = b.post_json("/api/v1/system/maintenance/pop", &json!({"enabled": false}));
    assert_eq!(r.status, 200);
    until_every_shard(
        &b,
        "/api/v1/system/maintenance/pop",
        "popMaintenanceMode",
        false,
    );
    let popped = b
        .pop("/api/v1/pop/queue/pq?batch=10")
        .expect("messages after pause");
    assert_eq!(messages(&popped).len(), 3);
}

#[test]
fn maintenance_requires_a_boolean() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for body in [json!({}), json!({"enabled": "yes"})] {
        let r = b.post_json("/api/v1/system/maintenance", &body);
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"], "enabled (boolean) is required");
    }
}

#[test]
fn maintenance_flag_survives_a_restart() {
    let db = Db::fresh();
    let mut b = Broker::start(&db);
    let r = b.post_json("/api/v1/system/maintenance/pop", &json!({"enabled": true}));
    assert_eq!(r.status, 200);
    b.stop(Duration::from_secs(10));
    let b = Broker::start(&db);
    check_for(Duration::from_secs(10), || {
        let r = b.get("/api/v1/pop/queue/any");
        (r.status == 200 && r.json()["paused"] == true).then_some(())
    });
}

#[test]
fn dlq_replay_answers_503_under_push_maintenance_and_works_after() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("dq", "p", "m", 1);
    let pop = b
        .pop("/api/v1/pop/queue/dq?batch=1&consumerGroup=g")
        .expect("message");
    let m = &messages(&pop)[0];
    let a = b.ack(
        json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
        "status": "dlq", "consumerGroup": "g", "error": "boom"}),
    );
    assert_eq!(a["dlq"], true, "{a}");
    let id: String = db.query("SELECT id::text FROM queen.dead_letter_queue", &[])[0].get(0);
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    until_every_shard(&b, "/api/v1/system/maintenance", "maintenanceMode", true);
    // Every shard refuses (fresh connections land on any shard).
    for _ in 0..8 {
        let r = b.post_empty(&format!("/api/v1/dlq/{id}/replay"));
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(r.error_lc().contains("maintenance"), "{}", r.text());
    }
    let dead = "SELECT count(*)::bigint FROM queen.dead_letter_queue";
    assert_eq!(db.count(dead, &[]), 1, "the dead letter stays");
    assert_eq!(count_queue(&db, "dq"), 1, "nothing replayed");
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    until_every_shard(&b, "/api/v1/system/maintenance", "maintenanceMode", false);
    let r = b.post_empty(&format!("/api/v1/dlq/{id}/replay"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(db.count(dead, &[]), 0);
    assert_eq!(count_queue(&db, "dq"), 2, "replayed as a new message");
}

#[test]
fn a_switch_is_applied_on_every_shard_before_its_post_answers() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for round in 0..5 {
        for (path, key) in [
            ("/api/v1/system/maintenance", "maintenanceMode"),
            ("/api/v1/system/maintenance/pop", "popMaintenanceMode"),
        ] {
            for on in [true, false] {
                let r = b.post_json(path, &json!({ "enabled": on }));
                assert_eq!(r.status, 200, "{}", r.text());
                // No waiting: fresh connections land on any shard, and each must
                // already answer with the switch just made.
                for _ in 0..8 {
                    let seen = b.get(path).json()[key].clone();
                    assert_eq!(seen, on, "round {round}: {path} right after the POST");
                }
            }
        }
    }
}
