//! What the mesh carries: a [`Notice`] (a hint about state in PostgreSQL,
//! never data) and the [`Envelope`] a shard sends it in. Below the fan-out
//! thread and the peer links, which both move notices.

use serde::{Deserialize, Serialize};
use shards::ShardId;

/// A hint about state in PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Notice {
    /// Messages were committed to `queue`.
    Pushed {
        /// Queue name.
        queue: String,
    },
    /// A maintenance flag changed (semantics.md §15): push maintenance, or
    /// with `pop` the pop maintenance.
    Maintenance {
        /// Which flag: pop maintenance (true) or push maintenance (false).
        pop: bool,
        /// Its new value.
        enabled: bool,
    },
    /// The KV/timers kill switches changed (`POST /api/v1/system/kv-timers`):
    /// the fields set, `None` = unchanged.
    KvSwitch {
        /// `kvEnabled`.
        kv: Option<bool>,
        /// `timersScheduleEnabled`.
        schedule: Option<bool>,
        /// `timersFireEnabled`.
        fire: Option<bool>,
    },
    /// `queue` of `tenant` was configured: every shard of every broker drops
    /// its cached settings at once instead of waiting for the cache refresh.
    Configured {
        /// Tenant id.
        tenant: String,
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
