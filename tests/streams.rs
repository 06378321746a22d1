//! Streams (http-api.md §19): registration and its 409, reset, the cycle's
//! atomicity (one transaction; a bad sink or a foreign lease applies
//! nothing), serialisation of a (query, partition) and parallelism across
//! partitions, state reads, sink encryption, dedup and notices, access
//! levels, tenancy, metrics, and the grants of `queen_streams` (SEC-29).
//! The SDK end to end: `clients/python/check_streams.py`.
mod common;

use common::*;
use jsonwebtoken::{encode, EncodingKey, Header};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SECRET: &str = "streams-test-secret-0123456789abcdef";
const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

fn register(b: &Broker, name: &str, hash: &str, reset: bool) -> Resp {
    b.post_json(
        "/streams/v1/queries",
        &json!({"name": name, "source_queue": "src", "sink_queue": "sink",
                "config_hash": hash, "reset": reset}),
    )
}

fn query_id(b: &Broker, name: &str) -> String {
    let r = register(b, name, "h1", false);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["query_id"].as_str().unwrap().to_string()
}

fn cycle(b: &Broker, body: &Value) -> Value {
    let r = b.post_json("/streams/v1/cycle", body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn state(b: &Broker, body: Value) -> Vec<Value> {
    let r = b.post_json("/streams/v1/state/get", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["rows"].as_array().unwrap().clone()
}

fn keys(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect()
}

/// Pushes `n` messages to `src`/`part` and pops them as group `g`: (lease,
/// partition id, last transaction id).
fn leased_batch(b: &Broker, part: &str, n: usize) -> (String, String, String) {
    b.push_n("src", part, &format!("{part}-m"), n);
    let pop = b
        .pop(&format!(
            "/api/v1/pop/queue/src/partition/{part}?batch={n}&consumerGroup=g"
        ))
        .expect("a batch");
    let m = messages(&pop);
    assert_eq!(m.len(), n);
    (
        pop["leaseId"].as_str().unwrap().to_string(),
        m[0]["partitionId"].as_str().unwrap().to_string(),
        m[n - 1]["transactionId"].as_str().unwrap().to_string(),
    )
}

fn sink_count(db: &Db, queue: &str) -> i64 {
    db.count(
        "SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
}

fn lease_of(db: &Db, pid: &str) -> Option<String> {
    db.query(
        "SELECT worker_id::text FROM queen.partition_consumers \
         WHERE partition_id = $1::text::uuid AND consumer_group = 'g'",
        &[&pid],
    )[0]
    .get(0)
}

#[test]
fn a_changed_config_hash_is_409_until_reset_wipes_the_state() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let first = register(&b, "orders-sum", "h1", false);
    assert_eq!(first.status, 200, "{}", first.text());
    let f = first.json();
    assert_eq!(
        (f["fresh"].clone(), f["reset"].clone()),
        (json!(true), json!(false))
    );
    let qid = f["query_id"].as_str().unwrap().to_string();
    let again = register(&b, "orders-sum", "h1", true).json();
    assert_eq!(again["query_id"], qid.as_str());
    assert_eq!(
        (again["fresh"].clone(), again["reset"].clone()),
        (json!(false), json!(false))
    );
    cycle(
        &b,
        &json!({"query_id": qid, "partition_id": "p",
                "state_ops": [{"type": "upsert", "key": "k", "value": {"acc": 1}}]}),
    );

    let refused = register(&b, "orders-sum", "h2", false);
    assert_eq!(refused.status, 409, "{}", refused.text());
    let r = refused.json();
    assert_eq!(r["success"], false);
    assert_eq!(r["query_id"], qid.as_str());
    let why = r["error"].as_str().unwrap();
    assert!(
        why.contains("config_hash") && why.contains("h1") && why.contains("reset"),
        "{why}"
    );
    assert_eq!(
        state(&b, json!({"query_id": qid, "partition_id": "p"})).len(),
        1
    );

    let reset = register(&b, "orders-sum", "h2", true);
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(reset.json()["reset"], true);
    assert_eq!(reset.json()["config_hash"], "h2");
    assert!(state(&b, json!({"query_id": qid, "partition_id": "p"})).is_empty());
    assert_eq!(register(&b, "orders-sum", "h2", false).status, 200);
    assert_eq!(register(&b, "orders-sum", "h1", false).status, 409);

    // The tenant's grant: one query at most, the one it has.
    db.exec(
        "INSERT INTO queen_streams.quota (tenant_id, max_queries) \
         VALUES ('00000000-0000-0000-0000-000000000001', 1)",
    );
    let over = register(&b, "second", "h1", false);
    assert_eq!(over.status, 403, "{}", over.text());
    assert!(over.json()["error"].as_str().unwrap().contains("quota"));
    assert_eq!(register(&b, "orders-sum", "h2", false).status, 200);
    for bad in [
        json!({"source_queue": "s", "config_hash": "h"}),
        json!({"name": "n", "config_hash": "h"}),
        json!({"name": "n", "source_queue": "s"}),
        json!({"name": "n", "source_queue": "s", "config_hash": "h", "reset": "yes"}),
    ] {
        let r = b.post_json("/streams/v1/queries", &bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
}

#[test]
fn a_cycle_is_one_transaction_of_state_sink_pushes_and_ack() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    let (lease, pid, last) = leased_batch(&b, "p1", 3);
    let ops: Vec<Value> = (0..10)
        .map(|i| json!({"type": "upsert", "key": format!("k{i:02}"), "value": {"acc": i}}))
        .collect();
    let items: Vec<Value> = (0..10)
        .map(|i| json!({"queue": "sink", "partition": "p1", "payload": {"i": i}}))
        .collect();
    let r = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g",
                "state_ops": ops, "push_items": items,
                "ack": {"transactionId": last, "leaseId": lease, "status": "completed", "count": 3}}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["state_ops_applied"], 10);
    assert_eq!(r["queueName"], "src");
    let pushed = r["push_results"].as_array().unwrap();
    assert_eq!(pushed.len(), 10);
    assert!(pushed
        .iter()
        .all(|p| p["status"] == "queued" && p["message_id"].is_string()));
    assert_eq!(
        r["ack_result"],
        json!({"success": true, "count": 3, "lease_released": true, "dlq": false})
    );
    assert_eq!(lease_of(&db, &pid), None, "lease released");
    // One transaction: every row the cycle wrote carries the same xmin.
    let xmins = db.count(
        "SELECT count(DISTINCT x) FROM (
           SELECT xmin::text AS x FROM queen_streams.state WHERE query_id = $1::text::uuid
           UNION ALL SELECT m.xmin::text FROM queen.messages m
             JOIN queen.partitions p ON p.id = m.partition_id
             JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'sink'
           UNION ALL SELECT xmin::text FROM queen.partition_consumers
             WHERE partition_id = $2::text::uuid AND consumer_group = 'g') t",
        &[&qid, &pid],
    );
    assert_eq!(
        xmins, 1,
        "state, sink messages and cursor from one transaction"
    );
    assert_eq!(sink_count(&db, "sink"), 10);
    assert!(b
        .pop("/api/v1/pop/queue/src?batch=10&consumerGroup=g&wait=false")
        .is_none_or(|p| messages(&p).is_empty()));
    // The same ack again (a retried request): refused, nothing applied twice.
    let again = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g",
                "push_items": [{"queue": "sink", "partition": "p1", "payload": {}}],
                "ack": {"transactionId": last, "leaseId": lease, "count": 3}}),
    );
    assert_eq!(again["success"], false, "{again}");
    assert_eq!(sink_count(&db, "sink"), 10);
}

#[test]
fn a_cycle_with_a_foreign_lease_or_a_bad_sink_applies_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    let (lease, pid, last) = leased_batch(&b, "p1", 2);
    let ops = json!([{"type": "upsert", "key": "a", "value": 1}, {"type": "delete", "key": "b"}]);
    cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid,
                "state_ops": [{"type": "upsert", "key": "b", "value": 2}]}),
    );
    let foreign = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g", "state_ops": ops,
                "push_items": [{"queue": "sink-foreign", "payload": {"x": 1}}],
                "ack": {"transactionId": last, "leaseId": random_uuid(), "count": 2}}),
    );
    assert_eq!(
        foreign,
        json!({"success": false, "error": "Invalid or expired lease"})
    );
    let bad_sink = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g", "state_ops": ops,
                "push_items": [{"queue": "sink-ok", "payload": {}}, {"queue": "", "payload": {}}],
                "ack": {"transactionId": last, "leaseId": lease, "count": 2}}),
    );
    assert_eq!(bad_sink["success"], false, "{bad_sink}");
    assert!(
        bad_sink["error"].as_str().unwrap().contains("push_items"),
        "{bad_sink}"
    );
    // A lease of another queue's partition is not this query's to ack.
    b.push_n("other", "p1", "o", 1);
    let other = b
        .pop("/api/v1/pop/queue/other?batch=1&consumerGroup=g")
        .expect("other");
    let not_source = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": messages(&other)[0]["partitionId"],
                "consumer_group": "g", "state_ops": ops,
                "ack": {"transactionId": "o0", "leaseId": other["leaseId"], "count": 1}}),
    );
    assert_eq!(
        not_source["error"], "The ack's partition is not of the query's source queue",
        "{not_source}"
    );
    let unknown = cycle(
        &b,
        &json!({"query_id": random_uuid(), "partition_id": pid, "state_ops": ops}),
    );
    assert_eq!(
        unknown,
        json!({"success": false, "error": "Unknown query_id"})
    );
    for bad in [
        json!({"partition_id": pid}),
        json!({"query_id": qid}),
        json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "merge", "key": "a"}]}),
        json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "upsert", "key": "a"}]}),
        json!({"query_id": qid, "partition_id": pid, "ack": {"transactionId": last}}),
    ] {
        let r = cycle(&b, &bad);
        assert_eq!(r["success"], false, "{bad}: {r}");
    }
    // Nothing of any of them: state as before, no sink queue, the lease and cursor intact.
    let rows = state(&b, json!({"query_id": qid, "partition_id": pid}));
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["key"].clone(), rows[0]["value"].clone()),
        (json!("b"), json!(2))
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.queues WHERE name LIKE 'sink%'",
            &[]
        ),
        0
    );
    assert_eq!(lease_of(&db, &pid).as_deref(), Some(lease.as_str()));
    let ok = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g", "state_ops": ops,
                "ack": {"transactionId": last, "leaseId": lease, "count": 2}}),
    );
    assert_eq!(ok["success"], true, "{ok}");
}

#[test]
fn cycles_of_one_partition_serialise_and_other_partitions_do_not_wait() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    // Hold the lock of (q, pA) as a cycle in flight would.
    let mut holder = db.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT queen.streams_lock($1::text::uuid, 'pA')", &[&qid])
        .unwrap();
    let port = b.port;
    let body = |p: &str, v: i64| {
        json!({"query_id": qid, "partition_id": p,
               "state_ops": [{"type": "upsert", "key": "k", "value": v}]})
    };
    let blocked = {
        let body = body("pA", 1);
        std::thread::spawn(move || {
            let mut c = Conn::connect(port).unwrap();
            let r = c.post_json("/streams/v1/cycle", &body).unwrap();
            (Instant::now(), r.json())
        })
    };
    // The pA cycle waits on the advisory lock in PostgreSQL ...
    check_for(Duration::from_secs(10), || {
        (db.count(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' \
             AND query LIKE '%streams_cycle%'",
            &[],
        ) == 1)
            .then_some(())
    });
    // ... while a pB cycle of the same query commits at once.
    let t0 = Instant::now();
    assert_eq!(cycle(&b, &body("pB", 2))["success"], true);
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "pB waited {:?}",
        t0.elapsed()
    );
    assert!(!blocked.is_finished(), "the pA cycle ran under a held lock");
    let released = Instant::now();
    tx.commit().unwrap();
    let (done, r) = blocked.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert!(done >= released);
    let a = state(&b, json!({"query_id": qid, "partition_id": "pA"}));
    assert_eq!(a[0]["value"], 1);
}

#[test]
fn state_reads_by_keys_prefix_and_ripeness() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    let ops = json!([
        {"type": "upsert", "key": "tumb\u{1f}w1\u{1f}a", "value": {"acc": 1, "windowEnd": 1_000}},
        {"type": "upsert", "key": "tumb\u{1f}w2\u{1f}a", "value": {"acc": 2, "windowEnd": 1_700_000_000_000_i64}},
        {"type": "upsert", "key": "tumb\u{1f}w3\u{1f}a", "value": {"acc": 3}},
        {"type": "upsert", "key": "__wm__", "value": {"eventTimeMs": 5}},
        {"type": "upsert", "key": "x", "value": 0},
        {"type": "delete", "key": "x"},
    ]);
    cycle(
        &b,
        &json!({"query_id": qid, "partition_id": "p", "state_ops": ops}),
    );
    let all = state(&b, json!({"query_id": qid, "partition_id": "p"}));
    assert_eq!(
        keys(&all),
        vec![
            "__wm__",
            "tumb\u{1f}w1\u{1f}a",
            "tumb\u{1f}w2\u{1f}a",
            "tumb\u{1f}w3\u{1f}a"
        ]
    );
    assert!(all
        .iter()
        .all(|r| r["updated_at"].as_str().unwrap().ends_with('Z')));
    let some = state(
        &b,
        json!({"query_id": qid, "partition_id": "p", "keys": ["__wm__", "nope"]}),
    );
    assert_eq!(keys(&some), vec!["__wm__"]);
    let pre = json!({"query_id": qid, "partition_id": "p", "key_prefix": "tumb\u{1f}"});
    assert_eq!(state(&b, pre.clone()).len(), 3);
    let mut ripe = pre.clone();
    ripe["ripe_at_or_before"] = json!(1_000);
    assert_eq!(keys(&state(&b, ripe.clone())), vec!["tumb\u{1f}w1\u{1f}a"]);
    ripe["ripe_at_or_before"] = json!("2023-11-14T22:13:20.000Z");
    assert_eq!(state(&b, ripe.clone()).len(), 2, "ISO bound = 1.7e12 ms");
    assert!(state(&b, json!({"query_id": qid, "partition_id": "other"})).is_empty());
    for bad in [
        json!({"query_id": "nope", "partition_id": "p"}),
        json!({"query_id": random_uuid(), "partition_id": "p"}),
        json!({"query_id": qid, "partition_id": "p", "keys": [1]}),
        json!({"query_id": qid, "partition_id": "p", "ripe_at_or_before": "soon"}),
    ] {
        let r = b.post_json("/streams/v1/state/get", &bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
        assert_eq!(r.json()["success"], false);
    }
}

#[test]
fn sink_pushes_are_encrypted_deduplicated_and_wake_long_polls() {
    let db = Db::fresh();
    // Rechecks of a parked pop far apart: only the notice can wake it early.
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "20000")
        .env("POP_WAIT_MAX_INTERVAL_MS", "20000")
        .start();
    b.configure("secret-sink", json!({"encryptionEnabled": true}));
    let qid = query_id(&b, "q");
    let port = b.port;
    let parked = std::thread::spawn(move || {
        let mut c = Conn::connect(port).unwrap();
        c.set_timeout(Duration::from_secs(30));
        let t0 = Instant::now();
        let r = c
            .get("/api/v1/pop/queue/secret-sink?batch=10&wait=true&timeout=15000")
            .unwrap();
        (t0.elapsed(), r.status, r.text())
    });
    check_for(Duration::from_secs(10), || {
        (b.get("/metrics").json()["parkedConsumers"].as_u64() >= Some(1)).then_some(())
    });
    let item = json!({"queue": "secret-sink", "partition": "p", "transactionId": "t-1",
                      "payload": {"card": "4111-plain"}});
    let r = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": "p", "push_items": [item.clone()]}),
    );
    assert_eq!(r["push_results"][0]["status"], "queued", "{r}");
    let (waited, status, body) = parked.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("4111-plain"), "decrypted on delivery: {body}");
    assert!(
        waited < Duration::from_secs(10),
        "woken by the notice, not a recheck: {waited:?}"
    );
    let stored = db.query(
        "SELECT is_encrypted, payload::text FROM queen.messages WHERE transaction_id = 't-1'",
        &[],
    );
    assert!(stored[0].get::<_, bool>(0));
    assert!(
        !stored[0].get::<_, String>(1).contains("4111"),
        "ciphertext at rest"
    );
    let dup = cycle(
        &b,
        &json!({"query_id": qid, "partition_id": "p", "push_items": [item]}),
    );
    assert_eq!(dup["push_results"][0]["status"], "duplicate", "{dup}");
    assert_eq!(sink_count(&db, "secret-sink"), 1);
}

fn hs(role: &str) -> String {
    let exp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    encode(
        &Header::default(),
        &json!({"sub": "u", "role": role, "exp": exp}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

fn call(b: &Broker, path: &str, headers: &[(&str, &str)], body: &Value) -> Resp {
    let mut h = headers.to_vec();
    h.push(("Content-Type", "application/json"));
    let bytes = body.to_string().into_bytes();
    b.conn().request("POST", path, &h, Some(&bytes)).unwrap()
}

#[test]
fn access_levels_follow_the_endpoint_index() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", SECRET)
        .start();
    let (ro, rw) = (
        format!("Bearer {}", hs("read-only")),
        format!("Bearer {}", hs("read-write")),
    );
    let reg = json!({"name": "q", "source_queue": "s", "config_hash": "h"});
    assert_eq!(call(&b, "/streams/v1/queries", &[], &reg).status, 401);
    assert_eq!(
        call(&b, "/streams/v1/queries", &[("Authorization", &ro)], &reg).status,
        403
    );
    let r = call(&b, "/streams/v1/queries", &[("Authorization", &rw)], &reg);
    assert_eq!(r.status, 200, "{}", r.text());
    let qid = r.json()["query_id"].as_str().unwrap().to_string();
    let cyc = json!({"query_id": qid, "partition_id": "p"});
    assert_eq!(
        call(&b, "/streams/v1/cycle", &[("Authorization", &ro)], &cyc).status,
        403
    );
    assert_eq!(
        call(&b, "/streams/v1/cycle", &[("Authorization", &rw)], &cyc).status,
        200
    );
    let r = call(&b, "/streams/v1/state/get", &[("Authorization", &ro)], &cyc);
    assert_eq!(r.status, 200, "READ_ONLY reads state: {}", r.text());
    assert_eq!(call(&b, "/streams/v1/state/get", &[], &cyc).status, 401);
}

#[test]
fn another_tenants_query_does_not_exist() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start();
    let reg = json!({"name": "same-name", "source_queue": "s", "config_hash": "h-a"});
    let a = call(
        &b,
        "/streams/v1/queries",
        &[("x-queen-tenant", TENANT_A)],
        &reg,
    )
    .json();
    let mut reg_b = reg.clone();
    reg_b["config_hash"] = json!("h-b");
    let r = call(
        &b,
        "/streams/v1/queries",
        &[("x-queen-tenant", TENANT_B)],
        &reg_b,
    );
    assert_eq!(r.status, 200, "a name is per tenant: {}", r.text());
    assert_ne!(r.json()["query_id"], a["query_id"]);
    let body = json!({"query_id": a["query_id"], "partition_id": "p",
                      "state_ops": [{"type": "upsert", "key": "k", "value": 1}]});
    let as_b = call(
        &b,
        "/streams/v1/cycle",
        &[("x-queen-tenant", TENANT_B)],
        &body,
    )
    .json();
    assert_eq!(as_b, json!({"success": false, "error": "Unknown query_id"}));
    let read = call(
        &b,
        "/streams/v1/state/get",
        &[("x-queen-tenant", TENANT_B)],
        &body,
    );
    assert_eq!(read.status, 400);
    let as_a = call(
        &b,
        "/streams/v1/cycle",
        &[("x-queen-tenant", TENANT_A)],
        &body,
    )
    .json();
    assert_eq!(as_a["success"], true, "{as_a}");
    assert_eq!(db.count("SELECT count(*) FROM queen_streams.state", &[]), 1);
}

#[test]
fn cycles_are_counted_and_timed_in_the_metrics() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    for _ in 0..3 {
        cycle(&b, &json!({"query_id": qid, "partition_id": "p"}));
    }
    cycle(&b, &json!({"query_id": random_uuid(), "partition_id": "p"}));
    let text = b.get("/metrics/prometheus").text();
    assert!(
        text.contains("queen_streams_cycles_total{outcome=\"applied\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("queen_streams_cycles_total{outcome=\"refused\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("queen_streams_cycle_duration_seconds_count 4\n"),
        "{text}"
    );
    let list = b.get("/streams/v1/queries").json();
    let q = &list["queries"][0];
    assert_eq!(
        (
            q["name"].clone(),
            q["cycles"].clone(),
            q["partitions"].clone()
        ),
        (json!("q"), json!(3), json!(1))
    );
    assert!(q["last_cycle_at"].is_string(), "{q}");
}

#[test]
fn sec29_a_plain_role_cannot_read_or_write_the_streams_tables() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    query_id(&b, "q");
    let role = format!("plain_{}", db.name);
    db.exec(&format!("CREATE ROLE {role} LOGIN"));
    let conn = format!(
        "host=127.0.0.1 port={} user={role} dbname={} connect_timeout=10",
        pg().port,
        db.name
    );
    let mut plain =
        postgres::Client::connect(&conn, postgres::NoTls).expect("connect as plain role");
    for t in ["queries", "state", "partitions", "quota"] {
        let e = plain
            .query(&format!("SELECT * FROM queen_streams.{t}"), &[])
            .expect_err(t);
        let why = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert!(why.contains("permission denied"), "{t}: {e:?}");
        let e = plain
            .execute(&format!("DELETE FROM queen_streams.{t}"), &[])
            .expect_err(t);
        let why = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert!(why.contains("permission denied"), "{t}: {e:?}");
    }
    drop(plain);
    // No grant to PUBLIC on the schema or any of its tables.
    let public = db.count(
        "SELECT count(*) FROM (
           SELECT (aclexplode(relacl)).grantee FROM pg_class
            WHERE relnamespace = 'queen_streams'::regnamespace AND relacl IS NOT NULL
           UNION ALL
           SELECT (aclexplode(nspacl)).grantee FROM pg_namespace
            WHERE nspname = 'queen_streams' AND nspacl IS NOT NULL) g WHERE grantee = 0",
        &[],
    );
    assert_eq!(public, 0);
    db.exec(&format!("DROP ROLE {role}"));
}

#[test]
fn release_lease_false_keeps_the_lease_and_dlq_dead_letters_the_run() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let qid = query_id(&b, "q");
    b.push_n("src", "p1", "m", 4);
    let pop = b
        .pop("/api/v1/pop/queue/src/partition/p1?batch=4&consumerGroup=g")
        .expect("a batch");
    let (lease, ms) = (pop["leaseId"].as_str().unwrap().to_string(), messages(&pop));
    let pid = ms[0]["partitionId"].as_str().unwrap().to_string();
    let ack = |txid: &str, status: &str, count: u64, release: bool| {
        cycle(
            &b,
            &json!({"query_id": qid, "partition_id": pid, "consumer_group": "g",
                    "release_lease": release,
                    "ack": {"transactionId": txid, "leaseId": lease, "status": status, "count": count}}),
        )
    };
    // A gate that allowed the first message: the cursor moves, the lease stays.
    let kept = ack("m0", "completed", 1, false);
    assert_eq!(kept["ack_result"]["lease_released"], false, "{kept}");
    assert_eq!(lease_of(&db, &pid).as_deref(), Some(lease.as_str()));
    // The next two dead-lettered as one run, the lease still kept.
    let dlq = ack("m2", "dlq", 2, false);
    assert_eq!(dlq["ack_result"]["dlq"], true, "{dlq}");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.dead_letter_queue WHERE consumer_group = 'g'",
            &[]
        ),
        2,
        "m1 and m2, not m0"
    );
    // Behind the cursor now: refused, nothing changes.
    assert_eq!(ack("m1", "completed", 1, true)["success"], false);
    let last = ack("m3", "completed", 1, true);
    assert_eq!(last["ack_result"]["lease_released"], true, "{last}");
    assert_eq!(lease_of(&db, &pid), None);
    assert_eq!(
        db.count(
            "SELECT total_messages_consumed FROM queen.partition_consumers \
             WHERE partition_id = $1::text::uuid AND consumer_group = 'g'",
            &[&pid]
        ),
        2,
        "m0 and m3 consumed, m1 and m2 dead-lettered"
    );
}
