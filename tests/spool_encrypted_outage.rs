//! An encrypted queue during a PostgreSQL outage (issue 4): pushes are
//! spooled as the encryption envelope, so the spool files on disk hold no
//! plaintext payload; after recovery the replayed rows are encrypted at rest
//! and pop decrypts them. Alone in its binary: it stops the binary's shared
//! PostgreSQL cluster for real (`pg_ctl stop -m immediate`).
mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// 32-byte AES key, hex (the same shape the security tests use).
const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
/// A payload string that must never reach the disk in clear.
const CANARY: &str = "spool-plaintext-canary-5521";
/// Pushes made while PostgreSQL is down.
const N: usize = 20;

/// Every spool segment under `root` (any shard directory, failed/ included).
fn segments(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn an_encrypted_queue_spools_only_envelopes_during_an_outage() {
    let db = Db::fresh();
    let spool = std::env::temp_dir().join(format!(
        "queen-enc-spool-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&spool).unwrap();
    // The harness cluster commits asynchronously; a hard stop could then
    // forget the schema the broker just applied (the newest sql file) or the
    // configure. This test measures the broker, so its database commits
    // synchronously (as spool_outage.rs does).
    db.exec(&format!(
        "ALTER DATABASE {} SET synchronous_commit = on",
        db.name
    ));
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .env("DB_CONNECTION_TIMEOUT", "500")
        .env("FILE_BUFFER_DIR", spool.to_str().unwrap())
        .start();
    let r = b.configure("enc", json!({"encryptionEnabled": true}));
    assert_eq!(r["configured"], true, "{r}");
    // One push before the outage: the queue's flags are cached on that shard.
    b.push(json!([{"queue": "enc", "transactionId": "before", "payload": {"s": CANARY}}]));

    pg().stop_immediate();
    let mut buffered = 0;
    for n in 0..N {
        let r = b.post_json(
            "/api/v1/push",
            &json!({"items": [{"queue": "enc", "partition": "p",
                "transactionId": format!("enc-{n}"), "payload": {"s": CANARY, "n": n}}]}),
        );
        if r.status == 201 {
            assert_eq!(r.json_array()[0]["status"], "buffered", "{}", r.text());
            buffered += 1;
        }
    }
    // Read the spool while PostgreSQL is still down (replay deletes segments).
    let files = segments(&spool);
    let bytes: Vec<u8> = files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_default())
        .collect();
    pg().start();
    assert_eq!(
        buffered,
        N,
        "every push during the outage is buffered:\n{}",
        b.log_tail(20)
    );
    assert!(!files.is_empty(), "no spool segment under {spool:?}");
    // The records are there (their transaction ids are stored in clear) ...
    for n in 0..N {
        assert!(
            contains(&bytes, &format!("enc-{n}")),
            "enc-{n} not in the spool"
        );
    }
    // ... and their payloads are not.
    assert!(!contains(&bytes, CANARY), "plaintext payload in the spool");
    assert!(contains(&bytes, "authTag"), "the envelope is spooled");

    check_for(Duration::from_secs(40), || {
        let st = b.get("/api/v1/status/buffers");
        (st.status == 200 && st.json()["pending"] == 0).then_some(())
    });
    let rows = db.query(
        "SELECT payload::text, is_encrypted FROM queen.messages WHERE transaction_id LIKE 'enc-%'",
        &[],
    );
    assert_eq!(rows.len(), N, "every buffered push replayed once");
    for row in &rows {
        let text: String = row.get(0);
        let enc: bool = row.get(1);
        assert!(
            enc && !text.contains(CANARY),
            "replayed row at rest: {text}"
        );
    }
    let mut seen = 0;
    while let Some(pop) = b.pop("/api/v1/pop/queue/enc/partition/p?batch=100&autoAck=true") {
        for m in messages(&pop) {
            assert_eq!(m["data"]["s"], CANARY, "pop decrypts: {m}");
            seen += 1;
        }
    }
    assert_eq!(seen, N);
    let _ = std::fs::remove_dir_all(&spool);
}
