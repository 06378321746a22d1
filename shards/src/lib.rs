//! Queen's thread-per-core runtime: pinned glommio executors, an inbox for
//! cross-thread messages, a shutdown signal, an HTTP/1.1 codec and an
//! `SO_REUSEPORT` listener. It knows nothing of queues; the broker (`src/`)
//! builds on it, never the reverse.
//!
//! # Layout
//!
//! | module       | owns                                                      | runs on            |
//! |--------------|-----------------------------------------------------------|--------------------|
//! | [`pool`]     | one glommio executor thread per shard, pinning, join     | main thread        |
//! | [`inbox`](mod@inbox) | bounded multi-producer queue into a shard, coalesced wakes | senders: any thread; receiver: its shard |
//! | [`shutdown`](mod@shutdown) | process-wide one-shot trigger, signal wait, [`shutdown::LocalSignal`] | trigger: any; wait: shards; signals: main |
//! | [`http`]     | `Request`/`Response`, sans-I/O decoder, codec errors     | the connection's shard |
//! | [`listen`]   | `ServerConfig`, `Handler`, SO_REUSEPORT bind, accept loop, gate, port probe | each serving shard |
//! | [`segment`]  | append-only record files: group-committed appends, torn-tail and corruption detection | the owning shard |
//! | `conn`       | one connection's task: timeouts, handler cancellation     | the accepting shard |
//! | [`tls`]      | PEM certificate/key loading, the per-connection TLS handshake | load: main; handshake: the accepting shard |
//!
//! # Threads and ownership
//!
//! - Shard `i` is executor thread `i` (named `shard-i`), pinned to the
//!   `i % n`-th CPU of the process's affinity mask. Everything a shard
//!   owns is `Rc`/`Cell`/`RefCell`; nothing here shares mutable state
//!   between shards except through the types below.
//! - Cross-thread traffic is only: [`inbox::InboxSender`] (lock-free ring +
//!   `AtomicWaker`), [`shutdown::ShutdownTrigger`]/`ShutdownListener` (an
//!   atomic flag + a mutex-guarded waker map locked only to register or
//!   fire, never across an await) and glommio's own foreign-wake channel.
//! - Channels are created before [`pool::PoolBuilder::spawn`] and handed to
//!   shards in `per_shard`; each end is kept for life.
//! - Each shard that calls [`listen::serve`] owns its listener and its
//!   connection tasks; a connection is served, start to end, by the shard
//!   whose listener accepted it. A handler's future runs on that shard and
//!   is dropped there if the client leaves.
//! - Signals: [`shutdown::block_signals`] must run in `main` before any
//!   thread starts; then [`shutdown::wait_for_signals`] on the main thread
//!   is the only taker of SIGTERM/SIGINT.
//! - No lock order exists: no code holds two locks.
#![warn(missing_docs, missing_debug_implementations)]

mod conn;
pub mod http;
pub mod inbox;
pub mod listen;
pub mod pool;
pub mod segment;
pub mod server;
pub mod shutdown;
pub mod tls;

pub use http::{HttpError, Method, Request, Response};
pub use inbox::{inbox, InboxReceiver, InboxSender};
pub use listen::{probe_port_free, serve, Handler, ServeError, ServerConfig};
pub use pool::{usable_cores, Pool, PoolBuilder, PoolError};
pub use shutdown::{block_signals, shutdown, wait_for_signals, ShutdownListener, ShutdownTrigger};

use std::fmt;

/// Index of a shard (0..nr_shards); shard `i` runs on executor thread `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardId(pub usize);

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
