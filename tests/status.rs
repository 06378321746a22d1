//! Status and analytics (http-api.md §12), `POST /api/v1/stats/refresh` and
//! the stats roll-up: response shapes, paging, 404/400, the per-minute history
//! behind the throughput series, and large scopes read from the roll-up.
mod common;

use common::*;
use std::time::Duration;

/// Time for a roll-up window to close (the roll-up counts a push once it is
/// older than its 5 s margin) on a loaded machine.
const ROLLUP_DEADLINE: Duration = Duration::from_secs(40);

fn has_keys(v: &Value, want: &[&str]) {
    for k in want {
        assert!(v.get(*k).is_some(), "{k} missing in {v}");
    }
}

/// `shop.orders`: p1 with 3 messages (1 consumed by queue mode), p2 with 2.
fn seed(b: &Broker) {
    b.push_n("shop.orders", "p1", "a", 3);
    b.push_n("shop.orders", "p2", "b", 2);
    b.pop("/api/v1/pop/queue/shop.orders/partition/p1?batch=1&autoAck=true")
        .expect("one message");
}

fn refresh(b: &Broker) -> Value {
    let r = b.post_empty("/api/v1/stats/refresh");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn stats_refresh_rescans_every_partition_into_the_rollup() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = refresh(&b);
    assert_eq!(r["success"], true);
    assert_eq!(r["partitions"], 2, "{r}");
    let rows = db.query(
        "SELECT pt.name, ps.total, ps.after_ref FROM queen.partition_stats ps \
         JOIN queen.partitions pt ON pt.id = ps.partition_id ORDER BY pt.name",
        &[],
    );
    let got: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        got,
        vec![("p1".to_string(), 3, 2), ("p2".to_string(), 2, 2)]
    );
    // The queue row of queen.stats carries the sums.
    let pending = db.count(
        "SELECT pending_messages FROM queen.stats WHERE stat_type = 'queue'",
        &[],
    );
    assert_eq!(pending, 4);
}

#[test]
fn status_has_the_dashboard_keys_and_a_throughput_series() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    // The series counts the 5 pushes once their roll-up window has closed.
    let s = check_for(ROLLUP_DEADLINE, || {
        refresh(&b);
        let s = b.get("/api/v1/status").json();
        let ingested: i64 = s["throughput"]
            .as_array()?
            .iter()
            .map(|p| p["ingested"].as_i64().unwrap_or(0))
            .sum();
        (ingested == 5).then_some(s)
    });
    has_keys(
        &s,
        &[
            "timeRange",
            "bucketMinutes",
            "pointCount",
            "throughput",
            "queues",
            "messages",
            "leases",
            "deadLetterQueue",
            "workers",
            "errors",
            "statsAge",
        ],
    );
    has_keys(&s["timeRange"], &["from", "to"]);
    assert_eq!(s["bucketMinutes"], 1, "last hour → 1-minute buckets");
    let points = s["throughput"].as_array().unwrap();
    assert_eq!(s["pointCount"], points.len());
    assert!(
        points.len() >= 60,
        "every bucket of the hour: {}",
        points.len()
    );
    has_keys(
        &points[0],
        &[
            "timestamp",
            "ingested",
            "processed",
            "ingestedPerSecond",
            "processedPerSecond",
        ],
    );
    let m = &s["messages"];
    has_keys(
        m,
        &[
            "total",
            "pending",
            "processing",
            "completed",
            "failed",
            "deadLetter",
            "requests",
            "batchEfficiency",
        ],
    );
    assert_eq!(m["total"], 5);
    assert_eq!(m["completed"], 1);
    assert_eq!(m["pending"], 4);
    has_keys(&m["requests"], &["push", "pop", "ack"]);
    assert!(m["requests"]["push"].as_u64().unwrap() >= 2);
    has_keys(
        &s["leases"],
        &[
            "active",
            "partitionsWithLeases",
            "totalBatchSize",
            "totalAcked",
        ],
    );
    has_keys(
        &s["deadLetterQueue"],
        &["totalMessages", "affectedPartitions", "topErrors"],
    );
    has_keys(&s["errors"], &["dbErrors", "ackFailed", "dlqMessages"]);
    let qs = s["queues"].as_array().unwrap();
    assert_eq!(qs.len(), 1);
    assert_eq!(qs[0]["name"], "shop.orders");
    assert_eq!(qs[0]["messages"]["total"], 5);
}

#[test]
fn status_counts_dead_letters_and_live_leases() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("q", "p1", "a", 2);
    b.push_n("q", "p2", "b", 1);
    let pop = b
        .pop("/api/v1/pop/queue/q/partition/p1?batch=2")
        .expect("two messages");
    assert_eq!(pop["messages"].as_array().unwrap().len(), 2);
    let s = b.get("/api/v1/status?queue=q").json();
    assert_eq!(s["leases"]["active"], 1, "{}", s["leases"]);
    assert_eq!(s["leases"]["partitionsWithLeases"], 1);
    assert_eq!(s["leases"]["totalBatchSize"], 2);
    let m = &pop["messages"][0];
    let r = b.post_json(
        "/api/v1/ack",
        &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                "leaseId": m["leaseId"], "status": "dlq", "error": "boom"}),
    );
    assert!(r.status < 300, "{}", r.text());
    let s = b.get("/api/v1/status?queue=q").json();
    let d = &s["deadLetterQueue"];
    assert_eq!(d["totalMessages"], 1, "{d}");
    assert_eq!(d["affectedPartitions"], 1);
    assert_eq!(d["topErrors"], json!([{"error": "boom", "count": 1}]));
    assert_eq!(s["errors"]["dlqMessages"], 1);
}

#[test]
fn status_queues_is_paged_and_bad_paging_is_400() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for q in ["qa", "qb", "qc"] {
        b.push_n(q, "p", "x", 1);
    }
    let r = b.get("/api/v1/status/queues?limit=2&offset=1");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        v["pagination"],
        json!({"limit": 2, "offset": 1, "total": 3})
    );
    let names: Vec<&str> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["qb", "qc"]);
    has_keys(
        &v["queues"][0],
        &[
            "id",
            "name",
            "namespace",
            "task",
            "priority",
            "createdAt",
            "partitions",
            "messages",
            "lag",
        ],
    );
    assert_eq!(v["queues"][0]["messages"]["pending"], 1);
    for bad in ["limit=0", "limit=x", "offset=-1"] {
        let r = b.get(&format!("/api/v1/status/queues?{bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        let name = bad.split('=').next().unwrap();
        assert!(r.json()["error"].as_str().unwrap().contains(name), "{bad}");
    }
    let r = b.get("/api/v1/status?from=yesterday");
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("from"));
}

#[test]
fn status_queue_detail_has_partitions_cursor_config_and_404() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = b.get("/api/v1/status/queues/shop.orders");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    has_keys(&v, &["queue", "partitions", "totals"]);
    has_keys(
        &v["queue"],
        &[
            "id",
            "name",
            "namespace",
            "task",
            "priority",
            "createdAt",
            "config",
        ],
    );
    has_keys(
        &v["queue"]["config"],
        &[
            "leaseTime",
            "retryLimit",
            "retryDelay",
            "ttl",
            "maxQueueSize",
            "deadLetterQueue",
        ],
    );
    let parts = v["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    let p1 = &parts[0];
    has_keys(
        p1,
        &[
            "id",
            "name",
            "createdAt",
            "messages",
            "stats",
            "cursor",
            "lastActivity",
        ],
    );
    assert_eq!(p1["name"], "p1");
    assert_eq!(
        p1["cursor"],
        json!({"totalConsumed": 1, "batchesConsumed": 1})
    );
    assert_eq!(p1["messages"]["completed"], 1);
    assert_eq!(v["totals"]["total"], 5);
    let r = b.get("/api/v1/status/queues/nosuch");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Queue not found");
}

#[test]
fn status_queue_messages_is_an_array_of_message_summaries() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = b.get("/api/v1/status/queues/shop.orders/messages?limit=3");
    assert_eq!(r.status, 200, "{}", r.text());
    let arr = r.json_array();
    assert_eq!(arr.len(), 3);
    has_keys(
        &arr[0],
        &[
            "id",
            "transactionId",
            "partitionId",
            "queuePath",
            "queue",
            "partition",
            "status",
            "createdAt",
        ],
    );
    assert_eq!(
        b.get("/api/v1/status/queues/shop.orders/messages?limit=-5")
            .status,
        400
    );
}

#[test]
fn analytics_views_answer_their_shapes() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("RETENTION_INTERVAL", "100")
        .start();
    b.configure(
        "old",
        json!({"retentionEnabled": true, "retentionSeconds": 1}),
    );
    b.push_n("old", "p", "r", 3);
    refresh(&b);
    // retention deletes the three messages and records them
    let ret = check_for(ROLLUP_DEADLINE, || {
        let v = b.get("/api/v1/analytics/retention").json();
        (v["totals"]["retention"] == 3).then_some(v)
    });
    has_keys(&ret, &["timeRange", "bucketMinutes", "series", "totals"]);
    has_keys(
        &ret["series"][0],
        &["timestamp", "retention_type", "messagesDeleted"],
    );

    let a = b.get("/api/v1/status/analytics?interval=minute&from=2020-01-01T00:00:00Z&to=2020-01-01T00:10:00Z");
    assert_eq!(a.status, 200, "{}", a.text());
    let a = a.json();
    has_keys(&a, &["dataPoints", "interval", "from", "to"]);
    assert_eq!(a["interval"], "minute");
    assert_eq!(a["dataPoints"].as_array().unwrap().len(), 11);
    has_keys(&a["dataPoints"][0], &["timestamp", "messages"]);
    has_keys(
        &a["dataPoints"][0]["messages"],
        &["ingested", "processed", "failed"],
    );
    let d = b.get("/api/v1/status/analytics").json();
    assert_eq!(d["interval"], "hour", "default interval");
    assert_eq!(b.get("/api/v1/status/analytics?interval=week").status, 400);

    for (path, want) in [
        (
            "/api/v1/analytics/queue-lag",
            &["timeRange", "bucketMinutes", "queues"][..],
        ),
        (
            "/api/v1/analytics/queue-ops",
            &["timeRange", "bucketMinutes", "queues"][..],
        ),
        (
            "/api/v1/analytics/system-metrics",
            &[
                "timeRange",
                "replicas",
                "replicaCount",
                "bucketMinutes",
                "pointCount",
            ][..],
        ),
        (
            "/api/v1/analytics/worker-metrics",
            &[
                "timeRange",
                "bucketMinutes",
                "pointCount",
                "timeSeries",
                "workers",
                "queues",
                "summary",
            ][..],
        ),
        (
            "/api/v1/analytics/queue-parked-replicas",
            &["replicas", "replicaCount"][..],
        ),
        (
            "/api/v1/analytics/postgres-stats",
            &["databaseSize", "tables", "connections", "cacheHitRatio"][..],
        ),
    ] {
        let r = b.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        has_keys(&r.json(), want);
    }
    let ops = b.get("/api/v1/analytics/queue-ops?queue=old").json();
    assert_eq!(ops["queues"][0]["queue"], "old");
    has_keys(
        &ops["queues"][0]["series"][0],
        &["timestamp", "push", "ack", "failed"],
    );
    assert_eq!(b.get("/api/v1/analytics/nosuch").status, 404);
}

/// Seeds `parts` partitions with `per` messages each into queue `big` by SQL.
fn seed_big(db: &Db, b: &Broker, parts: i32, per: i32) {
    b.configure("big", json!({}));
    db.client()
        .execute(
            "INSERT INTO queen.partitions (queue_id, name) \
             SELECT q.id, 'p' || g FROM queen.queues q, generate_series(1, $1) g \
             WHERE q.name = 'big'",
            &[&parts],
        )
        .unwrap();
    db.exec(
        "INSERT INTO queen.partition_lookup (partition_id, queue_id) \
         SELECT p.id, p.queue_id FROM queen.partitions p ON CONFLICT DO NOTHING",
    );
    db.client()
        .execute(
            "INSERT INTO queen.messages (id, transaction_id, partition_id, payload, created_at) \
             SELECT gen_random_uuid(), 't' || g, p.id, '{}', \
                    now() - interval '30 minutes' + g * interval '1 ms' \
             FROM queen.partitions p, generate_series(1, $1) g",
            &[&per],
        )
        .unwrap();
    db.exec(
        "UPDATE queen.partition_lookup pl SET last_message_id = x.id, \
                last_message_created_at = x.created_at, updated_at = now() \
         FROM (SELECT DISTINCT ON (partition_id) partition_id, id, created_at \
               FROM queen.messages ORDER BY partition_id, created_at DESC, id DESC) x \
         WHERE x.partition_id = pl.partition_id",
    );
}

#[test]
fn a_queue_over_a_thousand_partitions_is_counted_from_the_rollup() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("STATS_INTERVAL_MS", "0").start();
    seed_big(&db, &b, 1200, 2);
    let r = refresh(&b);
    assert!(r["partitions"].as_u64().unwrap() >= 1200, "{r}");
    let q = b.get("/api/v1/resources/queues").json();
    assert_eq!(q["queues"][0]["partitions"], 1201, "{q}");
    assert_eq!(
        q["queues"][0]["messages"]["total"], 2402,
        "two per partition, Default included"
    );
    // A push is not counted until the next roll-up: the read is the roll-up's.
    b.push_n("big", "p1", "new", 3);
    let q = b.get("/api/v1/resources/queues").json();
    assert_eq!(q["queues"][0]["messages"]["total"], 2402);
    assert!(q["statsAge"].as_f64().unwrap() >= 0.0);
    refresh(&b);
    let q = b.get("/api/v1/resources/queues").json();
    assert_eq!(q["queues"][0]["messages"]["total"], 2405);
    // depth per group from the roll-up: g consumed 2 of p1's 5 messages, none elsewhere
    b.pop("/api/v1/pop/queue/big/partition/p1?batch=2&consumerGroup=g&autoAck=true")
        .expect("two");
    refresh(&b);
    let d = b.get("/api/v1/resources/queues/big/depth?group=g").json();
    assert_eq!(d["pending"], 2403, "{}", d["pending"]);
    assert_eq!(d["partitionsPending"], 1201);
    let d = b
        .get("/api/v1/resources/queues/big/depth?group=nobody")
        .json();
    assert_eq!(
        d["pending"], 2405,
        "an unknown group has everything pending"
    );
    let groups = b.get("/api/v1/consumer-groups").json_array();
    let g = groups.iter().find(|x| x["name"] == "g").expect("g listed");
    assert_eq!(g["partitionsWithLag"], 1201, "{g}");
    assert_eq!(g["queueName"], "big");
    let o = b.get("/api/v1/resources/overview").json();
    assert_eq!(o["messages"]["total"], 2405);
    assert_eq!(o["partitions"], 1201);
    let page = b
        .get("/api/v1/consumer-groups/lagging?minLagSeconds=60")
        .json_array();
    assert_eq!(page.len(), 1000, "default page of the lagging list");
    let lag = b
        .get("/api/v1/consumer-groups/lagging?minLagSeconds=60&limit=10000")
        .json_array();
    // p1's oldest message for g is the fresh push: under a minute behind
    assert_eq!(lag.len(), 1200, "every other partition lags for g");
    assert!(
        lag.iter()
            .any(|r| r["consumer_group"] == "g" && r["partition_name"] == "p2"),
        "g lags on p2"
    );
}

#[test]
fn the_rollup_job_runs_on_its_interval() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("STATS_INTERVAL_MS", "100").start();
    b.push_n("q", "p", "x", 4);
    check_for(ROLLUP_DEADLINE, || {
        (db.count(
            "SELECT coalesce(sum(total), 0)::bigint FROM queen.partition_stats",
            &[],
        ) == 4)
            .then_some(())
    });
    let runs = db.count(
        "SELECT count(*) FROM queen.job_runs WHERE job = 'stats' AND finished_at IS NOT NULL",
        &[],
    );
    assert!(runs >= 1);
}

/// partition_stats of queue `inc`, partition `p`: (total, full_at as text).
fn inc_stats(db: &Db) -> Option<(i64, String)> {
    db.query(
        "SELECT ps.total, ps.full_at::text FROM queen.partition_stats ps \
         JOIN queen.partitions pt ON pt.id = ps.partition_id \
         JOIN queen.queues q ON q.id = pt.queue_id WHERE q.name = 'inc' AND pt.name = 'p'",
        &[],
    )
    .first()
    .map(|r| (r.get(0), r.get(1)))
}

#[test]
fn the_rollup_adds_appended_rows_and_recounts_after_retention_deletes() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("STATS_INTERVAL_MS", "100")
        .env("STATS_RECONCILE_INTERVAL_MS", "600000")
        .env("RETENTION_INTERVAL", "200")
        .start();
    b.configure("inc", json!({}));
    b.push_n("inc", "p", "a", 5);
    let (_, first_full) = check_for(ROLLUP_DEADLINE, || inc_stats(&db).filter(|s| s.0 == 5));

    // appended rows are added to the total without a count from scratch
    b.push_n("inc", "p", "b", 7);
    let (_, full) = check_for(ROLLUP_DEADLINE, || inc_stats(&db).filter(|s| s.0 == 12));
    assert_eq!(
        full, first_full,
        "the second scan counted only the new rows"
    );

    // the retention job deletes (and writes retention_history): the next scan of the
    // partition counts it from scratch, so the total meets the live count again
    b.configure(
        "inc",
        json!({"retentionEnabled": true, "retentionSeconds": 1}),
    );
    check_for(ROLLUP_DEADLINE, || {
        (db.count(
            "SELECT coalesce(sum(messages_deleted), 0)::bigint FROM queen.retention_history",
            &[],
        ) > 0)
            .then_some(())
    });
    b.push_n("inc", "p", "c", 1);
    check_for(ROLLUP_DEADLINE, || {
        let live = db.count(
            "SELECT count(*) FROM queen.messages m JOIN queen.partitions pt \
             ON pt.id = m.partition_id WHERE pt.name = 'p'",
            &[],
        );
        inc_stats(&db).filter(|s| s.0 == live && s.1 != first_full)
    });
}

#[test]
fn the_rollup_recounts_a_partition_after_a_clear() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("STATS_INTERVAL_MS", "100")
        .env("STATS_RECONCILE_INTERVAL_MS", "600000")
        .start();
    b.push_n("inc", "p", "a", 5);
    check_for(ROLLUP_DEADLINE, || inc_stats(&db).filter(|s| s.0 == 5));
    // the clear endpoint writes no retention history; the delete trigger marks the
    // partition, so the next scan counts it from scratch instead of adding to 5
    let r = b.delete("/api/v1/queues/inc/clear?partition=p");
    assert_eq!(r.status, 200, "{}", r.text());
    b.push_n("inc", "p", "b", 2);
    check_for(ROLLUP_DEADLINE, || inc_stats(&db).filter(|s| s.0 == 2));
}

#[test]
fn a_rollup_cycle_runs_only_the_rounds_its_stale_partitions_need() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("STATS_INTERVAL_MS", "500")
        .env("STATS_BATCH_SIZE", "1")
        .start();
    // steady push to three partitions: each is stale again right after its scan
    let start = std::time::Instant::now();
    let mut n = 0;
    while start.elapsed() < Duration::from_secs(3) {
        for p in ["a", "b", "c"] {
            b.push_n("steady", p, &format!("t{n}-"), 1);
        }
        n += 1;
    }
    let elapsed_ms = start.elapsed().as_millis() as i64;
    let rounds = db.count(
        "SELECT count(*) FROM queen.job_runs WHERE job = 'stats'",
        &[],
    );
    // three rounds a cycle (one partition a round), a cycle every 500 ms, plus the
    // cycle in flight; chaining until a round came back short ran up to 100 a cycle
    let bound = 3 * (elapsed_ms / 500 + 2);
    assert!(rounds > 0, "the roll-up ran");
    assert!(
        rounds <= bound,
        "{rounds} rounds in {elapsed_ms} ms (bound {bound})"
    );
}

/// partition_stats of queue `inc`, partition `p`: (total, after_ref, full_at as text).
fn inc_ref(db: &Db) -> Option<(i64, i64, String)> {
    db.query(
        "SELECT ps.total, ps.after_ref, ps.full_at::text FROM queen.partition_stats ps \
         JOIN queen.partitions pt ON pt.id = ps.partition_id \
         JOIN queen.queues q ON q.id = pt.queue_id WHERE q.name = 'inc' AND pt.name = 'p'",
        &[],
    )
    .first()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
}

#[test]
fn the_rollup_follows_a_cursor_both_ways_without_counting_from_scratch() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("STATS_INTERVAL_MS", "100")
        .env("STATS_RECONCILE_INTERVAL_MS", "600000")
        .start();
    b.push_n("inc", "p", "a", 10);
    let (_, _, first_full) = check_for(ROLLUP_DEADLINE, || {
        inc_ref(&db).filter(|s| s.0 == 10 && s.1 == 10)
    });
    let pop = |n: usize| {
        let path =
            format!("/api/v1/pop/queue/inc/partition/p?batch={n}&consumerGroup=g&autoAck=true");
        assert_eq!(messages(&b.pop(&path).expect("messages")).len(), n);
    };
    // the cursor moves forward: after_ref follows by the rows it passed
    pop(3);
    check_for(ROLLUP_DEADLINE, || inc_ref(&db).filter(|s| s.1 == 7));
    b.push_n("inc", "p", "b", 4);
    pop(5);
    let (total, _, full) = check_for(ROLLUP_DEADLINE, || {
        inc_ref(&db).filter(|s| s.0 == 14 && s.1 == 6)
    });
    assert_eq!(total, 14);
    assert_eq!(full, first_full, "no count from scratch for a cursor move");
    // a seek back to before every message moves it the other way; the seek stamps
    // nothing, the next push makes the partition stale
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/inc/seek",
        &json!({"timestamp": "2000-01-01T00:00:00Z"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    b.push_n("inc", "p", "c", 1);
    let (_, _, full) = check_for(ROLLUP_DEADLINE, || {
        inc_ref(&db).filter(|s| s.0 == 15 && s.1 == 15)
    });
    assert_eq!(full, first_full, "nor for a move back");
    // and what the roll-up holds is what a live count says
    let live = db.count(
        "SELECT count(*) FROM queen.messages m JOIN queen.partition_consumers pc \
         ON pc.partition_id = m.partition_id AND pc.consumer_group = 'g' \
         WHERE (m.created_at, m.id) > (pc.last_consumed_created_at, pc.last_consumed_id)",
        &[],
    );
    assert_eq!(live, 15);
}

#[test]
fn ingested_counts_each_push_once_in_the_window_whose_scan_found_it() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("STATS_INTERVAL_MS", "0").start();
    let ingested = || {
        db.count(
            "SELECT coalesce(sum((h.data->>'ingested')::bigint), 0)::bigint \
             FROM queen.stats_history h JOIN queen.queues q ON q.id = h.queue_id \
             WHERE q.name = 'ing'",
            &[],
        )
    };
    b.push_n("ing", "p1", "a", 5);
    refresh(&b);
    // counted at once: no wait for a window to close
    assert_eq!(ingested(), 5);
    b.push_n("ing", "p1", "b", 2);
    b.push_n("ing", "p2", "c", 1);
    refresh(&b);
    assert_eq!(ingested(), 8, "new rows once, old ones not again");
    refresh(&b);
    assert_eq!(ingested(), 8, "a scan that finds nothing new adds nothing");
    let s = b.get("/api/v1/status?queue=ing").json();
    let series: i64 = s["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ingested"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(series, 8);
}
