//! An in-memory stand-in for the broker, for testing the bench without
//! PostgreSQL: configure, push (201 array), pop (200 with `leaseId`, or 204;
//! long-poll with `wait=true`), `ack/batch` (200 array), `/health`. One
//! mutex and condvar over all queues; good for thousands of requests/s.
//! Used by `tests/stub_broker.rs` and by `examples/stub-broker.rs` (a
//! process `run.sh` can start in place of the broker: `BROKER_BIN=...`).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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

/// Serves the stub on `l`, one thread per connection, until the process ends.
pub fn serve_on(l: TcpListener) {
    let shared: Shared = Arc::default();
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let shared = shared.clone();
            thread::spawn(move || serve(s, &shared));
        }
    });
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
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
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
        ("GET", "/health") => (
            200,
            Some(json!({"status": "healthy", "database": "connected"})),
        ),
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
            let lease = if auto {
                String::new()
            } else {
                format!("lease-{}", st.next_lease)
            };
            let msgs: Vec<Value> = taken
                .iter()
                .map(|m| json!({"transactionId": m.txid, "partitionId": m.partition_id, "leaseId": lease, "data": m.data}))
                .collect();
            if !auto {
                for m in taken {
                    st.leased.insert((lease.clone(), m.txid.clone()), m);
                }
            }
            (
                200,
                Some(json!({"success": true, "leaseId": lease, "messages": msgs})),
            )
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
