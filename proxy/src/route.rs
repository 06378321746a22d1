//! The fail-closed route table (proxy.md §4): every request's method and
//! path (without query) gets one [`Class`] before anything is forwarded or
//! any credential is looked at. Anything under `/api/`, `/streams/` or
//! `/internal` the table cannot name is [`Class::Blocked`]. Matching is
//! method-exact and shape-exact on the raw (still percent-encoded) path, so
//! an encoded or case variant of a name is not that name and is blocked.
//!
//! Pure; runs on every shard. Decisions (inferred where the table is loose):
//! operator routes match on the path with any method (the broker answers a
//! wrong method itself); the Consume and Read shapes take the methods the
//! broker serves them with (GET pops, POST acks and lease extends, GET/HEAD
//! reads, `POST /api/v1/resources/kv/list`); non-API paths are Read for
//! GET and HEAD and blocked otherwise; a path with an empty, `.` or `..`
//! segment (raw or percent-encoded) is blocked; the "later" consume routes
//! (`fetch`, `partitions/changed`) are not in the broker and stay blocked;
//! `POST /api/v1/traces` is a growing write.

use shards::Method;

/// A gated feature family; the cluster's `features` must switch it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feature {
    /// `/streams/*`.
    Streams,
    /// `POST /api/v1/traces`.
    Traces,
    /// `/api/v1/kv*`.
    Kv,
    /// `/api/v1/timers*`.
    Timers,
    /// `/api/v1/ephemeral/*`.
    Ephemeral,
}

impl Feature {
    /// The key in a cluster's `features` object.
    pub fn key(self) -> &'static str {
        match self {
            Feature::Streams => "streams",
            Feature::Traces => "traces",
            Feature::Kv => "kv",
            Feature::Timers => "timers",
            Feature::Ephemeral => "ephemeral",
        }
    }
}

/// How a gated request relates to storage growth (quota blocking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Adds data: refused on a blocked cluster.
    Grow,
    /// Removes or cancels: never refused for quota.
    Open,
    /// Only reads.
    Read,
    /// Depends on the body.
    Mixed,
}

/// The class of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Only a live operator, only with `QUEEN_PROXY_OPERATOR_ENABLED`.
    Operator,
    /// Never forwarded.
    Blocked,
    /// Push and transaction.
    Produce,
    /// Pop, ack, lease.
    Consume,
    /// Queue configuration and deletions.
    QueueAdmin,
    /// A feature family of the plan.
    Gated(Feature, Growth),
    /// Reads and the dashboard.
    Read,
}

impl Class {
    /// A short label, for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Class::Operator => "operator",
            Class::Blocked => "blocked",
            Class::Produce => "produce",
            Class::Consume => "consume",
            Class::QueueAdmin => "queue_admin",
            Class::Gated(..) => "gated",
            Class::Read => "read",
        }
    }

    /// Every label, in [`Class::index`] order.
    pub const LABELS: [&'static str; 7] = [
        "operator",
        "blocked",
        "produce",
        "consume",
        "queue_admin",
        "gated",
        "read",
    ];

    /// Position of the label in [`Class::LABELS`].
    pub fn index(self) -> usize {
        Class::LABELS
            .iter()
            .position(|l| *l == self.label())
            .unwrap_or(0)
    }
}

/// Exactly these paths are operator routes.
const OPERATOR_PATHS: [&str; 8] = [
    "/api/v1/status",
    "/api/v1/status/buffers",
    "/api/v1/analytics/system-metrics",
    "/api/v1/analytics/worker-metrics",
    "/api/v1/analytics/postgres-stats",
    "/api/v1/system/maintenance",
    "/api/v1/system/maintenance/pop",
    "/metrics/prometheus",
];

/// True for a segment that is empty or a dot segment, raw or encoded.
fn suspicious(seg: &str) -> bool {
    let lower = seg.to_ascii_lowercase().replace("%2e", ".");
    seg.is_empty() || lower == "." || lower == ".."
}

/// Classifies `method path`.
pub fn classify(method: &Method, path: &str) -> Class {
    if OPERATOR_PATHS.contains(&path) {
        return Class::Operator;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Class::Blocked;
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let api = path.starts_with("/api/") || path.starts_with("/streams/");
    if path.starts_with("/internal") {
        return Class::Blocked;
    }
    if !api {
        return match (method, path) {
            (_, "/metrics" | "/status") => Class::Blocked,
            (Method::Get | Method::Head, "/") => Class::Read,
            (Method::Get | Method::Head, _) if !segs.iter().any(|s| suspicious(s)) => Class::Read,
            _ => Class::Blocked,
        };
    }
    if segs.iter().any(|s| suspicious(s)) {
        return Class::Blocked;
    }
    if segs[0] == "streams" {
        return match (method, &segs[1..]) {
            (Method::Post, ["v1", "cycle"]) => Class::Gated(Feature::Streams, Growth::Mixed),
            _ => Class::Gated(Feature::Streams, Growth::Open),
        };
    }
    match segs.as_slice() {
        ["api", "v1", tail @ ..] => classify_v1(method, tail),
        _ => Class::Blocked,
    }
}

/// Classifies a path under `/api/v1/`, given its segments after `v1`.
fn classify_v1(method: &Method, tail: &[&str]) -> Class {
    use Growth::{Grow, Mixed, Open};
    use Method::{Delete, Get, Head, Post, Put};
    let read = matches!(method, Get | Head);
    match (method, tail) {
        (_, [first, ..]) if first.starts_with("migration") || *first == "system" => Class::Blocked,
        (_, ["stats", "refresh"]) => Class::Blocked,
        (Post, ["push"] | ["transaction"]) => Class::Produce,
        (Get, ["pop", "queue", _] | ["pop", "queue", _, "partition", _]) => Class::Consume,
        (Post, ["ack"] | ["ack", "batch"] | ["lease", _, "extend"]) => Class::Consume,
        (Post, ["configure"]) => Class::QueueAdmin,
        (Delete, ["resources", "queues", _]) => Class::QueueAdmin,
        (Post, ["messages", _, _, "retry"] | ["dlq", _, "replay"]) => Class::QueueAdmin,
        (Delete, ["messages", _, _] | ["dlq"]) => Class::QueueAdmin,
        (Post | Delete, ["consumer-groups", ..]) => Class::QueueAdmin,
        (Post, ["traces"]) => Class::Gated(Feature::Traces, Grow),
        (Post, ["kv"]) => Class::Gated(Feature::Kv, Mixed),
        (Get, ["kv", _, ..]) => Class::Gated(Feature::Kv, Growth::Read),
        (Put, ["kv", _, ..]) => Class::Gated(Feature::Kv, Grow),
        (Delete, ["kv", _, ..]) => Class::Gated(Feature::Kv, Open),
        (Post, ["timers"]) => Class::Gated(Feature::Timers, Mixed),
        (Get, ["timers", _, ..]) => Class::Gated(Feature::Timers, Growth::Read),
        (Delete, ["timers", _, ..]) => Class::Gated(Feature::Timers, Open),
        (_, ["ephemeral", ..]) => classify_ephemeral(method, &tail[1..]),
        (_, ["messages", ..]) if read => Class::Read,
        (_, ["resources", ..]) if read => Class::Read,
        (Post, ["resources", "kv", "list"]) => Class::Read,
        (_, ["status", ..] | ["analytics", ..]) if read => Class::Read,
        (Get, ["consumer-groups", ..] | ["dlq"] | ["traces", ..]) => Class::Read,
        _ => Class::Blocked,
    }
}

/// The ephemeral shapes; every other one is blocked.
fn classify_ephemeral(method: &Method, tail: &[&str]) -> Class {
    use Growth::{Grow, Open};
    use Method::{Delete, Get, Post};
    let g = |growth| Class::Gated(Feature::Ephemeral, growth);
    match (method, tail) {
        (Post, ["push"]) => g(Grow),
        (Get, ["pop"]) => g(Open),
        (Post, ["ack"] | ["configure"] | ["reset"]) => g(Open),
        (Delete, ["queue", _]) => g(Open),
        (Get, ["queues"] | ["queues", _, "depth"]) => g(Growth::Read),
        _ => Class::Blocked,
    }
}

/// True for a long-poll pop (PX-11): `wait=true` on a queue pop or an
/// ephemeral pop.
pub fn is_long_poll(path: &str, wait: bool) -> bool {
    wait && (path.starts_with("/api/v1/pop/queue/") || path == "/api/v1/ephemeral/pop")
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
