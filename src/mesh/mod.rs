//! The mesh thread: carries notices (hints, never data) between shards, and
//! later between brokers (the mesh issue adds the TCP side).
//!
//! # Threads and ownership
//! Shards send [`Envelope`]s on one bounded crossbeam queue (`try_send`; a
//! full queue drops the hint, which only costs latency because parked pops
//! also recheck on a timer). The pinned `mesh` thread drains it in batches,
//! drops repeats within a batch (a burst of pushes to one queue wakes each
//! shard once), and forwards each notice to every shard's inbox except the
//! one it came from (that shard woke its own waiters already).

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use shards::inbox::InboxSender;
use shards::ShardId;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bound of the shard → mesh queue.
pub const NOTICE_QUEUE_DEPTH: usize = 65_536;
/// Bound of each shard's notice inbox.
pub const SHARD_INBOX_DEPTH: usize = 16_384;
/// Notices drained per round before fanning out.
const DRAIN_BATCH: usize = 1024;

/// A hint about state in PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Notice {
    /// Messages were committed to `queue`.
    Pushed {
        /// Queue name.
        queue: String,
    },
}

/// A notice with the shard it came from.
#[derive(Debug)]
pub struct Envelope {
    /// Origin shard (not sent back to it).
    pub from: ShardId,
    /// The notice.
    pub notice: Notice,
}

/// How often an idle mesh thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The running mesh thread.
#[derive(Debug)]
pub struct Mesh {
    /// The thread.
    thread: JoinHandle<()>,
    /// Set by `stop` once the shards ended (detached shard tasks may still
    /// hold senders, so the channel closing cannot be relied on).
    stop: Arc<AtomicBool>,
}

impl Mesh {
    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

/// Starts the mesh thread.
pub fn start(rx: Receiver<Envelope>, shards: Vec<InboxSender<Notice>>) -> Mesh {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("mesh".into())
        .spawn(move || run(rx, shards, flag))
        .expect("spawning a thread at boot");
    Mesh { thread, stop }
}

/// Creates the shard → mesh queue.
pub fn channel() -> (Sender<Envelope>, Receiver<Envelope>) {
    crossbeam_channel::bounded(NOTICE_QUEUE_DEPTH)
}

fn run(rx: Receiver<Envelope>, shards: Vec<InboxSender<Notice>>, stop: Arc<AtomicBool>) {
    let mut seen: HashSet<(usize, Notice)> = HashSet::new();
    let mut batch = Vec::with_capacity(DRAIN_BATCH);
    loop {
        let first = match rx.recv_timeout(STOP_POLL) {
            Ok(e) => e,
            Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Acquire) => continue,
            Err(_) => return,
        };
        batch.push(first);
        while batch.len() < DRAIN_BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        for env in batch.drain(..) {
            if !seen.insert((env.from.0, env.notice.clone())) {
                continue;
            }
            for (i, inbox) in shards.iter().enumerate() {
                if i != env.from.0 {
                    // A full inbox drops the hint; the waiter's slow recheck covers it.
                    let _ = inbox.try_send(env.notice.clone());
                }
            }
        }
        seen.clear();
    }
}
