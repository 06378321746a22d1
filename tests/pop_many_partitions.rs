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
