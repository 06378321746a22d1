//! Group commit in the KV pool (`src/store/kv_group.rs`): calls queued
//! together share one commit, each under its own savepoint. A failed call
//! (a required precondition, an error mid-call) applies nothing and its
//! group-mates still apply; a 503 still means "not applied"; nothing hangs.
//! A KV pool of 1 or 2 connections under 40-50 concurrent clients makes the
//! calls queue, so they group (`queen_kv_grouped_calls_total` says so).
//! Real PostgreSQL, real brokers.
mod common;

use common::*;
use std::time::{Duration, Instant};

fn kv(c: &mut Conn, ops: Value) -> Resp {
    c.post_json("/api/v1/kv", &json!({ "operations": ops }))
        .unwrap()
}

fn get(b: &Broker, ns: &str, key: &str) -> Value {
    let r = b.post_json(
        "/api/v1/kv",
        &json!({"operations": [{"op": "get", "ns": ns, "key": key}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["results"][0].clone()
}

/// `queen_kv_grouped_calls_total` on `b`.
fn grouped(b: &Broker) -> f64 {
    let prom = b.get("/metrics/prometheus").text();
    prom.lines()
        .find_map(|l| l.strip_prefix("queen_kv_grouped_calls_total "))
        .unwrap_or_else(|| panic!("no queen_kv_grouped_calls_total in the scrape"))
        .trim()
        .parse()
        .unwrap()
}

/// Sends `ops` until it is not a 503 (a 503 is "not applied": retrying is
/// the contract), at most 200 times; the final answer.
fn until_served(c: &mut Conn, ops: &Value) -> Resp {
    for _ in 0..200 {
        let r = kv(c, ops.clone());
        if r.status != 503 {
            return r;
        }
        assert_eq!(r.json()["error"], "kv_unavailable", "{}", r.text());
    }
    panic!("503 two hundred times in a row");
}

#[test]
fn failing_required_calls_grouped_with_good_ones_apply_nothing_and_the_good_apply_once() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("QUEEN_KV_POOL_SIZE", "1").start();
    let mut c = b.conn();
    assert_eq!(
        kv(
            &mut c,
            json!([{"op": "put", "ns": "g", "key": "sentinel", "value": 1, "forever": true}])
        )
        .status,
        200
    );
    const THREADS: usize = 40;
    const CALLS: usize = 25;
    let before = grouped(&b);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let b = &b;
            s.spawn(move || {
                let mut c = b.conn();
                for n in 0..CALLS {
                    if n % 3 == 1 {
                        // writes two keys, then loses its required precondition:
                        // none of it may stay
                        let r = until_served(
                            &mut c,
                            &json!([
                                {"op": "incr", "ns": "g", "key": format!("bad/{t}"), "delta": 1, "forever": true},
                                {"op": "put", "ns": "g", "key": format!("badput/{t}/{n}"), "value": n, "forever": true},
                                {"op": "putIfAbsent", "ns": "g", "key": "sentinel", "value": 2, "forever": true, "required": true}
                            ]),
                        );
                        assert_eq!(r.status, 200, "{}", r.text());
                        let j = r.json();
                        assert_eq!(j["ok"], false, "{j}");
                        assert_eq!(j["reason"], "kv_precondition", "{j}");
                        assert_eq!(j["failedIndex"], 2, "{j}");
                    } else {
                        let r = until_served(
                            &mut c,
                            &json!([
                                {"op": "incr", "ns": "g", "key": format!("good/{t}"), "delta": 1, "forever": true},
                                {"op": "put", "ns": "g", "key": format!("p/{t}/{n}"), "value": n, "forever": true},
                                {"op": "incr", "ns": "g", "key": "total", "delta": 1, "forever": true}
                            ]),
                        );
                        assert_eq!(r.status, 200, "{}", r.text());
                        let j = r.json();
                        assert_eq!(j["results"][0]["applied"], true, "{j}");
                        assert_eq!(j["results"][2]["applied"], true, "{j}");
                    }
                }
            });
        }
    });
    let good_per_thread = (0..CALLS).filter(|n| n % 3 != 1).count();
    for t in 0..THREADS {
        assert_eq!(
            get(&b, "g", &format!("good/{t}"))["value"],
            good_per_thread,
            "thread {t}"
        );
        let bad = get(&b, "g", &format!("bad/{t}"));
        assert_eq!(bad["found"], false, "thread {t}: {bad}");
    }
    assert_eq!(
        get(&b, "g", "total")["value"],
        THREADS * good_per_thread,
        "every good call applied exactly once"
    );
    assert_eq!(get(&b, "g", "sentinel")["value"], 1);
    let r = b.post_json(
        "/api/v1/kv",
        &json!({"operations": [
            {"op": "getPrefix", "ns": "g", "prefix": "p/", "limit": 1000},
            {"op": "getPrefix", "ns": "g", "prefix": "badput/", "limit": 1000}
        ]}),
    );
    let j = r.json();
    assert_eq!(
        j["results"][0]["rows"].as_array().unwrap().len(),
        THREADS * good_per_thread,
        "{}",
        j["results"][0]["truncated"]
    );
    assert_eq!(j["results"][1]["rows"], json!([]));
    assert!(
        grouped(&b) > before,
        "40 clients on one KV connection: some calls shared a commit"
    );
}

#[test]
fn a_thousand_concurrent_incr_on_a_two_connection_pool_count_exactly_when_grouped() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("QUEEN_KV_POOL_SIZE", "2").start();
    std::thread::scope(|s| {
        for t in 0..50 {
            let b = &b;
            s.spawn(move || {
                let mut c = b.conn();
                // first writes differ (so the calls group), the hot key rides in each
                let op = json!([
                    {"op": "incr", "ns": "ctr", "key": format!("mine/{t}"), "delta": 1, "forever": true},
                    {"op": "incr", "ns": "ctr", "key": "hits", "delta": 1, "forever": true}
                ]);
                for _ in 0..20 {
                    let r = until_served(&mut c, &op);
                    assert_eq!(r.status, 200, "{}", r.text());
                    assert_eq!(r.json()["results"][1]["applied"], true);
                }
            });
        }
    });
    assert_eq!(get(&b, "ctr", "hits")["value"], 1000);
    for t in 0..50 {
        assert_eq!(get(&b, "ctr", &format!("mine/{t}"))["value"], 20);
    }
    assert!(grouped(&b) > 0.0, "50 clients on two connections grouped");
}

#[test]
fn a_call_failing_mid_group_rolls_back_to_its_savepoint_and_its_group_mates_apply() {
    let db = Db::fresh();
    // A row lock held from outside makes a call fail inside its savepoint
    // (lock timeout) while calls queued beside it share its group.
    let b = Broker::builder(&db)
        .env("QUEEN_KV_POOL_SIZE", "1")
        .env("DB_LOCK_TIMEOUT", "300")
        .start();
    let mut c = b.conn();
    kv(
        &mut c,
        json!([{"op": "put", "ns": "m", "key": "held", "value": 0, "forever": true}]),
    );
    let mut holder = db.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute(
        "SELECT 1 FROM queen.kv WHERE namespace = 'm' AND key = 'held' FOR UPDATE",
        &[],
    )
    .unwrap();
    const THREADS: usize = 12;
    let failed = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let b = &b;
                s.spawn(move || {
                    let mut c = b.conn();
                    let mut failed = 0;
                    for n in 0..4 {
                        if t % 4 == 0 && n == 0 {
                            // writes its own key, then waits on the held row
                            let r = until_served(
                                &mut c,
                                &json!([
                                    {"op": "put", "ns": "m", "key": format!("partial/{t}"), "value": 1, "forever": true},
                                    {"op": "incr", "ns": "m", "key": "held", "delta": 1, "forever": true}
                                ]),
                            );
                            assert_eq!(r.status, 500, "{}", r.text());
                            let j = r.json();
                            assert_eq!(j["error"], "kv_error", "{j}");
                            assert!(
                                !j["detail"].as_str().unwrap().contains("lock"),
                                "no database text reaches a client: {j}"
                            );
                            failed += 1;
                        } else {
                            let r = until_served(
                                &mut c,
                                &json!([
                                    {"op": "incr", "ns": "m", "key": format!("ok/{t}"), "delta": 1, "forever": true}
                                ]),
                            );
                            assert_eq!(r.status, 200, "{}", r.text());
                        }
                    }
                    failed
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
    });
    tx.rollback().unwrap();
    assert_eq!(failed, THREADS / 4);
    for t in 0..THREADS {
        let want = if t % 4 == 0 { 3 } else { 4 };
        assert_eq!(
            get(&b, "m", &format!("ok/{t}"))["value"],
            want,
            "thread {t}"
        );
        assert_eq!(
            get(&b, "m", &format!("partial/{t}"))["found"],
            false,
            "thread {t}: the failed call's first op rolled back with it"
        );
    }
    assert_eq!(get(&b, "m", "held")["value"], 0);
}

#[test]
fn a_one_connection_pool_answers_503_while_a_group_waits_on_a_lock_and_503_applied_nothing() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("QUEEN_KV_POOL_SIZE", "1").start();
    let mut c = b.conn();
    kv(
        &mut c,
        json!([{"op": "put", "ns": "p", "key": "hot", "value": 0, "forever": true}]),
    );
    let mut holder = db.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT 1 FROM queen.kv WHERE key = 'hot' FOR UPDATE", &[])
        .unwrap();
    let op = json!([{"op": "incr", "ns": "p", "key": "hot", "delta": 1, "forever": true}]);
    let (ok, busy) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let (b, op) = (&b, &op);
                s.spawn(move || {
                    let mut c = b.conn();
                    let t = Instant::now();
                    let r = kv(&mut c, op.clone());
                    (r.status, t.elapsed())
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1300));
        // The one connection is stuck in a group on the held row; a call
        // queued behind it is abandoned after the patience and told to retry.
        let t = Instant::now();
        let r = b.post_json(
            "/api/v1/kv",
            &json!([{"op": "get", "ns": "p", "key": "other"}]),
        );
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.json()["error"], "kv_unavailable");
        assert!(r.header("retry-after").is_some());
        assert!(t.elapsed() < Duration::from_secs(5), "no hang");
        tx.rollback().unwrap();
        let mut ok = 0;
        let mut busy = 0;
        for h in hs {
            let (status, took) = h.join().unwrap();
            assert!(took < Duration::from_secs(8), "no hang: {took:?}");
            match status {
                200 => ok += 1,
                503 => busy += 1,
                s => panic!("status {s}"),
            }
        }
        (ok, busy)
    });
    assert!(ok >= 1, "the call holding the connection was waited for");
    assert_eq!(ok + busy, 16);
    assert_eq!(
        get(&b, "p", "hot")["value"],
        ok,
        "each 200 applied once, each 503 applied nothing"
    );
}
