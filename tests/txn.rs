//! Transactions: pushes and acks commit together or not at all.
mod common;

use common::*;
use std::time::Duration;

fn stored(db: &Db, txid: &str) -> i64 {
    db.count(
        "SELECT count(*) FROM queen.messages WHERE transaction_id = $1",
        &[&txid],
    )
}

fn txn(b: &Broker, body: Value) -> Value {
    let r = b.post_json("/api/v1/transaction", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// Pushes one message to `q` and pops it with a lease; returns (txid, partitionId, leaseId).
fn leased_one(b: &Broker, q: &str, lease_secs: u32) -> (String, String, String) {
    b.push_n(q, "p", "in", 1);
    let pop = b
        .pop(&format!(
            "/api/v1/pop/queue/{q}?batch=1&leaseSeconds={lease_secs}"
        ))
        .expect("message");
    let m = &messages(&pop)[0];
    (
        m["transactionId"].as_str().unwrap().to_string(),
        m["partitionId"].as_str().unwrap().to_string(),
        pop["leaseId"].as_str().unwrap().to_string(),
    )
}

#[test]
fn ack_and_push_commit_together() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (tx, pid, lease) = leased_one(&b, "tin", 30);
    let j = txn(
        &b,
        json!({
            "operations": [
                {"type": "ack", "transactionId": tx, "partitionId": pid, "status": "completed"},
                {"type": "push", "items": [{"queue": "tout", "transactionId": "out-1", "payload": {"k": 1}}]}
            ],
            "requiredLeases": [lease]
        }),
    );
    assert_eq!(j["success"], true, "{j}");
    let results = j["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{j}");
    assert_eq!(results[0]["type"], "ack");
    assert_eq!(results[0]["success"], true);
    assert_eq!(results[1]["type"], "push");
    assert_eq!(results[1]["transactionId"], "out-1");
    assert!(results[1]["messageId"].is_string(), "{j}");
    assert_eq!(stored(&db, "out-1"), 1);
    assert!(
        b.pop("/api/v1/pop/queue/tin?batch=10").is_none(),
        "input acked"
    );
    let out = b
        .pop("/api/v1/pop/queue/tout?batch=10")
        .expect("output pushed");
    assert_eq!(txids(&out), vec!["out-1"]);
}

#[test]
fn transaction_with_an_unknown_message_ack_stores_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (_, pid, _) = leased_one(&b, "uin", 30);
    let j = txn(
        &b,
        json!({
            "operations": [
                {"type": "push", "items": [{"queue": "uout", "transactionId": "t2-out", "payload": 1}]},
                {"type": "ack", "transactionId": "ghost", "partitionId": pid, "status": "completed"}
            ],
            "requiredLeases": []
        }),
    );
    assert_eq!(j["success"], false, "{j}");
    assert_eq!(stored(&db, "t2-out"), 0, "the push was rolled back");
}

#[test]
fn transaction_with_an_expired_required_lease_stores_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (tx, pid, lease) = leased_one(&b, "xin", 1);
    // Let the lease run out.
    std::thread::sleep(Duration::from_millis(1500));
    let j = txn(
        &b,
        json!({
            "operations": [
                {"type": "ack", "transactionId": tx, "partitionId": pid, "status": "completed"},
                {"type": "push", "items": [{"queue": "xout", "transactionId": "t3-out", "payload": 1}]}
            ],
            "requiredLeases": [lease]
        }),
    );
    assert_eq!(j["success"], false, "{j}");
    assert_eq!(stored(&db, "t3-out"), 0, "the push was not applied");
    let again = b
        .pop("/api/v1/pop/queue/xin?batch=10")
        .expect("the ack was not applied");
    assert_eq!(txids(&again), vec![tx]);
}

#[test]
fn transaction_with_an_unknown_operation_type_stores_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let j = txn(
        &b,
        json!({
            "operations": [
                {"type": "push", "items": [{"queue": "kout", "transactionId": "t4-out", "payload": 1}]},
                {"type": "frobnicate"}
            ],
            "requiredLeases": []
        }),
    );
    assert_eq!(j["success"], false, "{j}");
    assert_eq!(stored(&db, "t4-out"), 0);
}

#[test]
fn duplicate_push_inside_a_transaction_is_reported_not_failed() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let first = b.push(json!([{"queue": "dout", "transactionId": "dup-1", "payload": 1}]));
    let j = txn(
        &b,
        json!({
            "operations": [{"type": "push", "items": [
                {"queue": "dout", "transactionId": "dup-1", "payload": 2},
                {"queue": "dout", "transactionId": "dup-2", "payload": 3}
            ]}],
            "requiredLeases": []
        }),
    );
    assert_eq!(j["success"], true, "{j}");
    let results = j["results"].as_array().expect("results");
    assert_eq!(results[0]["status"], "duplicate", "{j}");
    assert_eq!(results[0]["messageId"], first[0]["message_id"]);
    assert_eq!(results[1]["status"], "queued", "{j}");
    assert_eq!(stored(&db, "dup-1"), 1);
    assert_eq!(stored(&db, "dup-2"), 1);
}

#[test]
fn empty_or_missing_operations_is_bad_request() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for body in [json!({"operations": []}), json!({"requiredLeases": []})] {
        let r = b.post_json("/api/v1/transaction", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(r.error_lc().contains("operations"), "{}", r.text());
    }
}
