//! Acknowledgement: cursor moves, lease release, lease validation, retries, DLQ,
//! voluntary retry, batch acks and request validation.
mod common;

use common::*;
use std::time::Duration;

/// (transactionId, partitionId) of each message of a pop answer.
fn keys(pop: &Value) -> Vec<(String, String)> {
    messages(pop)
        .iter()
        .map(|m| {
            (
                m["transactionId"].as_str().unwrap().to_string(),
                m["partitionId"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn ack_body(tx: &str, pid: &str, lease: Option<&str>, status: &str) -> Value {
    let mut b = json!({"transactionId": tx, "partitionId": pid, "status": status});
    if let Some(l) = lease {
        b["leaseId"] = json!(l);
    }
    b
}

fn dlq_txids(b: &Broker, queue: &str) -> Vec<Value> {
    let r = b.get(&format!("/api/v1/dlq?queue={queue}"));
    assert_eq!(r.status, 200, "GET /api/v1/dlq: {}", r.text());
    let j = r.json();
    assert!(j["total"].is_number(), "dlq answer has total: {j}");
    j["messages"]
        .as_array()
        .cloned()
        .expect("dlq messages array")
}

#[test]
fn completed_acks_advance_and_release_the_lease_when_the_batch_is_done() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ca", "p", "t", 3);
    let pop = b
        .pop("/api/v1/pop/queue/ca?batch=3&leaseSeconds=30")
        .expect("messages");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let k = keys(&pop);
    for (i, (tx, pid)) in k.iter().enumerate() {
        let r = b.ack(ack_body(tx, pid, Some(&lease), "completed"));
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["index"], 0);
        assert_eq!(r["transactionId"], json!(tx));
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["queueName"], "ca");
        assert_eq!(r["partitionName"], "p");
        assert_eq!(r["dlq"], false);
        assert_eq!(
            r["leaseReleased"],
            i == 2,
            "released exactly with the last ack: {r}"
        );
    }
    b.push_n("ca", "p", "later", 1);
    // Lease released (not expired: 30 s) and cursor advanced: only the new one comes.
    let pop = b
        .pop("/api/v1/pop/queue/ca?batch=10")
        .expect("new message right away");
    assert_eq!(txids(&pop), vec!["later0"]);
}

#[test]
fn re_ack_of_an_acked_message_succeeds_without_rewinding() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ra", "p", "t", 2);
    let pop = b.pop("/api/v1/pop/queue/ra?batch=2").expect("messages");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    for (tx, pid) in keys(&pop) {
        assert_eq!(
            b.ack(ack_body(&tx, &pid, Some(&lease), "completed"))["success"],
            true
        );
    }
    let (tx0, pid0) = keys(&pop)[0].clone();
    let r = b.ack(ack_body(&tx0, &pid0, None, "completed"));
    assert_eq!(r["success"], true, "idempotent re-ack: {r}");
    assert!(
        b.pop("/api/v1/pop/queue/ra?batch=10").is_none(),
        "cursor did not move back"
    );
}

#[test]
fn ack_with_wrong_or_expired_lease_fails_and_changes_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("wl", "p", "t", 2);
    let pop = b
        .pop("/api/v1/pop/queue/wl?batch=2&leaseSeconds=1")
        .expect("messages");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let (tx0, pid0) = keys(&pop)[0].clone();
    let r = b.ack(ack_body(&tx0, &pid0, Some(&random_uuid()), "completed"));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Invalid or expired lease");
    // Let the real lease expire (a lease must be allowed to run out here).
    std::thread::sleep(Duration::from_millis(1500));
    let r = b.ack(ack_body(&tx0, &pid0, Some(&lease), "completed"));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error"], "Invalid or expired lease");
    let again = b.pop("/api/v1/pop/queue/wl?batch=10").expect("redelivered");
    assert_eq!(
        txids(&again),
        vec!["t0", "t1"],
        "the refused acks moved nothing"
    );
}

#[test]
fn ack_of_an_unknown_message_fails() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("um", "p", "t", 1);
    let pop = b.pop("/api/v1/pop/queue/um?batch=1").expect("message");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let (_, pid) = keys(&pop)[0].clone();
    let r = b.ack(ack_body("no-such-tx", &pid, Some(&lease), "completed"));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].is_string(), "{r}");
}

#[test]
fn failed_acks_dead_letter_after_the_retry_limit() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("fl", json!({"retryLimit": 2}));
    b.push_n("fl", "p", "m", 2);
    let mut deliveries_of_m0 = 0;
    let mut last = None;
    for _ in 0..6 {
        let pop = b
            .pop("/api/v1/pop/queue/fl?batch=1&leaseSeconds=30")
            .expect("a message");
        let (tx, pid) = keys(&pop)[0].clone();
        if tx != "m0" {
            last = Some(tx);
            break;
        }
        deliveries_of_m0 += 1;
        let lease = pop["leaseId"].as_str().unwrap().to_string();
        let mut body = ack_body(&tx, &pid, Some(&lease), "failed");
        body["error"] = json!("boom");
        let r = b.ack(body);
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(
            r["dlq"],
            deliveries_of_m0 == 3,
            "dead-lettered on the third failure: {r}"
        );
    }
    assert_eq!(deliveries_of_m0, 3, "retryLimit 2 = 3 deliveries");
    assert_eq!(last.as_deref(), Some("m1"), "the next message follows");
    let dlq = dlq_txids(&b, "fl");
    let row = dlq
        .iter()
        .find(|m| m["transactionId"] == "m0")
        .unwrap_or_else(|| panic!("m0 not in the DLQ: {dlq:?}"));
    assert_eq!(row["errorMessage"], "boom");
    assert_eq!(row["queue"], "fl");
}

#[test]
fn dlq_status_dead_letters_immediately() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("dl", "p", "m", 2);
    let pop = b.pop("/api/v1/pop/queue/dl?batch=1").expect("message");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let (tx, pid) = keys(&pop)[0].clone();
    let r = b.ack(ack_body(&tx, &pid, Some(&lease), "dlq"));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["dlq"], true);
    let next = b.pop("/api/v1/pop/queue/dl?batch=1").expect("next message");
    assert_eq!(txids(&next), vec!["m1"]);
    assert!(dlq_txids(&b, "dl")
        .iter()
        .any(|m| m["transactionId"] == "m0"));
}

#[test]
fn retry_status_redelivers_without_counting_a_failure() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("rt", json!({"retryLimit": 1}));
    b.push_n("rt", "p", "m", 2);
    // 3 voluntary retries, then failed (counter 0 < 1: redelivered), then failed → DLQ.
    let plan = ["retry", "retry", "retry", "failed", "failed"];
    for (i, status) in plan.iter().enumerate() {
        let pop = b
            .pop("/api/v1/pop/queue/rt?batch=1&leaseSeconds=30")
            .expect("message");
        let (tx, pid) = keys(&pop)[0].clone();
        assert_eq!(tx, "m0", "step {i}: m0 is redelivered");
        let lease = pop["leaseId"].as_str().unwrap().to_string();
        let r = b.ack(ack_body(&tx, &pid, Some(&lease), status));
        assert_eq!(r["success"], true, "step {i}: {r}");
        assert_eq!(r["dlq"], i == 4, "step {i} ({status}): {r}");
    }
    let next = b.pop("/api/v1/pop/queue/rt?batch=1").expect("next message");
    assert_eq!(txids(&next), vec!["m1"]);
}

#[test]
fn ack_batch_handles_mixed_statuses() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ab", "p", "m", 4);
    let pop = b
        .pop("/api/v1/pop/queue/ab?batch=4&leaseSeconds=30")
        .expect("messages");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let k = keys(&pop);
    let pid = k[0].1.clone();
    let acks = json!([
        ack_body(&k[0].0, &pid, Some(&lease), "completed"),
        ack_body(&k[1].0, &pid, Some(&lease), "completed"),
        ack_body("ghost", &pid, Some(&lease), "completed"),
        ack_body(&k[2].0, &pid, Some(&lease), "dlq"),
        ack_body(&k[3].0, &pid, Some(&lease), "completed"),
    ]);
    let r = b.post_json("/api/v1/ack/batch", &json!({"acknowledgments": acks}));
    assert_eq!(r.status, 200, "{}", r.text());
    let arr = r.json_array();
    assert_eq!(arr.len(), 5);
    for (i, e) in arr.iter().enumerate() {
        assert_eq!(e["index"], i, "{e}");
        assert_eq!(e["success"], i != 2, "element {i}: {e}");
        assert_eq!(e["dlq"], i == 3, "element {i}: {e}");
    }
    assert!(
        arr.iter().any(|e| e["leaseReleased"] == true),
        "batch fully acked: {arr:?}"
    );
    b.push_n("ab", "p", "later", 1);
    let next = b
        .pop("/api/v1/pop/queue/ab?batch=10")
        .expect("lease released, cursor moved");
    assert_eq!(txids(&next), vec!["later0"]);
    assert!(dlq_txids(&b, "ab")
        .iter()
        .any(|m| m["transactionId"] == "m2"));
}

#[test]
fn ack_without_required_fields_is_bad_request() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pid = random_uuid();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/api/v1/ack",
            json!({"partitionId": pid, "status": "completed"}),
            "transactionid",
        ),
        (
            "/api/v1/ack",
            json!({"transactionId": "t", "status": "completed"}),
            "partitionid",
        ),
        (
            "/api/v1/ack/batch",
            json!({"acknowledgments": {"transactionId": "t"}}),
            "acknowledgments",
        ),
        ("/api/v1/ack/batch", json!({}), "acknowledgments"),
    ];
    for (path, body, field) in cases {
        let r = b.post_json(path, &body);
        assert_eq!(r.status, 400, "{path} {body}: {}", r.text());
        assert!(
            r.error_lc().contains(field),
            "{path} {body}: error should name {field}: {}",
            r.text()
        );
    }
}
