//! Timers (issue 14, http-api.md §16, semantics.md §20): exactly-once firing
//! across brokers, a same-second burst, a broker killed mid-fire, cancel and
//! reschedule, every limit's code, tenancy, encryption, peek/list/count,
//! `too_late`, and a parked pop woken by a fire. Real PostgreSQL, real
//! broker processes. The PostgreSQL restart is `timers_pg_restart.rs` (it
//! stops this binary's cluster, which would break the tests running beside it).

mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// One schedule op.
fn sched(queue: &str, key: &str, delay_ms: i64, txn: &str, payload: Value) -> Value {
    json!({"op": "schedule", "queue": queue, "timerKey": key, "delayMs": delay_ms,
           "txn": txn, "payload": B64.encode(payload.to_string())})
}

/// `POST /api/v1/timers`; asserts 200 and returns the results.
fn apply(b: &Broker, ops: Vec<Value>) -> Vec<Value> {
    let r = b.post_json("/api/v1/timers", &json!({ "operations": ops }));
    assert_eq!(r.status, 200, "timers answered {}: {}", r.status, r.text());
    r.json()["results"].as_array().cloned().expect("results")
}

/// Schedules `n` timers `{prefix}{i}` (txn = key) due in `delay_ms`, 250 per call.
fn schedule_many(b: &Broker, queue: &str, prefix: &str, n: usize, delay_ms: i64) {
    let keys = names(prefix, 0..n);
    for chunk in keys.chunks(250) {
        let ops = chunk
            .iter()
            .map(|k| sched(queue, k, delay_ms, k, json!({ "k": k })))
            .collect();
        let res = apply(b, ops);
        assert!(res.iter().all(|r| r["ok"] == true), "{res:?}");
    }
}

/// Pending timers in the database (all tenants).
fn pending(db: &Db) -> i64 {
    db.count("SELECT count(*) FROM queen.log_timers", &[])
}

/// Waits until no timer is pending.
fn wait_fired(db: &Db, deadline: Duration) {
    check_for(deadline, || (pending(db) == 0).then_some(()));
}

/// Pops `queue` with autoAck until `expected` messages came or `deadline`
/// passed; asserts none came twice, then that nothing more is there.
fn drain(b: &Broker, queue: &str, expected: usize, deadline: Duration) -> HashSet<String> {
    let mut seen = HashSet::new();
    let end = Instant::now() + deadline;
    while seen.len() < expected && Instant::now() < end {
        let Some(pop) = b.pop(&format!(
            "/api/v1/pop/queue/{queue}?batch=1000&autoAck=true"
        )) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        for t in txids(&pop) {
            assert!(seen.insert(t.clone()), "{t} delivered twice");
        }
    }
    let extra = b.pop(&format!(
        "/api/v1/pop/queue/{queue}?batch=1000&autoAck=true"
    ));
    assert!(extra.is_none(), "more than {expected} messages: {extra:?}");
    seen
}

/// A Prometheus sample of `b` (0 when absent).
fn prom(b: &Broker, name: &str) -> f64 {
    let text = b.get("/metrics/prometheus").text();
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_timer_fires_exactly_once_across_three_brokers() {
    let db = Db::fresh();
    let brokers: Vec<Broker> = (0..3)
        .map(|_| {
            Broker::builder(&db)
                .env("QUEEN_SWEEPER_CLAIM_BATCH", "20")
                .start()
        })
        .collect();
    // every broker schedules a third; all fall due together, so all three fire
    for (i, b) in brokers.iter().enumerate() {
        schedule_many(b, "tri", &format!("b{i}-"), 200, 300);
    }
    wait_fired(&db, Duration::from_secs(20));
    let got = drain(&brokers[0], "tri", 600, Duration::from_secs(10));
    assert_eq!(got.len(), 600);
    let stored = db.count(
        "SELECT count(DISTINCT transaction_id) FROM queen.messages",
        &[],
    );
    assert_eq!(stored, 600);
    // the brokers' own counts add up to one fire per timer (a count is bumped
    // when the round's answer is back, just after its commit)
    let fired = || -> f64 {
        brokers
            .iter()
            .map(|b| prom(b, "queen_timers_fired_total"))
            .sum()
    };
    let _ = try_check_for(Duration::from_secs(5), || (fired() >= 600.0).then_some(()));
    assert_eq!(fired(), 600.0);
}

#[test]
fn ten_thousand_timers_due_in_one_second_fire_once() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    // every call aims at the same instant, 3 s from now, whenever it is sent
    let due = Instant::now() + Duration::from_secs(3);
    let keys = names("t", 0..10_000);
    std::thread::scope(|s| {
        for part in keys.chunks(2_500) {
            let b = &b;
            s.spawn(move || {
                for chunk in part.chunks(250) {
                    let delay = due.saturating_duration_since(Instant::now()).as_millis() as i64;
                    let ops = chunk
                        .iter()
                        .map(|k| sched("burst", k, delay, k, json!({ "k": k })))
                        .collect();
                    assert!(apply(b, ops).iter().all(|r| r["ok"] == true));
                }
            });
        }
    });
    assert!(Instant::now() < due, "scheduling outlasted the due time");
    let spread = db.query(
        "SELECT count(*), extract(epoch FROM max(deliver_at) - min(deliver_at))::float8 \
           FROM queen.log_timers",
        &[],
    );
    assert_eq!(spread[0].get::<_, i64>(0), 10_000);
    assert!(spread[0].get::<_, f64>(1) < 1.0, "not due in one second");
    wait_fired(&db, Duration::from_secs(30));
    let got = drain(&b, "burst", 10_000, Duration::from_secs(30));
    let want: HashSet<String> = keys.into_iter().collect();
    assert_eq!(got, want);
}

#[test]
fn a_broker_killed_mid_fire_loses_no_timer_and_doubles_none() {
    let db = Db::fresh();
    // small rounds so the fire takes a while and the kill lands inside it
    let slow = |db: &Db| {
        Broker::builder(db)
            .env("QUEEN_SWEEPER_CLAIM_BATCH", "10")
            .spawn()
    };
    let mut victim = slow(&db);
    victim.wait_ready();
    let mut other = Broker::builder(&db).env("QUEEN_SWEEPER", "false").start();
    schedule_many(&other, "crash", "c", 3_000, 0);
    check_for(Duration::from_secs(20), || {
        let fired = db.count("SELECT count(*) FROM queen.messages", &[]);
        (fired > 0).then_some(())
    });
    victim.signal(libc::SIGKILL);
    assert!(victim.wait_exit(Duration::from_secs(5)).is_some());
    let left = pending(&db);
    assert!(
        left > 0,
        "the fire finished before the kill; nothing tested"
    );
    // a sweeping broker takes over what the dead one held
    drop(other);
    other = slow(&db);
    other.wait_ready();
    wait_fired(&db, Duration::from_secs(30));
    let got = drain(&other, "crash", 3_000, Duration::from_secs(20));
    assert_eq!(got.len(), 3_000);
}

#[test]
fn a_cancelled_timer_never_fires() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    apply(
        &b,
        vec![
            sched("cq", "gone", 400, "tx-gone", json!(1)),
            sched("cq", "kept", 400, "tx-kept", json!(2)),
        ],
    );
    let r = b.delete("/api/v1/timers/cq/gone?txn=tx-gone");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = r.json();
    assert_eq!(
        (r["ok"].clone(), r["status"].clone()),
        (json!(true), json!("cancelled"))
    );
    assert_eq!(r["txn"], "tx-gone");
    // cancelling again: absent, the txn passed echoed back
    let again = b.delete("/api/v1/timers/cq/gone?txn=tx-gone").json();
    assert_eq!(again["status"], "absent");
    assert_eq!(again["txn"], "tx-gone");
    wait_fired(&db, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let got = drain(&b, "cq", 1, Duration::from_secs(5));
    assert_eq!(got, HashSet::from(["tx-kept".to_string()]));
}

#[test]
fn reschedule_moves_the_fire_time() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let first = apply(
        &b,
        vec![sched("rq", "k/with/slash", 1_000, "tx1", json!("old"))],
    );
    assert_eq!(first[0]["status"], "scheduled");
    let mut op = sched("rq", "k/with/slash", 3_000, "tx2", json!("new"));
    op["op"] = json!("reschedule");
    let second = apply(&b, vec![op]);
    assert_eq!(second[0]["status"], "rescheduled");
    assert!(second[0]["deliverAt"].as_str() > first[0]["deliverAt"].as_str());
    std::thread::sleep(Duration::from_millis(1_800));
    let peek = b.get("/api/v1/timers/rq/k/with/slash").json();
    assert_eq!(peek["found"], true, "fired at the old time: {peek}");
    assert_eq!(peek["txn"], "tx2");
    wait_fired(&db, Duration::from_secs(10));
    let pop = b.pop("/api/v1/pop/queue/rq?autoAck=true").expect("fired");
    let m = &messages(&pop)[0];
    assert_eq!(m["transactionId"], "tx2");
    assert_eq!(m["data"], "new");
    assert_eq!(m["id"], second[0]["messageId"]);
}

#[test]
fn every_limit_answers_its_code_and_writes_nothing() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TIMERS_MAX_OPS_PER_CALL", "3")
        .env("QUEEN_TIMERS_MAX_PAYLOAD_BYTES", "64")
        .env("QUEEN_TIMERS_MAX_HORIZON_S", "60")
        .start();
    let ok = || sched("lq", "k", 10, "t", json!({"a": 1}));
    let with = |f: &str, v: Value| {
        let mut op = ok();
        op[f] = v;
        op
    };
    let bad = "timers_bad_request";
    let mut cases: Vec<(Value, u16, &str, Option<&str>)> = vec![
        (
            json!([with("delayMs", json!(60_001))]),
            403,
            "timer_horizon_exceeded",
            None,
        ),
        (
            json!([with(
                "payload",
                json!(B64.encode("\"".repeat(30) + &"x".repeat(40) + "\""))
            )]),
            413,
            "payload_too_large",
            None,
        ),
        (
            json!([ok(), ok()]),
            400,
            bad,
            Some("timers_duplicate_key_in_call"),
        ),
        (
            json!([with("txn", Value::Null)]),
            400,
            bad,
            Some("timers_missing_field"),
        ),
        (
            json!([with("delayMs", Value::Null)]),
            400,
            bad,
            Some("timers_missing_field"),
        ),
        (
            json!([with("op", json!("fire"))]),
            400,
            bad,
            Some("timers_unknown_op"),
        ),
        (
            json!([with("payload", json!("***"))]),
            400,
            bad,
            Some("timers_bad_payload"),
        ),
        (
            json!([with("payload", json!(B64.encode("nope")))]),
            400,
            bad,
            Some("timers_bad_payload"),
        ),
        (
            json!([with("payloadZstd", json!(true))]),
            400,
            bad,
            Some("timers_zstd_unsupported"),
        ),
        (
            json!([with("queue", json!(""))]),
            400,
            bad,
            Some("timers_bad_field"),
        ),
        (
            json!([with("extra", json!(1))]),
            400,
            bad,
            Some("timers_unknown_field"),
        ),
    ];
    for f in [
        "producerSub",
        "producer_sub",
        "messageId",
        "message_id",
        "tenant",
        "tenantId",
        "tenant_id",
        "deliverAt",
        "deliver_at",
        "delaySeconds",
        "delay_seconds",
        "attempts",
        "claimToken",
        "claim_token",
        "claimedUntil",
        "_private",
    ] {
        cases.push((
            json!([with(f, json!("x"))]),
            400,
            bad,
            Some("timers_server_owned_field"),
        ));
    }
    let four: Vec<Value> = (0..4)
        .map(|i| sched("lq", &i.to_string(), 10, "t", json!(1)))
        .collect();
    cases.push((json!(four), 400, bad, Some("timers_too_many_ops")));
    for (ops, status, code, reason) in cases {
        // the valid op first: a refusal anywhere in the call writes nothing
        let mut all = vec![sched("lq", "valid-neighbour", 10, "tv", json!(0))];
        all.extend(ops.as_array().unwrap().iter().cloned());
        if all.len() > 3 {
            all.remove(0);
        }
        let r = b.post_json("/api/v1/timers", &json!({ "operations": all }));
        assert_eq!(r.status, status, "{ops}: {}", r.text());
        let body = r.json();
        assert_eq!(body["error"], code, "{ops}: {body}");
        if let Some(reason) = reason {
            assert_eq!(body["reason"], reason, "{ops}: {body}");
        }
    }
    let r = b.post_json(
        "/api/v1/timers",
        &json!({"tenant": "x", "operations": [ok()]}),
    );
    assert_eq!(r.json()["reason"], "timers_tenant_not_an_input");
    let long = "p".repeat(129);
    let r = b.get(&format!("/api/v1/timers/lq?mode=count&prefix={long}"));
    assert_eq!((r.status, r.json()["error"].clone()), (400, json!(bad)));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(pending(&db), 0);
    assert_eq!(db.count("SELECT count(*) FROM queen.messages", &[]), 0);
}

#[test]
fn tenant_a_cannot_see_or_cancel_tenant_bs_timers() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start();
    let (ta, tb) = (random_uuid(), random_uuid());
    let as_tenant = |t: &str, method: &str, path: &str, body: Option<&Value>| {
        let mut c = b.conn();
        let bytes = body.map(|v| v.to_string().into_bytes());
        let mut headers = vec![("x-queen-tenant", t)];
        if bytes.is_some() {
            headers.push(("content-type", "application/json"));
        }
        c.request(method, path, &headers, bytes.as_deref())
            .expect("request")
    };
    let ops = json!({"operations": [sched("shared", "secret", 60_000, "ta-1", json!("a"))]});
    let r = as_tenant(&ta, "POST", "/api/v1/timers", Some(&ops));
    assert_eq!(r.status, 200, "{}", r.text());
    let peek = as_tenant(&tb, "GET", "/api/v1/timers/shared/secret", None).json();
    assert_eq!(peek, json!({"found": false}));
    let list = as_tenant(&tb, "GET", "/api/v1/timers/shared", None).json();
    assert_eq!(list["rows"], json!([]));
    let count = as_tenant(&tb, "GET", "/api/v1/timers/shared?mode=count", None).json();
    assert_eq!(count["count"], 0);
    let pend = as_tenant(&tb, "GET", "/api/v1/resources/timers", None).json();
    assert_eq!(pend["total"], 0);
    let cancel = as_tenant(&tb, "DELETE", "/api/v1/timers/shared/secret", None).json();
    assert_eq!(cancel["status"], "absent");
    let in_batch =
        json!({"operations": [{"op": "cancel", "queue": "shared", "timerKey": "secret"}]});
    let r = as_tenant(&tb, "POST", "/api/v1/timers", Some(&in_batch)).json();
    assert_eq!(r["results"][0]["status"], "absent");
    // B's own timer of the same key is a different timer
    let mine = json!({"operations": [sched("shared", "secret", 60_000, "tb-1", json!("b"))]});
    let r = as_tenant(&tb, "POST", "/api/v1/timers", Some(&mine)).json();
    assert_eq!(r["results"][0]["status"], "scheduled");
    let peek = as_tenant(&ta, "GET", "/api/v1/timers/shared/secret", None).json();
    assert_eq!(
        (peek["found"].clone(), peek["txn"].clone()),
        (json!(true), json!("ta-1"))
    );
    assert_eq!(pending(&db), 2);
}

#[test]
fn peek_list_count_too_late_and_encryption_at_rest() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", &"ab".repeat(32))
        .start();
    b.configure("sealed", json!({"encryptionEnabled": true}));
    let keys = names("p/", 0..5);
    apply(
        &b,
        keys.iter()
            .map(|k| sched("sealed", k, 60_000, k, json!({"secret": "plain-text-here"})))
            .collect(),
    );
    let peek = b.get("/api/v1/timers/sealed/p/3").json();
    assert_eq!(peek["encrypted"], true, "{peek}");
    let stored = B64.decode(peek["payload"].as_str().unwrap()).unwrap();
    let stored = String::from_utf8(stored).unwrap();
    assert!(
        !stored.contains("plain-text-here") && stored.contains("authTag"),
        "{stored}"
    );
    let page = b.get("/api/v1/timers/sealed?limit=2").json();
    assert_eq!(page["truncated"], true);
    assert_eq!(page["nextAfter"], "p/1");
    let rest = b.get("/api/v1/timers/sealed?limit=100&after=p/1").json();
    assert_eq!(rest["rows"].as_array().unwrap().len(), 3);
    assert_eq!(rest["truncated"], false);
    let count = b.get("/api/v1/timers/sealed?mode=count&prefix=p/").json();
    assert_eq!(count["count"], 5);
    let pend = b.get("/api/v1/resources/timers").json();
    assert_eq!(pend["queues"][0]["pending"], 5);
    assert_eq!(prom_after(&b, "queen_timers_pending", 5.0), 5.0);

    // a row held by a fire in progress: cancel and reschedule are too late
    let mut fire = db.client();
    let mut tx = fire.transaction().unwrap();
    tx.execute(
        "SELECT 1 FROM queen.log_timers WHERE timer_key = 'p/0' FOR UPDATE",
        &[],
    )
    .unwrap();
    let r = b.delete("/api/v1/timers/sealed/p/0").json();
    assert_eq!(
        (r["ok"].clone(), r["status"].clone()),
        (json!(false), json!("too_late"))
    );
    let r = apply(&b, vec![sched("sealed", "p/0", 0, "again", json!(0))]);
    assert_eq!(r[0]["status"], "too_late");
    tx.rollback().unwrap();

    // fired on an encrypted queue: stored as an envelope, popped as plaintext
    let mut now = sched(
        "sealed",
        "p/4",
        -1,
        "p/4",
        json!({"secret": "plain-text-here"}),
    );
    now["op"] = json!("reschedule");
    apply(&b, vec![now]);
    let pop = check_for(Duration::from_secs(10), || {
        b.pop("/api/v1/pop/queue/sealed?autoAck=true")
    });
    assert_eq!(messages(&pop)[0]["data"]["secret"], "plain-text-here");
    let enc = db.count(
        "SELECT count(*) FROM queen.messages WHERE is_encrypted AND payload::text NOT LIKE '%plain-text%'",
        &[],
    );
    assert_eq!(enc, 1);
}

/// Polls a Prometheus sample until it reads `want` (the snapshot is cached).
fn prom_after(b: &Broker, name: &str, want: f64) -> f64 {
    try_check_for(Duration::from_secs(10), || {
        let v = prom(b, name);
        (v == want).then_some(v)
    })
    .unwrap_or_else(|| prom(b, name))
}

#[test]
fn a_parked_pop_wakes_when_its_timer_fires() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    apply(&b, vec![sched("wake", "w", 600, "w1", json!("hi"))]);
    let t0 = Instant::now();
    let r = b.get("/api/v1/pop/queue/wake?wait=true&timeout=10000&autoAck=true");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(txids(&r.json()), vec!["w1"]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_millis(2_500),
        "woken after {waited:?}"
    );
}

#[test]
fn the_kill_switch_stops_scheduling_and_pauses_the_fire() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let switch = |body: Value| {
        let r = b.post_json("/api/v1/system/kv-timers", &body);
        assert_eq!(r.status, 200, "{}", r.text());
    };
    apply(&b, vec![sched("ks", "cancel-me", 60_000, "c", json!(0))]);
    switch(json!({"timersScheduleEnabled": false, "timersFireEnabled": false}));
    let r = b.post_json(
        "/api/v1/timers",
        &json!({"operations": [sched("ks", "new", 0, "n", json!(1))]}),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"], "kv_unavailable");
    assert!(r.header("retry-after").is_some());
    // cancelling is never switched off
    assert_eq!(
        b.delete("/api/v1/timers/ks/cancel-me").json()["status"],
        "cancelled"
    );
    // a due timer waits while the fire is off (scheduled behind the switch's back)
    switch(json!({"timersScheduleEnabled": true}));
    apply(&b, vec![sched("ks", "due", 0, "due", json!(2))]);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(pending(&db), 1, "fired while the fire was switched off");
    switch(json!({"timersFireEnabled": true}));
    wait_fired(&db, Duration::from_secs(5));
    assert_eq!(drain(&b, "ks", 1, Duration::from_secs(5)).len(), 1);
}

#[test]
fn a_write_only_token_schedules_but_cannot_cancel_and_the_sub_is_stamped() {
    use jsonwebtoken::{encode, EncodingKey, Header};
    const SECRET: &str = "timers-secret-0123456789abcdef";
    let token = |role: &str| {
        let exp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3600;
        let claims = json!({"sub": format!("{role}-svc"), "role": role, "exp": exp});
        let t = encode(
            &Header::default(),
            &claims,
            &EncodingKey::from_secret(SECRET.as_bytes()),
        );
        format!("Bearer {}", t.unwrap())
    };
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", SECRET)
        .start();
    let call = |auth: &str, method: &str, path: &str, body: Option<&Value>| {
        let bytes = body.map(|v| v.to_string().into_bytes());
        let mut h = vec![("Authorization", auth)];
        if bytes.is_some() {
            h.push(("Content-Type", "application/json"));
        }
        b.conn()
            .request(method, path, &h, bytes.as_deref())
            .expect("request")
    };
    let (wo, rw) = (token("write-only"), token("read-write"));
    let ops = json!({"operations": [
        sched("jq", "k", 60_000, "tk", json!({"a": 1})),
        sched("jq", "now", 0, "tnow", json!({"a": 2}))]});
    let r = call(&wo, "POST", "/api/v1/timers", Some(&ops));
    assert_eq!(r.status, 200, "{}", r.text());
    let with_cancel = json!({"operations": [
        sched("jq", "k2", 60_000, "tk2", json!(2)),
        {"op": "cancel", "queue": "jq", "timerKey": "k"}]});
    assert_eq!(
        call(&wo, "POST", "/api/v1/timers", Some(&with_cancel)).status,
        403
    );
    assert_eq!(call(&wo, "DELETE", "/api/v1/timers/jq/k", None).status, 403);
    // the refused batch wrote nothing
    let peek = call(&rw, "GET", "/api/v1/timers/jq/k2", None).json();
    assert_eq!(peek["found"], false);
    let r = call(&rw, "POST", "/api/v1/timers", Some(&with_cancel));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["results"][1]["status"], "cancelled");
    check_for(Duration::from_secs(10), || {
        let n = db.count(
            "SELECT count(*) FROM queen.messages WHERE transaction_id = 'tnow'",
            &[],
        );
        (n == 1).then_some(())
    });
    let sub: Option<String> = db.query(
        "SELECT producer_sub FROM queen.messages WHERE transaction_id = 'tnow'",
        &[],
    )[0]
    .get(0);
    assert_eq!(sub.as_deref(), Some("write-only-svc"));
}
