//! Long polling: notices wake parked pops across shards, timeouts answer 204, a gone
//! client claims nothing, and the slow recheck finds messages no notice announced.
mod common;

use common::*;
use std::time::{Duration, Instant};

/// Starts a long poll on its own connection in a thread; returns the join handle that
/// yields (response, instant answered).
fn park(port: u16, path: String) -> std::thread::JoinHandle<(Resp, Instant)> {
    std::thread::spawn(move || {
        let mut c = Conn::connect(port).expect("connect");
        c.set_timeout(Duration::from_secs(40));
        let r = c.get(&path).expect("long-poll response");
        (r, Instant::now())
    })
}

#[test]
fn parked_pop_answers_soon_after_a_push_on_another_connection() {
    let db = Db::fresh();
    // Rechecks so slow that only the push notice can answer within a second.
    let b = Broker::builder(&db)
        .env("NUM_WORKERS", "2")
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "10000")
        .env("POP_WAIT_MAX_INTERVAL_MS", "10000")
        .start();
    b.configure("lp", json!({}));
    for round in 0..6 {
        let h = park(
            b.port,
            "/api/v1/pop/queue/lp?wait=true&timeout=8000&autoAck=true&batch=10".into(),
        );
        // Give the pop time to park (the scenario, not a synchronisation: a pop that has
        // not parked yet simply finds the message at once).
        std::thread::sleep(Duration::from_millis(400));
        let t0 = Instant::now();
        let mut c = b.conn();
        let r = c
            .post_json(
                "/api/v1/push",
                &json!({"items": [{"queue": "lp", "transactionId": format!("r{round}")}]}),
            )
            .expect("push");
        assert_eq!(r.status, 201, "{}", r.text());
        let (resp, answered) = h.join().unwrap();
        assert_eq!(resp.status, 200, "round {round}: {}", resp.text());
        assert_eq!(txids(&resp.json()), vec![format!("r{round}")]);
        let lag = answered.saturating_duration_since(t0);
        assert!(
            lag < Duration::from_secs(1),
            "round {round}: answered {lag:?} after the push"
        );
    }
}

#[test]
fn parked_pop_times_out_with_204() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("to", json!({}));
    let t0 = Instant::now();
    let mut c = b.conn();
    let r = c
        .get("/api/v1/pop/queue/to?wait=true&timeout=1500")
        .expect("response");
    let took = t0.elapsed();
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.body.is_empty(), "204 has no body");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(3500),
        "answered after {took:?}, expected ≈1.5 s"
    );
}

#[test]
fn client_gone_while_parked_claims_nothing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.configure("gone", json!({}));
    let mut c = b.conn();
    c.send(
        "GET",
        "/api/v1/pop/queue/gone?wait=true&timeout=5000&leaseSeconds=30&batch=10",
        &[],
        None,
    )
    .expect("send");
    std::thread::sleep(Duration::from_millis(300));
    c.close();
    std::thread::sleep(Duration::from_millis(100));
    b.push_n("gone", "p", "t", 1);
    let pop = try_check_for(Duration::from_secs(2), || {
        b.pop("/api/v1/pop/queue/gone?batch=10")
    });
    let pop = pop.expect("the message went to the disconnected client's pop (lease held)");
    assert_eq!(txids(&pop), vec!["t0"]);
}

#[test]
fn slow_recheck_finds_a_message_pushed_through_another_broker() {
    let db = Db::fresh();
    let a = Broker::builder(&db)
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "100")
        .env("POP_WAIT_MAX_INTERVAL_MS", "300")
        .start();
    a.configure("sr", json!({}));
    // B shares the database but not the mesh: its notices cannot reach A.
    let other = Broker::start(&db);
    let h = park(
        a.port,
        "/api/v1/pop/queue/sr?wait=true&timeout=10000&batch=10".into(),
    );
    // Let A's backoff reach its cap before the push.
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    other.push_n("sr", "p", "t", 1);
    let (resp, answered) = h.join().unwrap();
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(txids(&resp.json()), vec!["t0"]);
    let lag = answered.saturating_duration_since(t0);
    assert!(
        lag < Duration::from_millis(1000),
        "found {lag:?} after the push (cap 300 ms)"
    );
}

/// `queen_stage_duration_seconds_count{stage="db_pop"}`: database pop attempts so far.
fn db_pops(b: &Broker) -> f64 {
    let text = b.get("/metrics/prometheus").text();
    text.lines()
        .find_map(|l| l.strip_prefix("queen_stage_duration_seconds_count{stage=\"db_pop\"} "))
        .map_or(0.0, |v| v.trim().parse().expect("a number"))
}

/// Issue 18 ("wake herd"): a push wakes one of the pops parked on its partition, not
/// all of them. Six pops park; each single-message push is answered by exactly one of
/// them, promptly (rechecks are 10 s apart), with one database pop, while the others
/// stay parked; every message pushed comes out exactly once.
#[test]
fn a_push_wakes_one_parked_pop_and_the_next_push_the_next() {
    const N: usize = 6;
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("NUM_WORKERS", "1")
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "10000")
        .env("POP_WAIT_MAX_INTERVAL_MS", "10000")
        .start();
    b.configure("herd", json!({}));
    let mut parked: Vec<_> = (0..N)
        .map(|_| {
            park(
                b.port,
                "/api/v1/pop/queue/herd/partition/p?wait=true&timeout=20000&autoAck=true&batch=10"
                    .into(),
            )
        })
        .collect();
    let waiting = |n: usize| {
        check_for(Duration::from_secs(5), || {
            (b.get("/metrics").json()["parkedConsumers"] == n).then_some(())
        })
    };
    waiting(N);
    let mut out = Vec::new();
    for round in 0..N {
        let before = db_pops(&b);
        let t0 = Instant::now();
        b.push_n("herd", "p", &format!("r{round}-"), 1);
        let done = check_for(Duration::from_secs(2), || {
            parked.iter().position(|h| h.is_finished())
        });
        let (resp, answered) = parked.swap_remove(done).join().unwrap();
        assert_eq!(resp.status, 200, "round {round}: {}", resp.text());
        out.extend(txids(&resp.json()));
        let lag = answered.saturating_duration_since(t0);
        assert!(
            lag < Duration::from_secs(1),
            "round {round}: answered after {lag:?}"
        );
        // The others keep waiting: no second answer, no extra attempt.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            parked.iter().all(|h| !h.is_finished()),
            "round {round}: a second pop answered"
        );
        waiting(N - round - 1);
        assert_eq!(
            db_pops(&b) - before,
            1.0,
            "round {round}: one database pop for one message, not one per parked pop"
        );
    }
    out.sort();
    let mut want: Vec<String> = (0..N).map(|r| format!("r{r}-0")).collect();
    want.sort();
    assert_eq!(out, want, "every message out exactly once");
}
