//! The DB threads' connections: one that carried a result of 4 MiB or more is
//! closed after it (its client's read buffer would otherwise keep that size
//! for good: `src/store/pooled.rs`), and the next job opens a new one. Every
//! message is still delivered once, its payload as pushed (an answer of over
//! 1 MiB of payloads points into the row: `src/api/pop_answer.rs`). A
//! prepared statement whose function changed shape is prepared again.
mod common;

use common::*;
use std::collections::HashSet;

/// The backend pids of the broker's connections to `db` named `app`.
fn backends_of(db: &Db, app: &str) -> HashSet<i32> {
    db.query(
        "SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = $1",
        &[&app],
    )
    .iter()
    .map(|r| r.get::<_, i32>(0))
    .collect()
}

/// The request group's connections.
fn backends(db: &Db) -> HashSet<i32> {
    backends_of(db, "queen")
}

/// The KV pool's connections.
fn kv_backends(db: &Db) -> HashSet<i32> {
    backends_of(db, "queen-kv")
}

/// Pushes `n` messages of ~8 KiB each to `queue`, 64 per request.
fn push_big(b: &Broker, queue: &str, n: usize) {
    let pad = "x".repeat(8 << 10);
    for start in (0..n).step_by(64) {
        let items: Vec<Value> = (start..(start + 64).min(n))
            .map(|i| {
                json!({"queue": queue, "partition": "p",
                       "payload": {"n": i, "pad": pad, "s": "a \"q\", é\n\\", "l": [1, {"k": null}]}})
            })
            .collect();
        b.push(Value::Array(items));
    }
}

#[test]
fn a_connection_that_carried_a_big_pop_is_closed_and_replaced() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("DB_POOL_SIZE", "2").start();
    // 640 x 8 KiB: a 5 MiB result, over the 4 MiB mark
    push_big(&b, "big", 640);
    push_big(&b, "small", 64);

    // a small pop leaves every connection in place
    let before = backends(&db);
    assert!(!before.is_empty(), "the broker holds connections");
    let small = b
        .pop("/api/v1/pop/queue/small?batch=1000&autoAck=true")
        .expect("small messages");
    assert_eq!(messages(&small).len(), 64);
    let after_small = backends(&db);
    assert!(
        before.is_subset(&after_small),
        "a 0.5 MiB pop closed a connection: {before:?} -> {after_small:?}"
    );

    // the big pop delivers all 640, once, and its connection goes
    let big = b
        .pop("/api/v1/pop/queue/big?batch=1000")
        .expect("big messages");
    assert_eq!(messages(&big).len(), 640, "no message twice");
    // over 1 MiB of payloads: spliced from the row, read back as pushed
    for m in messages(&big) {
        let n = m["data"]["n"].as_u64().expect("n");
        let pushed = json!({"n": n, "pad": "x".repeat(8 << 10), "s": "a \"q\", é\n\\",
                            "l": [1, {"k": null}]});
        assert_eq!(m["data"], pushed);
    }
    let got: HashSet<u64> = messages(&big)
        .iter()
        .map(|m| m["data"]["n"].as_u64().unwrap())
        .collect();
    assert_eq!(
        got,
        (0..640).collect::<HashSet<u64>>(),
        "every message once"
    );
    let gone = check_for(std::time::Duration::from_secs(5), || {
        let now = backends(&db);
        let gone: Vec<i32> = after_small.difference(&now).copied().collect();
        (!gone.is_empty()).then_some(gone)
    });
    assert_eq!(gone.len(), 1, "exactly the big pop's connection closed");

    // the broker goes on with a new connection: ack all, nothing left behind
    let lease = big["leaseId"].as_str().expect("leaseId");
    let acks: Vec<Value> = messages(&big)
        .iter()
        .map(|m| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": lease, "status": "completed"})
        })
        .collect();
    let r = b.post_json("/api/v1/ack/batch", &json!({ "acknowledgments": acks }));
    assert_eq!(r.status, 200, "ack/batch: {}", r.text());
    assert!(
        r.json_array().iter().all(|a| a["success"] == true),
        "{}",
        r.text()
    );
    assert!(
        b.pop("/api/v1/pop/queue/big?batch=1000").is_none(),
        "all consumed"
    );
    assert!(
        b.pop("/api/v1/pop/queue/small?batch=1000").is_none(),
        "all consumed"
    );
}

#[test]
fn a_kv_connection_that_read_a_big_result_is_closed_and_replaced() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_KV_POOL_SIZE", "1")
        .env("QUEEN_KV_MAX_READ_BYTES", "16777216")
        .start();
    let kv = |ops: Value| {
        let r = b.post_json("/api/v1/kv", &json!({ "operations": ops }));
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["results"].clone()
    };
    // 96 values of 60 KiB under one prefix: a 5.6 MiB getPrefix, over the mark
    let pad = "v".repeat(60 << 10);
    for start in (0..96).step_by(16) {
        let puts: Vec<Value> = (start..start + 16)
            .map(|i| {
                json!({"op": "put", "ns": "big", "key": format!("k/{i:03}"),
                            "value": {"i": i, "pad": pad}, "forever": true})
            })
            .collect();
        kv(Value::Array(puts));
    }
    let small = kv(json!([{"op": "get", "ns": "big", "key": "k/000"}]));
    assert_eq!(small[0]["value"]["i"], 0);
    let before = kv_backends(&db);
    assert_eq!(before.len(), 1, "one KV connection: {before:?}");

    let big = kv(json!([{"op": "getPrefix", "ns": "big", "prefix": "k/", "limit": 1000}]));
    let rows = big[0]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 96, "every value read");
    assert!(rows.iter().all(|r| r["value"]["pad"] == pad.as_str()));
    // the big read's connection closes (check_for panics if it stays)
    check_for(std::time::Duration::from_secs(5), || {
        kv_backends(&db).is_disjoint(&before).then_some(())
    });

    // the next call opens a new connection and applies
    let again = kv(json!([{"op": "get", "ns": "big", "key": "k/095"}]));
    assert_eq!(again[0]["value"]["i"], 95);
    let now = kv_backends(&db);
    assert_eq!(now.len(), 1);
    assert!(now.is_disjoint(&before), "{before:?} -> {now:?}");
}

/// Starts a broker, lets `send` write one 5 MiB payload `{"pad": ...}` to
/// `queue` (over the mark whatever the push's piece size), and checks that a
/// request-group connection closes and the message pops whole, once.
fn a_big_write_retires_its_connection(queue: &str, send: impl FnOnce(&Broker, Value)) {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("DB_POOL_SIZE", "2").start();
    push_big(&b, "warm", 8);
    let before = backends(&db);
    assert!(!before.is_empty(), "the broker holds connections");
    let pad = "z".repeat(5 << 20);
    send(&b, json!({"pad": pad}));
    check_for(std::time::Duration::from_secs(5), || {
        let now = backends(&db);
        (!before.is_subset(&now)).then_some(())
    });
    let m = b
        .pop(&format!("/api/v1/pop/queue/{queue}?batch=10&autoAck=true"))
        .expect("the big message");
    assert_eq!(messages(&m).len(), 1);
    assert_eq!(messages(&m)[0]["data"]["pad"], pad.as_str());
    assert!(
        b.pop(&format!("/api/v1/pop/queue/{queue}?batch=10"))
            .is_none(),
        "once"
    );
}

#[test]
fn a_connection_that_sent_a_big_push_item_is_closed_and_the_item_kept_whole() {
    a_big_write_retires_its_connection("huge", |b, payload| {
        b.push(json!([{"queue": "huge", "partition": "p", "payload": payload}]));
    });
}

#[test]
fn a_connection_that_sent_a_big_transaction_is_closed_and_the_push_applied() {
    // the transaction call's jsonb argument is over the mark
    a_big_write_retires_its_connection("txbig", |b, payload| {
        let r = b.post_json(
            "/api/v1/transaction",
            &json!({"operations": [{"type": "push",
                "items": [{"queue": "txbig", "partition": "p", "payload": payload}]}]}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    });
}

/// A connection prepares each of the broker's statements once
/// (`src/store/pooled.rs`). When PostgreSQL can no longer run one as
/// prepared (a peer broker replaced the function it calls with one of
/// another result type), the statement is prepared again and the call is
/// answered: the connection does not keep failing it.
#[test]
fn a_prepared_statement_whose_function_changed_shape_is_prepared_again() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("DB_POOL_SIZE", "1").start();
    b.configure("before", json!({"leaseTime": 31}));
    db.exec(
        "ALTER FUNCTION queen.configure(jsonb) RENAME TO configure_as_jsonb;
         CREATE FUNCTION queen.configure(p jsonb) RETURNS json LANGUAGE sql
             AS $$ SELECT queen.configure_as_jsonb(p)::json $$;",
    );
    for q in ["after-1", "after-2"] {
        b.configure(q, json!({"leaseTime": 32}));
    }
    let leases = db.query(
        "SELECT name, lease_time FROM queen.queues ORDER BY name",
        &[],
    );
    let got: Vec<(String, i32)> = leases.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        [
            ("after-1".to_string(), 32),
            ("after-2".to_string(), 32),
            ("before".to_string(), 31)
        ]
    );
}
