//! Issue 3's cleanup job and bounded detail views: idle empty partitions and
//! old metrics rows go away on their own (semantics.md §12 steps 3-4, sql/functions/cleanup.sql),
//! `errors.ackFailed` of `/status` counts failed ack items, and the queue
//! detail views page their partitions (sql/functions/resources.sql, status.sql).
mod common;

use common::*;
use std::time::Duration;

/// Generous: a loaded machine may delay a 200 ms cycle a lot.
const JOB_DEADLINE: Duration = Duration::from_secs(30);

fn fast_cleanup(db: &Db) -> BrokerBuilder {
    Broker::builder(db)
        .env("CLEANUP_INTERVAL", "200")
        .env("PARTITION_CLEANUP_DAYS", "7")
        .env("METRICS_RETENTION_DAYS", "30")
}

fn partition_exists(db: &Db, name: &str) -> bool {
    db.count(
        "SELECT count(*) FROM queen.partitions WHERE name = $1",
        &[&name],
    ) == 1
}

/// Makes partition `name` look idle for 10 days.
fn age_partition(db: &Db, name: &str) {
    db.exec(&format!(
        "UPDATE queen.partitions SET last_activity = now() - interval '10 days', \
                created_at = now() - interval '10 days' WHERE name = '{name}'; \
         UPDATE queen.partition_lookup pl SET last_message_created_at = \
                now() - interval '10 days' FROM queen.partitions p \
          WHERE p.id = pl.partition_id AND p.name = '{name}' \
            AND pl.last_message_created_at IS NOT NULL"
    ));
}

#[test]
fn cleanup_deletes_idle_empty_partitions_and_keeps_the_rest() {
    let db = Db::fresh();
    let b = fast_cleanup(&db).start();
    b.configure("cl", json!({}));
    b.push_n("cl", "idle", "i", 1);
    b.push_n("cl", "full", "f", 1);
    b.push_n("cl", "fresh", "n", 1);
    // empty "idle": consume and delete its message; "full" keeps one
    b.pop("/api/v1/pop/queue/cl/partition/idle?batch=1&autoAck=true")
        .expect("i0");
    db.exec(
        "DELETE FROM queen.messages m USING queen.partitions p \
         WHERE p.id = m.partition_id AND p.name IN ('idle', 'fresh')",
    );
    age_partition(&db, "idle");
    age_partition(&db, "full");
    check_for(JOB_DEADLINE, || {
        (!partition_exists(&db, "idle")).then_some(())
    });
    assert!(
        partition_exists(&db, "full"),
        "a partition with a message stays"
    );
    assert!(
        partition_exists(&db, "fresh"),
        "a recently active partition stays"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.partition_consumers pc \
             WHERE NOT EXISTS (SELECT 1 FROM queen.partitions p WHERE p.id = pc.partition_id)",
            &[]
        ),
        0,
        "no cursor is left pointing at a deleted partition"
    );
    // the name works again: push recreates the partition
    b.push_n("cl", "idle", "j", 1);
    assert!(partition_exists(&db, "idle"));
    let pop = b
        .pop("/api/v1/pop/queue/cl/partition/idle?batch=1&autoAck=true")
        .expect("the new message");
    assert_eq!(txids(&pop), vec!["j0"]);
}

#[test]
fn cleanup_deletes_metrics_rows_older_than_metrics_retention() {
    let db = Db::fresh();
    let b = fast_cleanup(&db)
        .env("QUEEN_PARTITION_CLEANUP_ENABLED", "false")
        .start();
    b.push_n("mr", "p", "a", 1);
    db.exec(
        "INSERT INTO queen.retention_history (partition_id, messages_deleted, retention_type, \
                                             executed_at) \
         SELECT p.id, 1, 'retention', now() - d * interval '1 day' \
           FROM queen.partitions p, (VALUES (40), (1)) v(d) WHERE p.name = 'p'; \
         INSERT INTO queen.system_metrics (ts, hostname, port, worker_id) \
         VALUES (now() - interval '40 days', 'h', 1, 'w'), (now(), 'h', 1, 'w')",
    );
    check_for(JOB_DEADLINE, || {
        (db.count("SELECT count(*) FROM queen.system_metrics", &[]) == 1).then_some(())
    });
    check_for(JOB_DEADLINE, || {
        (db.count("SELECT count(*) FROM queen.retention_history", &[]) == 1).then_some(())
    });
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.retention_history \
             WHERE executed_at > now() - interval '2 days'",
            &[]
        ),
        1,
        "the recent row stays"
    );
}

#[test]
fn status_counts_failed_ack_items() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("af", "p", "a", 1);
    let before = b.get("/api/v1/status").json()["errors"]["ackFailed"].clone();
    assert_eq!(before, json!(0));
    let r = b.post_json(
        "/api/v1/ack/batch",
        &json!({"acknowledgments": [
            {"transactionId": "nope", "partitionId": "00000000-0000-0000-0000-000000000001",
             "status": "completed"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json_array()[0]["success"], json!(false), "{}", r.text());
    let after = b.get("/api/v1/status").json();
    assert_eq!(after["errors"]["ackFailed"], json!(1), "{after}");
}

#[test]
fn queue_detail_views_page_their_partitions() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for p in ["p1", "p2", "p3"] {
        b.push_n("pg", p, p, 2);
    }
    for base in ["/api/v1/resources/queues/pg", "/api/v1/status/queues/pg"] {
        let all = b.get(base).json();
        assert_eq!(all["partitions"].as_array().map(Vec::len), Some(3), "{all}");
        assert_eq!(all["pagination"]["total"], json!(3), "{all}");
        assert_eq!(all["totals"]["total"], json!(6), "{all}");
        let page = b.get(&format!("{base}?limit=1&offset=1")).json();
        let names: Vec<_> = page["partitions"]
            .as_array()
            .expect("partitions")
            .iter()
            .map(|p| p["name"].clone())
            .collect();
        assert_eq!(names, vec![json!("p2")], "{page}");
        assert_eq!(
            page["totals"]["total"],
            json!(6),
            "totals cover the queue: {page}"
        );
        assert_eq!(
            page["pagination"],
            json!({"limit": 1, "offset": 1, "total": 3})
        );
        let bad = b.get(&format!("{base}?limit=0"));
        assert_eq!(bad.status, 400, "{}", bad.text());
        assert!(bad.text().contains("limit"), "{}", bad.text());
    }
}

#[test]
fn group_detail_pages_each_queues_partitions() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for p in ["p1", "p2", "p3"] {
        b.push_n("gd", p, p, 2);
    }
    b.pop("/api/v1/pop/queue/gd/partition/p1?batch=1&consumerGroup=g&autoAck=true")
        .expect("p10");
    let all = b.get("/api/v1/consumer-groups/g").json();
    assert_eq!(
        all["gd"]["partitions"].as_array().map(Vec::len),
        Some(3),
        "{all}"
    );
    assert_eq!(all["gd"]["pagination"]["total"], json!(3), "{all}");
    let page = b.get("/api/v1/consumer-groups/g?limit=1&offset=0").json();
    let parts = page["gd"]["partitions"]
        .as_array()
        .expect("partitions")
        .clone();
    assert_eq!(parts.len(), 1, "{page}");
    assert_eq!(parts[0]["partition"], json!("p1"));
    assert_eq!(parts[0]["totalConsumed"], json!(1), "{page}");
    assert_eq!(parts[0]["offsetLag"], json!(1), "{page}");
    let bad = b.get("/api/v1/consumer-groups/g?offset=-1");
    assert_eq!(bad.status, 400, "{}", bad.text());
}
