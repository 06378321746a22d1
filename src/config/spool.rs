//! Spool defaults (`FILE_BUFFER_*`, config.md §7). The spool itself is
//! `crate::spool`; it reads these from the shard's `Config`.

/// Spool directory when `FILE_BUFFER_DIR` is unset (the Queen default);
/// shard i spools under `shard-<i>/` inside it.
pub const DEFAULT_FILE_BUFFER_DIR: &str = "/var/lib/queen/buffers";
/// Spool replay cadence in ms (config.md §7, the Queen default): how soon
/// replay notices PostgreSQL is back.
pub const DEFAULT_FILE_BUFFER_FLUSH_MS: u64 = 100;
/// Records per spool replay batch (config.md §7): one push transaction each.
pub const DEFAULT_FILE_BUFFER_MAX_BATCH: usize = 100;
/// Largest replay batch (a larger `FILE_BUFFER_MAX_BATCH` is lowered to it):
/// bounds one replay transaction and the records read into memory for it.
pub const MAX_FILE_BUFFER_MAX_BATCH: usize = 10_000;
/// Records per spool segment before rotating (config.md §7): bounds what a
/// replay reads into memory at once and what a corrupt segment can strand.
pub const DEFAULT_FILE_BUFFER_EVENTS_PER_FILE: u64 = 10_000;
