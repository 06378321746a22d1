//! The work a shard hands to the shard owning an ephemeral partition, and
//! the answer. Everything here is `Send`: it crosses from one executor to
//! another on the owner's ephemeral inbox ([`Call`]), and the answer comes
//! back on a oneshot whose waker wakes the asking task on its own shard.
//!
//! Cost: one inbox slot and one oneshot per hand-over, a foreign wake each
//! way (tens of µs on an idle shard, about a millisecond on a busy one, see
//! `shards::inbox`); the payloads move as `Bytes` (a refcount, no copy).

use super::options::Options;
use super::ring::{AckStatus, Delivery, Outcome};
use super::{EphError, QKey, QueueStat};
use bytes::Bytes;
use futures_channel::oneshot;
use std::time::Instant;

/// Bound of each shard's ephemeral inbox: hand-overs in flight towards one
/// shard. A full inbox answers 503 `ephemeral_unavailable` (the work did
/// not start); a closed-loop client set never holds more than its
/// connections, so this only bites on a shard that stopped draining. The
/// ring's slots are allocated up front (about 150 bytes each), so depth is
/// resident memory: 1,024 slots cost ~150 KiB per shard.
pub const EPH_INBOX_DEPTH: usize = 1024;

/// One ack for a shard: (index in the request, partition, seq, attempt, status).
pub type AckItem = (usize, String, u64, u32, AckStatus);

/// An operation on the owning shard.
#[derive(Debug)]
pub enum Op {
    /// Append to one partition.
    Push {
        /// Queue.
        key: QKey,
        /// Partition.
        partition: String,
        /// Payload JSON texts.
        payloads: Vec<Bytes>,
    },
    /// Deliveries for a group: from one partition (parked until
    /// `wait_until` when there is nothing), or from any of the queue's
    /// partitions on the shard (never parked: the asking shard waits).
    Pop {
        /// Queue.
        key: QKey,
        /// One partition, or any.
        partition: Option<String>,
        /// Consumer group.
        group: String,
        /// Most deliveries.
        max: usize,
        /// Settle at delivery.
        auto_ack: bool,
        /// Long-poll deadline (single partition only).
        wait_until: Option<Instant>,
    },
    /// Settle deliveries: (index in the request, partition, seq, attempt, status).
    Ack {
        /// Queue.
        key: QKey,
        /// Consumer group.
        group: String,
        /// The acks for this shard.
        items: Vec<AckItem>,
    },
    /// Empty a queue's rings.
    Reset {
        /// Queue.
        key: QKey,
    },
    /// Forget a queue's contents (and declaration when `undeclare`).
    Drop {
        /// Queue.
        key: QKey,
        /// Also remove the shard's copy of the declaration.
        undeclare: bool,
    },
    /// Set or remove the shard's copy of a declaration.
    Declare {
        /// Queue.
        key: QKey,
        /// New options (`None`: undeclared).
        options: Option<Options>,
    },
    /// Figures of a tenant's queues (or one queue) with pending for a group.
    Stats {
        /// Tenant.
        tenant: String,
        /// One queue, or all.
        queue: Option<String>,
        /// Group for `pending`.
        group: String,
    },
}

/// The answer to an [`Op`].
#[derive(Debug)]
pub enum Answer {
    /// Push: messages stored.
    Pushed(Result<usize, EphError>),
    /// Pop: (partition, delivery) in order.
    Popped(Result<Vec<(String, Delivery)>, EphError>),
    /// Ack: (index, outcome).
    Acked(Vec<(usize, Outcome)>),
    /// Reset: messages dropped; Drop: 1 when the queue had state.
    Count(usize),
    /// Declare: done.
    Done,
    /// Stats.
    Stats(Vec<QueueStat>),
}

/// A hand-over in an owner's inbox.
#[derive(Debug)]
pub struct Call {
    /// The work.
    pub op: Op,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Answer>,
}
