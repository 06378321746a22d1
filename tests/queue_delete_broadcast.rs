//! Deleting a queue is broadcast to the other brokers of the mesh
//! (http-api.md §8): a peer that cached the queue's settings forgets them at
//! once, so a push there after the delete re-creates the queue with defaults.
mod common;

use common::*;
use std::time::Duration;

const SECRET_HEX: &str = "6d65736874657374736563726574303132333435363738396162636465663031";
const ENC_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// Two brokers listing each other as mesh peers, with an encryption key.
fn pair(db: &Db) -> Vec<Broker> {
    let ports = [free_port(), free_port()];
    (0..2)
        .map(|i| {
            Broker::builder(db)
                .env("QUEEN_MESH_PORT", &ports[i].to_string())
                .env("QUEEN_MESH_PEERS", &format!("127.0.0.1:{}", ports[1 - i]))
                .env("QUEEN_MESH_ADVERTISE_HOST", "127.0.0.1")
                .env("QUEEN_SYNC_SECRET", SECRET_HEX)
                .env("QUEEN_SYNC_HEARTBEAT_MS", "200")
                .env("QUEEN_ENCRYPTION_KEY", ENC_KEY)
                .env("DB_POOL_SIZE", "4")
                .start()
        })
        .collect()
}

fn stored_encrypted(db: &Db, txid: &str) -> bool {
    let rows = db.query(
        "SELECT is_encrypted FROM queen.messages WHERE transaction_id = $1",
        &[&txid],
    );
    assert_eq!(rows.len(), 1, "one row for {txid}");
    rows[0].get(0)
}

#[test]
fn a_deleted_queue_is_forgotten_by_peers_at_once() {
    let db = Db::fresh();
    let b = pair(&db);
    for br in &b {
        check_for(Duration::from_secs(20), || {
            let s = br.get("/api/v1/system/shared-state").json();
            let peers = s["mesh"]["peers"].as_array()?.clone();
            (!peers.is_empty() && peers.iter().all(|p| p["state"] == "alive")).then_some(())
        });
    }
    b[0].configure("delq", json!({"encryptionEnabled": true}));
    let push = |br: &Broker, tx: &str| {
        br.push(json!([{"queue": "delq", "transactionId": tx, "payload": {"t": tx}}]));
    };
    // every shard of the peer caches "encrypted" (fresh connections spread over shards)
    for k in 0..8 {
        let tx = format!("enc-{k}");
        push(&b[1], &tx);
        assert!(stored_encrypted(&db, &tx));
    }
    let r = b[0].delete("/api/v1/resources/queues/delq");
    assert_eq!(r.json()["deleted"], true, "{}", r.text());
    // The settings cache lives 60 s; the broadcast must beat it by far.
    let mut n = 0;
    check_for(Duration::from_secs(3), || {
        n += 1;
        let tx = format!("probe-{n}");
        push(&b[1], &tx);
        (!stored_encrypted(&db, &tx)).then_some(())
    });
    for k in 0..8 {
        let tx = format!("plain-{k}");
        push(&b[1], &tx);
        assert!(
            !stored_encrypted(&db, &tx),
            "{tx}: stale settings after delete"
        );
    }
}
