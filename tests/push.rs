//! Push: queue/partition creation, idempotency by transactionId, validation, and
//! fused concurrent pushes answered from their own slices.
mod common;

use common::*;
use std::sync::{Arc, Barrier};

#[test]
fn first_push_creates_queue_and_partition_with_namespace_and_task() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let res = b.push(json!([{"queue": "billing.invoice.v2", "partition": "eu",
                             "transactionId": "tx-1", "payload": {"amount": 12}}]));
    assert_eq!(res.len(), 1);
    let r = &res[0];
    assert_eq!(r["index"], 0);
    assert_eq!(r["status"], "queued");
    assert_eq!(r["transaction_id"], "tx-1");
    let mid = r["message_id"].as_str().expect("message_id string");
    let pid = r["partition_id"].as_str().expect("partition_id string");
    assert!(r.get("trace_id").is_some(), "trace_id key missing: {r}");

    let q = db.query(
        "SELECT namespace, task FROM queen.queues WHERE name = $1",
        &[&"billing.invoice.v2"],
    );
    assert_eq!(q.len(), 1, "queue row not created");
    assert_eq!(q[0].get::<_, Option<String>>(0).as_deref(), Some("billing"));
    assert_eq!(q[0].get::<_, Option<String>>(1).as_deref(), Some("invoice"));

    let p = db.query(
        "SELECT p.id::text, p.name FROM queen.partitions p \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&"billing.invoice.v2"],
    );
    assert_eq!(p.len(), 1, "exactly the pushed partition exists");
    assert_eq!(p[0].get::<_, String>(0), pid);
    assert_eq!(p[0].get::<_, String>(1), "eu");

    let m = db.query(
        "SELECT id::text, transaction_id, payload, partition_id::text FROM queen.messages",
        &[],
    );
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].get::<_, String>(0), mid);
    assert_eq!(m[0].get::<_, String>(1), "tx-1");
    assert_eq!(m[0].get::<_, Value>(2), json!({"amount": 12}));
    assert_eq!(m[0].get::<_, String>(3), pid);
}

#[test]
fn duplicate_transaction_id_returns_existing_message_id() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let res = b.push(json!([
        {"queue": "dq", "partition": "p", "transactionId": "same", "payload": {"v": 1}},
        {"queue": "dq", "partition": "p", "transactionId": "same", "payload": {"v": 2}},
    ]));
    assert_eq!(res[0]["status"], "queued");
    assert_eq!(
        res[1]["status"], "duplicate",
        "second occurrence in one request"
    );
    assert_eq!(res[1]["index"], 1);
    assert_eq!(res[0]["message_id"], res[1]["message_id"]);

    let again = b.push(
        json!([{"queue": "dq", "partition": "p", "transactionId": "same",
                               "payload": {"v": 3}}]),
    );
    assert_eq!(again[0]["status"], "duplicate", "across requests");
    assert_eq!(again[0]["message_id"], res[0]["message_id"]);

    let rows = db.query("SELECT payload FROM queen.messages", &[]);
    assert_eq!(rows.len(), 1, "only the first occurrence is stored");
    assert_eq!(rows[0].get::<_, Value>(0), json!({"v": 1}));
}

/// The newest-message pointer pop relies on, read from the database.
fn newest_of(db: &Db, queue: &str, partition: &str) -> Option<String> {
    db.query(
        "SELECT pl.last_message_id::text FROM queen.partition_lookup pl \
         JOIN queen.partitions pt ON pt.id = pl.partition_id \
         JOIN queen.queues q ON q.id = pt.queue_id WHERE q.name = $1 AND pt.name = $2",
        &[&queue, &partition],
    )
    .first()
    .and_then(|r| r.get(0))
}

#[test]
fn duplicates_on_an_existing_partition_fail_alone_and_the_newest_pointer_follows() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let old = b.push(json!([{"queue": "fq", "partition": "p", "transactionId": "old"}]));
    assert_eq!(
        newest_of(&db, "fq", "p").as_deref(),
        old[0]["message_id"].as_str()
    );

    // the partition exists now: a plain insert first, then the duplicate path
    let res = b.push(json!([
        {"queue": "fq", "partition": "p", "transactionId": "n1", "payload": 1},
        {"queue": "fq", "partition": "p", "transactionId": "old", "payload": 2},
        {"queue": "fq", "partition": "p", "transactionId": "n2", "payload": 3},
        {"queue": "fq", "partition": "p", "transactionId": "n2", "payload": 4},
    ]));
    let status: Vec<&str> = res.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(status, ["queued", "duplicate", "queued", "duplicate"]);
    assert_eq!(res[1]["message_id"], old[0]["message_id"]);
    assert_eq!(res[3]["message_id"], res[2]["message_id"]);
    assert_eq!(
        newest_of(&db, "fq", "p").as_deref(),
        res[2]["message_id"].as_str()
    );

    // no duplicate: the pointer moves to the greatest id of the request
    let fresh = b.push(json!([
        {"queue": "fq", "partition": "p", "transactionId": "n3"},
        {"queue": "fq", "partition": "p", "transactionId": "n4"},
    ]));
    assert_eq!(fresh[1]["status"], "queued");
    assert_eq!(
        newest_of(&db, "fq", "p").as_deref(),
        fresh[1]["message_id"].as_str()
    );
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 5);

    // and pop hands them out in push order
    let mut seen = Vec::new();
    while let Some(got) = b.pop("/api/v1/pop/queue/fq?batch=2&autoAck=true") {
        let msgs = got["messages"].as_array().cloned().unwrap_or_default();
        seen.extend(
            msgs.iter()
                .map(|m| m["transactionId"].as_str().unwrap().to_string()),
        );
    }
    assert_eq!(seen, ["old", "n1", "n2", "n3", "n4"]);
}

#[test]
fn same_transaction_id_in_two_partitions_is_two_messages() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let res = b.push(json!([
        {"queue": "tq", "partition": "a", "transactionId": "t", "payload": 1},
        {"queue": "tq", "partition": "b", "transactionId": "t", "payload": 2},
    ]));
    assert_eq!(res[0]["status"], "queued");
    assert_eq!(res[1]["status"], "queued");
    assert_ne!(res[0]["message_id"], res[1]["message_id"]);
    assert_ne!(res[0]["partition_id"], res[1]["partition_id"]);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE transaction_id = 't'",
            &[]
        ),
        2
    );
}

#[test]
fn missing_transaction_id_is_minted_by_the_broker() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let res =
        b.push(json!([{"queue": "mq", "payload": {"x": 1}}, {"queue": "mq", "payload": {"x": 2}}]));
    let t0 = res[0]["transaction_id"]
        .as_str()
        .expect("minted transaction_id");
    let t1 = res[1]["transaction_id"]
        .as_str()
        .expect("minted transaction_id");
    assert!(!t0.is_empty() && !t1.is_empty());
    assert_ne!(t0, t1, "each item gets its own id");
    assert_eq!(res[0]["status"], "queued");
    assert_eq!(res[1]["status"], "queued");
    let n = db.count(
        "SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         WHERE p.name = 'Default' AND m.transaction_id IN ($1, $2)",
        &[&t0, &t1],
    );
    assert_eq!(n, 2, "stored with the minted ids in the Default partition");
}

#[test]
fn trace_id_must_be_a_string() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_json(
        "/api/v1/push",
        &json!({"items": [{"queue": "trq", "traceId": 42}]}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.error_lc().contains("traceid"),
        "error must name traceId: {}",
        r.text()
    );
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 0);

    let trace = random_uuid();
    let ok = b.push(json!([{"queue": "trq", "traceId": trace, "payload": 1}]));
    assert_eq!(ok[0]["status"], "queued");
    assert_eq!(ok[0]["trace_id"], json!(trace));
}

#[test]
fn empty_items_answers_201_with_empty_array() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_json("/api/v1/push", &json!({"items": []}));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json(), json!([]));
}

#[test]
fn invalid_push_is_rejected_whole_naming_the_field_and_writes_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let good = r#"{"queue":"okq","partition":"p","payload":{"a":1}}"#;
    // (body, substrings of which the lower-cased error must contain one)
    let cases: Vec<(String, &[&str])> = vec![
        ("hello".to_string(), &["json"]),
        (format!(r#"{{"items":[{good}"#), &["json"]),
        (r#"{"items":{"queue":"okq"}}"#.to_string(), &["items"]),
        (r#"{"nothing":1}"#.to_string(), &["items"]),
        (
            format!(r#"{{"items":[{good},{{"payload":1}}]}}"#),
            &["queue"],
        ),
        (format!(r#"{{"items":[{good},{{"queue":5}}]}}"#), &["queue"]),
        (
            format!(r#"{{"items":[{good},{{"queue":"okq","partition":7}}]}}"#),
            &["partition"],
        ),
        (
            format!(r#"{{"items":[{good},{{"queue":"okq","transactionId":7}}]}}"#),
            &["transactionid"],
        ),
        (
            format!(r#"{{"items":[{good},{{"queue":"okq","payload":{{"s":"a\u0000b"}}}}]}}"#),
            &["payload", "\\u0000", "nul", "zero"],
        ),
    ];
    for (body, names) in &cases {
        let r = b.post_bytes("/api/v1/push", body.as_bytes());
        assert_eq!(
            r.status,
            400,
            "body {body:?} answered {}: {}",
            r.status,
            r.text()
        );
        let err = r.error_lc();
        assert!(
            r.json.as_ref().is_some_and(|j| j["error"].is_string()),
            "400 must be a JSON object with an error string: {}",
            r.text()
        );
        assert!(
            names.iter().any(|n| err.contains(n)),
            "error for {body:?} should name one of {names:?}: {err:?}"
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM queen.messages", &[]),
        0,
        "nothing stored"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM queen.queues WHERE name = 'okq'", &[]),
        0,
        "no queue created by a rejected request"
    );
    // The broker is still fine afterwards.
    assert_eq!(
        b.push(json!([{"queue": "okq", "payload": 1}]))[0]["status"],
        "queued"
    );
}

#[test]
fn concurrent_pushes_with_one_invalid_are_answered_from_their_own_slices() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    const N: usize = 50;
    const BAD: usize = 17;
    let port = b.port;
    let barrier = Arc::new(Barrier::new(N));
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let k = 1 + i % 5;
                let mut items: Vec<Value> = (0..k)
                    .map(|j| {
                        json!({"queue": "fused", "partition": format!("p{}", i % 4),
                               "transactionId": format!("r{i}-{j}"), "payload": {"i": i, "j": j}})
                    })
                    .collect();
                if i == BAD {
                    items[0]["payload"] = json!({"s": "bad\u{0}byte"});
                }
                let mut c = Conn::connect(port).expect("connect");
                barrier.wait();
                let r = c
                    .post_json("/api/v1/push", &json!({"items": items}))
                    .expect("push response");
                (i, k, r)
            })
        })
        .collect();
    let mut expected = 0;
    for h in handles {
        let (i, k, r) = h.join().unwrap();
        if i == BAD {
            assert_eq!(r.status, 400, "request with NUL payload: {}", r.text());
            continue;
        }
        assert_eq!(r.status, 201, "request {i}: {}", r.text());
        let arr = r.json_array();
        assert_eq!(arr.len(), k, "request {i} answer length");
        for (j, e) in arr.iter().enumerate() {
            assert_eq!(e["index"], j, "request {i}");
            assert_eq!(
                e["transaction_id"],
                format!("r{i}-{j}"),
                "request {i} got another slice"
            );
            assert_eq!(e["status"], "queued", "request {i}: {e}");
        }
        expected += k as i64;
    }
    assert_eq!(
        db.count("SELECT count(*) FROM queen.messages", &[]),
        expected
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE transaction_id LIKE $1",
            &[&format!("r{BAD}-%")]
        ),
        0,
        "nothing of the invalid request stored"
    );
}

#[test]
fn a_replayed_stored_item_is_answered_stored_and_leaves_the_newest_pointer() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let first = b.push(
        json!([{"queue": "rq", "partition": "p", "transactionId": "t1",
                               "payload": {"n": 1}}]),
    );
    let second = b.push(
        json!([{"queue": "rq", "partition": "p", "transactionId": "t2",
                                "payload": {"n": 2}}]),
    );
    let second_id = second[0]["message_id"].as_str().unwrap().to_string();
    assert_eq!(
        newest_of(&db, "rq", "p").as_deref(),
        Some(second_id.as_str())
    );

    // what the spool sends again after a crash between commit and its own record:
    // the same id and transaction id as the stored first message
    let first_id: uuid::Uuid = first[0]["message_id"].as_str().unwrap().parse().unwrap();
    let rows = db.query(
        "SELECT dup_ord FROM queen.push_typed(NULL, ARRAY['rq'], ARRAY['p'], ARRAY[1], \
         ARRAY[$1::uuid], ARRAY['t1'], ARRAY[NULL]::uuid[], ARRAY['{}'::jsonb], \
         ARRAY[false], ARRAY[NULL]::text[])",
        &[&first_id],
    );
    let dup: Option<Vec<i32>> = rows[0].get(0);
    assert_eq!(
        dup, None,
        "its own id is stored: answered as stored, not duplicate"
    );
    assert_eq!(
        newest_of(&db, "rq", "p").as_deref(),
        Some(second_id.as_str()),
        "the replay inserted nothing, so the newest message is still the second"
    );
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 2);
}

/// A request of more payload than one statement carries (1 MiB: the store
/// cuts it into pieces in one transaction) is stored whole, in order, and a
/// transaction id repeated in a later piece is found as a duplicate.
#[test]
fn a_request_of_several_statements_is_stored_whole_and_in_order() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pad = "x".repeat(60_000);
    let mut items: Vec<Value> = (0..40)
        .map(|i| {
            json!({"queue": "big", "partition": "p", "transactionId": format!("t{i}"),
                        "payload": {"i": i, "pad": pad}})
        })
        .collect();
    items.push(json!({"queue": "big", "partition": "p", "transactionId": "t0", "payload": 1}));
    let res = b.push(Value::Array(items));
    assert_eq!(res.len(), 41);
    assert!(
        res[..40].iter().all(|r| r["status"] == "queued"),
        "{:?}",
        &res[..2]
    );
    assert_eq!(res[40]["status"], "duplicate");
    assert_eq!(res[40]["message_id"], res[0]["message_id"]);
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 40);
    let order = db.query(
        "SELECT (payload->>'i')::int FROM queen.messages ORDER BY id",
        &[],
    );
    let got: Vec<i32> = order.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    assert_eq!(
        newest_of(&db, "big", "p").as_deref(),
        res[39]["message_id"].as_str()
    );
}
