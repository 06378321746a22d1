//! The broker-wide figures of ephemeral queues: the accounted bytes of every
//! shard's rings (also the counter the RAM ceiling is checked against) and
//! each shard's queue depths, published by its sweep for scrapes on any
//! shard. Made once by `main` (an `Arc`, like the metrics board).
//!
//! Why one atomic for the bytes and not a share per shard: the ceiling is
//! the whole broker's (`QUEEN_EPHEMERAL_MAX_BYTES`), and one skewed queue
//! living on one shard must be able to use it all. An atomic add is not a
//! lock: no shard ever waits for another.

use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// One queue's depth as a shard publishes it: (queue name, messages).
pub type Depth = (String, u64);

/// Ephemeral gauges shared by every shard.
#[derive(Debug)]
pub struct EphGauges {
    /// Accounted bytes in every ring of this broker: each shard adds what it
    /// stores and subtracts what it drops; pushes check the ceiling on it.
    pub bytes: AtomicU64,
    /// Per shard, its queues' depths (swapped whole by the owning shard).
    slots: Vec<ArcSwap<Vec<Depth>>>,
}

impl EphGauges {
    /// Gauges for `nr_shards` shards.
    pub fn new(nr_shards: usize) -> Arc<EphGauges> {
        Arc::new(EphGauges {
            bytes: AtomicU64::new(0),
            slots: (0..nr_shards)
                .map(|_| ArcSwap::from_pointee(Vec::new()))
                .collect(),
        })
    }

    /// Reserves `n` bytes under `ceiling`; false (nothing reserved) when
    /// they do not fit.
    pub fn reserve(&self, n: u64, ceiling: u64) -> bool {
        let prev = self.bytes.fetch_add(n, Relaxed);
        if prev + n > ceiling {
            self.bytes.fetch_sub(n, Relaxed);
            return false;
        }
        true
    }

    /// Gives back `n` bytes.
    pub fn release(&self, n: u64) {
        if n > 0 {
            self.bytes.fetch_sub(n, Relaxed);
        }
    }

    /// Shard `shard` publishes its depths.
    pub fn publish(&self, shard: usize, depths: Vec<Depth>) {
        if let Some(s) = self.slots.get(shard) {
            s.store(Arc::new(depths));
        }
    }

    /// Depth per queue name, summed over shards (and tenants: no series
    /// carries a tenant label, SEC-17).
    pub fn depths(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for s in &self.slots {
            for (q, n) in s.load().iter() {
                *out.entry(q.clone()).or_insert(0) += n;
            }
        }
        out
    }
}
