//! Messages and dead letters (http-api.md §9): listing with filters and paging,
//! detail, delete, retry/replay from the DLQ, manual move, DLQ delete; 404/400.
mod common;

use common::*;

fn has_keys(v: &Value, want: &[&str]) {
    for k in want {
        assert!(v.get(*k).is_some(), "{k} missing in {v}");
    }
}

/// Pushes `n` messages to q/p and dead-letters the first for group `g`;
/// returns (partition id, transaction id of the dead letter).
fn dead_letter(b: &Broker, q: &str) -> (String, String) {
    let pushed = b.push_n(q, "p", "m", 3);
    let pid = pushed[0]["partition_id"].as_str().unwrap().to_string();
    let pop = b
        .pop(&format!("/api/v1/pop/queue/{q}?batch=1&consumerGroup=g"))
        .expect("message");
    let m = &messages(&pop)[0];
    let a = b.ack(
        json!({"transactionId": m["transactionId"], "partitionId": pid,
                         "status": "dlq", "consumerGroup": "g", "error": "boom"}),
    );
    assert_eq!(a["dlq"], true, "{a}");
    (pid, "m0".to_string())
}

#[test]
fn list_filters_by_queue_and_status_with_paging() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ml", "p", "a", 3);
    b.push_n("other", "p", "o", 1);
    b.pop("/api/v1/pop/queue/ml?batch=1&autoAck=true")
        .expect("one");
    let r = b.get("/api/v1/messages?queue=ml");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(j["total"], 3);
    has_keys(&j["mode"], &["hasQueueMode", "busGroupsCount", "type"]);
    let ms = j["messages"].as_array().unwrap();
    assert_eq!(ms.len(), 3);
    has_keys(
        &ms[0],
        &[
            "id",
            "transactionId",
            "partitionId",
            "queuePath",
            "queue",
            "partition",
            "namespace",
            "task",
            "status",
            "queueStatus",
            "busStatus",
            "traceId",
            "producerSub",
            "queuePriority",
            "createdAt",
            "leaseExpiresAt",
        ],
    );
    has_keys(&ms[0]["busStatus"], &["consumedBy", "totalGroups"]);
    assert_eq!(ms[0]["transactionId"], "a2", "newest first");
    assert_eq!(ms[0]["queuePath"], "ml/p");
    let done = b.get("/api/v1/messages?queue=ml&status=completed").json();
    assert_eq!(done["total"], 1);
    assert_eq!(done["messages"][0]["transactionId"], "a0");
    let page = b.get("/api/v1/messages?queue=ml&limit=1&offset=1").json();
    assert_eq!(page["total"], 3);
    assert_eq!(page["messages"].as_array().unwrap().len(), 1);
    assert_eq!(page["messages"][0]["transactionId"], "a1");
    for (q, name) in [
        ("limit=0", "limit"),
        ("offset=x", "offset"),
        ("status=weird", "status"),
        ("from=yesterday", "from"),
    ] {
        let r = b.get(&format!("/api/v1/messages?{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert!(r.error_lc().contains(name), "{q}: {}", r.text());
    }
}

#[test]
fn detail_shows_payload_groups_and_dlq_error() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (pid, txid) = dead_letter(&b, "md");
    let r = b.get(&format!("/api/v1/messages/{pid}/{txid}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    has_keys(
        &j,
        &[
            "id",
            "transactionId",
            "partitionId",
            "queuePath",
            "queue",
            "partition",
            "namespace",
            "task",
            "status",
            "payload",
            "data",
            "isEncrypted",
            "traceId",
            "producerSub",
            "createdAt",
            "errorMessage",
            "retryCount",
            "leaseExpiresAt",
            "queueConfig",
            "mode",
            "consumerGroups",
        ],
    );
    assert_eq!(j["payload"], json!({"n": 0}));
    assert_eq!(j["data"], j["payload"]);
    assert_eq!(j["status"], "dead_letter");
    assert_eq!(j["errorMessage"], "boom");
    assert_eq!(j["consumerGroups"][0]["name"], "g");
    assert_eq!(j["consumerGroups"][0]["consumed"], true);
    has_keys(
        &j["queueConfig"],
        &["leaseTime", "retryLimit", "retryDelay", "ttl", "priority"],
    );
    let r = b.get(&format!("/api/v1/messages/{pid}/nosuch"));
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "Message not found");
    assert_eq!(b.get("/api/v1/messages/not-a-uuid/x").status, 404);
}

#[test]
fn delete_message_removes_it_and_its_dlq_rows() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (pid, txid) = dead_letter(&b, "mdel");
    let r = b.delete(&format!("/api/v1/messages/{pid}/{txid}"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "partitionId": pid, "transactionId": txid,
               "message": "Message deleted"})
    );
    assert_eq!(
        db.count("SELECT count(*) FROM queen.dead_letter_queue", &[]),
        0
    );
    assert_eq!(
        b.delete(&format!("/api/v1/messages/{pid}/{txid}")).status,
        404
    );
}

#[test]
fn retry_replays_a_dead_letter_once_under_a_dlq_id() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (pid, txid) = dead_letter(&b, "mr");
    let dlq_id: String = db.query("SELECT id::text FROM queen.dead_letter_queue", &[])[0].get(0);
    let r = b.post_empty(&format!("/api/v1/messages/{pid}/{txid}/retry"));
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    has_keys(
        &j,
        &[
            "success",
            "result",
            "queue",
            "partition",
            "consumerGroup",
            "dlqId",
            "originalTransactionId",
            "replayedAs",
            "dlqRowRemoved",
        ],
    );
    assert_eq!(j["result"], "moved");
    assert_eq!(j["dlqId"], json!(dlq_id));
    assert_eq!(j["consumerGroup"], "g");
    assert_eq!(j["originalTransactionId"], "m0");
    assert_eq!(j["dlqRowRemoved"], true);
    has_keys(
        &j["replayedAs"],
        &[
            "index",
            "message_id",
            "transaction_id",
            "queueName",
            "status",
            "offset",
        ],
    );
    assert_eq!(j["replayedAs"]["transaction_id"], format!("dlq:{dlq_id}"));
    assert_eq!(
        db.count("SELECT count(*) FROM queen.dead_letter_queue", &[]),
        0
    );
    // The replay is a new message at the end: the group gets it after m1, m2.
    let pop = b
        .pop("/api/v1/pop/queue/mr?batch=10&consumerGroup=g&autoAck=true")
        .expect("rest");
    assert_eq!(
        txids(&pop),
        vec!["m1".to_string(), "m2".into(), format!("dlq:{dlq_id}")]
    );
    let again = b.post_empty(&format!("/api/v1/messages/{pid}/{txid}/retry"));
    assert_eq!(again.status, 404, "the DLQ row is gone");
}

#[test]
fn replay_by_dlq_id_and_dlq_delete() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    dead_letter(&b, "mx");
    let dlq_id: String = db.query("SELECT id::text FROM queen.dead_letter_queue", &[])[0].get(0);
    let r = b.post_empty(&format!("/api/v1/dlq/{dlq_id}/replay"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"], "moved");
    assert_eq!(
        b.post_empty(&format!("/api/v1/dlq/{dlq_id}/replay")).status,
        404
    );

    dead_letter(&b, "my");
    let r = b.delete("/api/v1/dlq?queue=my&consumerGroup=g");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "deleted": 1, "queue": "my", "consumerGroup": "g"})
    );
    assert_eq!(b.delete("/api/v1/dlq").status, 400);
    assert_eq!(b.delete("/api/v1/dlq?queue=nosuch").status, 404);
}

#[test]
fn move_to_dlq_marks_the_message_for_unpassed_groups() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pushed = b.push_n("mm", "p", "a", 2);
    let pid = pushed[0]["partition_id"].as_str().unwrap();
    let r = b.post_empty(&format!("/api/v1/messages/{pid}/a1/dlq"));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"success": true, "partitionId": pid, "transactionId": "a1", "dlq": true})
    );
    let rows = db.query(
        "SELECT consumer_group, error_message FROM queen.dead_letter_queue",
        &[],
    );
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "__QUEUE_MODE__");
    assert_eq!(rows[0].get::<_, String>(1), "Moved to DLQ manually");
    let listed = b.get("/api/v1/dlq?queue=mm").json();
    assert_eq!(listed["total"], 1);
    assert_eq!(
        b.post_empty(&format!("/api/v1/messages/{pid}/zz/dlq"))
            .status,
        404
    );
}
