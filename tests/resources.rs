//! Resource catalogue (http-api.md §8): queues list and detail, delete with
//! cascade, depth, namespaces, tasks, overview, partitions, clear; 404 and 400.
mod common;

use common::*;

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

fn has_keys(v: &Value, want: &[&str]) {
    for k in want {
        assert!(v.get(*k).is_some(), "{k} missing in {v}");
    }
}

/// Two partitions of `shop.orders`: p1 with 3 messages (1 consumed in queue
/// mode), p2 with 2.
fn seed(b: &Broker) {
    b.push_n("shop.orders", "p1", "a", 3);
    b.push_n("shop.orders", "p2", "b", 2);
    let pop = b
        .pop("/api/v1/pop/queue/shop.orders/partition/p1?batch=1&autoAck=true")
        .expect("one message");
    assert_eq!(txids(&pop), vec!["a0"]);
}

#[test]
fn queues_list_counts_partitions_and_messages() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    b.push_n("other", "p", "x", 1);
    let r = b.get("/api/v1/resources/queues?namespace=shop");
    assert_eq!(r.status, 200, "{}", r.text());
    let qs = r.json()["queues"].as_array().expect("queues").clone();
    assert_eq!(qs.len(), 1, "namespace filter: {qs:?}");
    let q = &qs[0];
    has_keys(
        q,
        &[
            "id",
            "name",
            "namespace",
            "task",
            "createdAt",
            "partitions",
            "messages",
        ],
    );
    assert_eq!(q["name"], "shop.orders");
    assert_eq!(q["namespace"], "shop");
    assert_eq!(q["task"], "orders");
    assert_eq!(q["partitions"], 2);
    assert_eq!(
        q["messages"],
        json!({"total": 5, "pending": 4, "processing": 0})
    );
}

#[test]
fn queue_detail_has_partitions_stats_and_totals() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    b.pop("/api/v1/pop/queue/shop.orders/partition/p2?batch=1")
        .expect("leased");
    let r = b.get("/api/v1/resources/queues/shop.orders");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    has_keys(
        &j,
        &[
            "id",
            "name",
            "namespace",
            "task",
            "createdAt",
            "config",
            "partitions",
            "totals",
        ],
    );
    has_keys(
        &j["config"],
        &["leaseTime", "retryLimit", "retryDelay", "ttl", "priority"],
    );
    let stat_keys = [
        "completed",
        "deadLetter",
        "failed",
        "pending",
        "processing",
        "total",
    ];
    assert_eq!(keys(&j["totals"]), stat_keys);
    assert_eq!(j["totals"]["total"], 5);
    assert_eq!(j["totals"]["completed"], 1);
    assert_eq!(j["totals"]["processing"], 1);
    assert_eq!(j["totals"]["pending"], 3);
    let parts = j["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 2);
    for p in parts {
        has_keys(
            p,
            &[
                "id",
                "name",
                "createdAt",
                "stats",
                "oldestMessage",
                "newestMessage",
            ],
        );
        assert_eq!(keys(&p["stats"]), stat_keys);
        assert!(p["oldestMessage"].as_str().unwrap().ends_with('Z'));
    }
    let r = b.get("/api/v1/resources/queues/nosuch");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Queue not found");
}

#[test]
fn delete_queue_cascades_and_a_later_push_starts_fresh() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    b.pop("/api/v1/pop/queue/shop.orders?batch=1&consumerGroup=g")
        .expect("leased by a group");
    let r = b.delete("/api/v1/resources/queues/shop.orders");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"deleted": true, "queue": "shop.orders", "existed": true})
    );
    for t in [
        "queen.messages",
        "queen.partitions",
        "queen.partition_consumers",
        "queen.consumer_groups_metadata",
        "queen.partition_lookup",
    ] {
        assert_eq!(
            db.count(&format!("SELECT count(*) FROM {t}"), &[]),
            0,
            "{t}"
        );
    }
    let r = b.delete("/api/v1/resources/queues/shop.orders");
    assert_eq!(
        r.json(),
        json!({"deleted": true, "queue": "shop.orders", "existed": false})
    );
    // A later push re-creates the queue from scratch: nothing old comes back.
    b.push_n("shop.orders", "p1", "n", 1);
    let pop = b
        .pop("/api/v1/pop/queue/shop.orders?batch=10&consumerGroup=g")
        .expect("new message");
    assert_eq!(txids(&pop), vec!["n0"]);
}

#[test]
fn depth_counts_pending_per_partition_for_a_group_and_overall() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = b.get("/api/v1/resources/queues/shop.orders/depth");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"queue": "shop.orders", "group": null, "pending": 4, "partitionsPending": 2,
               "conflation": false, "effectivePending": 4,
               "partitions": [{"partition": "p1", "pending": 2}, {"partition": "p2", "pending": 2}]})
    );
    b.pop("/api/v1/pop/queue/shop.orders/partition/p2?batch=2&consumerGroup=g&autoAck=true")
        .expect("two");
    let r = b.get("/api/v1/resources/queues/shop.orders/depth?group=g");
    assert_eq!(r.json()["pending"], 3);
    assert_eq!(r.json()["partitionsPending"], 1);
    assert_eq!(r.json()["group"], "g");
    assert_eq!(b.get("/api/v1/resources/queues/nosuch/depth").status, 404);
}

#[test]
fn namespaces_tasks_and_overview_aggregate() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    b.push_n("shop.refunds", "p", "r", 1);
    let ns = b.get("/api/v1/resources/namespaces").json();
    assert_eq!(
        ns,
        json!({"namespaces": [{"namespace": "shop", "queues": 2, "partitions": 3,
                               "messages": {"total": 6, "pending": 5}}]})
    );
    let tasks = b.get("/api/v1/resources/tasks").json();
    let t = tasks["tasks"].as_array().unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t[0]["task"], "orders");
    has_keys(&t[0], &["task", "queues", "partitions", "messages"]);
    let o = b.get("/api/v1/resources/overview").json();
    has_keys(
        &o,
        &[
            "queues",
            "partitions",
            "namespaces",
            "tasks",
            "messages",
            "lag",
            "throughput",
            "timestamp",
            "statsAge",
        ],
    );
    assert_eq!(o["queues"], 2);
    assert_eq!(o["partitions"], 3);
    assert_eq!(o["messages"]["total"], 6);
    assert_eq!(o["messages"]["completed"], 1);
    has_keys(&o["lag"]["time"], &["avg", "median", "min", "max"]);
    has_keys(&o["lag"]["offset"], &["avg", "median", "min", "max"]);
    has_keys(
        &o["throughput"],
        &["ingestedPerSecond", "processedPerSecond"],
    );
    assert!(o["throughput"]["ingestedPerSecond"].as_f64().unwrap() > 0.0);
}

#[test]
fn partitions_are_paged_and_bad_paging_is_400() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = b.get("/api/v1/resources/partitions?queue=shop.orders&limit=1&offset=1");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(j["total"], 2);
    let p = j["partitions"].as_array().unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0]["name"], "p2");
    has_keys(
        &p[0],
        &[
            "id",
            "name",
            "queue",
            "createdAt",
            "lastActivity",
            "messages",
        ],
    );
    assert_eq!(p[0]["messages"], json!({"total": 2, "pending": 2}));
    for (q, name) in [
        ("limit=0", "limit"),
        ("limit=abc", "limit"),
        ("offset=-1", "offset"),
    ] {
        let r = b.get(&format!("/api/v1/resources/partitions?{q}"));
        assert_eq!(r.status, 400, "{q}");
        assert!(r.error_lc().contains(name), "{q}: {}", r.text());
    }
}

#[test]
fn clear_deletes_messages_keeps_the_queue_and_rewinds_cursors() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    seed(&b);
    let r = b.delete("/api/v1/queues/shop.orders/clear?partition=p1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "queue": "shop.orders", "partition": "p1", "deleted": 3})
    );
    assert_eq!(db.count("SELECT count(*) FROM queen.partitions", &[]), 2);
    b.push_n("shop.orders", "p1", "c", 1);
    let pop = b
        .pop("/api/v1/pop/queue/shop.orders/partition/p1?batch=10&autoAck=true")
        .expect("new message after clear");
    assert_eq!(txids(&pop), vec!["c0"]);
    let r = b.delete("/api/v1/queues/shop.orders/clear");
    assert_eq!(r.json()["deleted"], 3, "c0 of p1 and both of p2");
    assert_eq!(r.json()["partition"], Value::Null);
    assert_eq!(b.delete("/api/v1/queues/nosuch/clear").status, 404);
    let r = b.delete("/api/v1/queues/shop.orders/clear?partition=zz");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Partition not found");
}

#[test]
fn stats_refresh_answers_success_without_a_body() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_empty("/api/v1/stats/refresh");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["success"], true);
    assert_eq!(b.get("/api/v1/stats/refresh").status, 405);
}
