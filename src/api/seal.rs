//! Readies validated push items for storage (every write path: push and
//! transaction pushes): stamps `sub` from the validated token (SEC-16;
//! never from the body) and encrypts payloads of queues with
//! `encryptionEnabled` when a valid key is set (SEC-33..36). Runs on the
//! shard, before the items enter a push lane, so anything downstream
//! (fused batch, spool file) only ever sees the envelope.

use crate::shard::Shard;
use crate::store::payload::Payload;
use crate::store::PushItem;
use serde_json::value::to_raw_value;
use shards::http::Request;
use std::collections::BTreeSet;

/// Stamps and, where due, encrypts `items` (as built by `push_items`).
pub async fn seal(shard: &Shard, req: &Request, tenant: &str, items: &mut [PushItem]) {
    // no `sub` at all without a token subject (absent reads as none)
    if let Some(sub) = crate::auth::sub(&shard.cfg.auth, &shard.tokens, req) {
        for it in items.iter_mut() {
            it.sub = Some(sub.clone());
        }
    }
    let Some(cipher) = crate::crypto::cipher() else {
        return;
    };
    let names: BTreeSet<&str> = items.iter().map(|i| i.queue.as_str()).collect();
    let flags = shard
        .queues
        .encryption_flags(&shard.db, tenant, &names, true)
        .await;
    for it in items.iter_mut() {
        let on = flags.get(it.queue.as_str()).copied().unwrap_or(false);
        if !on || it.encrypted {
            continue;
        }
        match cipher
            .encrypt_text(it.payload.as_bytes())
            .and_then(|env| to_raw_value(&env).ok())
            .map(Payload::of_raw)
        {
            Some(env) => {
                it.payload = env;
                it.encrypted = true;
            }
            None => log::warn!("payload encryption failed; stored as plaintext"),
        }
    }
}
