//! Queen's thread-per-core runtime: pinned glommio executors, an inbox for
//! cross-thread messages, a shutdown signal, an HTTP/1.1 codec and an
//! `SO_REUSEPORT` listener. It knows nothing of queues.
#![warn(missing_docs, missing_debug_implementations)]

pub mod http;
pub mod inbox;
pub mod pool;
pub mod shutdown;

use std::fmt;

/// Index of a shard (0..nr_shards); shard `i` runs on executor thread `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub usize);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
