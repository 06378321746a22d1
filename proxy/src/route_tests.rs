//! The classification table, row by row (proxy.md §4).
use super::*;
use shards::Method::{self, Delete, Get, Head, Patch, Post, Put};

fn c(m: Method, p: &str) -> Class {
    classify(&m, p)
}

#[test]
fn operator_routes_are_exact() {
    for p in OPERATOR_PATHS {
        assert_eq!(c(Get, p), Class::Operator, "{p}");
    }
    assert_eq!(c(Post, "/api/v1/system/maintenance"), Class::Operator);
    assert_eq!(c(Get, "/api/v1/status/queues"), Class::Read);
    assert_eq!(c(Get, "/api/v1/status/"), Class::Blocked);
}

#[test]
fn blocked_rows() {
    for (m, p) in [
        (Get, "/api/v1/migration"),
        (Post, "/api/v1/migration/run"),
        (Get, "/api/v1/migrations"),
        (Get, "/api/v1/system/shared-state"),
        (Get, "/api/v1/system"),
        (Get, "/internal"),
        (Post, "/internal/mesh"),
        (Get, "/internalx"),
        (Post, "/api/v1/stats/refresh"),
        (Get, "/metrics"),
        (Get, "/status"),
        (Get, "/api/v1/pop"),
        (Get, "/api/v1/pop/"),
        (Get, "/api/v1/unknown"),
        (Get, "/api/v2/push"),
        (Get, "/api/v1/push"),
        (Put, "/api/v1/push"),
        (Post, "/api/v1/push/"),
        (Post, "/API/v1/push"),
        (Post, "/api/v1/%70ush"),
        (Patch, "/api/v1/messages/p/t"),
        (Post, "/api/v1/messages/p/t/dlq"),
        (Delete, "/api/v1/queues/q/clear"),
        (Get, "/api/v1/status/../system/shared-state"),
        (Get, "/api/v1/status/%2e%2e/system"),
        (Get, "/api/v1//push"),
        (Put, "/api/v1/kv"),
        (Post, "/api/v1/kv/x"),
        (Put, "/api/v1/timers/x"),
        (Get, "/api/v1/ephemeral/push"),
        (Post, "/api/v1/ephemeral/other"),
        (Post, "/"),
        (Get, "/../etc"),
        (Get, "nopath"),
    ] {
        assert_eq!(c(m.clone(), p), Class::Blocked, "{m:?} {p}");
    }
}

#[test]
fn produce_consume_admin_rows() {
    assert_eq!(c(Post, "/api/v1/push"), Class::Produce);
    assert_eq!(c(Post, "/api/v1/transaction"), Class::Produce);
    for (m, p) in [
        (Get, "/api/v1/pop/queue/q"),
        (Get, "/api/v1/pop/queue/q/partition/p"),
        (Post, "/api/v1/ack"),
        (Post, "/api/v1/ack/batch"),
        (Post, "/api/v1/lease/abc/extend"),
    ] {
        assert_eq!(c(m.clone(), p), Class::Consume, "{m:?} {p}");
    }
    for (m, p) in [
        (Post, "/api/v1/configure"),
        (Delete, "/api/v1/resources/queues/q"),
        (Post, "/api/v1/messages/p/t/retry"),
        (Post, "/api/v1/dlq/7/replay"),
        (Delete, "/api/v1/messages/p/t"),
        (Delete, "/api/v1/dlq"),
        (Post, "/api/v1/consumer-groups/g/subscription"),
        (Delete, "/api/v1/consumer-groups/g"),
    ] {
        assert_eq!(c(m.clone(), p), Class::QueueAdmin, "{m:?} {p}");
    }
    assert_eq!(c(Post, "/api/v1/messages/p/t/x/retry"), Class::Blocked);
}

#[test]
fn gated_rows() {
    use Feature::*;
    use Growth::*;
    for (m, p, want) in [
        (Post, "/streams/v1/cycle", Class::Gated(Streams, Mixed)),
        (Get, "/streams/v1/x", Class::Gated(Streams, Open)),
        (Post, "/api/v1/traces", Class::Gated(Traces, Grow)),
        (Post, "/api/v1/kv", Class::Gated(Kv, Mixed)),
        (Get, "/api/v1/kv/ns/k", Class::Gated(Kv, Growth::Read)),
        (Put, "/api/v1/kv/ns/k", Class::Gated(Kv, Grow)),
        (Delete, "/api/v1/kv/ns/k", Class::Gated(Kv, Open)),
        (Post, "/api/v1/timers", Class::Gated(Timers, Mixed)),
        (Get, "/api/v1/timers/t", Class::Gated(Timers, Growth::Read)),
        (Delete, "/api/v1/timers/t", Class::Gated(Timers, Open)),
        (
            Post,
            "/api/v1/ephemeral/push",
            Class::Gated(Ephemeral, Grow),
        ),
        (Get, "/api/v1/ephemeral/pop", Class::Gated(Ephemeral, Open)),
        (Post, "/api/v1/ephemeral/ack", Class::Gated(Ephemeral, Open)),
        (
            Post,
            "/api/v1/ephemeral/configure",
            Class::Gated(Ephemeral, Open),
        ),
        (
            Post,
            "/api/v1/ephemeral/reset",
            Class::Gated(Ephemeral, Open),
        ),
        (
            Delete,
            "/api/v1/ephemeral/queue/q",
            Class::Gated(Ephemeral, Open),
        ),
        (
            Get,
            "/api/v1/ephemeral/queues",
            Class::Gated(Ephemeral, Growth::Read),
        ),
        (
            Get,
            "/api/v1/ephemeral/queues/q/depth",
            Class::Gated(Ephemeral, Growth::Read),
        ),
    ] {
        assert_eq!(c(m.clone(), p), want, "{m:?} {p}");
    }
}

#[test]
fn read_rows() {
    for (m, p) in [
        (Get, "/api/v1/messages"),
        (Head, "/api/v1/messages/p/t"),
        (Get, "/api/v1/resources/queues"),
        (Post, "/api/v1/resources/kv/list"),
        (Get, "/api/v1/status/queues/q"),
        (Get, "/api/v1/analytics/queue-lag"),
        (Get, "/api/v1/consumer-groups"),
        (Get, "/api/v1/consumer-groups/g"),
        (Get, "/api/v1/dlq"),
        (Get, "/api/v1/traces/names"),
        (Get, "/"),
        (Get, "/health"),
        (Get, "/assets/app.js"),
    ] {
        assert_eq!(c(m.clone(), p), Class::Read, "{m:?} {p}");
    }
}

#[test]
fn long_polls_are_recognised() {
    assert!(is_long_poll("/api/v1/pop/queue/q", true));
    assert!(is_long_poll("/api/v1/ephemeral/pop", true));
    assert!(!is_long_poll("/api/v1/pop/queue/q", false));
    assert!(!is_long_poll("/api/v1/ack", true));
}
