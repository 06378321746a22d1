//! A backlog spread over more partitions than one candidate sweep reads (256):
//! a pop's first attempt must still find what is left, however little, rather
//! than answer empty by the luck of where its sweep started.
mod common;

use common::*;
use std::collections::HashSet;

const PARTITIONS: usize = 2_000;

#[test]
fn a_pop_finds_the_last_messages_of_a_backlog_over_thousands_of_partitions() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for chunk in 0..4 {
        let items: Vec<Value> = (0..PARTITIONS / 4)
            .map(|i| {
                let n = chunk * (PARTITIONS / 4) + i;
                json!({"queue": "wide", "partition": format!("p{n}"),
                       "transactionId": format!("t{n}"), "payload": {"n": n}})
            })
            .collect();
        b.push(Value::Array(items));
    }

    // Pops without waiting: each must deliver while anything is left. Before the
    // deep sweep a pop saw ~512 of the 2,000 partitions, so once a handful were
    // left most pops came back empty.
    let mut seen = HashSet::new();
    let mut pops = 0;
    while seen.len() < PARTITIONS {
        pops += 1;
        assert!(pops <= 200, "{} of {PARTITIONS} after 200 pops", seen.len());
        let pop = b
            .pop("/api/v1/pop/queue/wide?batch=64&partitions=64&consumerGroup=g&autoAck=true")
            .unwrap_or_else(|| {
                panic!(
                    "pop {pops} came back empty with {} of {PARTITIONS} messages left",
                    PARTITIONS - seen.len()
                )
            });
        for m in messages(&pop) {
            let id = m["id"].as_str().unwrap().to_string();
            assert!(seen.insert(id), "a message delivered twice: {m}");
        }
    }
    assert_eq!(seen.len(), PARTITIONS);
    assert!(
        b.pop("/api/v1/pop/queue/wide?batch=64&partitions=64&consumerGroup=g&autoAck=true")
            .is_none(),
        "the group has consumed everything"
    );
}

/// Sum over shards of a `queen_shard_*` counter (`name` without `_total`).
fn shard_total(b: &Broker, name: &str) -> u64 {
    let text = b.get("/metrics/prometheus").text();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("exposition parses");
    let name = format!("{name}_total");
    let sum: f64 = (scrape.samples.iter())
        .filter(|x| x.metric == name)
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum();
    sum as u64
}

#[test]
fn pops_of_an_empty_wide_queue_do_not_sweep_it_back_to_back_and_a_later_push_is_delivered() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let items: Vec<Value> = (0..600)
        .map(|n| json!({"queue": "idle", "partition": format!("p{n}"), "payload": {"n": n}}))
        .collect();
    b.push(Value::Array(items));
    let pop = "/api/v1/pop/queue/idle?batch=100&partitions=100&consumerGroup=g&autoAck=true";
    let mut seen = 0;
    while let Some(p) = b.pop(pop) {
        seen += messages(&p).len();
        assert!(seen <= 600, "more delivered than pushed");
    }
    assert_eq!(seen, 600, "the backlog drained before the queue went empty");

    let swept = shard_total(&b, "queen_shard_pop_deep_sweeps");
    let skipped = shard_total(&b, "queen_shard_pop_deep_sweeps_skipped");
    const POPS: u64 = 20;
    for _ in 0..POPS {
        assert!(b.pop(pop).is_none(), "nothing left to deliver");
    }
    let swept = shard_total(&b, "queen_shard_pop_deep_sweeps") - swept;
    let skipped = shard_total(&b, "queen_shard_pop_deep_sweeps_skipped") - skipped;
    assert_eq!(
        swept + skipped,
        POPS,
        "every pop's first attempt is counted once"
    );
    assert!(
        skipped >= 1,
        "back-to-back empty pops skip the sweep that just came back empty: {swept} swept, {skipped} skipped"
    );

    // A message pushed after the memo is still delivered to a waiting pop: by
    // the push's wake, or by the sweep a long poll owes once the memo has passed
    // (the push may reach the popping shard's memo after the pop starts).
    b.push(json!([{"queue": "idle", "partition": "p7", "payload": {"late": true}}]));
    let p = b
        .pop(&format!("{pop}&wait=true&timeout=5000"))
        .expect("the new message is delivered");
    assert_eq!(messages(&p).len(), 1);
    assert_eq!(messages(&p)[0]["data"]["late"], true, "{p}");
}
