//! A shard's cache of queue settings it needs on the push path: today the
//! `encryptionEnabled` flag (semantics.md §13). Runs on the shard; the
//! state is a [`QueueCache`], a field of the `Shard` (no lock: one shard =
//! one thread).
//!
//! An entry lives `QUEEN_CACHE_REFRESH_INTERVAL_MS`; a configure on this
//! shard drops the queue's entry at once. A configure served by another
//! shard is seen here after at most that interval (inferred: the flag is
//! set when a queue is created, rarely flipped on a live queue). Queues
//! that do not exist yet are not cached (they are created with the flag
//! off by the push itself). Only consulted when a valid key is set, so a
//! broker without encryption never pays for it.

use crate::store::{DbClient, Proc, StoreError};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Most cached queues per shard; past it the cache starts over.
const MAX_CACHED_QUEUES: usize = 100_000;

/// One cached queue.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// `encryptionEnabled`.
    encrypted: bool,
    /// When it was read.
    at: Instant,
}

/// One shard's cached queue settings (`Shard::queues`): filled by the push
/// path, dropped per queue by configure notices. At most [`MAX_CACHED_QUEUES`].
#[derive(Debug)]
pub struct QueueCache {
    /// How long an entry is trusted (`QUEEN_CACHE_REFRESH_INTERVAL_MS`).
    ttl: Duration,
    /// (tenant, queue) → settings.
    entries: RefCell<HashMap<(String, String), Entry>>,
}

impl QueueCache {
    /// An empty cache whose entries live `ttl`.
    pub fn new(ttl: Duration) -> QueueCache {
        QueueCache {
            ttl,
            entries: RefCell::new(HashMap::new()),
        }
    }

    /// Drops `queue`'s entry (after a configure on this shard or a
    /// `Configured` notice from another).
    pub fn forget(&self, tenant: &str, queue: &str) {
        self.entries
            .borrow_mut()
            .remove(&(tenant.to_string(), queue.to_string()));
    }

    /// The `encryptionEnabled` flag of each of `queues`; one round trip on
    /// `db` (the shard's) for those not cached. Unknown queues answer
    /// `false`. When PostgreSQL cannot be asked, the uncached queues answer
    /// `unknown_as` (decisions.md: a push whose config is unknown is
    /// encrypted whenever a key is set).
    pub async fn encryption_flags(
        &self,
        db: &DbClient,
        tenant: &str,
        queues: &BTreeSet<&str>,
        unknown_as: bool,
    ) -> HashMap<String, bool> {
        let ttl = self.ttl;
        let now = Instant::now();
        let mut out = HashMap::new();
        let mut missing = Vec::new();
        {
            let c = self.entries.borrow();
            for q in queues {
                match c.get(&(tenant.to_string(), q.to_string())) {
                    Some(e) if now.duration_since(e.at) < ttl => {
                        out.insert(q.to_string(), e.encrypted);
                    }
                    _ => missing.push(q.to_string()),
                }
            }
        }
        if missing.is_empty() {
            return out;
        }
        let arg = json!({ "tenant": tenant, "queues": missing });
        let found: Result<Value, StoreError> = db.call(Proc::QueueFlags, arg).await;
        let found = match found {
            Ok(v) => v,
            Err(e) => {
                log::debug!("queue flags unavailable ({e}); treating as {unknown_as}");
                for q in missing {
                    out.insert(q, unknown_as);
                }
                return out;
            }
        };
        let mut c = self.entries.borrow_mut();
        if c.len() >= MAX_CACHED_QUEUES {
            c.clear();
        }
        for q in missing {
            match found["queues"].get(&q) {
                Some(f) => {
                    let encrypted = f["encryptionEnabled"].as_bool().unwrap_or(false);
                    c.insert(
                        (tenant.to_string(), q.clone()),
                        Entry { encrypted, at: now },
                    );
                    out.insert(q, encrypted);
                }
                None => {
                    out.insert(q, false);
                }
            }
        }
        out
    }
}
