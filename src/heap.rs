//! The heap's footprint: at most [`ARENAS`] malloc arenas, and free pages
//! given back to the OS at most once a second.
//!
//! Why two arenas: glibc gives each thread that allocates an arena of its
//! own, up to eight per core, and each arena keeps its own free chunks and
//! slack. The broker has ~35 threads (20 DB threads at `DB_POOL_SIZE=20`),
//! so with the default up to 16 arenas each held part of the same load.
//! `bench/history/2026-12-06-rss-ab.sh`, 3 rounds, median peak RSS:
//! push b100 24.7 → 23.3 MiB, drain + ack 23.5 → 20.5, autoAck 20.2 →
//! 18.8. The price is the DB threads' contention on two arenas: pushes keep
//! their (PostgreSQL-bound) rate, but a pop + ack drain ran 0.90× at 1.13×
//! broker CPU in one 3-round compare on 2 cores. Four arenas cost the drain
//! 0.98× but left push b100 at 24.2 MiB, above the 25 MB target
//! (`bench/history/results/2026-12-06-rss-arena-cap.md`).
//!
//! Why the trim: glibc malloc hands memory back on its own only from the top of an
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

/// Most malloc arenas (glibc's default is eight per core).
pub const ARENAS: i32 = 2;

/// Caps the arenas at [`ARENAS`], unless the operator set glibc's own
/// `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES=glibc.malloc.arena_max=...`. Call
/// first in `main`: threads that allocated before keep their arenas.
pub fn limit_arenas() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() || tunables.contains("arena_max") {
        return;
    }
    set_arena_max(ARENAS);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(n: i32) {
    // SAFETY: mallopt takes a parameter code and a plain integer; it only
    // sets the allocator's own tunable, under its own lock.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, n);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_: i32) {}

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
