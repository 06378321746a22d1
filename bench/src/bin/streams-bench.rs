//! `streams-bench`: stream cycles per second on `--partitions` source
//! partitions (default 20, one client thread each), every cycle the issue-15
//! shape: `--state-ops` state upserts (10), `--pushes` sink pushes (10) and the
//! source ack of one message.
//!
//! Modes (`--mode`, default `both`, run one after the other on fresh queues):
//! - `broker`: each cycle is `POST /streams/v1/cycle` to the broker;
//! - `pg`: the same statement by a plain PostgreSQL client, one transaction
//!   each: `SELECT queen.streams_cycle($1::jsonb)` (autocommit) with the
//!   argument the broker would build (ids minted here as the broker does),
//!   on a connection of `--dsn`. The broker's figure as a share of this one
//!   is what the broker's cycle path costs (target: at least 50%).
//!
//! Both modes use the broker for the set-up outside the cycles: configure
//! the source queue (leaseTime 3600), register the query, and per thread a
//! refill loop of "push `--lease-batch` messages to my partition, pop them
//! as group `streams.<query>`", after which each cycle acknowledges the next
//! message of the lease (`release_lease` false until the last). Those two
//! requests per `--lease-batch` cycles (500) are inside the window and under
//! 1% of its round trips; only cycles are counted and timed.
//!
//! Do not run this at scale on a shared box: `bench/README.md` says how.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client as Pg, NoTls};
use queen_bench::args::Args;
use queen_bench::http::{Client, Target};
use queen_bench::report::{Errors, Lat};
use serde_json::{json, Value};
use uuid::Uuid;

const USAGE: &str = "\
usage: streams-bench [--url http://127.0.0.1:6632]
       [--dsn 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
       [--mode both|broker|pg] [--partitions 20] [--state-ops 10] [--pushes 10]
       [--lease-batch 500] [--duration 10] [--warmup 2] [--label TEXT] [--json]";

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

#[derive(Debug, Clone)]
struct Opts {
    target: Target,
    dsn: String,
    partitions: usize,
    state_ops: usize,
    pushes: usize,
    lease_batch: usize,
    duration: Duration,
    warmup: Duration,
}

/// What one thread counted inside the window.
#[derive(Debug, Default)]
struct Stats {
    lat: Lat,
    cycles: u64,
    errors: Errors,
}

/// One leased message: (partition id, transaction id, lease id).
type Leased = (String, String, String);

fn call(c: &mut Client, method: &str, path: &str, body: &Value) -> Result<Value, String> {
    let bytes = body.to_string().into_bytes();
    let st = c
        .request(method, path, Some(&bytes))
        .map_err(|e| format!("{method} {path}: {e}"))?;
    if !(200..300).contains(&st) {
        return Err(format!(
            "{method} {path}: HTTP {st} {}",
            String::from_utf8_lossy(c.body())
        ));
    }
    if c.body().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(c.body()).map_err(|e| format!("{path}: {e}"))
}

/// Pushes `n` messages to `src/part` and leases them for `group`.
fn refill(
    c: &mut Client,
    src: &str,
    part: &str,
    group: &str,
    n: usize,
) -> Result<Vec<Leased>, String> {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"queue": src, "partition": part, "payload": {"i": i}}))
        .collect();
    call(c, "POST", "/api/v1/push", &json!({ "items": items }))?;
    let st = c
        .get(&format!(
            "/api/v1/pop/queue/{src}/partition/{part}?batch={n}&consumerGroup={group}&wait=false"
        ))
        .map_err(|e| format!("pop: {e}"))?;
    if st != 200 {
        return Err(format!("pop: HTTP {st}"));
    }
    let v: Value = serde_json::from_slice(c.body()).map_err(|e| format!("pop: {e}"))?;
    let lease = v["leaseId"].as_str().unwrap_or("").to_string();
    Ok(v["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    (
                        m["partitionId"].as_str().unwrap_or("").to_string(),
                        m["transactionId"].as_str().unwrap_or("").to_string(),
                        lease.clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// The body of one cycle acking `m` (`last`: release the lease). `sink` is
/// (queue, partition): the source partition's name, as the SDK's `.to()`
/// defaults, so cycles of different partitions do not queue on one sink
/// partition's append lock.
fn cycle_body(
    o: &Opts,
    qid: &str,
    sink: (&str, &str),
    m: &Leased,
    group: &str,
    last: bool,
    n: u64,
) -> Value {
    let ops: Vec<Value> = (0..o.state_ops)
        .map(|k| json!({"type": "upsert", "key": format!("w{k}"), "value": {"acc": n, "windowEnd": n}}))
        .collect();
    let items: Vec<Value> = (0..o.pushes)
        .map(|k| json!({"queue": sink.0, "partition": sink.1, "payload": {"n": n, "k": k}}))
        .collect();
    json!({"query_id": qid, "partition_id": m.0, "consumer_group": group,
           "state_ops": ops, "push_items": items, "release_lease": last,
           "ack": {"transactionId": m.1, "leaseId": m.2, "status": "completed", "count": 1}})
}

/// The same argument as the broker builds it for `queen.streams_cycle`.
fn as_procedure_arg(mut body: Value) -> Value {
    if let Some(items) = body["push_items"].as_array_mut() {
        for it in items {
            let id = Uuid::now_v7().to_string();
            it["id"] = json!(id);
            it["txid"] = json!(id);
        }
    }
    body["group"] = body["consumer_group"].take();
    body
}

#[allow(clippy::too_many_arguments)]
fn worker(
    o: Opts,
    pg: bool,
    qid: String,
    src: String,
    sink: String,
    part: String,
    phase: Arc<AtomicU8>,
) -> Stats {
    let group = format!("streams.{src}");
    let mut http = Client::new(o.target.clone(), Duration::from_secs(30));
    let mut conn = if pg {
        match Pg::connect(&o.dsn, NoTls) {
            Ok(c) => Some(c),
            Err(e) => {
                let mut s = Stats::default();
                s.errors.transport("connect", &e);
                return s;
            }
        }
    } else {
        None
    };
    let mut st = Stats::default();
    let mut n = 0u64;
    while phase.load(Ordering::Acquire) != STOP {
        let batch = match refill(&mut http, &src, &part, &group, o.lease_batch) {
            Ok(b) if !b.is_empty() => b,
            Ok(_) => continue,
            Err(e) => {
                st.errors.sample(|| e);
                st.errors.unparsed += 1;
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        for (i, m) in batch.iter().enumerate() {
            let p = phase.load(Ordering::Acquire);
            if p == STOP {
                break;
            }
            n += 1;
            let body = cycle_body(&o, &qid, (&sink, &part), m, &group, i + 1 == batch.len(), n);
            let t = Instant::now();
            let ok = match conn.as_mut() {
                Some(c) => c
                    .query_one(
                        "SELECT queen.streams_cycle($1::jsonb)",
                        &[&as_procedure_arg(body)],
                    )
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                None => call(&mut http, "POST", "/streams/v1/cycle", &body).and_then(|v| {
                    if v["success"] == true {
                        Ok(())
                    } else {
                        Err(v["error"].to_string())
                    }
                }),
            };
            if p == MEASURE {
                match ok {
                    Ok(()) => {
                        st.lat.record_us(t.elapsed().as_micros() as u64);
                        st.cycles += 1;
                    }
                    Err(e) => {
                        st.errors.sample(|| e);
                        st.errors.acks_failed += 1;
                    }
                }
            }
        }
    }
    st
}

/// Runs one mode on fresh queues; its JSON line.
fn run_mode(o: &Opts, pg: bool, label: &str) -> Result<Value, String> {
    let tag = format!(
        "sbench-{}-{}",
        if pg { "pg" } else { "broker" },
        Uuid::new_v4().simple()
    );
    let (src, sink) = (format!("{tag}-src"), format!("{tag}-sink"));
    let mut http = Client::new(o.target.clone(), Duration::from_secs(30));
    call(
        &mut http,
        "POST",
        "/api/v1/configure",
        &json!({"queue": src, "options": {"leaseTime": 3600}}),
    )?;
    let reg = call(
        &mut http,
        "POST",
        "/streams/v1/queries",
        &json!({"name": src, "source_queue": src, "sink_queue": sink, "config_hash": "bench"}),
    )?;
    let qid = reg["query_id"]
        .as_str()
        .ok_or("register: no query_id")?
        .to_string();
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let threads: Vec<_> = (0..o.partitions)
        .map(|p| {
            let (o, qid, src, sink, phase) = (
                o.clone(),
                qid.clone(),
                src.clone(),
                sink.clone(),
                phase.clone(),
            );
            thread::spawn(move || worker(o, pg, qid, src, sink, format!("p{p}"), phase))
        })
        .collect();
    thread::sleep(o.warmup);
    phase.store(MEASURE, Ordering::Release);
    let t0 = Instant::now();
    thread::sleep(o.duration);
    phase.store(STOP, Ordering::Release);
    let secs = t0.elapsed().as_secs_f64();
    let mut total = Stats::default();
    for t in threads {
        if let Ok(s) = t.join() {
            total.lat.merge(&s.lat);
            total.cycles += s.cycles;
            total.errors.merge(&s.errors);
        }
    }
    let mode = if pg { "pg" } else { "broker" };
    let lat = total.lat.summary();
    eprintln!(
        "streams cycle ({mode}) p{} s{} i{}: {:>8.0} cycles/s  p50 {:.2} p99 {:.2} max {:.2} ms  errors {}",
        o.partitions, o.state_ops, o.pushes,
        total.cycles as f64 / secs, lat.p50_ms, lat.p99_ms, lat.max_ms, total.errors.total()
    );
    for s in &total.errors.samples {
        eprintln!("  error: {s}");
    }
    Ok(json!({
        "scenario": "streams-cycle", "mode": mode, "label": label,
        "key": format!("cycle {mode} p{} s{} i{}", o.partitions, o.state_ops, o.pushes),
        "params": {"partitions": o.partitions, "state_ops": o.state_ops, "pushes": o.pushes,
                   "lease_batch": o.lease_batch, "duration_s": o.duration.as_secs_f64()},
        "duration_s": secs, "cycles": total.cycles, "cycles_per_s": total.cycles as f64 / secs,
        "cycle_latency": lat, "errors": total.errors.total(), "error_samples": total.errors.samples,
    }))
}

fn run(words: &[String]) -> Result<ExitCode, String> {
    if words.iter().any(|w| w == "--help" || w == "-h") {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    let a = Args::parse(words).map_err(|e| format!("{e}\n{USAGE}"))?;
    let bad = |e| format!("{e}\n{USAGE}");
    let url: String = a
        .get("url", "http://127.0.0.1:6632".to_string())
        .map_err(bad)?;
    let o = Opts {
        target: Target::parse(&url)?,
        dsn: a
            .get(
                "dsn",
                "host=127.0.0.1 port=5432 user=postgres dbname=postgres".to_string(),
            )
            .map_err(bad)?,
        partitions: a.get("partitions", 20usize).map_err(bad)?.max(1),
        state_ops: a.get("state-ops", 10usize).map_err(bad)?,
        pushes: a.get("pushes", 10usize).map_err(bad)?,
        lease_batch: a
            .get("lease-batch", 500usize)
            .map_err(bad)?
            .clamp(1, 10_000),
        duration: Duration::from_secs_f64(a.get("duration", 10.0f64).map_err(bad)?.max(0.1)),
        warmup: Duration::from_secs_f64(a.get("warmup", 2.0f64).map_err(bad)?.max(0.0)),
    };
    let mode: String = a.get("mode", "both".to_string()).map_err(bad)?;
    let label: String = a.get("label", String::new()).map_err(bad)?;
    let json_out = a.switch("json");
    a.finish().map_err(bad)?;
    let modes: &[bool] = match mode.as_str() {
        "both" => &[false, true],
        "broker" => &[false],
        "pg" => &[true],
        m => return Err(format!("--mode {m:?}: both, broker or pg\n{USAGE}")),
    };
    let mut rates = Vec::new();
    for &pg in modes {
        let line = run_mode(&o, pg, &label)?;
        rates.push(line["cycles_per_s"].as_f64().unwrap_or(0.0));
        if json_out {
            println!("{line}");
        }
    }
    if let [broker, pg] = rates[..] {
        if pg > 0.0 {
            eprintln!(
                "broker / plain client: {:.0}% (target: at least 50%)",
                100.0 * broker / pg
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    match run(&words) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("streams-bench: {msg}");
            ExitCode::from(1)
        }
    }
}
