//! The disk spool (issue 4): kill -9 with a non-empty spool, torn tails,
//! corrupt segments, an unusable spool directory. Spooling is forced with
//! push maintenance (PostgreSQL stays up); the outage test is `spool_outage.rs`.
mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn spool_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("queen-spool-{tag}-{}", random_uuid()));
    std::fs::create_dir_all(&d).expect("spool dir");
    d
}

fn count_queue(db: &Db, queue: &str) -> i64 {
    db.count(
        "SELECT count(*)::bigint FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id \
         JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
}

fn distinct_txids(db: &Db, queue: &str) -> i64 {
    db.count(
        "SELECT count(DISTINCT m.transaction_id)::bigint FROM queen.messages m JOIN queen.partitions p \
         ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1",
        &[&queue],
    )
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// One spool record as the broker writes it.
fn record(queue: &str, txid: &str, n: i64) -> Vec<u8> {
    // Ids ascend like the broker's UUIDv7s: a batch's messages are ordered by id.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32);
    let id = format!("{secs:08x}-0000-7000-8000-{n:012}");
    let body = json!({"t": "00000000-0000-0000-0000-000000000001", "i": {
        "queue": queue, "partition": "Default", "id": id, "txid": txid,
        "traceId": null, "payload": {"n": n}, "encrypted": false, "sub": null}})
    .to_string()
    .into_bytes();
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&crc32(&body).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn write_segment(dir: &Path, seq: u64, records: &[Vec<u8>]) -> PathBuf {
    let shard = dir.join("shard-0");
    std::fs::create_dir_all(&shard).expect("shard dir");
    let path = shard.join(format!("seg-{seq:020}.log"));
    std::fs::write(&path, records.concat()).expect("write segment");
    path
}

fn maintenance(b: &Broker, on: bool) {
    let r = b.post_json("/api/v1/system/maintenance", &json!({"enabled": on}));
    assert_eq!(r.status, 200, "{}", r.text());
    check_for(Duration::from_secs(10), || {
        (0..8)
            .all(|_| b.get("/api/v1/system/maintenance").json()["maintenanceMode"] == on)
            .then_some(())
    });
}

#[test]
fn kill_9_with_a_full_spool_then_restart_replays_everything_once() {
    let db = Db::fresh();
    let dir = spool_dir("kill9");
    let dir_s = dir.to_str().expect("utf-8 path").to_string();
    let mut b = Broker::builder(&db).env("FILE_BUFFER_DIR", &dir_s).start();
    maintenance(&b, true);
    let mut buffered = 0;
    for round in 0..10 {
        for r in b.push_n("k9", &format!("p{}", round % 3), &format!("r{round}-"), 10) {
            assert_eq!(r["status"], "buffered", "{r}");
            buffered += 1;
        }
    }
    assert_eq!(buffered, 100);
    b.signal(libc::SIGKILL);
    b.wait_exit(Duration::from_secs(10)).expect("broker died");
    assert_eq!(count_queue(&db, "k9"), 0, "replayed during maintenance");
    // Maintenance off in the database, then the restart replays at boot.
    db.exec("UPDATE queen.system_state SET value = '{\"enabled\": false}' WHERE key = 'maintenance_mode'");
    let b = Broker::builder(&db).env("FILE_BUFFER_DIR", &dir_s).start();
    check_for(Duration::from_secs(30), || {
        (count_queue(&db, "k9") >= 100).then_some(())
    });
    check_for(Duration::from_secs(10), || {
        (b.get("/api/v1/status/buffers").json()["pending"] == 0).then_some(())
    });
    assert_eq!(count_queue(&db, "k9"), 100);
    assert_eq!(distinct_txids(&db, "k9"), 100);
    let left: Vec<_> = std::fs::read_dir(dir.join("shard-0"))
        .into_iter()
        .chain(std::fs::read_dir(dir.join("shard-1")))
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .collect();
    assert!(left.is_empty(), "segments left after replay: {left:?}");
}

#[test]
fn a_torn_tail_is_cut_and_the_valid_records_replay() {
    let db = Db::fresh();
    let dir = spool_dir("torn");
    let mut recs: Vec<Vec<u8>> = (0..3)
        .map(|i| record("torn", &format!("t{i}"), i))
        .collect();
    let mut last = record("torn", "t3", 3);
    last.truncate(last.len() - 5);
    recs.push(last);
    write_segment(&dir, 1, &recs);
    let b = Broker::builder(&db)
        .env("FILE_BUFFER_DIR", dir.to_str().expect("utf-8"))
        .start();
    check_for(Duration::from_secs(20), || {
        (count_queue(&db, "torn") == 3).then_some(())
    });
    assert!(b.log().contains("torn tail"), "{}", b.log_tail(30));
    let order: Vec<i64> = db
        .query(
            "SELECT (payload->>'n')::bigint FROM queen.messages ORDER BY created_at, id",
            &[],
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(order, vec![0, 1, 2]);
}

#[test]
fn a_corrupt_middle_moves_the_segment_to_failed_and_others_replay() {
    let db = Db::fresh();
    let dir = spool_dir("corrupt");
    let mut bad: Vec<Vec<u8>> = (0..3).map(|i| record("bad", &format!("b{i}"), i)).collect();
    let n = bad[1].len();
    bad[1][n - 3] ^= 0x55;
    write_segment(&dir, 1, &bad);
    let good: Vec<Vec<u8>> = (0..2)
        .map(|i| record("good", &format!("g{i}"), i))
        .collect();
    write_segment(&dir, 2, &good);
    let b = Broker::builder(&db)
        .env("FILE_BUFFER_DIR", dir.to_str().expect("utf-8"))
        .start();
    check_for(Duration::from_secs(20), || {
        (count_queue(&db, "good") == 2).then_some(())
    });
    assert_eq!(count_queue(&db, "bad"), 0, "garbage segment replayed");
    let failed: Vec<_> = std::fs::read_dir(dir.join("shard-0").join("failed"))
        .expect("failed dir")
        .flatten()
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(b.log().contains("corrupt"), "{}", b.log_tail(30));
    let st = b.get("/api/v1/status/buffers").json();
    assert_eq!(st["failed"], 1, "{st}");
}

#[test]
fn an_unusable_spool_directory_answers_503_and_acknowledges_nothing() {
    let db = Db::fresh();
    let dir = spool_dir("unwritable");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"x").expect("write file");
    let spool = file.join("spool");
    let b = Broker::builder(&db)
        .env("FILE_BUFFER_DIR", spool.to_str().expect("utf-8"))
        .start();
    maintenance(&b, true);
    let r = b.post_json(
        "/api/v1/push",
        &json!({"items": [{"queue": "nw", "payload": {"a": 1}}]}),
    );
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(
        r.json()["error"]
            .as_str()
            .is_some_and(|e| e.contains("spool")),
        "{}",
        r.text()
    );
    maintenance(&b, false);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(count_queue(&db, "nw"), 0);
    let st = b.get("/api/v1/status/buffers").json();
    assert_eq!(st["shards"][0]["spoolWritable"], false, "{st}");
}

/// Every directory and file under `dir` with its permission bits.
fn modes(dir: &Path, out: &mut Vec<(PathBuf, u32)>) {
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(dir).expect("read spool dir") {
        let p = e.unwrap().path();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        out.push((p.clone(), mode));
        if p.is_dir() {
            modes(&p, out);
        }
    }
}

/// Issue 17, point 6: the spool holds payloads in clear for unencrypted queues,
/// so what the broker creates there is its owner's alone.
#[test]
fn spool_directories_and_segments_are_owner_only() {
    let db = Db::fresh();
    let parent = spool_dir("modes");
    let dir = parent.join("made-by-the-broker");
    let b = Broker::builder(&db)
        .env("FILE_BUFFER_DIR", dir.to_str().expect("utf-8"))
        .start();
    maintenance(&b, true);
    for r in b.push_n("modes", "p", "m-", 5) {
        assert_eq!(r["status"], "buffered", "{r}");
    }
    let mut found = vec![(dir.clone(), 0)];
    {
        use std::os::unix::fs::PermissionsExt;
        found[0].1 = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    }
    modes(&dir, &mut found);
    let files: Vec<_> = found.iter().filter(|(p, _)| p.is_file()).collect();
    assert!(!files.is_empty(), "no segment written: {found:?}");
    for (p, mode) in &found {
        let want = if p.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} is {mode:o}", p.display());
    }
    maintenance(&b, false);
}
