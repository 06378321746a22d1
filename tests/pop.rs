//! Pop: order, batch limits, multi-partition claims, autoAck, the three path forms,
//! window buffer, delayed processing, one lease per (partition, group), lease expiry,
//! and the `batch` parameter rules.
mod common;

use common::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn ns(pop: &Value) -> Vec<u64> {
    messages(pop)
        .iter()
        .map(|m| m["data"]["n"].as_u64().unwrap())
        .collect()
}

#[test]
fn pop_returns_fifo_order_within_a_partition_across_pushes() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for round in 0..3 {
        let items: Vec<Value> = (0..4)
            .map(|j| {
                json!({"queue": "fifo", "partition": "p", "payload": {"n": round * 4 + j},
                            "transactionId": format!("t{}", round * 4 + j)})
            })
            .collect();
        b.push(Value::Array(items));
    }
    let pop = b.pop("/api/v1/pop/queue/fifo?batch=100").expect("messages");
    assert_eq!(
        ns(&pop),
        (0..12).collect::<Vec<u64>>(),
        "FIFO within the partition"
    );
    assert_eq!(pop["success"], true);
    assert_eq!(pop["queue"], "fifo");
    assert_eq!(pop["partition"], "p");
    assert_eq!(pop["consumerGroup"], "__QUEUE_MODE__");
    assert_eq!(pop["partitionsClaimed"], 1);
    let lease = pop["leaseId"].as_str().expect("leaseId");
    assert!(!lease.is_empty());
    let pid = pop["partitionId"].as_str().expect("partitionId");
    for m in messages(&pop) {
        for key in [
            "id",
            "transactionId",
            "traceId",
            "data",
            "producerSub",
            "createdAt",
            "partitionId",
            "partition",
            "queue",
            "leaseId",
            "consumerGroup",
        ] {
            assert!(m.get(key).is_some(), "message lacks {key}: {m}");
        }
        assert_eq!(m["leaseId"], lease);
        assert_eq!(m["partitionId"], pid);
        assert_eq!(m["consumerGroup"], "__QUEUE_MODE__");
        let created = m["createdAt"].as_str().unwrap();
        assert!(
            created.ends_with('Z') && created.contains('.'),
            "createdAt format: {created}"
        );
    }
}

#[test]
fn pop_batch_limits_the_number_of_messages() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("bq", "p", "t", 10);
    let pop = b.pop("/api/v1/pop/queue/bq?batch=3").expect("messages");
    assert_eq!(ns(&pop), vec![0, 1, 2]);
}

#[test]
fn multi_partition_pop_shares_one_lease() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for p in ["p0", "p1", "p2"] {
        b.push_n("mp", p, &format!("{p}-"), 2);
    }
    let pop = b
        .pop("/api/v1/pop/queue/mp?partitions=3&batch=100")
        .expect("messages");
    let msgs = messages(&pop);
    assert_eq!(msgs.len(), 6, "{pop}");
    assert_eq!(pop["partitionsClaimed"], 3);
    let lease = pop["leaseId"].as_str().unwrap();
    assert!(!lease.is_empty());
    let parts: HashSet<&str> = msgs
        .iter()
        .map(|m| m["partition"].as_str().unwrap())
        .collect();
    assert_eq!(parts.len(), 3);
    for m in &msgs {
        assert_eq!(m["leaseId"], lease, "every message shares the one lease");
    }
    for p in ["p0", "p1", "p2"] {
        let order: Vec<&str> = msgs
            .iter()
            .filter(|m| m["partition"] == p)
            .map(|m| m["transactionId"].as_str().unwrap())
            .collect();
        assert_eq!(order, vec![format!("{p}-0"), format!("{p}-1")]);
    }
}

#[test]
fn auto_ack_pop_delivers_once_without_a_lease() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("aa", "p", "t", 3);
    let pop = b
        .pop("/api/v1/pop/queue/aa?batch=10&autoAck=true")
        .expect("messages");
    assert_eq!(ns(&pop), vec![0, 1, 2]);
    assert_eq!(pop["leaseId"], "");
    for m in messages(&pop) {
        assert_eq!(m["leaseId"], "");
    }
    assert!(
        b.pop("/api/v1/pop/queue/aa?batch=10").is_none(),
        "auto-acked messages never come back"
    );
}

#[test]
fn partition_form_pops_only_that_partition() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("pf", "pa", "a", 2);
    b.push_n("pf", "pb", "b", 2);
    let pop = b
        .pop("/api/v1/pop/queue/pf/partition/pb?batch=10")
        .expect("messages");
    assert_eq!(txids(&pop), vec!["b0", "b1"]);
    assert_eq!(pop["partition"], "pb");
    assert!(b
        .pop("/api/v1/pop/queue/pf/partition/nope?batch=10")
        .is_none());
}

#[test]
fn discovery_form_finds_queues_by_namespace_and_task() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_json(
        "/api/v1/configure",
        &json!({"queue": "disc-a", "namespace": "shop", "task": "orders", "options": {}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = b.post_json(
        "/api/v1/configure",
        &json!({"queue": "disc-b", "namespace": "shop", "task": "refunds", "options": {}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    b.push_n("disc-a", "p", "a", 2);
    b.push_n("disc-b", "p", "b", 2);
    let pop = b
        .pop("/api/v1/pop?namespace=shop&task=refunds&batch=10")
        .expect("messages");
    assert_eq!(txids(&pop), vec!["b0", "b1"]);
    assert_eq!(pop["queue"], "disc-b");
    let pop = b
        .pop("/api/v1/pop?namespace=shop&batch=10")
        .expect("messages");
    assert_eq!(
        txids(&pop),
        vec!["a0", "a1"],
        "the remaining queue of the namespace"
    );
    assert!(b.pop("/api/v1/pop?namespace=shop&batch=10").is_none());
}

#[test]
fn configure_echoes_options_and_reports_configured() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.configure(
        "cfg",
        json!({"leaseTime": 7, "retryLimit": 5, "windowBuffer": 0}),
    );
    assert_eq!(r["configured"], true);
    assert_eq!(r["queue"], "cfg");
    assert_eq!(r["options"]["leaseTime"], 7);
    assert_eq!(r["options"]["retryLimit"], 5);
    assert!(
        r["queueId"].is_string() && r["partitionId"].is_string(),
        "{r}"
    );
}

/// Polls the queue until a message arrives; returns how long after `t0` it came.
fn first_delivery_after(b: &Broker, path: &str, t0: Instant) -> Duration {
    check_for(Duration::from_secs(8), || b.pop(path).map(|_| t0.elapsed()))
}

#[test]
fn window_buffer_holds_the_partition_until_it_is_quiet() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("wb", json!({"windowBuffer": 2}));
    let t0 = Instant::now();
    b.push_n("wb", "p", "t", 2);
    assert!(
        b.pop("/api/v1/pop/queue/wb?batch=10").is_none(),
        "held by the window buffer"
    );
    let after = first_delivery_after(&b, "/api/v1/pop/queue/wb?batch=10", t0);
    assert!(
        after >= Duration::from_millis(1900),
        "delivered after {after:?}, before 2 s"
    );
}

#[test]
fn delayed_processing_hides_messages_until_old_enough() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("dp", json!({"delayedProcessing": 2}));
    let t0 = Instant::now();
    b.push_n("dp", "p", "t", 1);
    assert!(
        b.pop("/api/v1/pop/queue/dp?batch=10").is_none(),
        "not visible yet"
    );
    let after = first_delivery_after(&b, "/api/v1/pop/queue/dp?batch=10", t0);
    assert!(
        after >= Duration::from_millis(1900),
        "delivered after {after:?}, before 2 s"
    );
}

#[test]
fn one_live_lease_per_partition_and_group() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ll", "p", "t", 5);
    let first = b
        .pop("/api/v1/pop/queue/ll?batch=2&leaseSeconds=30")
        .expect("messages");
    assert_eq!(ns(&first), vec![0, 1]);
    assert!(
        b.pop("/api/v1/pop/queue/ll?batch=10").is_none(),
        "same group must not claim the leased partition, even for undelivered messages"
    );
    let other = b
        .pop("/api/v1/pop/queue/ll?batch=10&consumerGroup=other")
        .expect("other group");
    assert_eq!(ns(&other), vec![0, 1, 2, 3, 4]);
    assert_eq!(other["consumerGroup"], "other");
}

#[test]
fn expired_lease_redelivers_the_batch() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("le", "p", "t", 3);
    let first = b
        .pop("/api/v1/pop/queue/le?batch=10&leaseSeconds=1")
        .expect("messages");
    let ids: Vec<Value> = messages(&first).iter().map(|m| m["id"].clone()).collect();
    assert!(
        b.pop("/api/v1/pop/queue/le?batch=10").is_none(),
        "lease still live"
    );
    let again = check_for(Duration::from_secs(5), || {
        b.pop("/api/v1/pop/queue/le?batch=10")
    });
    let ids2: Vec<Value> = messages(&again).iter().map(|m| m["id"].clone()).collect();
    assert_eq!(ids, ids2, "the same batch comes back");
    assert_ne!(again["leaseId"], first["leaseId"], "with a new lease");
}

#[test]
fn out_of_range_batch_is_rejected_naming_batch() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("br", "p", "t", 1);
    for bad in ["0", "-5", "100000000"] {
        let r = b.get(&format!("/api/v1/pop/queue/br?batch={bad}"));
        assert_eq!(r.status, 400, "batch={bad}: {}", r.text());
        assert!(
            r.error_lc().contains("batch"),
            "error must name batch: {}",
            r.text()
        );
    }
    assert!(
        b.pop("/api/v1/pop/queue/br?batch=1").is_some(),
        "nothing was claimed by the rejects"
    );
}

#[test]
fn unparseable_batch_falls_back_to_the_default_of_200() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("bd", "p", "t", 250);
    let pop = b.pop("/api/v1/pop/queue/bd?batch=abc").expect("messages");
    assert_eq!(messages(&pop).len(), 200);
}

/// Payloads go in as slices of the push body and come out of the pop's result row
/// with jsonb's blanks dropped: whatever the text holds (blanks, `: ` and `, ` inside
/// strings, escapes, non-ASCII, deep nesting, every scalar) reads back as pushed.
#[test]
fn payloads_of_every_shape_read_back_as_pushed() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let payloads = [
        json!({"s": "a: b, c", "t": " x \t y ", "q": "say \"hi\": ok", "back": "c:\\dir\\"}),
        json!({"é": "ü ß — 漢字 🙂", "esc": "\u{0001}\n\r\t", "nested": [[[{"k": [1, [2, [3]]]}]]]}),
        json!([
            1.5e300,
            -0.0,
            12345678901234567u64,
            true,
            false,
            null,
            "",
            {},
            []
        ]),
        json!("a bare string, with: punctuation"),
        json!(42),
        json!(null),
    ];
    // a body with blanks and newlines between the tokens of the payloads themselves
    let items: Vec<String> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let spaced = serde_json::to_string_pretty(p).unwrap();
            format!(r#"{{"queue": "shapes", "transactionId": "t{i}", "payload": {spaced} }}"#)
        })
        .collect();
    let body = format!("{{\"items\": [\n{}\n]}}", items.join(",\n"));
    let r = b.post_bytes("/api/v1/push", body.as_bytes());
    assert_eq!(r.status, 201, "{}", r.text());
    let pop = b
        .pop("/api/v1/pop/queue/shapes?batch=10")
        .expect("messages");
    let got: Vec<Value> = messages(&pop)
        .into_iter()
        .map(|m| m["data"].clone())
        .collect();
    assert_eq!(got.len(), payloads.len());
    for (want, got) in payloads.iter().zip(got) {
        assert_eq!(&got, want);
    }
}
