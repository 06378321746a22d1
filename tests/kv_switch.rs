//! The KV/timers runtime kill switch (`POST /api/v1/system/kv-timers`,
//! http-api.md §13, SEC-23): persisted in `queen.system_state`, seen by every
//! shard of the broker that took it at once and by another broker on the same
//! database within a second (its recheck; no mesh between the two here), and
//! read back at boot.
mod common;

use common::*;
use std::time::{Duration, Instant};

const PATH: &str = "/api/v1/system/kv-timers";

/// Every one of 8 fresh connections (any shard) sees `kvEnabled == want`.
fn every_shard(b: &Broker, want: bool) -> bool {
    (0..8).all(|_| b.get(PATH).json()["kvEnabled"] == want)
}

#[test]
fn switch_is_persisted_and_reaches_another_broker_within_a_second() {
    let db = Db::fresh();
    let a = Broker::start(&db);
    let b = Broker::start(&db);
    let r = a.get(PATH);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"kvEnabled": true, "timersScheduleEnabled": true, "timersFireEnabled": true})
    );

    let r = a.post_json(PATH, &json!({"kvEnabled": false}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kvEnabled"], false);
    assert_eq!(r.json()["timersFireEnabled"], true);
    let switched = Instant::now();
    // Every shard of the broker that took the POST: at once.
    assert!(every_shard(&a, false));
    // The other broker: within a second.
    check_for(Duration::from_secs(1), || {
        every_shard(&b, false).then_some(())
    });
    assert!(switched.elapsed() < Duration::from_millis(1500));
    let stored: String = db.query(
        "SELECT value::text FROM queen.system_state WHERE key = 'kv_enabled'",
        &[],
    )[0]
    .get(0);
    assert!(stored.contains("false"), "{stored}");

    // A broker booted now reads it from the database.
    let c = Broker::start(&db);
    check_for(Duration::from_secs(2), || {
        every_shard(&c, false).then_some(())
    });

    let r = b.post_json(
        PATH,
        &json!({"kvEnabled": true, "timersScheduleEnabled": false}),
    );
    assert_eq!(r.json()["kvEnabled"], true);
    assert_eq!(r.json()["timersScheduleEnabled"], false);
    check_for(Duration::from_secs(1), || {
        every_shard(&a, true).then_some(())
    });
    check_for(Duration::from_secs(1), || {
        (a.get(PATH).json()["timersScheduleEnabled"] == false).then_some(())
    });
}

#[test]
fn bad_bodies_are_refused_and_change_nothing() {
    let db = Db::fresh();
    let a = Broker::start(&db);
    for body in [
        json!({"kvEnabled": "no"}),
        json!({"kvEnabled": false, "tenant": "x"}),
        json!({"timersFireEnabled": 0}),
    ] {
        let r = a.post_json(PATH, &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(r.json()["error"].is_string());
    }
    assert!(every_shard(&a, true));
    let rows = db.count(
        "SELECT count(*)::bigint FROM queen.system_state WHERE key = 'kv_enabled' AND value->>'enabled' = 'false'",
        &[],
    );
    assert_eq!(rows, 0);
    // An empty POST is a read.
    let r = a.post_empty(PATH);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["kvEnabled"], true);
}
