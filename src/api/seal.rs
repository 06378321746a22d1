//! Readies validated push items for storage (every write path: push and
//! transaction pushes): stamps `sub` from the validated token (SEC-16;
//! never from the body) and encrypts payloads of queues with
//! `encryptionEnabled` when a valid key is set (SEC-33..36). Runs on the
//! shard, before the items enter a push lane, so anything downstream
//! (fused batch, spool file) only ever sees the envelope.

use crate::shard::Shard;
use serde_json::Value;
use shards::http::Request;
use std::collections::BTreeSet;

/// Stamps and, where due, encrypts `items` (as built by `push::stored_item`).
pub async fn seal(shard: &Shard, req: &Request, tenant: &str, items: &mut [Value]) {
    // no `sub` key at all without a token subject (absent reads as none)
    if let Some(sub) = crate::auth::sub(&shard.cfg.auth, &shard.tokens, req) {
        for it in items.iter_mut() {
            it["sub"] = Value::String(sub.clone());
        }
    }
    let Some(cipher) = crate::crypto::cipher() else {
        return;
    };
    let queues: BTreeSet<String> = items
        .iter()
        .filter_map(|i| i["queue"].as_str().map(str::to_string))
        .collect();
    let names: BTreeSet<&str> = queues.iter().map(String::as_str).collect();
    let flags = shard
        .queues
        .encryption_flags(&shard.db, tenant, &names, true)
        .await;
    for it in items.iter_mut() {
        let on = it["queue"]
            .as_str()
            .and_then(|q| flags.get(q))
            .copied()
            .unwrap_or(false);
        if !on || it["encrypted"] == Value::Bool(true) {
            continue;
        }
        match cipher.encrypt(&it["payload"]) {
            Some(env) => {
                it["payload"] = env;
                it["encrypted"] = Value::Bool(true);
            }
            None => log::warn!("payload encryption failed; stored as plaintext"),
        }
    }
}
