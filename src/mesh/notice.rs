//! What the mesh carries: a [`Notice`] (a hint about state in PostgreSQL,
//! never data) and the [`Delivered`] form a shard's inbox takes it in. Below the fan-out
//! thread and the peer links, which both move notices.

use serde::{Deserialize, Serialize};

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
    /// About ephemeral queues (`crate::shard::ephemeral`).
    Ephemeral(EphNotice),
}

/// What brokers tell each other about ephemeral queues. `from` (a server
/// id) lets a broker skip its own notices where it applied the change on
/// every shard already and a late re-apply could undo a newer one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EphNotice {
    /// A broker's beacon, once a heartbeat: its rendezvous identity, HTTP
    /// address (forwarding target) and boot nonce (incarnation).
    Member {
        /// `QUEEN_SERVER_ID`.
        id: String,
        /// `ip:port` of its HTTP listener.
        http: String,
        /// Boot nonce.
        boot: u64,
    },
    /// Messages were pushed to an ephemeral queue: wakes pops parked over
    /// all of its partitions.
    Pushed {
        /// Tenant id.
        tenant: String,
        /// Queue name.
        queue: String,
    },
    /// A queue was declared (`options`: the given options, JSON) or its
    /// declaration deleted (`None`).
    Declared {
        /// Server id of the broker that changed it.
        from: String,
        /// Tenant id.
        tenant: String,
        /// Queue name.
        queue: String,
        /// The options as given to `configure`, JSON text.
        options: Option<String>,
    },
    /// A queue was reset (`undeclare` false) or deleted (true): every
    /// broker empties the rings it owns.
    Dropped {
        /// Server id of the broker that changed it.
        from: String,
        /// Tenant id.
        tenant: String,
        /// Queue name.
        queue: String,
        /// Deleted, not only reset.
        undeclare: bool,
    },
}

/// A notice as a shard's inbox receives it: with the time its origin shard
/// sent it when that was a shard of this broker (`None`: from a peer).
pub type Delivered = (Notice, Option<std::time::Instant>);
