//! The key/value store (http-api.md §15, semantics.md §20): one transaction
//! per call, versions, preconditions, TTL, limits, tenancy, the kill switch
//! and KV riders of `POST /api/v1/transaction`. Real PostgreSQL, real brokers.
mod common;

use common::*;
use std::time::{Duration, Instant};

const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

fn kv(b: &Broker, ops: Value) -> Value {
    let r = b.post_json("/api/v1/kv", &json!({ "operations": ops }));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn one(b: &Broker, op: Value) -> Value {
    kv(b, json!([op]))["results"][0].clone()
}

fn rows(db: &Db) -> i64 {
    db.count("SELECT count(*)::bigint FROM queen.kv", &[])
}

fn as_tenant(b: &Broker, tenant: &str, path: &str, body: &Value) -> Resp {
    let mut c = b.conn();
    let body = body.to_string().into_bytes();
    c.request(
        "POST",
        path,
        &[
            ("x-queen-tenant", tenant),
            ("Content-Type", "application/json"),
        ],
        Some(&body),
    )
    .unwrap()
}

#[test]
fn ops_apply_in_order_with_versions_and_index_aligned_results() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let j = kv(
        &b,
        json!([
            {"op": "put", "ns": "app", "key": "a/1", "value": {"n": 1}, "forever": true},
            {"op": "get", "ns": "app", "key": "a/1"},
            {"op": "putIfAbsent", "ns": "app", "key": "a/2", "value": 2, "ttlSeconds": 60},
            {"op": "incr", "ns": "app", "key": "c", "delta": 5, "forever": true},
            {"op": "getMany", "ns": "app", "keys": ["a/1", "zz", "a/2"]},
            {"op": "getPrefix", "ns": "app", "prefix": "a/", "limit": 1},
            {"op": "delete", "ns": "app", "key": "missing"}
        ]),
    );
    let r = j["results"].as_array().unwrap();
    assert_eq!(r.len(), 7, "{j}");
    for (i, x) in r.iter().enumerate() {
        assert_eq!(x["index"], i, "{x}");
    }
    assert_eq!(r[0]["applied"], true);
    let v1 = r[0]["version"].as_i64().unwrap();
    assert_eq!(r[1]["found"], true);
    assert_eq!(r[1]["value"], json!({"n": 1}));
    assert_eq!(r[1]["version"], v1);
    assert!(r[1]["expiresAt"].is_null());
    assert!(r[2]["version"].as_i64().unwrap() > v1);
    assert_eq!(r[3]["value"], 5);
    assert_eq!(r[4]["missing"], json!(["zz"]));
    assert_eq!(r[4]["rows"].as_array().unwrap().len(), 2);
    assert_eq!(r[5]["rows"][0]["key"], "a/1");
    assert_eq!(r[5]["truncated"], true);
    assert_eq!(r[5]["nextAfter"], "a/1");
    assert_eq!(r[6]["applied"], false);
    assert_eq!(r[6]["reason"], "absent");

    // single-key routes, ETag = version
    let g = b.get("/api/v1/kv/app/a/1");
    assert_eq!(g.status, 200, "{}", g.text());
    assert_eq!(g.header("etag"), Some(format!("\"{v1}\"").as_str()));
    let p = b.request(
        "PUT",
        "/api/v1/kv/app/x%2Fy",
        Some(br#"{"value": [1], "ttlSeconds": 30}"#),
    );
    assert_eq!(p.status, 200, "{}", p.text());
    assert_eq!(p.json()["applied"], true);
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "app", "key": "x/y"}))["value"],
        json!([1])
    );
    assert_eq!(b.delete("/api/v1/kv/app/x/y").json()["applied"], true);
    assert_eq!(b.get("/api/v1/kv/app/x/y").json()["found"], false);
    let q = b.get("/api/v1/kv/app/a/1?x=1");
    assert_eq!(q.status, 400);
    assert_eq!(q.json()["reason"], "kv_no_query_string");

    // queen_kv_ops_total{op}: this broker's ops, the batch and single-key routes
    let prom = b.get("/metrics/prometheus").text();
    let count = |op: &str| -> f64 {
        let head = format!("queen_kv_ops_total{{op=\"{op}\"}} ");
        prom.lines()
            .find_map(|l| l.strip_prefix(head.as_str()))
            .unwrap_or_else(|| panic!("no {head} in the scrape"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(count("put") >= 2.0, "put: {}", count("put"));
    assert!(count("get") >= 3.0);
    assert_eq!(count("getPrefix"), 1.0);

    // dashboard browser
    let ns = b.get("/api/v1/resources/kv/namespaces").json();
    assert_eq!(ns["namespaces"][0]["namespace"], "app", "{ns}");
    assert_eq!(ns["namespaces"][0]["rows"], 3, "{ns}");
}

#[test]
fn a_thousand_concurrent_incr_from_fifty_connections_count_exactly() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    std::thread::scope(|s| {
        for _ in 0..50 {
            s.spawn(|| {
                let mut c = b.conn();
                let body = json!({"operations": [
                    {"op": "incr", "ns": "ctr", "key": "hits", "delta": 1, "forever": true}
                ]})
                .to_string();
                let (mut done, mut busy) = (0, 0);
                while done < 20 {
                    let r = c
                        .post_json("/api/v1/kv", &serde_json::from_str(&body).unwrap())
                        .unwrap();
                    if r.status == 503 && busy < 200 {
                        busy += 1; // a full KV pool says so (nothing applied); retry
                        continue;
                    }
                    assert_eq!(r.status, 200, "{}", r.text());
                    assert_eq!(r.json()["results"][0]["applied"], true);
                    done += 1;
                }
            });
        }
    });
    let v = one(&b, json!({"op": "get", "ns": "ctr", "key": "hits"}));
    assert_eq!(v["value"], 1000, "{v}");
}

#[test]
fn stale_version_is_refused_and_required_failure_applies_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let v1 = one(
        &b,
        json!({"op": "put", "ns": "c", "key": "k", "value": 1, "forever": true}),
    )["version"]
        .clone();
    let v2 = one(
        &b,
        json!({"op": "put", "ns": "c", "key": "k", "value": 2, "forever": true, "expect": v1}),
    )["version"]
        .clone();
    let stale = one(
        &b,
        json!({"op": "put", "ns": "c", "key": "k", "value": 3, "forever": true, "expect": v1}),
    );
    assert_eq!(stale["applied"], false, "{stale}");
    assert_eq!(stale["reason"], "version");
    assert_eq!(stale["version"], v2);
    assert_eq!(stale["value"], 2);
    let exists = one(
        &b,
        json!({"op": "putIfAbsent", "ns": "c", "key": "k", "value": 9, "forever": true}),
    );
    assert_eq!(exists["reason"], "exists");

    let before = rows(&db);
    let j = kv(
        &b,
        json!([
            {"op": "put", "ns": "c", "key": "new", "value": 1, "forever": true},
            {"op": "incr", "ns": "c", "key": "n", "delta": 1, "forever": true},
            {"op": "put", "ns": "c", "key": "k", "value": 4, "forever": true, "expect": v1, "required": true}
        ]),
    );
    assert_eq!(j["ok"], false, "{j}");
    assert_eq!(j["reason"], "kv_precondition");
    assert_eq!(j["failedIndex"], 2);
    assert_eq!(j["kvReason"], "version");
    assert_eq!(j["version"], v2);
    assert_eq!(rows(&db), before, "nothing of the call applied");
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "c", "key": "k"}))["value"],
        2
    );
}

#[test]
fn a_key_with_a_one_second_ttl_is_gone_after_two_seconds_before_any_sweep() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    one(
        &b,
        json!({"op": "put", "ns": "t", "key": "k", "value": 1, "ttlSeconds": 1}),
    );
    one(
        &b,
        json!({"op": "incr", "ns": "t", "key": "n", "delta": 7, "ttlSeconds": 1}),
    );
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "t", "key": "k"}))["found"],
        true
    );
    std::thread::sleep(Duration::from_secs(2));
    // the rows are still there (no sweep yet) but invisible and absent
    assert_eq!(rows(&db), 2);
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "t", "key": "k"}))["found"],
        false
    );
    let p = one(&b, json!({"op": "getPrefix", "ns": "t", "prefix": "k"}));
    assert_eq!(p["rows"], json!([]));
    let again = one(
        &b,
        json!({"op": "putIfAbsent", "ns": "t", "key": "k", "value": 2, "forever": true}),
    );
    assert_eq!(
        again["applied"], true,
        "an expired key does not exist: {again}"
    );
    // incr on an expired counter starts from zero
    assert_eq!(
        one(
            &b,
            json!({"op": "incr", "ns": "t", "key": "n", "delta": 1, "forever": true})
        )["value"],
        1
    );
    assert_eq!(b.get("/api/v1/kv/t/k").json()["value"], 2);
}

#[test]
fn every_limit_and_refused_field_answers_its_code_and_writes_nothing() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_KV_MAX_KEYS_PER_CALL", "4")
        .start();
    let put = |extra: Value| {
        let mut o = json!({"op": "put", "ns": "a", "key": "k", "value": 1});
        o.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        o
    };
    let big = "x".repeat(70_000);
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            json!([{"op": "put", "ns": "Bad", "key": "k", "value": 1, "forever": true}]),
            400,
            "kv_bad_namespace",
        ),
        (json!([put(json!({}))]), 400, "kv_expiry_not_specified"),
        (json!([put(json!({"ttlSeconds": -1}))]), 400, "kv_bad_ttl"),
        (
            json!([{"op": "getPrefix", "ns": "a", "prefix": ""}]),
            400,
            "kv_prefix_required",
        ),
        (
            json!([put(json!({"forever": true})), put(json!({"forever": true}))]),
            400,
            "kv_duplicate_key_in_call",
        ),
        (
            json!([put(json!({"forever": true, "tenant": TENANT_B}))]),
            400,
            "kv_tenant_not_an_input",
        ),
        (
            json!([put(json!({"forever": true, "expect": "1"}))]),
            400,
            "kv_bad_expect",
        ),
        (
            json!([{"op": "frob", "ns": "a", "key": "k"}]),
            400,
            "kv_unknown_op",
        ),
        (
            json!([{"op": "getMany", "ns": "a", "keys": ["1", "2", "3", "4", "5"]}]),
            400,
            "kv_too_many_keys",
        ),
        (
            json!([put(json!({"forever": true, "key": "k".repeat(513)}))]),
            400,
            "kv_bad_key",
        ),
        (
            json!([put(json!({"forever": true, "value": big}))]),
            413,
            "kv_value_too_large",
        ),
    ];
    for (ops, status, reason) in cases {
        let r = b.post_json("/api/v1/kv", &json!({ "operations": ops }));
        assert_eq!(r.status, status, "{reason}: {}", r.text());
        let j = r.json();
        assert_eq!(j["reason"], reason, "{j}");
        assert!(j["error"].is_string() && j["detail"].is_string(), "{j}");
    }
    let many: Vec<Value> = (0..257)
        .map(|i| json!({"op": "get", "ns": "a", "key": i.to_string()}))
        .collect();
    let r = b.post_json("/api/v1/kv", &json!({ "operations": many }));
    assert_eq!(r.json()["reason"], "kv_too_many_ops");
    let r = b.post_json("/api/v1/kv", &json!({"tenant": TENANT_B, "operations": []}));
    assert_eq!(r.json()["reason"], "kv_tenant_not_an_input");
    let r = b.post_json(
        "/api/v1/transaction",
        &json!({"operations": [], "kv": [{"op": "getPrefix", "ns": "a", "prefix": "p"}]}),
    );
    assert_eq!(
        r.json()["reason"],
        "kv_get_prefix_not_allowed_in_transaction",
        "{}",
        r.text()
    );
    let r = b.request(
        "PUT",
        "/api/v1/kv/a/k",
        Some(br#"{"ns": "b", "value": 1, "forever": true}"#),
    );
    assert_eq!(r.status, 400);
    assert_eq!(rows(&db), 0);
}

#[test]
fn tenants_cannot_read_write_or_list_each_others_keys() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start();
    let put = json!({"operations": [{"op": "put", "ns": "s", "key": "secret", "value": "a", "forever": true}]});
    assert_eq!(
        as_tenant(&b, TENANT_A, "/api/v1/kv", &put).json()["results"][0]["applied"],
        true
    );
    let get = json!({"operations": [
        {"op": "get", "ns": "s", "key": "secret"},
        {"op": "getPrefix", "ns": "s", "prefix": "se"},
        {"op": "delete", "ns": "s", "key": "secret", "expect": 999999}
    ]});
    let r = as_tenant(&b, TENANT_B, "/api/v1/kv", &get).json();
    assert_eq!(r["results"][0]["found"], false, "{r}");
    assert_eq!(r["results"][1]["rows"], json!([]), "{r}");
    assert_eq!(r["results"][2]["reason"], "absent", "{r}");
    // B writes its own key of the same name; A's is untouched
    let putb = json!({"operations": [{"op": "put", "ns": "s", "key": "secret", "value": "b", "forever": true}]});
    let rb = as_tenant(&b, TENANT_B, "/api/v1/kv", &putb).json();
    assert_eq!(rb["results"][0]["applied"], true, "{rb}");
    let ra = as_tenant(&b, TENANT_A, "/api/v1/kv", &get).json();
    assert_eq!(ra["results"][0]["value"], "a", "{ra}");
    let mut c = b.conn();
    let ns = c
        .request(
            "GET",
            "/api/v1/resources/kv/namespaces",
            &[("x-queen-tenant", TENANT_B)],
            None,
        )
        .unwrap()
        .json();
    assert_eq!(ns["namespaces"][0]["rows"], 1, "{ns}");
    let all: Vec<String> = db
        .query(
            "SELECT tenant_id::text || ' ' || namespace || ' ' || key FROM queen.kv",
            &[],
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(all.len(), 2, "{all:?}");
}

#[test]
fn kill_switch_answers_503_on_both_brokers_and_on_again_works() {
    let db = Db::fresh();
    let a = Broker::start(&db);
    let b = Broker::start(&db);
    let op =
        json!({"operations": [{"op": "put", "ns": "k", "key": "x", "value": 1, "forever": true}]});
    assert_eq!(a.post_json("/api/v1/kv", &op).status, 200);
    a.post_json("/api/v1/system/kv-timers", &json!({"kvEnabled": false}));
    let off = Instant::now();
    let r = a.post_json("/api/v1/kv", &op);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"], "kv_unavailable");
    assert!(r.header("retry-after").is_some());
    check_for(Duration::from_secs(1), || {
        (0..4)
            .all(|_| b.post_json("/api/v1/kv", &op).status == 503)
            .then_some(())
    });
    assert!(off.elapsed() < Duration::from_millis(1500));
    assert_eq!(b.get("/api/v1/kv/k/x").status, 503);
    // the KV riders of a transaction and the locks are off too
    let t = b.post_json(
        "/api/v1/transaction",
        &json!({"operations": [], "kv": [{"op": "get", "ns": "k", "key": "x"}]}),
    );
    assert_eq!(t.status, 503, "{}", t.text());
    let l = b.post_json("/api/v1/locks", &json!([{"op": "get", "name": "x"}]));
    assert_eq!(l.json()["error"], "kv_unavailable");
    b.post_json("/api/v1/system/kv-timers", &json!({"kvEnabled": true}));
    check_for(Duration::from_secs(1), || {
        (0..4)
            .all(|_| a.post_json("/api/v1/kv", &op).status == 200)
            .then_some(())
    });
    assert_eq!(b.post_json("/api/v1/kv", &op).status, 200);
}

fn leased_one(b: &Broker, q: &str) -> (String, String, String) {
    b.push_n(q, "p", "in", 1);
    let pop = b
        .pop(&format!("/api/v1/pop/queue/{q}?batch=1"))
        .expect("message");
    let m = &messages(&pop)[0];
    (
        m["transactionId"].as_str().unwrap().to_string(),
        m["partitionId"].as_str().unwrap().to_string(),
        pop["leaseId"].as_str().unwrap().to_string(),
    )
}

#[test]
fn kv_and_ack_in_one_transaction_commit_or_roll_back_together() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let (tx, pid, lease) = leased_one(&b, "kq");
    let ack =
        json!({"type": "ack", "transactionId": tx, "partitionId": pid, "status": "completed"});
    // The KV rider's required precondition fails: the ack rolls back too.
    one(
        &b,
        json!({"op": "put", "ns": "st", "key": "seen", "value": 1, "forever": true}),
    );
    let j = b
        .post_json(
            "/api/v1/transaction",
            &json!({"operations": [ack], "requiredLeases": [lease],
                    "kv": [{"op": "incr", "ns": "st", "key": "count", "delta": 1, "forever": true},
                           {"op": "putIfAbsent", "ns": "st", "key": "seen", "value": 2, "forever": true, "required": true}]}),
        )
        .json();
    assert_eq!(j["success"], false, "{j}");
    assert_eq!(j["reason"], "kv_precondition");
    assert_eq!(j["kvReason"], "exists");
    assert_eq!(j["failedIndex"], 2, "indices run after the operations: {j}");
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "st", "key": "count"}))["found"],
        false
    );
    let pending = db.count(
        "SELECT count(*)::bigint FROM queen.partition_consumers WHERE worker_id IS NOT NULL AND lease_expires_at > now()",
        &[],
    );
    assert_eq!(pending, 1, "the ack rolled back: the lease is still held");

    // Both parts hold: they commit together.
    let j = b
        .post_json(
            "/api/v1/transaction",
            &json!({"operations": [ack], "requiredLeases": [lease],
                    "kv": [{"op": "incr", "ns": "st", "key": "count", "delta": 1, "forever": true}]}),
        )
        .json();
    assert_eq!(j["success"], true, "{j}");
    assert_eq!(j["results"][1]["op"], "incr");
    assert_eq!(j["results"][1]["index"], 1);
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "st", "key": "count"}))["value"],
        1
    );
    assert!(b.pop("/api/v1/pop/queue/kq?batch=1").is_none(), "acked");

    // The ack fails (its lease is gone): the KV write rolls back.
    let j = b
        .post_json(
            "/api/v1/transaction",
            &json!({"operations": [ack], "requiredLeases": [lease],
                    "kv": [{"op": "incr", "ns": "st", "key": "count", "delta": 1, "forever": true}]}),
        )
        .json();
    assert_eq!(j["success"], false, "{j}");
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "st", "key": "count"}))["value"],
        1
    );
}

#[test]
fn a_full_kv_pool_answers_503_at_once_and_queues_still_work() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("QUEEN_KV_POOL_SIZE", "1").start();
    one(
        &b,
        json!({"op": "put", "ns": "p", "key": "hot", "value": 0, "forever": true}),
    );
    // Hold the key's row from outside: the one KV connection blocks on it.
    let mut holder = db.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT 1 FROM queen.kv WHERE key = 'hot' FOR UPDATE", &[])
        .unwrap();
    std::thread::scope(|s| {
        let stuck = s.spawn(|| {
            b.post_json(
                "/api/v1/kv",
                &json!([{"op": "incr", "ns": "p", "key": "hot", "delta": 1, "forever": true}]),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        // The next call waits for the busy connection, then is told to retry.
        let t = Instant::now();
        let r = b.post_json(
            "/api/v1/kv",
            &json!([{"op": "get", "ns": "p", "key": "other"}]),
        );
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.json()["error"], "kv_unavailable");
        assert!(r.header("retry-after").is_some());
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no hang: {:?}",
            t.elapsed()
        );
        // The queues have their own connections.
        assert_eq!(b.push_n("q", "p", "m", 1)[0]["status"], "queued");
        tx.rollback().unwrap();
        assert_eq!(stuck.join().unwrap().status, 200);
    });
    assert_eq!(
        one(&b, json!({"op": "get", "ns": "p", "key": "hot"}))["value"],
        1
    );
}

#[test]
fn the_sweep_deletes_expired_keys_and_keeps_live_ones() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let mut ops: Vec<Value> = (0..20)
        .map(|i| json!({"op": "put", "ns": "sw", "key": format!("old/{i}"), "value": i, "ttlSeconds": 1}))
        .collect();
    ops.push(json!({"op": "put", "ns": "sw", "key": "live", "value": 1, "ttlSeconds": 3600}));
    ops.push(json!({"op": "put", "ns": "sw", "key": "forever", "value": 1, "forever": true}));
    kv(&b, Value::Array(ops));
    assert_eq!(rows(&db), 22);
    // The sweep runs every 10 s (jobs::kv_sweep::SWEEP_EVERY_MS) on shard 0.
    check_for(Duration::from_secs(25), || (rows(&db) == 2).then_some(()));
    let left: Vec<String> = db
        .query("SELECT key FROM queen.kv ORDER BY key", &[])
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(left, vec!["forever", "live"]);
}
