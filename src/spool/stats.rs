//! Spool gauges of every shard, for `GET /api/v1/status/buffers` and the
//! metrics. Each shard writes only its own slot; any shard reads them all.
//! These are plain atomics (no lock, nothing blocks): a gauge board is the
//! one piece of spool state that crosses threads, and only as numbers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// One shard's gauges.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Records waiting for replay.
    pub records: AtomicU64,
    /// Bytes of those records.
    pub bytes: AtomicU64,
    /// Segments in `failed/`.
    pub failed: AtomicU64,
    /// Unix ms of the oldest pending record (0: none).
    pub oldest_ms: AtomicU64,
    /// Whether PostgreSQL is believed reachable.
    pub pg_healthy: AtomicBool,
    /// Whether the spool directory is unusable.
    pub broken: AtomicBool,
    /// Corrupt segments met since boot (counter).
    pub corrupt_total: AtomicU64,
    /// Records replayed into PostgreSQL since boot (counter).
    pub replayed_total: AtomicU64,
    /// Push maintenance as this shard has applied it.
    pub push_paused: AtomicBool,
    /// Pop maintenance as this shard has applied it.
    pub pop_paused: AtomicBool,
}

impl Gauges {
    /// Sets the state gauges.
    pub fn set(&self, records: u64, bytes: u64, failed: u64, oldest: Option<SystemTime>, pg: bool) {
        self.records.store(records, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        self.failed.store(failed, Ordering::Relaxed);
        let ms = oldest
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        self.oldest_ms.store(ms, Ordering::Relaxed);
        self.pg_healthy.store(pg, Ordering::Relaxed);
    }

    /// Marks the spool directory unusable.
    pub fn set_broken(&self, broken: bool) {
        self.broken.store(broken, Ordering::Relaxed);
    }
}

/// Every shard's gauges. Process-wide, not a shard's: `/status/buffers`, the
/// metrics and the maintenance answers read all shards' slots on whichever
/// shard serves them, and each slot is only atomics its owner writes.
static BOARD: OnceLock<Vec<Gauges>> = OnceLock::new();

/// Creates the board for `n` shards (the first call wins; every shard passes the same `n`).
pub fn init(n: usize) {
    BOARD.get_or_init(|| (0..n).map(|_| Gauges::default()).collect());
}

/// Every shard's gauges (empty before [`init`]).
pub fn board() -> &'static [Gauges] {
    BOARD.get().map_or(&[], Vec::as_slice)
}

/// Whether every shard has applied maintenance flag `pop` (pop or push) = `on`.
pub fn all_applied(pop: bool, on: bool) -> bool {
    board().iter().all(|g| {
        let flag = if pop { &g.pop_paused } else { &g.push_paused };
        flag.load(Ordering::Relaxed) == on
    })
}

/// Counts a corrupt segment on shard `i`.
pub fn corrupt_seen(i: usize) {
    if let Some(g) = board().get(i) {
        g.corrupt_total.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts replayed records on shard `i`.
pub fn replayed(i: usize, n: u64) {
    if let Some(g) = board().get(i) {
        g.replayed_total.fetch_add(n, Ordering::Relaxed);
    }
}
