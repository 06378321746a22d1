//! Consumer-group administration (http-api.md §11): list with lag, lagging,
//! detail, delete (with and without metadata), subscription rewrite, seek per
//! queue and per partition, and the 404/400 answers.
mod common;

use common::*;

/// Keys of a JSON object, sorted.
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

fn sorted(k: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = k.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Pops with autoAck for `group` and returns the transaction ids.
fn pop_auto(b: &Broker, queue: &str, group: &str, batch: usize) -> Vec<String> {
    b.pop(&format!(
        "/api/v1/pop/queue/{queue}?batch={batch}&consumerGroup={group}&autoAck=true"
    ))
    .map(|p| txids(&p))
    .unwrap_or_default()
}

#[test]
fn list_reports_one_entry_per_group_and_queue_with_lag() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("cgl", "p1", "a", 3);
    b.push_n("cgl", "p2", "b", 1);
    let pop = b
        .pop("/api/v1/pop/queue/cgl/partition/p1?batch=10&consumerGroup=g1&autoAck=true")
        .expect("p1");
    assert_eq!(messages(&pop).len(), 3);
    let r = b.get("/api/v1/consumer-groups");
    assert_eq!(r.status, 200, "{}", r.text());
    let arr = r.json_array();
    let e = arr
        .iter()
        .find(|e| e["name"] == "g1" && e["queueName"] == "cgl")
        .unwrap_or_else(|| panic!("g1/cgl missing: {arr:?}"));
    assert_eq!(
        keys(e),
        sorted(&[
            "name",
            "topics",
            "queueName",
            "members",
            "partitionsWithLag",
            "totalLag",
            "maxTimeLag",
            "state",
            "subscriptionMode",
            "subscriptionTimestamp",
            "subscriptionCreatedAt"
        ])
    );
    assert_eq!(e["topics"], json!(["cgl"]));
    assert_eq!(e["members"], 0);
    assert_eq!(e["partitionsWithLag"], 1, "p2 is still unconsumed: {e}");
    assert_eq!(e["totalLag"], Value::Null);
    assert!(e["maxTimeLag"].is_i64(), "{e}");
    assert_eq!(e["state"], "Stable");
    assert_eq!(e["subscriptionMode"], "all");
    assert!(e["subscriptionCreatedAt"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn lagging_lists_partitions_behind_with_offsets() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("lag", "p1", "a", 4);
    assert_eq!(
        b.pop("/api/v1/pop/queue/lag?batch=1&consumerGroup=gl&autoAck=true")
            .map(|p| txids(&p)),
        Some(vec!["a0".to_string()])
    );
    let r = b.get("/api/v1/consumer-groups/lagging?minLagSeconds=0");
    assert_eq!(r.status, 200, "{}", r.text());
    let rows = r.json_array();
    let row = rows
        .iter()
        .find(|x| x["consumer_group"] == "gl")
        .unwrap_or_else(|| panic!("gl missing: {rows:?}"));
    assert_eq!(
        keys(row),
        sorted(&[
            "consumer_group",
            "queue_name",
            "partition_name",
            "partition_id",
            "worker_id",
            "offset_lag",
            "time_lag_seconds",
            "lag_hours",
            "oldest_unconsumed_at",
            "last_consumed_at"
        ])
    );
    assert_eq!(row["queue_name"], "lag");
    assert_eq!(row["partition_name"], "p1");
    assert_eq!(row["offset_lag"], 3);
    let high = b.get("/api/v1/consumer-groups/lagging?minLagSeconds=86400");
    assert!(
        !high
            .json_array()
            .iter()
            .any(|x| x["consumer_group"] == "gl"),
        "a fresh lag is not an hour old"
    );
}

#[test]
fn detail_is_keyed_by_queue_and_unknown_group_is_404() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("det", "p1", "a", 2);
    b.pop("/api/v1/pop/queue/det?batch=1&consumerGroup=gd")
        .expect("message");
    let r = b.get("/api/v1/consumer-groups/gd");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    let parts = j["det"]["partitions"].as_array().expect("partitions");
    assert_eq!(parts.len(), 1);
    let p = &parts[0];
    for k in [
        "partition",
        "workerId",
        "lastConsumedAt",
        "totalConsumed",
        "offsetLag",
        "timeLagSeconds",
        "leaseActive",
    ] {
        assert!(p.get(k).is_some(), "{k} missing in {p}");
    }
    assert_eq!(p["partition"], "p1");
    assert_eq!(p["leaseActive"], true);
    assert!(p["workerId"].is_string(), "a live lease has a worker: {p}");
    assert_eq!(p["offsetLag"], 2);
    let r = b.get("/api/v1/consumer-groups/nobody");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Consumer group not found");
}

#[test]
fn delete_group_removes_cursors_leases_and_metadata() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("del", "p1", "a", 2);
    b.push_n("del2", "p1", "a", 2);
    b.pop("/api/v1/pop/queue/del?batch=1&consumerGroup=gx")
        .expect("leased");
    b.pop("/api/v1/pop/queue/del2?batch=1&consumerGroup=gx&autoAck=true")
        .expect("consumed");
    let r = b.delete("/api/v1/consumer-groups/gx?deleteMetadata=true");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "consumerGroup": "gx", "deletedPartitions": 2,
               "metadataDeleted": true})
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.partition_consumers WHERE consumer_group = 'gx'",
            &[]
        ),
        0,
        "no cursor or lease left"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.consumer_groups_metadata WHERE consumer_group = 'gx'",
            &[]
        ),
        0
    );
    // Re-registered from scratch: the whole history again.
    assert_eq!(pop_auto(&b, "del2", "gx", 10), vec!["a0", "a1"]);
    assert_eq!(b.delete("/api/v1/consumer-groups/gone").status, 404);
}

#[test]
fn delete_group_keeping_metadata_keeps_the_subscription() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("keep", "p1", "a", 2);
    pop_auto(&b, "keep", "gk", 1);
    let r = b.delete("/api/v1/consumer-groups/gk?deleteMetadata=false");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["metadataDeleted"], false);
    assert_eq!(r.json()["deletedPartitions"], 1);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.consumer_groups_metadata WHERE consumer_group = 'gk'",
            &[]
        ),
        1
    );
}

#[test]
fn delete_group_on_one_queue_leaves_other_queues() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("qa", "p", "a", 1);
    b.push_n("qb", "p", "b", 1);
    pop_auto(&b, "qa", "gq", 1);
    pop_auto(&b, "qb", "gq", 1);
    let r = b.delete("/api/v1/consumer-groups/gq/queues/qa");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "consumerGroup": "gq", "queueName": "qa",
               "deletedPartitions": 1, "metadataDeleted": true})
    );
    let left: Vec<String> = db
        .query(
            "SELECT q.name FROM queen.consumer_groups_metadata m \
             JOIN queen.queues q ON q.id = m.queue_id WHERE m.consumer_group = 'gq'",
            &[],
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec!["qb"]);
    let r = b.delete("/api/v1/consumer-groups/gq/queues/nosuch");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Queue not found");
}

#[test]
fn subscription_rewrites_the_timestamp_of_every_queue() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("s1", "p", "a", 1);
    b.push_n("s2", "p", "a", 1);
    b.pop("/api/v1/pop/queue/s1?consumerGroup=gs&subscriptionMode=new");
    b.pop("/api/v1/pop/queue/s2?consumerGroup=gs&subscriptionMode=new");
    let r = b.post_json(
        "/api/v1/consumer-groups/gs/subscription",
        &json!({"subscriptionTimestamp": "2020-01-01T00:00:00Z"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "consumerGroup": "gs",
               "newTimestamp": "2020-01-01T00:00:00.000000Z", "rowsUpdated": 2})
    );
    // No cursor progress yet: the rewritten start applies to the next pop.
    assert_eq!(pop_auto(&b, "s1", "gs", 10), vec!["a0"]);
    let bad = b.post_json("/api/v1/consumer-groups/gs/subscription", &json!({}));
    assert_eq!(bad.status, 400);
    assert!(
        bad.error_lc().contains("subscriptiontimestamp"),
        "{}",
        bad.text()
    );
    let none = b.post_json(
        "/api/v1/consumer-groups/nobody/subscription",
        &json!({"subscriptionTimestamp": "2020-01-01T00:00:00Z"}),
    );
    assert_eq!(none.status, 404);
}

#[test]
fn seek_to_end_covers_untouched_partitions_and_releases_leases() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("se", "p1", "old1-", 2);
    b.push_n("se", "p2", "old2-", 2);
    // The group holds a lease on one partition and never touched the other.
    let leased = b
        .pop("/api/v1/pop/queue/se/partition/p1?batch=1&consumerGroup=g")
        .expect("leased");
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/se/seek",
        &json!({"toEnd": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "consumerGroup": "g", "queueName": "se", "seekToEnd": true,
               "targetTimestamp": null, "partitionsUpdated": 2})
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.partition_consumers \
             WHERE consumer_group = 'g' AND worker_id IS NOT NULL",
            &[]
        ),
        0,
        "the lease was released"
    );
    let _ = leased;
    assert!(
        b.pop("/api/v1/pop/queue/se?batch=10&consumerGroup=g")
            .is_none(),
        "nothing old is delivered after toEnd"
    );
    b.push_n("se", "p2", "new-", 1);
    assert_eq!(pop_auto(&b, "se", "g", 10), vec!["new-0"]);
}

#[test]
fn seek_to_timestamp_redelivers_from_that_instant() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("st", "p1", "a", 2);
    b.push_n("st", "p1", "b", 2);
    assert_eq!(pop_auto(&b, "st", "g", 10).len(), 4);
    let ts: String = db.query(
        "SELECT to_char(max(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
         FROM queen.messages WHERE transaction_id LIKE 'a%'",
        &[],
    )[0]
    .get(0);
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/st/seek",
        &json!({"timestamp": ts}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["seekToEnd"], false);
    assert_eq!(r.json()["targetTimestamp"], json!(ts));
    assert_eq!(pop_auto(&b, "st", "g", 10), vec!["b0", "b1"]);
    // Before everything: the whole history again.
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/st/seek",
        &json!({"timestamp": "2000-01-01T00:00:00Z"}),
    );
    assert_eq!(r.status, 200);
    assert_eq!(pop_auto(&b, "st", "g", 10), vec!["a0", "a1", "b0", "b1"]);
}

#[test]
fn seek_one_partition_reports_the_cursor_message() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pushed = b.push_n("sp", "p1", "a", 3);
    b.push_n("sp", "p2", "x", 1);
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/sp/partitions/p1/seek",
        &json!({"toEnd": true}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "consumerGroup": "g", "queueName": "sp",
               "partitionName": "p1", "updated": true,
               "cursorMovedTo": pushed[2]["message_id"]})
    );
    // p2 is untouched by a partition seek.
    assert_eq!(pop_auto(&b, "sp", "g", 10), vec!["x0"]);
}

#[test]
fn seek_rejects_missing_options_and_unknown_targets() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("sx", "p1", "a", 1);
    let r = b.post_empty("/api/v1/consumer-groups/g/queues/sx/seek");
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"],
        "Must specify either 'toEnd': true or 'timestamp'"
    );
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/sx/seek",
        &json!({"timestamp": "not a time"}),
    );
    assert_eq!(r.status, 400);
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/nosuch/seek",
        &json!({"toEnd": true}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Queue not found");
    let r = b.post_json(
        "/api/v1/consumer-groups/g/queues/sx/partitions/nope/seek",
        &json!({"toEnd": true}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Partition not found");
}
