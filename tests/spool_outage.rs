//! PostgreSQL stopped hard under 8 producers (issue 4): every push answered
//! `queued` or `buffered` is in PostgreSQL exactly once afterwards, in order
//! per partition. Alone in its binary: it stops the binary's shared cluster.
mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PRODUCERS: usize = 8;

#[test]
fn no_acknowledged_push_is_lost_across_a_postgres_crash() {
    let db = Db::fresh();
    // The harness cluster runs with synchronous_commit=off for speed, which
    // lets PostgreSQL itself forget acknowledged commits in a crash; this
    // test measures the broker, so its database commits synchronously.
    db.exec(&format!(
        "ALTER DATABASE {} SET synchronous_commit = on",
        db.name
    ));
    let b = Broker::builder(&db)
        .env("DB_CONNECTION_TIMEOUT", "500")
        .start();
    let port = b.port;
    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut acked: Vec<i64> = Vec::new();
                let mut statuses = (0u32, 0u32, 0u32);
                let mut conn = Conn::connect(port).expect("connect");
                conn.set_timeout(Duration::from_secs(15));
                let mut n = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let body = json!({"items": [{"queue": "outage", "partition": format!("p{p}"),
                        "transactionId": format!("p{p}-{n}"), "payload": {"n": n}}]});
                    let r = match conn.post_json("/api/v1/push", &body) {
                        Ok(r) => r,
                        Err(_) => {
                            conn = Conn::connect(port).expect("reconnect");
                            conn.set_timeout(Duration::from_secs(15));
                            n += 1;
                            continue;
                        }
                    };
                    if r.status == 201 {
                        match r.json_array()[0]["status"].as_str() {
                            Some("queued") => statuses.0 += 1,
                            Some("buffered") => statuses.1 += 1,
                            other => panic!("unexpected status {other:?}"),
                        }
                        acked.push(n);
                    } else {
                        statuses.2 += 1;
                    }
                    n += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                (p, acked, statuses)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    pg().stop_immediate();
    std::thread::sleep(Duration::from_secs(4));
    pg().start();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<_> = producers
        .into_iter()
        .map(|h| h.join().expect("producer"))
        .collect();
    let (mut queued, mut buffered, mut failed) = (0, 0, 0);
    for (_, _, s) in &results {
        queued += s.0;
        buffered += s.1;
        failed += s.2;
    }
    eprintln!("queued={queued} buffered={buffered} not-acknowledged={failed}");
    assert!(
        buffered > 0,
        "nothing was buffered during the outage:\n{}",
        b.log_tail(30)
    );
    check_for(Duration::from_secs(40), || {
        let st = b.get("/api/v1/status/buffers");
        (st.status == 200 && st.json()["pending"] == 0).then_some(())
    });
    for (p, acked, _) in &results {
        let part = format!("p{p}");
        let stored: Vec<i64> = db
            .query(
                "SELECT (m.payload->>'n')::bigint FROM queen.messages m JOIN queen.partitions pa \
                 ON pa.id = m.partition_id WHERE pa.name = $1 ORDER BY m.created_at, m.id",
                &[&part],
            )
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut sorted = stored.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), stored.len(), "{part}: a message stored twice");
        assert_eq!(stored, sorted, "{part}: order broken");
        for n in acked {
            assert!(
                sorted.binary_search(n).is_ok(),
                "{part}: acknowledged push {n} lost"
            );
        }
    }
}
