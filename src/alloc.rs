//! The process allocator: mimalloc (v2), set up once at the top of `main`.
//!
//! Why not glibc malloc: request JSON is allocated on a shard thread and freed
//! on a DB thread, and answers the other way round. With glibc's arenas capped
//! at two (uncapped, every thread kept its own high-water mark and a push
//! b100 c50 run peaked at 48 MiB), push b100 c50 spent about 45% of the
//! broker's CPU in malloc, free, chunk consolidation and the arena lock. mimalloc
//! frees a cross-thread block onto its owning page without a lock.
//!
//! Why these settings: mimalloc keeps freed pages for 10 ms before handing
//! them back, and its default build lets the kernel back its segments with
//! transparent huge pages; on this workload those kept the broker's resident
//! set at 42-51 MiB (with huge pages, 133 MiB) against 36 MiB with glibc.
//! Without huge pages (`no_thp` feature) and purging at once, the peak is
//! 37-38 MiB at a small CPU cost (bench/history/2026-11-diary.md, session 4).

use libmimalloc_sys as mi;

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v2's `mi_option_e` (include/mimalloc.h);
/// the -sys crate names no constant for it.
const PURGE_DELAY: mi::mi_option_t = 15;
/// mimalloc v2's documented default for that option, used to check that
/// `PURGE_DELAY` still names it before changing it.
const PURGE_DELAY_DEFAULT: std::os::raw::c_long = 10;

/// Hands freed memory back to the OS at once. Call first thing in `main`.
pub fn init() {
    // SAFETY: reading and setting a mimalloc option is allowed at any time;
    // both take a plain option index and value.
    unsafe {
        if mi::mi_option_get(PURGE_DELAY) == PURGE_DELAY_DEFAULT {
            mi::mi_option_set(PURGE_DELAY, 0);
        }
    }
}

/// Hands back what the calling thread's heap holds free: blocks other
/// threads freed into its pages and pages left empty. A DB thread calls it
/// once when it parks (`store::db_group`): a thread that does not allocate
/// never collects those on its own.
pub fn collect() {
    // SAFETY: mi_collect only walks the calling thread's own heap.
    unsafe { mi::mi_collect(false) }
}
