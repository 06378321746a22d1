//! The scenarios against a tiny in-memory stand-in for the broker, so the
//! bench's push, pop, ack, long-poll and verification paths are tested
//! without PostgreSQL or the real broker. The stub speaks just enough of the
//! wire contract (http-api.md §2-§5): configure, push (201 array), pop
//! (200 with leaseId or 204, long-poll), ack/batch (200 array).

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use queen_bench::http::Target;
use queen_bench::procstat::Watch;
use queen_bench::scenario::{drain, latency, push, Ctx};
use serde_json::{json, Value};

/// One stored message.
#[derive(Clone)]
struct Msg {
    txid: String,
    partition_id: String,
    data: Value,
}

#[derive(Default)]
struct State {
    /// Ready messages per queue.
    ready: HashMap<String, VecDeque<Msg>>,
    /// Leased messages: (lease, txid) -> message.
    leased: HashMap<(String, String), Msg>,
    next_lease: u64,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

fn start_stub() -> Target {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let shared: Shared = Arc::default();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let shared = shared.clone();
            thread::spawn(move || serve(s, &shared));
        }
    });
    Target::parse(&format!("http://{addr}")).unwrap()
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn serve(mut s: TcpStream, shared: &Shared) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let len = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap()))
            .unwrap_or(0);
        while buf.len() < head_end + len {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        let mut words = head.split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let (status, reply) = handle(method, target, &body, shared);
        let text = reply.map(|v| v.to_string()).unwrap_or_default();
        let resp = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if s.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

fn handle(method: &str, target: &str, body: &[u8], shared: &Shared) -> (u16, Option<Value>) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let q = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_string)
    };
    let (lock, cv) = &**shared;
    match (method, path) {
        ("POST", "/api/v1/configure") => (200, Some(json!({"configured": true}))),
        ("POST", "/api/v1/push") => {
            let v: Value = serde_json::from_slice(body).unwrap();
            let mut st = lock.lock().unwrap();
            let mut out = Vec::new();
            for (i, it) in v["items"].as_array().unwrap().iter().enumerate() {
                let q = it["queue"].as_str().unwrap().to_string();
                let txid = it["transactionId"].as_str().unwrap().to_string();
                let pid = format!("pid-{}", it["partition"].as_str().unwrap());
                st.ready.entry(q).or_default().push_back(Msg {
                    txid: txid.clone(),
                    partition_id: pid.clone(),
                    data: it["payload"].clone(),
                });
                out.push(json!({"index": i, "transaction_id": txid, "status": "queued", "partition_id": pid}));
            }
            cv.notify_all();
            (201, Some(Value::Array(out)))
        }
        ("GET", p) if p.starts_with("/api/v1/pop/queue/") => {
            let queue = p.trim_start_matches("/api/v1/pop/queue/").to_string();
            let batch: usize = q("batch").and_then(|b| b.parse().ok()).unwrap_or(1);
            let wait = q("wait").as_deref() == Some("true");
            let timeout: u64 = q("timeout").and_then(|b| b.parse().ok()).unwrap_or(30000);
            let auto = q("autoAck").as_deref() == Some("true");
            let deadline = Instant::now() + Duration::from_millis(timeout);
            let mut st = lock.lock().unwrap();
            loop {
                let n = st.ready.get(&queue).map_or(0, |d| d.len());
                if n > 0 || !wait || Instant::now() >= deadline {
                    break;
                }
                st = cv.wait_timeout(st, deadline - Instant::now()).unwrap().0;
            }
            let taken: Vec<Msg> = match st.ready.get_mut(&queue) {
                Some(d) => {
                    let k = batch.min(d.len());
                    d.drain(..k).collect()
                }
                None => Vec::new(),
            };
            if taken.is_empty() {
                return (204, None);
            }
            st.next_lease += 1;
            let lease = if auto { String::new() } else { format!("lease-{}", st.next_lease) };
            let msgs: Vec<Value> = taken
                .iter()
                .map(|m| json!({"transactionId": m.txid, "partitionId": m.partition_id, "leaseId": lease, "data": m.data}))
                .collect();
            if !auto {
                for m in taken {
                    st.leased.insert((lease.clone(), m.txid.clone()), m);
                }
            }
            (200, Some(json!({"success": true, "leaseId": lease, "messages": msgs})))
        }
        ("POST", "/api/v1/ack/batch") => {
            let v: Value = serde_json::from_slice(body).unwrap();
            let mut st = lock.lock().unwrap();
            let out: Vec<Value> = v["acknowledgments"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let key = (a["leaseId"].as_str().unwrap().to_string(), a["transactionId"].as_str().unwrap().to_string());
                    let ok = st.leased.remove(&key).is_some();
                    json!({"index": i, "success": ok, "error": if ok { Value::Null } else { json!("Invalid or expired lease") }})
                })
                .collect();
            (200, Some(Value::Array(out)))
        }
        _ => (404, Some(json!({"error": "Not found"}))),
    }
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
    assert!((300..=500).contains(&v.expected), "offered ~400 in 1 s, got {}", v.expected);
    let e = r.e2e_latency.clone().unwrap();
    assert_eq!(e.count, v.expected);
    assert!(e.p50_ms > 0.0 && e.p50_ms < 100.0, "{e:?}");
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
}

#[test]
fn dead_broker_is_counted_as_transport_errors() {
    // Bind then drop: nothing listens on this port.
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
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
        },
    );
    assert_eq!(r.messages, 0);
    assert!(r.errors.transport > 0);
    assert!(!r.notes.is_empty(), "the failed configure is noted");
}
