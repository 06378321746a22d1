//! Background jobs (semantics.md §12): retention, completed retention,
//! max-wait eviction, expired-lease reclaim, and the advisory lock that lets
//! one broker of a cluster run a job at a time.
mod common;

use common::*;
use std::time::Duration;

/// Generous: a loaded machine may delay a 200 ms cycle a lot.
const JOB_DEADLINE: Duration = Duration::from_secs(30);

fn fast_jobs(db: &Db) -> BrokerBuilder {
    Broker::builder(db)
        .env("RETENTION_INTERVAL", "200")
        .env("EVICTION_INTERVAL", "200")
}

fn messages_of(db: &Db, queue: &str) -> i64 {
    db.count(
        "SELECT count(*) FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
}

/// Queue `ret` (retention 1 s) with 3 messages and queue `keep` (no
/// retention) with 2, the fixture of the retention tests.
fn seed_ret_and_keep(b: &Broker) {
    b.configure(
        "ret",
        json!({"retentionEnabled": true, "retentionSeconds": 1}),
    );
    b.configure("keep", json!({}));
    b.push_n("ret", "p", "a", 3);
    b.push_n("keep", "p", "k", 2);
}

fn history(db: &Db, kind: &str) -> i64 {
    db.count(
        "SELECT coalesce(sum(messages_deleted), 0)::bigint FROM queen.retention_history \
         WHERE retention_type = $1",
        &[&kind],
    )
}

#[test]
fn retention_deletes_messages_older_than_retention_seconds() {
    let db = Db::fresh();
    let b = fast_jobs(&db).start();
    seed_ret_and_keep(&b);
    check_for(JOB_DEADLINE, || {
        (messages_of(&db, "ret") == 0).then_some(())
    });
    assert_eq!(history(&db, "retention"), 3);
    assert_eq!(
        messages_of(&db, "keep"),
        2,
        "queues without retention keep everything"
    );
}

#[test]
fn completed_retention_deletes_only_what_every_group_consumed() {
    let db = Db::fresh();
    let b = fast_jobs(&db).start();
    b.configure("cr", json!({"completedRetentionSeconds": 1}));
    b.push_n("cr", "p", "a", 3);
    let pop = b
        .pop("/api/v1/pop/queue/cr?batch=2&autoAck=true")
        .expect("two");
    assert_eq!(txids(&pop), vec!["a0", "a1"]);
    check_for(JOB_DEADLINE, || {
        (history(&db, "completed_retention") == 2).then_some(())
    });
    assert_eq!(messages_of(&db, "cr"), 1, "the unconsumed a2 stays");
    let pop = b
        .pop("/api/v1/pop/queue/cr?batch=10&autoAck=true")
        .expect("a2");
    assert_eq!(txids(&pop), vec!["a2"]);
}

#[test]
fn eviction_deletes_messages_waiting_longer_than_max_wait() {
    let db = Db::fresh();
    let b = fast_jobs(&db).start();
    b.configure("ev", json!({"maxWaitTimeSeconds": 1}));
    b.push_n("ev", "p", "a", 2);
    check_for(JOB_DEADLINE, || (messages_of(&db, "ev") == 0).then_some(()));
    assert_eq!(history(&db, "max_wait_time_eviction"), 2);
}

#[test]
fn pop_never_delivers_a_message_older_than_max_wait() {
    // Eviction far away: only pop's own condition can keep the old message out.
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("EVICTION_INTERVAL", "600000")
        .start();
    b.configure("mw", json!({"maxWaitTimeSeconds": 1}));
    b.push_n("mw", "p", "old", 2);
    // Age the two past the limit on the database clock (pop compares with now()).
    db.exec(
        "UPDATE queen.messages SET created_at = created_at - interval '5 seconds' \
         WHERE transaction_id LIKE 'old%'",
    );
    db.exec(
        "UPDATE queen.partition_lookup SET last_message_created_at = \
         last_message_created_at - interval '5 seconds'",
    );
    b.push_n("mw", "p", "new", 1);
    for path in [
        "/api/v1/pop/queue/mw?batch=10&consumerGroup=g",
        "/api/v1/pop/queue/mw/partition/p?batch=10",
        "/api/v1/pop/queue/mw?batch=10&consumerGroup=c&autopilot=true",
    ] {
        let pop = b.pop(path).expect("the fresh message");
        assert_eq!(txids(&pop), vec!["new0"], "{path}: {pop}");
    }
    // The conflation reader too: a partition holding only overdue messages has
    // nothing to deliver (not even its newest).
    b.configure("mw2", json!({"maxWaitTimeSeconds": 1}));
    b.push_n("mw2", "p", "old", 1);
    db.exec(
        "UPDATE queen.messages m SET created_at = m.created_at - interval '5 seconds' \
           FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id \
          WHERE pt.id = m.partition_id AND q.name = 'mw2'",
    );
    let pop = b.pop("/api/v1/pop/queue/mw2?batch=10&consumerGroup=cf&conflation=true&wait=false");
    let got = pop.map(|p| txids(&p)).unwrap_or_default();
    assert!(got.is_empty(), "conflated pop delivered {got:?}");
    assert_eq!(messages_of(&db, "mw"), 3, "nothing evicted yet");
}

#[test]
fn expired_leases_are_reclaimed() {
    let db = Db::fresh();
    let b = fast_jobs(&db).start();
    b.configure("lr", json!({"leaseTime": 1}));
    b.push_n("lr", "p", "a", 1);
    b.pop("/api/v1/pop/queue/lr?batch=1").expect("leased");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.partition_consumers WHERE worker_id IS NOT NULL",
            &[]
        ),
        1
    );
    check_for(JOB_DEADLINE, || {
        (db.count(
            "SELECT count(*) FROM queen.partition_consumers WHERE worker_id IS NULL AND behind",
            &[],
        ) == 1)
            .then_some(())
    });
    let pop = b
        .pop("/api/v1/pop/queue/lr?batch=1&autoAck=true")
        .expect("redelivered");
    assert_eq!(txids(&pop), vec!["a0"]);
}

#[test]
fn two_brokers_on_one_database_never_run_the_same_job_at_once() {
    let db = Db::fresh();
    let fast = |db: &Db| {
        Broker::builder(db)
            .env("RETENTION_INTERVAL", "30")
            .env("EVICTION_INTERVAL", "30")
            .start()
    };
    let b1 = fast(&db);
    let b2 = fast(&db);
    b1.configure(
        "two",
        json!({"retentionEnabled": true, "retentionSeconds": 1}),
    );
    // While this session holds the retention key, no broker may run retention.
    let mut holder = db.client();
    holder
        .execute(
            "SELECT pg_advisory_lock(queen.job_lock_key('retention'))",
            &[],
        )
        .unwrap();
    let t0: std::time::SystemTime = holder.query_one("SELECT now()", &[]).unwrap().get(0);
    let runs_of = |job: &str| {
        db.count(
            "SELECT count(*) FROM queen.job_runs WHERE job = $1 AND started_at > $2",
            &[&job, &t0],
        )
    };
    // Eviction keeps running meanwhile (the brokers are alive and scheduling).
    check_for(JOB_DEADLINE, || (runs_of("eviction") >= 10).then_some(()));
    assert_eq!(runs_of("retention"), 0, "retention ran under a held lock");
    holder
        .execute(
            "SELECT pg_advisory_unlock(queen.job_lock_key('retention'))",
            &[],
        )
        .unwrap();
    check_for(JOB_DEADLINE, || (runs_of("retention") >= 10).then_some(()));
    let brokers = db.count(
        "SELECT count(DISTINCT broker) FROM queen.job_runs WHERE job = 'eviction'",
        &[],
    );
    assert!(brokers >= 1);
    let overlaps = db.count(
        "SELECT count(*) FROM queen.job_runs a JOIN queen.job_runs b \
           ON a.job = b.job AND a.id < b.id \
          AND a.started_at < coalesce(b.finished_at, 'infinity') \
          AND b.started_at < coalesce(a.finished_at, 'infinity')",
        &[],
    );
    assert_eq!(overlaps, 0, "two runs of one job overlapped");
    drop((b1, b2));
}

/// Dead letters and traces of a message hang on it (schema/005_message_refs.sql keeps the old
/// foreign key's cascade with a statement trigger): `(dlq, traces)` rows of
/// the messages of `queue`.
fn refs_of(db: &Db, queue: &str) -> (i64, i64) {
    let of = |table: &str| {
        db.count(
            &format!(
                "SELECT count(*) FROM queen.{table} r JOIN queen.partitions p \
                   ON p.id = r.partition_id JOIN queen.queues q ON q.id = p.queue_id \
                 WHERE q.name = $1"
            ),
            &[&queue],
        )
    };
    (of("dead_letter_queue"), of("message_traces"))
}

#[test]
fn retention_deletes_the_dead_letters_and_traces_of_what_it_deletes() {
    let db = Db::fresh();
    // Push first, then let the job run: the dead letters and traces are added
    // while the messages still exist.
    let b = fast_jobs(&db).env("RETENTION_INTERVAL", "0").start();
    seed_ret_and_keep(&b);
    db.exec(
        "INSERT INTO queen.dead_letter_queue (message_id, partition_id) \
         SELECT id, partition_id FROM queen.messages; \
         INSERT INTO queen.message_traces (message_id, partition_id, transaction_id) \
         SELECT id, partition_id, transaction_id FROM queen.messages",
    );
    assert_eq!(refs_of(&db, "ret"), (3, 3));
    drop(b);
    let _b = fast_jobs(&db).start();
    check_for(JOB_DEADLINE, || {
        (messages_of(&db, "ret") == 0).then_some(())
    });
    assert_eq!(refs_of(&db, "ret"), (0, 0), "orphans left behind");
    assert_eq!(refs_of(&db, "keep"), (2, 2), "other queues' rows kept");
}

#[test]
fn a_dead_letter_or_trace_for_a_missing_message_is_refused() {
    let db = Db::fresh();
    let b = Broker::builder(&db).start();
    b.push_n("q", "p", "a", 1);
    let mut c = db.client();
    for table in ["dead_letter_queue", "message_traces"] {
        let cols = if table == "message_traces" {
            "(message_id, partition_id, transaction_id) \
             SELECT gen_random_uuid(), partition_id, 'x'"
        } else {
            "(message_id, partition_id) SELECT gen_random_uuid(), partition_id"
        };
        let err = c
            .batch_execute(&format!(
                "INSERT INTO queen.{table} {cols} FROM queen.messages"
            ))
            .expect_err("a row for a message that does not exist was accepted");
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::FOREIGN_KEY_VIOLATION),
            "{table}: {err}"
        );
    }
}
