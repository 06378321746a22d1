//! The schema ledger across boots: a data directory made by an older broker
//! (tests/fixtures/upgrade, made by its make.py) boots unchanged and delivers
//! every message it holds exactly once; a second boot applies no schema file
//! but re-applies the functions; a changed schema file stops the boot.
mod common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The fixture: a plain pg_dump of a database written by the broker of
/// commit d5b4046 (every sql file run at every boot, no ledger) and what was
/// pushed to and consumed from it.
const FIXTURE: &str = "d5b4046";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `psql` of the installed PostgreSQL (PATH first, else the newest
/// /usr/lib/postgresql/*/bin), for the dump's COPY blocks and meta-commands.
fn psql() -> PathBuf {
    if let Ok(out) = Command::new("sh").args(["-c", "command -v psql"]).output() {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            return PathBuf::from(p);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("no PostgreSQL under /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin/psql")))
        .filter(|p| p.exists())
        .collect();
    dirs.sort_by_key(|p| {
        p.iter()
            .nth(4)
            .and_then(|v| v.to_str()?.parse::<u32>().ok())
    });
    dirs.pop().expect("psql not found")
}

/// Restores the fixture dump into `db`.
fn restore(db: &Db) {
    let dump = repo().join(format!("tests/fixtures/upgrade/{FIXTURE}.sql"));
    // pg_dump since 15.14 fences a dump with \restrict / \unrestrict, which an
    // older psql does not know; the fixture is ours, so the fence is dropped.
    let text: String = std::fs::read_to_string(&dump)
        .expect("read the fixture dump")
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .flat_map(|l| [l, "\n"])
        .collect();
    let mut child = Command::new(psql())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U"])
        .arg("postgres")
        .arg("-p")
        .arg(pg().port.to_string())
        .arg("-d")
        .arg(&db.name)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run psql");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("psql stdin");
        stdin.write_all(text.as_bytes()).expect("feed psql");
    }
    let out = child.wait_with_output().expect("wait for psql");
    assert!(
        out.status.success(),
        "restore of {}: {}",
        dump.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Names of the functions defined in sql/functions, with how many times each
/// is created there.
fn defined_functions() -> BTreeMap<String, usize> {
    let mut names = BTreeMap::new();
    for e in std::fs::read_dir(repo().join("sql/functions")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("CREATE OR REPLACE FUNCTION queen.") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                *names.entry(name).or_insert(0) += 1;
            }
        }
    }
    names
}

/// The files of sql/schema, as the ledger names them.
fn schema_files() -> BTreeSet<String> {
    std::fs::read_dir(repo().join("sql/schema"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The ledger: name -> (checksum, applied_at as text).
fn ledger(db: &Db) -> BTreeMap<String, (String, String)> {
    db.query(
        "SELECT name, checksum, applied_at::text FROM queen.schema_migrations",
        &[],
    )
    .iter()
    .map(|r| (r.get(0), (r.get(1), r.get(2))))
    .collect()
}

/// The functions of schema queen (by name; none is overloaded).
fn live_functions(db: &Db) -> BTreeSet<String> {
    db.query(
        "SELECT proname::text FROM pg_proc WHERE pronamespace = 'queen'::regnamespace",
        &[],
    )
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// Pops `queue` for `group` until nothing is left, acknowledging every
/// message; returns the transaction ids delivered, in order.
fn drain(b: &Broker, queue: &str, group: &str) -> Vec<String> {
    let mut got = Vec::new();
    let mut path = format!("/api/v1/pop/queue/{queue}?batch=100&partitions=64&wait=false");
    if group != "__QUEUE_MODE__" {
        path += &format!("&consumerGroup={group}");
    }
    while let Some(pop) = b.pop(&path) {
        let lease = pop["leaseId"].as_str().unwrap().to_string();
        for m in messages(&pop) {
            let txid = m["transactionId"].as_str().unwrap().to_string();
            let mut ack = json!({"transactionId": txid, "leaseId": lease,
                                 "partitionId": m["partitionId"], "status": "completed"});
            if group != "__QUEUE_MODE__" {
                ack["consumerGroup"] = json!(group);
            }
            let a = b.ack(ack);
            assert_eq!(a["success"], json!(true), "ack of {txid}: {a}");
            got.push(txid);
        }
        assert!(got.len() < 10_000, "drain of {queue}/{group} never ends");
    }
    got
}

#[test]
fn data_directory_of_the_old_layout_boots_unchanged() {
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join(format!("tests/fixtures/upgrade/{FIXTURE}.json")))
            .unwrap(),
    )
    .unwrap();
    let db = Db::fresh();
    restore(&db);
    // The fixture is what it claims: no ledger, the old dead functions present.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM pg_class WHERE oid = to_regclass('queen.schema_migrations')",
            &[]
        ),
        0
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM pg_proc WHERE oid = to_regprocedure('queen.push_fast(jsonb)')",
            &[]
        ),
        1
    );
    let messages_sql = "SELECT q.name, m.transaction_id FROM queen.messages m \
                        JOIN queen.partitions p ON p.id = m.partition_id \
                        JOIN queen.queues q ON q.id = p.queue_id";
    let stored = |db: &Db| -> BTreeSet<(String, String)> {
        db.query(messages_sql, &[])
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    let before = stored(&db);
    let pushed: BTreeSet<(String, String)> = record["pushed"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(q, ids)| {
            ids.as_array()
                .unwrap()
                .iter()
                .map(move |t| (q.clone(), t.as_str().unwrap().to_string()))
        })
        .collect();
    assert_eq!(before, pushed, "the dump holds what make.py pushed");

    let b = Broker::start(&db);

    // The ledger lists every schema file; the schema is the new layout's.
    let applied: BTreeSet<String> = ledger(&db).into_keys().collect();
    assert_eq!(applied, schema_files());
    let defined = defined_functions();
    for (name, n) in &defined {
        assert_eq!(
            *n, 1,
            "queen.{name} is created in {n} places in sql/functions"
        );
    }
    let live = live_functions(&db);
    let expected: BTreeSet<String> = defined.into_keys().collect();
    assert_eq!(
        live, expected,
        "functions left that sql/functions does not define"
    );
    // Every message survived the boot, and the dead letter too.
    assert_eq!(stored(&db), pushed);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.dead_letter_queue d JOIN queen.messages m \
             ON m.id = d.message_id WHERE d.consumer_group = 'g1' AND m.transaction_id = $1",
            &[&record["dead_lettered"][0].as_str().unwrap()]
        ),
        1
    );

    // Every message is delivered exactly once per consumer across the two
    // brokers: what the old one consumed plus what the new one delivers is
    // what was pushed, with nothing twice (the expired leases come back once).
    for (queue, group) in [
        ("up.a", "__QUEUE_MODE__"),
        ("up.b", "__QUEUE_MODE__"),
        ("up.b", "g1"),
    ] {
        let consumed: Vec<String> = record["consumed"][format!("{queue}|{group}")]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        let delivered = drain(&b, queue, group);
        let mut all: Vec<String> = consumed.iter().chain(&delivered).cloned().collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "{queue}/{group}: a message delivered twice");
        let want: Vec<String> = record["pushed"][queue]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(all, want, "{queue}/{group}: messages lost");
        for t in record["leased"].as_array().unwrap() {
            if queue == "up.a" && group == "__QUEUE_MODE__" {
                assert!(delivered.contains(&t.as_str().unwrap().to_string()));
            }
        }
    }

    // And the new broker pushes, pops and acks as usual.
    b.push_n("up.new", "Default", "n-", 3);
    let got = drain(&b, "up.new", "__QUEUE_MODE__");
    assert_eq!(got, names("n-", 0..3));
    assert!(b.pop("/api/v1/pop/queue/up.new?batch=10").is_none());
}

#[test]
fn second_boot_applies_no_schema_file_and_reapplies_functions() {
    let db = Db::fresh();
    let mut b = Broker::start(&db);
    b.stop(Duration::from_secs(10));
    let first = ledger(&db);
    assert_eq!(
        first.keys().cloned().collect::<BTreeSet<_>>(),
        schema_files()
    );
    // Stand-ins for a function edited by hand or left from an older build: the
    // next boot puts the live definitions back.
    db.exec(
        "CREATE OR REPLACE FUNCTION queen.cg_offset_cap() RETURNS int \
         LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$; \
         ALTER FUNCTION queen.msg_list(jsonb) RESET jit;",
    );
    let mut b = Broker::start(&db);
    assert_eq!(ledger(&db), first, "the second boot touched the ledger");
    assert_eq!(
        db.count("SELECT queen.cg_offset_cap()::bigint", &[]),
        100_000
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM pg_proc WHERE oid = 'queen.msg_list(jsonb)'::regprocedure \
             AND proconfig @> ARRAY['jit=off']",
            &[]
        ),
        1
    );
    b.push_n("twice", "Default", "t-", 2);
    assert_eq!(drain(&b, "twice", "__QUEUE_MODE__"), names("t-", 0..2));
    b.stop(Duration::from_secs(10));
}

#[test]
fn changed_schema_file_stops_the_boot() {
    let db = Db::fresh();
    let mut b = Broker::start(&db);
    b.stop(Duration::from_secs(10));
    db.exec(
        "UPDATE queen.schema_migrations SET checksum = repeat('0', 64) \
         WHERE name = '002_dlq_traces.sql'",
    );
    let mut b = Broker::builder(&db).spawn();
    let st = b
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("broker kept running:\n{}", b.log_tail(40)));
    assert!(!st.success(), "exit status {st}");
    let log = b.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("append-only")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(
        lines[0].contains("sql/schema/002_dlq_traces.sql") && lines[0].contains(&"0".repeat(64)),
        "{}",
        lines[0]
    );
}
