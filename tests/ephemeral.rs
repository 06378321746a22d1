//! Ephemeral (RAM-only) queues, http-api.md §18, on real brokers: order per
//! partition, exactly-once counting across shards, lease expiry, bounds and
//! their codes, the broker RAM ceiling, consumer groups, long polls woken by
//! pushes, forwarding between two meshed brokers, and contents surviving
//! nothing while declarations survive a restart.
mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const PUSH: &str = "/api/v1/ephemeral/push";
const ACK: &str = "/api/v1/ephemeral/ack";
const CONFIGURE: &str = "/api/v1/ephemeral/configure";

fn configure(b: &Broker, queue: &str, options: Value) -> Resp {
    b.post_json(CONFIGURE, &json!({"queue": queue, "options": options}))
}

fn push(b: &Broker, queue: &str, partition: Option<&str>, payloads: Vec<Value>) -> Resp {
    let messages: Vec<Value> = payloads
        .into_iter()
        .map(|p| json!({ "payload": p }))
        .collect();
    let mut body = json!({"queue": queue, "messages": messages});
    if let Some(p) = partition {
        body["partition"] = json!(p);
    }
    b.post_json(PUSH, &body)
}

fn pop(b: &Broker, query: &str) -> Vec<Value> {
    let r = b.get(&format!("/api/v1/ephemeral/pop?{query}"));
    assert_eq!(r.status, 200, "pop {query}: {}", r.text());
    messages(&r.json())
}

fn ack(b: &Broker, queue: &str, group: Option<&str>, acks: Vec<Value>) -> Vec<String> {
    let mut body = json!({"queue": queue, "acks": acks});
    if let Some(g) = group {
        body["group"] = json!(g);
    }
    let r = b.post_json(ACK, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["outcome"].as_str().unwrap().to_string())
        .collect()
}

fn code(r: &Resp) -> String {
    r.json()["code"].as_str().unwrap_or("").to_string()
}

fn depth(b: &Broker, queue: &str) -> Value {
    let r = b.get(&format!("/api/v1/ephemeral/queues/{queue}/depth"));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// N messages over 8 partitions, drained by pops over all partitions (both
/// shards): exactly N out, none twice, each partition in push order.
#[test]
fn count_and_order_per_partition() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    const N: usize = 4000;
    for chunk in 0..(N / 100) {
        let p = format!("p{}", chunk % 8);
        let payloads = (0..100)
            .map(|i| json!({"p": p, "n": chunk * 100 + i}))
            .collect();
        let r = push(&b, "orders", Some(&p), payloads);
        assert_eq!(r.status, 201, "{}", r.text());
        assert_eq!(r.json()["pushed"], 100);
    }
    assert_eq!(depth(&b, "orders")["pending"], N as u64);
    let mut seen = HashSet::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < N && Instant::now() < deadline {
        let msgs = pop(&b, "queue=orders&batch=100");
        let acks: Vec<Value> = msgs.iter().map(|m| json!({"id": m["id"]})).collect();
        for m in &msgs {
            let (p, n) = (
                m["payload"]["p"].as_str().unwrap(),
                m["payload"]["n"].as_i64().unwrap(),
            );
            assert_eq!(m["partition"], p);
            assert_eq!(m["attempts"], 1);
            assert!(seen.insert(n), "message {n} delivered twice");
            let prev = last.insert(p.to_string(), n).unwrap_or(-1);
            assert!(n > prev, "partition {p}: {n} after {prev}");
        }
        if !acks.is_empty() {
            assert!(ack(&b, "orders", None, acks).iter().all(|o| o == "acked"));
        }
    }
    assert_eq!(seen.len(), N);
    assert!(pop(&b, "queue=orders&batch=100").is_empty());
    assert_eq!(depth(&b, "orders")["pending"], 0);
}

/// An unacked delivery comes back after its lease with attempts + 1; the
/// first holder's ack is then stale, and the retry limit drops it.
#[test]
fn lease_expiry_redelivers() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = configure(&b, "jobs", json!({"leaseSeconds": 1, "retryLimit": 2}));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["options"]["leaseSeconds"], 1);
    assert_eq!(push(&b, "jobs", None, vec![json!("work")]).status, 201);
    let first = pop(&b, "queue=jobs&partition=Default");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["partition"], "Default");
    assert!(pop(&b, "queue=jobs&partition=Default").is_empty());
    // Long poll: woken by the sweep when the lease comes due.
    let t0 = Instant::now();
    let again = pop(&b, "queue=jobs&partition=Default&wait=true&timeout=5000");
    assert_eq!(again.len(), 1, "redelivered within the wait");
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(again[0]["attempts"], 2);
    assert_eq!(again[0]["payload"], "work");
    assert_ne!(again[0]["id"], first[0]["id"]);
    let out = ack(
        &b,
        "jobs",
        None,
        vec![json!({"id": first[0]["id"]}), json!({"id": "junk"})],
    );
    assert_eq!(out, ["stale", "unknown"]);
    // Failing the last allowed attempt drops it and counts it.
    let out = ack(
        &b,
        "jobs",
        None,
        vec![json!({"id": again[0]["id"], "status": "failed"})],
    );
    assert_eq!(out, ["acked"]);
    assert!(pop(&b, "queue=jobs").is_empty());
    let list = b.get("/api/v1/ephemeral/queues").json();
    let q = &list["queues"][0];
    assert_eq!(
        (q["queue"].as_str(), q["tier"].as_str()),
        (Some("jobs"), Some("declared"))
    );
    assert_eq!(q["drops"]["retry"], 1);
}

/// A failed ack redelivers at once, ahead of newer messages.
#[test]
fn failed_ack_redelivers_first() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    push(&b, "retry", None, vec![json!(1), json!(2)]);
    let m = pop(&b, "queue=retry");
    assert_eq!(m[0]["payload"], 1);
    let out = ack(
        &b,
        "retry",
        None,
        vec![json!({"id": m[0]["id"], "status": "retry"})],
    );
    assert_eq!(out, ["redelivered"]);
    let m = pop(&b, "queue=retry&batch=5&autoAck=true");
    let got: Vec<(i64, i64)> = m
        .iter()
        .map(|x| {
            (
                x["payload"].as_i64().unwrap(),
                x["attempts"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(1, 2), (2, 1)]);
}

/// `dropOldest` keeps the newest `maxLength` messages and counts the drops.
#[test]
fn drop_oldest_keeps_the_newest() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = configure(&b, "feed", json!({"maxLength": 5, "policy": "dropOldest"}));
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        push(&b, "feed", None, (0..4).map(|i| json!(i)).collect()).status,
        201
    );
    assert_eq!(
        push(&b, "feed", None, (4..12).map(|i| json!(i)).collect()).status,
        201
    );
    let got: Vec<i64> = pop(&b, "queue=feed&batch=100&autoAck=true")
        .iter()
        .map(|m| m["payload"].as_i64().unwrap())
        .collect();
    assert_eq!(got, [7, 8, 9, 10, 11]);
    let list = b.get("/api/v1/ephemeral/queues").json();
    assert_eq!(list["queues"][0]["drops"]["bounds"], 7);
}

/// `ttlSeconds` drops what is older, delivered or not, and counts it.
#[test]
fn ttl_drops_old_messages() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    assert_eq!(configure(&b, "short", json!({"ttlSeconds": 1})).status, 201);
    assert_eq!(push(&b, "short", None, vec![json!("old")]).status, 201);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(push(&b, "short", None, vec![json!("new")]).status, 201);
    let got: Vec<Value> = pop(&b, "queue=short&batch=10&autoAck=true")
        .iter()
        .map(|m| m["payload"].clone())
        .collect();
    assert_eq!(got, [json!("new")]);
    let list = b.get("/api/v1/ephemeral/queues").json();
    assert_eq!(list["queues"][0]["drops"]["ttl"], 1);
}

/// `reject` answers 429 `queue_full` with Retry-After and stores nothing;
/// every refused field and limit answers its code with nothing changed.
#[test]
fn reject_answers_429_and_limits_have_codes() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    assert_eq!(configure(&b, "small", json!({"maxLength": 3})).status, 201);
    assert_eq!(
        push(&b, "small", None, vec![json!(1), json!(2)]).status,
        201
    );
    let r = push(&b, "small", None, vec![json!(3), json!(4)]);
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(code(&r), "queue_full");
    assert!(r.header("retry-after").is_some());
    assert_eq!(
        depth(&b, "small")["pending"],
        2,
        "a refused push stores nothing"
    );
    let bad_configs = [
        json!({"maxLength": 0}),
        json!({"maxLength": 10_001}),
        json!({"policy": "sometimes"}),
        json!({"leaseSeconds": 0}),
        json!({"retryLimit": 1001}),
        json!({"ttl_second": 5}),
        json!({"windowBuffer": 5}),
    ];
    for o in bad_configs {
        let r = configure(&b, "small", o.clone());
        assert_eq!(
            (r.status, code(&r)),
            (400, "ephemeral_bad_request".into()),
            "{o}"
        );
    }
    assert_eq!(
        b.get("/api/v1/ephemeral/queues").json()["queues"][0]["options"]["maxLength"],
        3,
        "refused configures change nothing"
    );
    let long = "q".repeat(513);
    let too_many: Vec<Value> = (0..10_001).map(|_| json!(0)).collect();
    let refused = [
        push(&b, &long, None, vec![json!(1)]),
        push(&b, "small", None, too_many),
        b.post_json(PUSH, &json!({"queue": "small", "messages": [{"data": 1}]})),
        b.post_json(PUSH, &json!({"messages": []})),
        b.get("/api/v1/ephemeral/pop?queue=small&batch=0"),
        b.get("/api/v1/ephemeral/pop?queue=small&wait=true&timeout=300001"),
        b.get("/api/v1/ephemeral/pop"),
        b.post_json(
            ACK,
            &json!({"queue": "small", "acks": [{"id": "x", "status": "maybe"}]}),
        ),
    ];
    for r in refused {
        assert_eq!(
            (r.status, code(&r)),
            (400, "ephemeral_bad_request".into()),
            "{}",
            r.text()
        );
    }
    assert_eq!(depth(&b, "small")["pending"], 2);
    let r = b.get("/api/v1/ephemeral/queues/nothing-here/depth");
    assert_eq!(
        (r.status, code(&r)),
        (404, "ephemeral_queue_not_found".into())
    );
    // A pop of nothing is 200 with an empty list, never 204.
    let r = b.get("/api/v1/ephemeral/pop?queue=empty-one");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["messages"], json!([]));
}

/// The broker-wide ceiling answers 503 `ephemeral_unavailable`, and room
/// comes back when messages are consumed.
#[test]
fn memory_ceiling_answers_503() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_EPHEMERAL_MAX_BYTES", "20000")
        .start();
    let big = "x".repeat(1000);
    let mut stored = 0;
    let refused = loop {
        let r = push(&b, "mem", Some(&format!("p{stored}")), vec![json!(big)]);
        if r.status != 201 {
            break r;
        }
        stored += 1;
        assert!(stored < 100, "the ceiling never bit");
    };
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(code(&refused), "ephemeral_unavailable");
    assert!(stored >= 15, "{stored}");
    let cell = b.get("/api/v1/ephemeral/queues").json()["cellBytes"]
        .as_u64()
        .unwrap();
    assert!(cell <= 20_000, "{cell}");
    let prom = b.get("/metrics/prometheus").text();
    assert!(
        prom.contains(&format!("queen_ephemeral_bytes {cell}")),
        "{prom}"
    );
    check_for(Duration::from_secs(3), || {
        prom_depth(&b, "mem").filter(|d| *d == stored).map(|_| ())
    });
    let drained = pop(&b, "queue=mem&batch=100&autoAck=true");
    assert_eq!(drained.len() as u64, stored);
    assert_eq!(push(&b, "mem", None, vec![json!(big)]).status, 201);
}

fn prom_depth(b: &Broker, queue: &str) -> Option<u64> {
    let text = b.get("/metrics/prometheus").text();
    let prefix = format!("queen_ephemeral_depth{{queue=\"{queue}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// Each group sees every message; members of one group share them. (A
/// group counts from its first pop: what every group known then has settled
/// is gone, so the groups subscribe before the push.)
#[test]
fn consumer_groups_each_see_every_message() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for g in ["a", "b", "w"] {
        assert!(pop(&b, &format!("queue=fan&group={g}")).is_empty());
    }
    push(&b, "fan", None, (0..10).map(|i| json!(i)).collect());
    for g in ["a", "b"] {
        let got: Vec<i64> = pop(&b, &format!("queue=fan&group={g}&batch=50&autoAck=true"))
            .iter()
            .map(|m| m["payload"].as_i64().unwrap())
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>(), "group {g}");
        assert!(pop(&b, &format!("queue=fan&group={g}")).is_empty());
    }
    let one = pop(&b, "queue=fan&group=w&batch=6");
    let two = pop(&b, "queue=fan&group=w&batch=6");
    assert_eq!((one.len(), two.len()), (6, 4));
    let ids: HashSet<i64> = one
        .iter()
        .chain(&two)
        .map(|m| m["payload"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 10);
    // Acks are per group: group w's ids are unknown to group a.
    let out = ack(&b, "fan", Some("a"), vec![json!({"id": one[0]["id"]})]);
    assert_eq!(out, ["stale"]);
    let out = ack(&b, "fan", Some("w"), vec![json!({"id": one[0]["id"]})]);
    assert_eq!(out, ["acked"]);
}

/// A parked pop answers as soon as a push lands, on one partition (parked on
/// the owning shard) and over all partitions (parked on the asking shard).
#[test]
fn long_poll_woken_by_push() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for query in [
        "queue=inbox&partition=room-7&wait=true&timeout=10000",
        "queue=inbox&wait=true&timeout=10000",
    ] {
        let port = b.port;
        let path = format!("/api/v1/ephemeral/pop?{query}");
        let h = std::thread::spawn(move || {
            let mut c = Conn::connect(port).unwrap();
            let r = c.get(&path).unwrap();
            (r, Instant::now())
        });
        // Time for the pop to park (the scenario; the answer is what is timed).
        std::thread::sleep(Duration::from_millis(300));
        let pushed = Instant::now();
        assert_eq!(
            push(&b, "inbox", Some("room-7"), vec![json!("hi")]).status,
            201
        );
        let (r, answered) = h.join().unwrap();
        assert_eq!(r.status, 200);
        let m = messages(&r.json());
        assert_eq!(m.len(), 1, "{query}");
        assert_eq!(m[0]["payload"], "hi");
        let lag = answered.saturating_duration_since(pushed);
        assert!(
            lag < Duration::from_millis(800),
            "{query}: woken after {lag:?}"
        );
        ack(&b, "inbox", None, vec![json!({"id": m[0]["id"]})]);
    }
    // Nothing comes: the wait ends at its timeout with 200 and an empty list.
    let t0 = Instant::now();
    assert!(pop(&b, "queue=inbox&partition=room-7&wait=true&timeout=300").is_empty());
    assert!(t0.elapsed() >= Duration::from_millis(280));
}

/// Two meshed brokers: pushes on A for every partition are popped and acked
/// through B, whichever owns each partition; a declaration on A reaches B.
#[test]
fn push_on_a_popped_on_b() {
    let db = Db::fresh();
    let (ma, mb) = (free_port(), free_port());
    let member = |mine: u16, peer: u16| {
        Broker::builder(&db)
            .env("QUEEN_MESH_PORT", &mine.to_string())
            .env("QUEEN_MESH_PEERS", &format!("127.0.0.1:{peer}"))
            .env("QUEEN_MESH_ADVERTISE_HOST", "127.0.0.1")
            .env("QUEEN_SYNC_HEARTBEAT_MS", "200")
            .env("QUEEN_SYNC_DEAD_THRESHOLD_MS", "1500")
            .env("DB_POOL_SIZE", "4")
    };
    let a = member(ma, mb).start();
    let b = member(mb, ma).start();
    for x in [&a, &b] {
        check_for(Duration::from_secs(20), || {
            let v = x.get("/api/v1/ephemeral/queues").json();
            (v["members"].as_array().unwrap().len() == 2).then_some(())
        });
    }
    assert_eq!(configure(&a, "chat", json!({"maxLength": 50})).status, 201);
    check_for(Duration::from_secs(5), || {
        let v = b.get("/api/v1/ephemeral/queues").json();
        (v["queues"][0]["options"]["maxLength"] == 50).then_some(())
    });
    let parts: Vec<String> = (0..16).map(|i| format!("room-{i}")).collect();
    for p in &parts {
        let payloads = (0..5).map(|i| json!({"p": p, "i": i})).collect();
        let r = push(&a, "chat", Some(p), payloads);
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // Owned on A or on B: with 16 partitions, both own some (rendezvous).
    let on_a: u64 = depth(&a, "chat")["pending"].as_u64().unwrap();
    let on_b: u64 = depth(&b, "chat")["pending"].as_u64().unwrap();
    assert_eq!(on_a + on_b, 80);
    assert!(on_a > 0 && on_b > 0, "a {on_a}, b {on_b}");
    // A request already forwarded once, for a partition B does not own, is
    // refused on B with 503 owner_moved instead of travelling on, and stores nothing.
    let on_a_part = depth(&a, "chat")["partitions"].as_array().unwrap()[0]["partition"]
        .as_str()
        .unwrap()
        .to_string();
    let body = json!({"queue": "chat", "partition": on_a_part, "messages": [{"payload": 1}]});
    let r = b
        .conn()
        .request(
            "POST",
            PUSH,
            &[
                ("content-type", "application/json"),
                ("x-queen-eph-fwd", "elsewhere"),
            ],
            Some(body.to_string().as_bytes()),
        )
        .unwrap();
    assert_eq!(
        (r.status, code(&r)),
        (503, "owner_moved".into()),
        "{}",
        r.text()
    );
    assert_eq!(depth(&a, "chat")["pending"], on_a);
    let mut total = 0;
    for p in &parts {
        let m = pop(&b, &format!("queue=chat&partition={p}&batch=10"));
        let got: Vec<i64> = m
            .iter()
            .map(|x| x["payload"]["i"].as_i64().unwrap())
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4], "partition {p}");
        let acks = m.iter().map(|x| json!({"id": x["id"]})).collect();
        assert!(ack(&b, "chat", None, acks).iter().all(|o| o == "acked"));
        total += m.len();
    }
    assert_eq!(total, 80);
    // Over all partitions, from either broker: pushes on B reach a pop on A.
    for p in &parts {
        push(&b, "chat", Some(p), vec![json!({"p": p, "i": 9})]);
    }
    let mut got = 0;
    check_for(Duration::from_secs(10), || {
        got += pop(&a, "queue=chat&batch=100&autoAck=true").len();
        (got >= 16).then_some(())
    });
    assert_eq!(got, 16);
}

/// Contents survive nothing, declarations survive a restart.
#[test]
fn restart_keeps_declarations_not_contents() {
    let db = Db::fresh();
    let mut b = Broker::start(&db);
    assert_eq!(configure(&b, "kept", json!({"maxLength": 7})).status, 201);
    assert_eq!(push(&b, "kept", None, vec![json!(1)]).status, 201);
    assert_eq!(push(&b, "loose", None, vec![json!(1)]).status, 201);
    let old = pop(&b, "queue=kept");
    b.stop(Duration::from_secs(5));
    let b = Broker::builder(&db).port(b.port).start();
    // The declarations load right after boot, from PostgreSQL.
    let list = check_for(Duration::from_secs(5), || {
        let v = b.get("/api/v1/ephemeral/queues").json();
        (v["count"] == 1).then_some(v)
    });
    assert_eq!(list["count"], 1, "{list}");
    assert_eq!(list["queues"][0]["queue"], "kept");
    assert_eq!(list["queues"][0]["depth"], 0);
    assert_eq!(list["queues"][0]["options"]["maxLength"], 7);
    assert_eq!(
        ack(&b, "kept", None, vec![json!({"id": old[0]["id"]})]),
        ["stale"]
    );
    let r = b.delete("/api/v1/ephemeral/queue/kept");
    assert_eq!(
        r.json(),
        json!({"queue": "kept", "deleted": true, "declared": true})
    );
    let r = b.delete("/api/v1/ephemeral/queue/kept");
    assert_eq!(
        r.json(),
        json!({"queue": "kept", "deleted": false, "declared": false})
    );
    let r = b.post_json("/api/v1/ephemeral/reset", &json!({"queue": "kept"}));
    assert_eq!(r.json(), json!({"queue": "kept", "dropped": 0}));
}
