//! Timers across a PostgreSQL crash (issue 14): timers falling due while the
//! server is down all fire, once, after it comes back. A binary of its own:
//! it stops this binary's cluster, which would break tests running beside it.

mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::*;
use std::time::Duration;

#[test]
fn timers_due_during_a_postgres_restart_all_fire_once() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let keys = names("r", 0..500);
    for chunk in keys.chunks(250) {
        let ops: Vec<Value> = chunk
            .iter()
            .map(|k| {
                json!({"op": "schedule", "queue": "pgr", "timerKey": k, "delayMs": 2_000,
                       "txn": k, "payload": B64.encode(json!({ "k": k }).to_string())})
            })
            .collect();
        let r = b.post_json("/api/v1/timers", &json!({ "operations": ops }));
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // the harness cluster commits asynchronously (synchronous_commit=off):
    // give the WAL writer (3 x 200 ms at worst) time to flush the schedules
    // before the crash, or the crash rolls them back, acknowledged or not
    std::thread::sleep(Duration::from_millis(800));
    pg().stop_immediate();
    // due while PostgreSQL is down: the broker answers 503, nothing is lost
    std::thread::sleep(Duration::from_secs(2));
    let r = b.get("/api/v1/timers/pgr/r1");
    assert_eq!(r.status, 503, "{}", r.text());
    pg().start();
    check_for(Duration::from_secs(30), || {
        (db.count("SELECT count(*) FROM queen.log_timers", &[]) == 0).then_some(())
    });
    let stored = db.count(
        "SELECT count(DISTINCT transaction_id) FROM queen.messages",
        &[],
    );
    let all = db.count("SELECT count(*) FROM queen.messages", &[]);
    assert_eq!((stored, all), (500, 500));
    // the request group's pooled connections died with the server: the first
    // uses answer 503 (a client retries), so retry those here
    let mut seen = std::collections::HashSet::new();
    check_for(Duration::from_secs(10), || {
        let r = b.get("/api/v1/pop/queue/pgr?batch=1000&autoAck=true");
        match r.status {
            200 => {
                for t in txids(&r.json()) {
                    assert!(seen.insert(t.clone()), "{t} twice");
                }
                None
            }
            204 => Some(()),
            503 => None,
            s => panic!("pop answered {s}: {}", r.text()),
        }
    });
    assert_eq!(seen.len(), 500);
}
