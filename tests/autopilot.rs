//! Pop autopilot (semantics.md §18, http-api.md §4, config.md §3): only
//! the dimensions the client left out are chosen, the echo, the delegated
//! batch and `off`, the width controller widening under backlog, and boot
//! refusing invalid `QUEEN_POP_AUTOPILOT*` values.
mod common;

use common::*;
use std::time::Duration;

#[test]
fn autopilot_fills_only_unset_dimensions_and_echoes_them() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("auto", "Default", "m", 150);
    let pop = b
        .pop("/api/v1/pop/queue/auto?consumerGroup=g1&autopilot=true")
        .expect("messages");
    assert_eq!(messages(&pop).len(), 100, "delegated batch");
    assert_eq!(
        pop["autopilot"],
        json!({"partitions": 1, "batch": 100, "waitMs": 0})
    );
    let pop = b
        .pop("/api/v1/pop/queue/auto?consumerGroup=g2&autopilot=true&batch=7&partitions=3")
        .expect("messages");
    assert_eq!(messages(&pop).len(), 7, "explicit batch kept");
    assert_eq!(
        pop["autopilot"],
        json!({"partitions": 3, "batch": 7, "waitMs": 0})
    );
    let pop = b
        .pop("/api/v1/pop/queue/auto?consumerGroup=g3&batch=7")
        .expect("messages");
    assert!(pop.get("autopilot").is_none(), "no echo without autopilot");
    // The partition form delegates only the batch.
    let pop = b
        .pop("/api/v1/pop/queue/auto/partition/Default?consumerGroup=g4&autopilot=true")
        .expect("messages");
    assert_eq!(pop["autopilot"]["partitions"], 1);
    assert_eq!(pop["autopilot"]["batch"], 100);
}

#[test]
fn autopilot_batch_setting_and_off_and_shadow_modes() {
    let db = Db::fresh();
    let mut small = Broker::builder(&db)
        .env("QUEEN_POP_AUTOPILOT_BATCH", "5")
        .start();
    small.push_n("sized", "Default", "m", 250);
    let pop = small
        .pop("/api/v1/pop/queue/sized?consumerGroup=g1&autopilot=true")
        .expect("messages");
    assert_eq!(messages(&pop).len(), 5);
    assert_eq!(pop["autopilot"]["batch"], 5);
    small.stop(Duration::from_secs(5));

    for (mode, group) in [("off", "g2"), ("shadow", "g3")] {
        let mut b = Broker::builder(&db)
            .env("QUEEN_POP_AUTOPILOT", mode)
            .start();
        let pop = b
            .pop(&format!(
                "/api/v1/pop/queue/sized?consumerGroup={group}&autopilot=true"
            ))
            .expect("messages");
        assert_eq!(messages(&pop).len(), 200, "{mode}: normal default batch");
        assert_eq!(
            pop["autopilot"],
            json!({"partitions": 1, "batch": 200, "waitMs": 0}),
            "{mode}"
        );
        b.stop(Duration::from_secs(5));
    }
}

#[test]
fn autopilot_widens_the_sweep_under_backlog() {
    let db = Db::fresh();
    // One shard so every pop meets the same controller lane; target age 1 ms
    // and no dwell so each backlogged pop may widen.
    let b = Broker::builder(&db)
        .env("NUM_WORKERS", "1")
        .env("QUEEN_POP_AUTOPILOT_TARGET_AGE_MS", "1")
        .env("QUEEN_POP_AUTOPILOT_DWELL_MS", "0")
        .env("QUEEN_POP_AUTOPILOT_DWELL_POPS", "1")
        .start();
    let items: Vec<Value> = (0..60)
        .map(|i| json!({"queue": "wide", "partition": format!("p{i}"), "payload": i}))
        .collect();
    b.push(Value::Array(items));
    std::thread::sleep(Duration::from_millis(20)); // let the backlog age past 1 ms
    let mut widths = Vec::new();
    let mut delivered = 0;
    while delivered < 60 {
        let Some(pop) = b.pop("/api/v1/pop/queue/wide?consumerGroup=g&autopilot=true&autoAck=true")
        else {
            break;
        };
        let claimed = pop["partitionsClaimed"].as_u64().unwrap();
        assert!(claimed <= pop["autopilot"]["partitions"].as_u64().unwrap());
        widths.push(pop["autopilot"]["partitions"].as_u64().unwrap());
        delivered += messages(&pop).len();
    }
    assert_eq!(delivered, 60, "every partition drained once: {widths:?}");
    assert_eq!(widths[0], 1, "a new lane starts at width 1: {widths:?}");
    assert!(
        widths.windows(2).all(|w| w[1] >= w[0]) && *widths.last().unwrap() >= 8,
        "width grows under backlog: {widths:?}"
    );
}

#[test]
fn boot_fails_fast_on_an_invalid_autopilot_setting() {
    let db = Db::fresh();
    for (var, value) in [
        ("QUEEN_POP_AUTOPILOT", "sometimes"),
        ("QUEEN_POP_AUTOPILOT_BATCH", "0"),
        ("QUEEN_POP_AUTOPILOT_BURST_CAP", "65"),
    ] {
        let mut b = Broker::builder(&db).env(var, value).spawn();
        let status = b
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{var}={value} must stop the boot"));
        assert_eq!(status.code(), Some(1), "{var}={value}");
        let log = b.log();
        let lines: Vec<&str> = log.lines().filter(|l| l.contains(var)).collect();
        assert_eq!(lines.len(), 1, "one clear line naming {var}: {log}");
        assert!(lines[0].contains(value), "{}", lines[0]);
    }
}
