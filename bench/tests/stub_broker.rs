//! The scenarios against a tiny in-memory stand-in for the broker, so the
//! bench's push, pop, ack, long-poll and verification paths are tested
//! without PostgreSQL or the real broker. The stub speaks just enough of the
//! wire contract (http-api.md §2-§5): configure, push (201 array), pop
//! (200 with leaseId or 204, long-poll), ack/batch (200 array).

mod stub;

use std::net::TcpListener;
use std::time::Duration;

use queen_bench::http::Target;
use queen_bench::procstat::Watch;
use queen_bench::scenario::{drain, latency, push, Ctx};

fn start_stub() -> Target {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    stub::serve_on(l);
    Target::parse(&format!("http://{addr}")).unwrap()
}

fn ctx(target: Target) -> Ctx {
    Ctx {
        target,
        watch: Watch {
            pid: Some(std::process::id()),
            pg_pid: None,
        },
        label: "stub".into(),
        queue_prefix: "t".into(),
        group: None,
        queue_options: serde_json::json!({}),
    }
}

#[test]
fn push_counts_accepted_items_and_latency() {
    let c = ctx(start_stub());
    let r = push::run(
        &c,
        &push::PushOpts {
            batch: 10,
            conns: 4,
            partitions: 3,
            duration: Duration::from_millis(500),
            warmup: Duration::from_millis(100),
            payload_bytes: 100,
            rate: None,
        },
    );
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(r.messages > 0 && r.msg_per_s > 0.0);
    assert_eq!(r.messages, r.requests * 10);
    assert!(r.req_latency.p99_ms > 0.0);
    assert!(r.proc.broker_cpu_s.is_some());
    assert!(r.json_line().contains("\"key\":\"push b10 p3 c4\""));
}

#[test]
fn drain_with_acks_confirms_every_prefilled_message() {
    let c = ctx(start_stub());
    let r = drain::run(
        &c,
        &drain::DrainOpts {
            prefill: 5_000,
            partitions: 10,
            prefill_conns: 4,
            batch: 100,
            conns: 3,
            auto_ack: false,
            wait_ms: 200,
            idle: Duration::from_secs(2),
            max: Duration::from_secs(30),
            warmup_msgs: 300,
            payload_bytes: 100,
            spread: false,
        },
    );
    let v = r.verify.clone().unwrap();
    assert!(v.ok, "{v:?} {:?}", r.notes);
    assert_eq!(v.expected, 5_000);
    assert_eq!(r.messages, 5_000);
    assert_eq!(v.duplicates, 0);
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(r.ack_latency.is_some());
}

#[test]
fn drain_auto_ack_confirms_every_prefilled_message() {
    let c = ctx(start_stub());
    let r = drain::run(
        &c,
        &drain::DrainOpts {
            prefill: 2_000,
            partitions: 5,
            prefill_conns: 2,
            batch: 100,
            conns: 2,
            auto_ack: true,
            wait_ms: 200,
            idle: Duration::from_secs(2),
            max: Duration::from_secs(30),
            warmup_msgs: 0,
            payload_bytes: 100,
            spread: true,
        },
    );
    assert!(r.verify.unwrap().ok);
    assert_eq!(r.messages, 2_000);
    assert!(r.ack_latency.is_none());
}

#[test]
fn latency_measures_push_to_pop_for_messages_in_the_window() {
    let c = ctx(start_stub());
    let r = latency::run(
        &c,
        &latency::LatencyOpts {
            rate: 400.0,
            batch: 1,
            producers: 4,
            consumers: 1,
            partitions: 3,
            duration: Duration::from_millis(1000),
            warmup: Duration::from_millis(200),
            auto_ack: false,
            pop_batch: 100,
            wait_ms: 200,
            grace: Duration::from_secs(2),
            payload_bytes: 100,
        },
    );
    let v = r.verify.clone().unwrap();
    assert!(v.ok, "{v:?}");
    assert!(
        (300..=500).contains(&v.expected),
        "offered ~400 in 1 s, got {}",
        v.expected
    );
    let e = r.e2e_latency.clone().unwrap();
    assert_eq!(e.count, v.expected);
    assert!(e.p50_ms > 0.0 && e.p50_ms < 100.0, "{e:?}");
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
}

#[test]
fn dead_broker_is_counted_as_transport_errors() {
    // Bind then drop: nothing listens on this port.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = ctx(Target::parse(&format!("http://{addr}")).unwrap());
    let r = push::run(
        &c,
        &push::PushOpts {
            batch: 1,
            conns: 2,
            partitions: 1,
            duration: Duration::from_millis(200),
            warmup: Duration::from_millis(0),
            payload_bytes: 100,
            rate: None,
        },
    );
    assert_eq!(r.messages, 0);
    assert!(r.errors.transport > 0);
    assert!(!r.notes.is_empty(), "the failed configure is noted");
}

#[test]
fn push_with_a_rate_offers_that_rate_not_more() {
    let c = ctx(start_stub());
    let r = push::run(
        &c,
        &push::PushOpts {
            batch: 10,
            conns: 4,
            partitions: 3,
            duration: Duration::from_millis(1000),
            warmup: Duration::from_millis(100),
            payload_bytes: 100,
            rate: Some(400.0),
        },
    );
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    // A closed loop against the stub runs at thousands of msg/s.
    assert!(
        (200.0..600.0).contains(&r.msg_per_s),
        "offered 400 msg/s, measured {}",
        r.msg_per_s
    );
}
