//! What a push answers per item, typed: the DB threads build one [`Pushed`]
//! per item of a batch (and the spool one per buffered item), and the push
//! endpoint writes the response from it.
//!
//! Typed rather than a JSON object per item because a push of 100 items made
//! a few thousand small allocations for the maps, keys and id strings of its
//! answers alone (about a quarter of the broker's CPU on push b100); ids stay
//! 16-byte values until the response is serialised.

use uuid::Uuid;

/// How an item was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushStatus {
    /// Stored as a new message.
    Queued,
    /// Its transaction id was already stored in its partition; nothing written.
    Duplicate,
    /// Written to the disk spool; PostgreSQL gets it later.
    Buffered,
}

impl PushStatus {
    /// The wire name (http-api.md §3).
    pub fn as_str(self) -> &'static str {
        match self {
            PushStatus::Queued => "queued",
            PushStatus::Duplicate => "duplicate",
            PushStatus::Buffered => "buffered",
        }
    }
}

/// One item's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Pushed {
    /// How it was taken.
    pub status: PushStatus,
    /// The message holding the item: its own id when queued or buffered, the
    /// earlier message's for a duplicate (`None` if that one vanished since).
    pub message_id: Option<Uuid>,
    /// Its partition (`None` while buffered: PostgreSQL has not seen it).
    pub partition_id: Option<Uuid>,
    /// The trace id the item carried.
    pub trace_id: Option<Uuid>,
}

impl Pushed {
    /// An item written to the spool.
    pub fn buffered(message_id: Option<Uuid>) -> Pushed {
        Pushed {
            status: PushStatus::Buffered,
            message_id,
            partition_id: None,
            trace_id: None,
        }
    }
}
