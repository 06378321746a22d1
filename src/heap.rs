//! Gives the heap's free pages back to the OS, at most once a second.
//!
//! Why: glibc malloc hands memory back on its own only from the top of an
//! arena; pages freed in the middle stay resident. A broker that drained a
//! backlog and then took pushes held the sum of both workloads' peaks
//! (`bench/run.sh`, one broker through every scenario: 34 MiB, against at
//! most 25 for each scenario on a fresh broker). `malloc_trim` releases
//! every whole free page of every arena. It walks the arenas under their
//! locks, so it runs at most once per [`EVERY`], from a DB thread that has
//! just gone idle (`store::db_group`), never from a shard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Least time between two trims, process-wide.
pub const EVERY: Duration = Duration::from_secs(1);

/// Milliseconds since `EPOCH` at the last trim (0: none yet).
static LAST_MS: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Trims the heap unless another thread did less than [`EVERY`] ago.
pub fn trim_now_and_then() {
    let now = EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1;
    let last = LAST_MS.load(Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < EVERY.as_millis() as u64 {
        return;
    }
    if LAST_MS
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return; // another thread is trimming
    }
    trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes a plain byte count and only touches the
    // allocator's own state, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
