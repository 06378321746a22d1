//! Conflation (semantics.md §17, http-api.md §4): newest-per-partition
//! delivery, superseded messages never delivered, the stored policy wins,
//! `conflationConflict`, the 200 empty bodies, refusals, and queue depth.
mod common;

use common::*;
use std::collections::HashSet;
use std::time::Duration;

fn group_pop(b: &Broker, queue: &str, group: &str, extra: &str) -> Option<Value> {
    b.pop(&format!(
        "/api/v1/pop/queue/{queue}?consumerGroup={group}{extra}"
    ))
}

fn ack(b: &Broker, m: &Value, group: &str) {
    let r = b.ack(json!({
        "transactionId": m["transactionId"], "partitionId": m["partitionId"],
        "leaseId": m["leaseId"], "consumerGroup": group, "status": "completed"}));
    assert_eq!(r["success"], true, "ack {m}: {r}");
}

fn txids(pop: &Value) -> Vec<String> {
    messages(pop)
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn conflated_pop_delivers_newest_per_partition_and_never_the_superseded() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let mut pushed = 0;
    for p in ["p0", "p1", "p2"] {
        pushed += b.push_n("last", p, &format!("{p}-"), 5).len();
    }
    let first = group_pop(&b, "last", "g", "&conflation=true&batch=10").expect("messages");
    assert_eq!(first["conflation"], true, "{first}");
    assert!(first.get("conflationConflict").is_none(), "{first}");
    let mut got = txids(&first);
    got.sort();
    assert_eq!(
        got,
        ["p0-4", "p1-4", "p2-4"],
        "only each partition's newest"
    );
    assert_eq!(first["partitionsClaimed"], 3);

    // Leases held: a second pop gets nothing, as a 200 with the conflation key.
    let held = b.get("/api/v1/pop/queue/last?consumerGroup=g&conflation=true&batch=10");
    assert_eq!(held.status, 200, "{}", held.text());
    assert_eq!(held.json(), json!({"messages": [], "conflation": true}));

    for m in messages(&first) {
        ack(&b, &m, "g");
    }
    // After the acks the superseded messages are gone for this group.
    let none = b.get("/api/v1/pop/queue/last?consumerGroup=g&conflation=true&batch=10");
    assert_eq!(none.json(), json!({"messages": [], "conflation": true}));

    pushed += b.push_n("last", "p0", "p0-new-", 2).len();
    let second = group_pop(&b, "last", "g", "&conflation=true&batch=10").expect("messages");
    assert_eq!(txids(&second), ["p0-new-1"]);
    ack(&b, &messages(&second)[0], "g");

    let mut out: Vec<String> = txids(&first);
    out.extend(txids(&second));
    let distinct: HashSet<&String> = out.iter().collect();
    assert_eq!((pushed, out.len(), distinct.len()), (17, 4, 4));
    assert!(
        group_pop(&b, "last", "g", "&conflation=true&batch=10").unwrap()["messages"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing left after the newest were acked"
    );
    // A normal group on the same queue still sees every message.
    let all = group_pop(&b, "last", "other", "&batch=100&partitions=3").expect("messages");
    assert_eq!(messages(&all).len(), 17);
    assert!(all.get("conflation").is_none(), "{all}");
}

#[test]
fn stored_conflating_policy_wins_for_pops_that_do_not_ask() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("sticky", json!({}));
    // First registration asks for conflation (nothing to deliver yet).
    let r = b.get("/api/v1/pop/queue/sticky?consumerGroup=g&conflation=true");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"messages": [], "conflation": true}));
    b.push_n("sticky", "Default", "s", 4);
    let pop = group_pop(&b, "sticky", "g", "&batch=10").expect("messages");
    assert_eq!(txids(&pop), ["s3"], "conflated without asking");
    assert_eq!(pop["conflation"], true);
    // The stored value is what the metadata says.
    let stored = db.count(
        "SELECT count(*) FROM queen.consumer_groups_metadata \
         WHERE consumer_group = 'g' AND queen.conflation_on(conflation)",
        &[],
    );
    assert_eq!(stored, 1);
}

#[test]
fn conflation_asked_of_a_non_conflating_group_is_a_conflict_with_normal_delivery() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("plain", "Default", "m", 3);
    // Registered without conflation by its first pop.
    let first = group_pop(&b, "plain", "g", "&batch=1").expect("messages");
    assert!(first.get("conflation").is_none() && first.get("conflationConflict").is_none());
    ack(&b, &messages(&first)[0], "g");
    let second = group_pop(&b, "plain", "g", "&batch=10&conflation=true").expect("messages");
    assert_eq!(txids(&second), ["m1", "m2"], "normal delivery");
    assert_eq!(second["conflationConflict"], true);
    assert!(second.get("conflation").is_none(), "{second}");
    let empty = b.get("/api/v1/pop/queue/plain?consumerGroup=g&conflation=true");
    assert_eq!(empty.status, 200);
    assert_eq!(
        empty.json(),
        json!({"messages": [], "conflationConflict": true})
    );
}

#[test]
fn conflation_is_refused_with_auto_ack_and_in_queue_mode() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("refuse", "Default", "r", 2);
    let r = b.get("/api/v1/pop/queue/refuse?consumerGroup=g&conflation=true&autoAck=true");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.error_lc().contains("autoack"), "{}", r.text());
    let r = b.get("/api/v1/pop/queue/refuse?conflation=true");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.error_lc().contains("consumergroup"), "{}", r.text());
    // Nothing was claimed or registered by the refused pops.
    let pop = group_pop(&b, "refuse", "g", "&batch=10").expect("messages");
    assert_eq!(messages(&pop).len(), 2);
}

#[test]
fn depth_reports_effective_pending_for_a_conflating_group() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("deep", json!({}));
    let r = b.get("/api/v1/pop/queue/deep?consumerGroup=g&conflation=true");
    assert_eq!(r.status, 200);
    b.push_n("deep", "a", "a", 3);
    b.push_n("deep", "b", "b", 2);
    let d = b.get("/api/v1/resources/queues/deep/depth?group=g").json();
    assert_eq!(d["conflation"], true, "{d}");
    assert_eq!(d["pending"], 5, "{d}");
    assert_eq!(d["partitionsPending"], 2, "{d}");
    assert_eq!(d["effectivePending"], 2, "{d}");
    let plain = b.get("/api/v1/resources/queues/deep/depth?group=h").json();
    assert_eq!(plain["conflation"], false, "{plain}");
    assert_eq!(plain["effectivePending"], 5, "{plain}");
}

#[test]
fn concurrent_conflated_consumers_never_repeat_or_go_backwards() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    const PARTS: usize = 6;
    const ROUNDS: usize = 20;
    b.configure("race", json!({}));
    let r = b.get("/api/v1/pop/queue/race?consumerGroup=g&conflation=true");
    assert_eq!(r.status, 200, "{}", r.text());
    let done = std::sync::atomic::AtomicBool::new(false);
    let delivered = std::sync::Mutex::new(Vec::<(String, u64)>::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                let pop = group_pop(&b, "race", "g", "&conflation=true&batch=4").unwrap();
                let msgs = messages(&pop);
                let parts: HashSet<&str> = msgs
                    .iter()
                    .map(|m| m["partition"].as_str().unwrap())
                    .collect();
                assert_eq!(parts.len(), msgs.len(), "one message per partition: {pop}");
                for m in &msgs {
                    let n = m["data"]["n"].as_u64().unwrap();
                    let part = m["partition"].as_str().unwrap().to_string();
                    delivered.lock().unwrap().push((part, n));
                    ack(&b, m, "g");
                }
                if finished && msgs.is_empty() {
                    break;
                }
            });
        }
        for round in 0..ROUNDS {
            let items: Vec<Value> = (0..PARTS)
                .map(|p| {
                    json!({"queue": "race", "partition": format!("p{p}"),
                                "payload": {"n": round}})
                })
                .collect();
            b.push(Value::Array(items));
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let delivered = delivered.into_inner().unwrap();
    // Per partition: strictly increasing (never a superseded or repeated
    // message), and the last message pushed was delivered.
    for p in 0..PARTS {
        let seq: Vec<u64> = delivered
            .iter()
            .filter(|(part, _)| *part == format!("p{p}"))
            .map(|(_, n)| *n)
            .collect();
        assert!(
            seq.windows(2).all(|w| w[0] < w[1]),
            "p{p} delivered out of order or twice: {seq:?}"
        );
        assert_eq!(seq.last(), Some(&(ROUNDS as u64 - 1)), "p{p}: {seq:?}");
    }
    assert!(delivered.len() <= PARTS * ROUNDS);
}

#[test]
fn discovery_pop_conflates_every_conflating_queue_in_scope() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("cfx.a", "Default", "a", 3);
    b.push_n("cfx.b", "Default", "b", 2);
    let pop = b
        .pop("/api/v1/pop?namespace=cfx&consumerGroup=g&conflation=true&batch=10&partitions=4")
        .expect("messages");
    assert_eq!(pop["conflation"], true, "{pop}");
    let mut got = txids(&pop);
    got.sort();
    assert_eq!(got, ["a2", "b1"]);
}

#[test]
fn expired_conflated_lease_redelivers_the_then_newest_message() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("lapse", json!({"leaseTime": 1}));
    b.push_n("lapse", "Default", "old", 2);
    let first = group_pop(&b, "lapse", "g", "&conflation=true").expect("messages");
    assert_eq!(txids(&first), ["old1"]);
    b.push_n("lapse", "Default", "new", 2);
    // Not acked: once the lease lapses the newest message is delivered instead.
    let again = check_for(Duration::from_secs(10), || {
        group_pop(&b, "lapse", "g", "&conflation=true").filter(|p| !messages(p).is_empty())
    });
    assert_eq!(txids(&again), ["new1"]);
    ack(&b, &messages(&again)[0], "g");
    let rest = group_pop(&b, "lapse", "g", "&conflation=true").unwrap();
    assert!(
        messages(&rest).is_empty(),
        "old0, old1, new0 superseded: {rest}"
    );
}
