//! Ack fusion (issue 2, item 6): concurrent `POST /api/v1/ack` and
//! `/ack/batch` requests on a shard leave in one `queen.ack_batch` call, and
//! each request is answered from its own slice; a refused ack and an invalid
//! request fail alone while their neighbours succeed.
//!
//! Determinism without sleeps: the test holds the advisory lock of one
//! (partition, group) from its own PostgreSQL session, so the first acks
//! (one per in-flight slot of the shard's lane) block inside PostgreSQL. The
//! requests sent next must queue in the lane (the broker logs each one at
//! debug level); releasing the lock lets them leave together. One
//! transaction updating every good partition's cursor shows as a single
//! `xmin` on those `partition_consumers` rows.
mod common;

use common::*;
use std::sync::Arc;
use std::thread::JoinHandle;

/// In-flight ack batches per shard and tenant (`MAX_INFLIGHT_BATCHES` in
/// src/shard/ack_lanes.rs): this many blocked acks fill the lane.
const LANE_SLOTS: usize = 4;
/// Partitions whose acks must all succeed.
const GOOD: usize = 12;
/// Messages per good partition (one ack/batch request each).
const PER_PARTITION: usize = 5;
/// Messages in the partition acked with a wrong lease.
const BAD_MSGS: usize = 3;

/// One popped batch: (transactionId, partitionId) of each message and the lease.
struct Popped {
    keys: Vec<(String, String)>,
    lease: String,
}

fn pop_partition(b: &Broker, queue: &str, partition: &str, n: usize) -> Popped {
    let pop = b
        .pop(&format!(
            "/api/v1/pop/queue/{queue}/partition/{partition}?batch={n}&leaseSeconds=120"
        ))
        .unwrap_or_else(|| panic!("partition {partition} has messages"));
    let keys: Vec<(String, String)> = messages(&pop)
        .iter()
        .map(|m| {
            (
                m["transactionId"].as_str().unwrap().to_string(),
                m["partitionId"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(keys.len(), n, "pop of {partition}: {pop}");
    Popped {
        keys,
        lease: pop["leaseId"].as_str().expect("leaseId").to_string(),
    }
}

fn acks(keys: &[(String, String)], lease: &str) -> Value {
    Value::Array(
        keys.iter()
            .map(|(tx, pid)| {
                json!({"transactionId": tx, "partitionId": pid, "leaseId": lease,
                       "status": "completed"})
            })
            .collect(),
    )
}

/// Sends `body` to `path` on a connection of its own, in a thread.
fn send(port: u16, path: &'static str, body: Value) -> JoinHandle<Resp> {
    std::thread::spawn(move || {
        let mut c = Conn::connect(port).expect("connect");
        c.post_json(path, &body).expect("response")
    })
}

fn queued_lines(b: &Broker) -> usize {
    b.log().matches("ack lane: request queued").count()
}

/// Holds the (blk, queue mode) ack lock from a session of the test's own and
/// sends one ack of blk per in-flight slot of the lane, each waiting inside
/// PostgreSQL: requests sent next queue in the lane. Returns the session.
fn fill_lane(db: &Db, port: u16, blk: &Popped) -> (postgres::Client, Vec<JoinHandle<Resp>>) {
    let mut holder = db.client();
    holder
        .execute(
            "SELECT pg_advisory_lock(queen.lock_key($1::text::uuid, '__QUEUE_MODE__'))",
            &[&blk.keys[0].1],
        )
        .expect("take the lock");
    // One blocker at a time, so that each takes an in-flight slot of its own.
    let mut blockers: Vec<JoinHandle<Resp>> = Vec::new();
    for k in &blk.keys {
        let body = acks(std::slice::from_ref(k), &blk.lease)[0].clone();
        blockers.push(send(port, "/api/v1/ack", body));
        let want = blockers.len() as i64;
        check_for(std::time::Duration::from_secs(20), || {
            let n = db.count(
                "SELECT count(*) FROM pg_stat_activity
                  WHERE datname = current_database() AND wait_event = 'advisory'",
                &[],
            );
            (n == want).then_some(())
        });
    }
    (holder, blockers)
}

/// Releases the lock taken by [`fill_lane`]; every blocker then succeeds.
fn release_lane(holder: &mut postgres::Client, blk: &Popped, blockers: Vec<JoinHandle<Resp>>) {
    holder
        .execute(
            "SELECT pg_advisory_unlock(queen.lock_key($1::text::uuid, '__QUEUE_MODE__'))",
            &[&blk.keys[0].1],
        )
        .expect("release the lock");
    for (i, h) in blockers.into_iter().enumerate() {
        let r = h.join().unwrap();
        assert_eq!(r.status, 200, "blocker {i}: {}", r.text());
        assert_eq!(
            r.json_array()[0]["success"],
            true,
            "blocker {i}: {}",
            r.text()
        );
    }
}

#[test]
fn concurrent_acks_are_answered_from_one_fused_batch_and_a_bad_one_fails_alone() {
    let db = Db::fresh();
    // One shard, so every request meets the same lane; debug logs say when a
    // request is queued.
    let b = Broker::builder(&db)
        .env("NUM_WORKERS", "1")
        .env("LOG_LEVEL", "debug")
        .start();
    let mut pushed = 0;
    for g in 0..GOOD {
        pushed += b
            .push_n("af", &format!("g{g}"), &format!("g{g}-"), PER_PARTITION)
            .len();
    }
    pushed += b.push_n("af", "blk", "blk-", LANE_SLOTS).len();
    pushed += b.push_n("af", "bad", "bad-", BAD_MSGS).len();
    let good: Vec<Popped> = (0..GOOD)
        .map(|g| pop_partition(&b, "af", &format!("g{g}"), PER_PARTITION))
        .collect();
    let blk = pop_partition(&b, "af", "blk", LANE_SLOTS);
    let bad = pop_partition(&b, "af", "bad", BAD_MSGS);

    let port = b.port;
    let (mut holder, blockers) = fill_lane(&db, port, &blk);
    let before = queued_lines(&b);

    // The fused group: every good partition's batch, a batch acked with a
    // wrong lease, and a single ack of a message that does not exist.
    let mut fused: Vec<JoinHandle<Resp>> = good
        .iter()
        .map(|p| {
            send(
                port,
                "/api/v1/ack/batch",
                json!({"acknowledgments": acks(&p.keys, &p.lease)}),
            )
        })
        .collect();
    let wrong_lease = random_uuid();
    fused.push(send(
        port,
        "/api/v1/ack/batch",
        json!({"acknowledgments": acks(&bad.keys, &wrong_lease)}),
    ));
    let unknown = json!({"transactionId": "no-such-message", "partitionId": good[0].keys[0].1,
                         "status": "completed"});
    fused.push(send(port, "/api/v1/ack", unknown));
    // Invalid (400 before any lane): answered while the others still wait.
    let invalid = send(
        port,
        "/api/v1/ack",
        json!({"transactionId": "nul\u{0}byte", "partitionId": good[1].keys[0].1}),
    )
    .join()
    .unwrap();
    assert_eq!(invalid.status, 400, "{}", invalid.text());
    assert!(
        invalid.error_lc().contains("transactionid"),
        "names the field: {}",
        invalid.text()
    );
    let n_fused = fused.len();
    check_for(std::time::Duration::from_secs(20), || {
        (queued_lines(&b) >= before + n_fused).then_some(())
    });
    release_lane(&mut holder, &blk, blockers);
    let mut answers: Vec<Resp> = fused.into_iter().map(|h| h.join().unwrap()).collect();
    let unknown = answers.pop().unwrap();
    let bad_answer = answers.pop().unwrap();
    for (g, (r, p)) in answers.iter().zip(&good).enumerate() {
        assert_eq!(r.status, 200, "good request {g}: {}", r.text());
        let arr = r.json_array();
        assert_eq!(arr.len(), PER_PARTITION, "good request {g}: {arr:?}");
        for (i, (e, (tx, pid))) in arr.iter().zip(&p.keys).enumerate() {
            assert_eq!(e["index"], i, "request {g} item {i}: {e}");
            assert_eq!(
                e["transactionId"],
                json!(tx),
                "request {g} got another slice"
            );
            assert_eq!(e["partitionId"], json!(pid), "request {g}: {e}");
            assert_eq!(e["success"], true, "request {g}: {e}");
            assert_eq!(e["partitionName"], format!("g{g}"));
            assert_eq!(
                e["leaseReleased"],
                i == PER_PARTITION - 1,
                "released by the last ack only: {e}"
            );
        }
    }
    assert_eq!(bad_answer.status, 200, "{}", bad_answer.text());
    let arr = bad_answer.json_array();
    assert_eq!(arr.len(), BAD_MSGS);
    for (i, e) in arr.iter().enumerate() {
        assert_eq!(e["index"], i);
        assert_eq!(e["transactionId"], json!(bad.keys[i].0));
        assert_eq!(e["success"], false, "{e}");
        assert_eq!(e["error"], "Invalid or expired lease");
    }
    assert_eq!(unknown.status, 200, "{}", unknown.text());
    let arr = unknown.json_array();
    assert_eq!(arr.len(), 1);
    assert_eq!(arr[0]["index"], 0);
    assert_eq!(arr[0]["success"], false);
    assert_eq!(arr[0]["error"], "Message not found");

    // One batch: the broker says so, and one transaction moved every good cursor.
    let acks_in_batch = GOOD * PER_PARTITION + BAD_MSGS + 1;
    let line = format!("ack lane: fused {n_fused} requests ({acks_in_batch} acks) into one batch");
    assert!(
        b.log().contains(&line),
        "expected '{line}' in the log:\n{}",
        b.log_tail(40)
    );
    let xids = db.count(
        "SELECT count(DISTINCT pc.xmin::text) FROM queen.partition_consumers pc
           JOIN queen.partitions p ON p.id = pc.partition_id WHERE p.name LIKE 'g%'",
        &[],
    );
    assert_eq!(xids, 1, "every good cursor moved in one transaction");

    // The refused acks changed nothing: the real lease still acks the bad partition.
    let r = b.post_json(
        "/api/v1/ack/batch",
        &json!({"acknowledgments": acks(&bad.keys, &bad.lease)}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.json_array().iter().all(|e| e["success"] == true),
        "{}",
        r.text()
    );
    // Every message in was acknowledged once and nothing comes back.
    assert_eq!(
        db.count(
            "SELECT coalesce(sum(total_messages_consumed), 0)::bigint FROM queen.partition_consumers",
            &[]
        ),
        pushed as i64
    );
    assert!(
        b.pop("/api/v1/pop/queue/af?batch=100&partitions=64")
            .is_none(),
        "nothing acked is delivered again"
    );
}

#[test]
fn concurrent_consumers_acking_through_fused_batches_see_each_message_once() {
    let db = Db::fresh();
    let b = Arc::new(Broker::start(&db));
    const PARTITIONS: usize = 20;
    const PER: usize = 50;
    const CONSUMERS: usize = 8;
    for p in 0..PARTITIONS {
        b.push_n("fc", &format!("p{p}"), &format!("p{p}-"), PER);
    }
    let handles: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut c = Conn::connect(b.port).expect("connect");
                let mut seen = Vec::new();
                let mut empty = 0;
                while empty < 3 {
                    let r = c
                        .get("/api/v1/pop/queue/fc?batch=7&wait=true&timeout=300")
                        .expect("pop");
                    if r.status == 204 {
                        empty += 1;
                        continue;
                    }
                    assert_eq!(r.status, 200, "{}", r.text());
                    empty = 0;
                    let pop = r.json();
                    let lease = pop["leaseId"].as_str().unwrap().to_string();
                    let keys: Vec<(String, String)> = messages(&pop)
                        .iter()
                        .map(|m| {
                            (
                                m["transactionId"].as_str().unwrap().to_string(),
                                m["partitionId"].as_str().unwrap().to_string(),
                            )
                        })
                        .collect();
                    let r = c
                        .post_json(
                            "/api/v1/ack/batch",
                            &json!({"acknowledgments": acks(&keys, &lease)}),
                        )
                        .expect("ack");
                    assert_eq!(r.status, 200, "{}", r.text());
                    let arr = r.json_array();
                    assert_eq!(arr.len(), keys.len());
                    for (e, (tx, _)) in arr.iter().zip(&keys) {
                        assert_eq!(e["transactionId"], json!(tx), "own slice: {e}");
                        assert_eq!(e["success"], true, "{e}");
                    }
                    seen.extend(keys.into_iter().map(|k| k.0));
                }
                seen
            })
        })
        .collect();
    let mut all: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "no message delivered twice");
    assert_eq!(n, PARTITIONS * PER, "every message delivered and acked");
}

#[test]
fn a_fused_ack_call_postgresql_rejects_is_rerun_request_by_request() {
    const REQS: usize = 4;
    const PER: usize = 3;
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("NUM_WORKERS", "1")
        .env("LOG_LEVEL", "debug")
        .start();
    let mut pushed = 0;
    for g in 0..REQS {
        pushed += b
            .push_n("rr", &format!("g{g}"), &format!("g{g}-"), PER)
            .len();
    }
    pushed += b.push_n("rr", "blk", "blk-", LANE_SLOTS).len();
    pushed += b.push_n("rr", "poison", "poison-", PER).len();
    let good: Vec<Popped> = (0..REQS)
        .map(|g| pop_partition(&b, "rr", &format!("g{g}"), PER))
        .collect();
    let blk = pop_partition(&b, "rr", "blk", LANE_SLOTS);
    let poison = pop_partition(&b, "rr", "poison", PER);
    // PostgreSQL itself refuses any cursor move of the poisoned partition: a
    // valid request that only the database rejects, sinking a fused call.
    db.client()
        .batch_execute(&format!(
            "CREATE FUNCTION public.poison() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'poisoned partition'; END $$;
             CREATE TRIGGER poison BEFORE UPDATE ON queen.partition_consumers FOR EACH ROW
             WHEN (NEW.partition_id = '{}'::uuid) EXECUTE FUNCTION public.poison();",
            poison.keys[0].1
        ))
        .expect("install the trigger");

    let port = b.port;
    let (mut holder, blockers) = fill_lane(&db, port, &blk);
    let before = queued_lines(&b);
    let mut fused: Vec<JoinHandle<Resp>> = good
        .iter()
        .map(|p| {
            send(
                port,
                "/api/v1/ack/batch",
                json!({"acknowledgments": acks(&p.keys, &p.lease)}),
            )
        })
        .collect();
    fused.push(send(
        port,
        "/api/v1/ack/batch",
        json!({"acknowledgments": acks(&poison.keys, &poison.lease)}),
    ));
    let n_fused = REQS + 1;
    check_for(std::time::Duration::from_secs(20), || {
        (queued_lines(&b) >= before + n_fused).then_some(())
    });
    release_lane(&mut holder, &blk, blockers);

    let mut answers: Vec<Resp> = fused.into_iter().map(|h| h.join().unwrap()).collect();
    let refused = answers.pop().unwrap();
    assert_eq!(refused.status, 500, "{}", refused.text());
    assert!(
        refused.text().contains("poisoned partition"),
        "{}",
        refused.text()
    );
    for (g, (r, p)) in answers.iter().zip(&good).enumerate() {
        assert_eq!(r.status, 200, "good request {g}: {}", r.text());
        let arr = r.json_array();
        assert_eq!(arr.len(), PER, "good request {g}: {arr:?}");
        for (e, (tx, _)) in arr.iter().zip(&p.keys) {
            assert_eq!(e["transactionId"], json!(tx), "request {g}: own slice");
            assert_eq!(e["success"], true, "request {g}: {e}");
        }
    }
    let log = b.log();
    let line = format!(
        "ack lane: fused {} requests ({} acks) into one batch",
        REQS + 1,
        (REQS + 1) * PER
    );
    assert!(
        log.contains(&line),
        "expected '{line}':\n{}",
        b.log_tail(40)
    );
    assert!(
        log.contains("fused batch refused (poisoned partition); retrying request by request"),
        "{}",
        b.log_tail(40)
    );
    // Re-run alone, each good request committed on its own.
    let xids = db.count(
        "SELECT count(DISTINCT pc.xmin::text) FROM queen.partition_consumers pc
           JOIN queen.partitions p ON p.id = pc.partition_id WHERE p.name LIKE 'g%'",
        &[],
    );
    assert_eq!(xids, REQS as i64, "one transaction per re-run request");

    // The refused request changed nothing: without the trigger its lease still acks.
    db.client()
        .batch_execute("DROP TRIGGER poison ON queen.partition_consumers")
        .expect("drop the trigger");
    let r = b.post_json(
        "/api/v1/ack/batch",
        &json!({"acknowledgments": acks(&poison.keys, &poison.lease)}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.json_array().iter().all(|e| e["success"] == true),
        "{}",
        r.text()
    );
    // Every message in was acknowledged once and nothing comes back.
    assert_eq!(
        db.count(
            "SELECT coalesce(sum(total_messages_consumed), 0)::bigint FROM queen.partition_consumers",
            &[]
        ),
        pushed as i64
    );
    assert!(
        b.pop("/api/v1/pop/queue/rr?batch=100&partitions=64")
            .is_none(),
        "nothing acked is delivered again"
    );
}
