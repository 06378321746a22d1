//! Payload encryption at rest (security.md SEC-33..36, semantics.md §13):
//! rows read straight from PostgreSQL hold no plaintext; clients get it back.
mod common;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use common::*;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SECRET_TEXT: &str = "the-plaintext-canary-7731";

fn stored(db: &Db, txid: &str) -> (Value, bool) {
    let rows = db.query(
        "SELECT payload, is_encrypted FROM queen.messages WHERE transaction_id = $1",
        &[&txid],
    );
    assert_eq!(rows.len(), 1, "one row for {txid}");
    (rows[0].get(0), rows[0].get(1))
}

#[test]
fn sec33_flag_without_key_stores_plaintext_without_error_and_configure_warns() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.configure("nokey", json!({"encryptionEnabled": true}));
    let warning = r["warning"]
        .as_str()
        .unwrap_or_else(|| panic!("no warning: {r}"));
    assert!(warning.contains("QUEEN_ENCRYPTION_KEY"), "{warning}");
    assert!(
        b.log().contains("queue \"nokey\" has encryptionEnabled"),
        "the log warns too"
    );
    let out =
        b.push(json!([{"queue": "nokey", "transactionId": "p", "payload": {"s": SECRET_TEXT}}]));
    assert_eq!(out[0]["status"], "queued");
    let (payload, enc) = stored(&db, "p");
    assert_eq!(payload, json!({"s": SECRET_TEXT}));
    assert!(!enc);
}

#[test]
fn sec33_key_without_flag_stores_plaintext() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .start();
    b.configure("plain", json!({}));
    b.push(json!([{"queue": "plain", "transactionId": "p", "payload": {"s": SECRET_TEXT}}]));
    let (payload, enc) = stored(&db, "p");
    assert_eq!(payload, json!({"s": SECRET_TEXT}));
    assert!(!enc);
}

#[test]
fn sec34_boot_line_only_with_a_valid_key() {
    let db = Db::fresh();
    let good = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .start();
    assert!(good
        .log()
        .contains("Encryption service initialized (AES-256-GCM)"));
    assert!(!good.log().contains(KEY), "the key is in the log");
    let bad_key = "abcd".repeat(8);
    let bad = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", &bad_key)
        .start();
    let log = bad.log();
    assert!(!log.contains("Encryption service initialized"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("QUEEN_ENCRYPTION_KEY")),
        "{log}"
    );
    assert!(!log.contains(&bad_key));
    let none = Broker::start(&db);
    assert!(!none.log().contains("Encryption service initialized"));
}

#[test]
fn sec35_sec36_push_and_transaction_payloads_are_encrypted_at_rest_and_decrypted_on_pop() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .start();
    b.configure("enc", json!({"encryptionEnabled": true}));
    b.push(json!([{"queue": "enc", "transactionId": "p1", "payload": {"s": SECRET_TEXT}}]));
    let txn = json!({"operations": [{"type": "push", "items": [
        {"queue": "enc", "transactionId": "p2", "payload": {"s": SECRET_TEXT, "n": 2}}]}]});
    let r = b.post_json("/api/v1/transaction", &txn);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["success"], true, "{}", r.text());
    let all = db.query("SELECT payload::text FROM queen.messages", &[]);
    assert_eq!(all.len(), 2);
    for row in &all {
        let text: String = row.get(0);
        assert!(!text.contains(SECRET_TEXT), "plaintext at rest: {text}");
    }
    for tx in ["p1", "p2"] {
        let (payload, enc) = stored(&db, tx);
        assert!(enc, "{tx} flagged is_encrypted");
        let o = payload.as_object().expect("envelope object");
        let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, vec!["authTag", "encrypted", "iv"]);
        let iv = B64.decode(o["iv"].as_str().unwrap()).expect("base64 iv");
        assert_eq!(iv.len(), 16, "16-byte IV");
        let tag = B64
            .decode(o["authTag"].as_str().unwrap())
            .expect("base64 tag");
        assert_eq!(tag.len(), 16, "16-byte tag");
    }
    let (a, _) = stored(&db, "p1");
    let pop = b
        .pop("/api/v1/pop/queue/enc?batch=10&wait=false")
        .expect("messages");
    let ms = messages(&pop);
    assert_eq!(ms.len(), 2);
    assert_eq!(ms[0]["data"], json!({"s": SECRET_TEXT}));
    assert_eq!(ms[1]["data"], json!({"s": SECRET_TEXT, "n": 2}));
    // A second push of the same payload gets a fresh IV.
    b.push(json!([{"queue": "enc", "transactionId": "p3", "payload": {"s": SECRET_TEXT}}]));
    let (c, _) = stored(&db, "p3");
    assert_ne!(a["iv"], c["iv"]);
}

#[test]
fn sec35_dead_lettered_payloads_are_decrypted_in_the_dlq_listing() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("QUEEN_ENCRYPTION_KEY", KEY)
        .start();
    b.configure("encdlq", json!({"encryptionEnabled": true}));
    b.push(json!([{"queue": "encdlq", "transactionId": "d1", "payload": {"s": SECRET_TEXT}}]));
    let pop = b
        .pop("/api/v1/pop/queue/encdlq?wait=false")
        .expect("a message");
    let m = &messages(&pop)[0];
    let r = b.ack(
        json!({"transactionId": "d1", "partitionId": m["partitionId"],
                         "leaseId": m["leaseId"], "status": "dlq", "error": "x"}),
    );
    assert_eq!(r["success"], true, "{r}");
    let r = b.get("/api/v1/dlq?queue=encdlq");
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    let row = j["messages"]
        .as_array()
        .and_then(|a| a.first())
        .unwrap_or_else(|| panic!("no DLQ row: {j}"));
    assert_eq!(row["data"], json!({"s": SECRET_TEXT}), "{row}");
}
