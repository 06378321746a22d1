//! Integration-test harness: one private PostgreSQL cluster per test binary, a fresh
//! database per test, a `queen` broker process per test, and a small HTTP/1.1 client
//! that speaks the wire (keep-alive, chunked bodies, raw bytes for malformed input).
//!
//! - [`pg`]: the cluster and the per-test database;
//! - [`broker`]: the broker process and the API shorthands most tests use;
//! - [`http`]: the client connection and responses;
//! - this file: polling, ports, temp directories and pop-answer helpers.
//!
//! # Threads
//! Tests of one binary run in parallel threads, each with its own database and broker.
//! The only shared state is the cluster ([`Pg`], behind a mutex for stop/start) and the
//! set of ports handed out by [`free_port`].
#![allow(dead_code, unused_imports)]

pub mod broker;
pub mod http;
pub mod pg;

pub use broker::{Broker, BrokerBuilder};
pub use http::{raw_exchange, raw_status, Conn, Resp};
pub use pg::{pg, Db, Pg};

use std::collections::HashSet;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use serde_json::{json, Value};

/// How long a broker may take to answer `GET /health` with 200 after spawn.
pub const BROKER_READY_DEADLINE: Duration = Duration::from_secs(30);
/// Default read timeout of a client connection; long polls raise it per request.
pub const CLIENT_READ_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Polling and ports
// ---------------------------------------------------------------------------

/// Polls `f` every 20 ms until it returns `Some`, or `None` once `deadline` passed.
pub fn try_check_for<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Like [`try_check_for`] but panics when the deadline passes.
pub fn check_for<T>(deadline: Duration, f: impl FnMut() -> Option<T>) -> T {
    match try_check_for(deadline, f) {
        Some(v) => v,
        None => panic!("condition not met within {deadline:?}"),
    }
}

/// A loopback port nobody in this process has been handed yet and that is free now.
pub fn free_port() -> u16 {
    static USED: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let used = USED.get_or_init(|| Mutex::new(HashSet::new()));
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().unwrap().port();
        if used.lock().unwrap().insert(port) {
            return port;
        }
    }
}

fn unique_suffix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        nanos % 100_000
    )
}

fn mkdir_private(path: &Path) {
    fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(path)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
}

/// The last `n` lines of `s`.
fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ---------------------------------------------------------------------------
// Small helpers for message bodies
// ---------------------------------------------------------------------------

/// The `messages` array of a pop answer.
pub fn messages(pop: &Value) -> Vec<Value> {
    pop["messages"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("pop answer without messages array: {pop}"))
}

/// The transaction ids of a pop answer, in order.
pub fn txids(pop: &Value) -> Vec<String> {
    messages(pop)
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `{prefix}{i}` for i in range.
pub fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// A random v4 UUID string (an id nobody issued).
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
