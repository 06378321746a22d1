//! The three broker scenarios and what they share: the run context, the
//! warm-up/measure/stop phase, and the push, pop and ack requests.
//!
//! Threads and ownership: the main thread owns the clock (it flips
//! [`Phase`]) and the [`procstat`](crate::procstat) window; each worker
//! thread owns one [`Client`] and one [`WorkerStats`] and returns the stats
//! when joined. Workers share only atomics (the phase, counters).

pub mod drain;
pub mod ephemeral;
pub mod latency;
pub mod push;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::http::{self, Client, Target};
use crate::payload::{self, Delivery, Item, Rng};
use crate::procstat::{ProcReport, Watch};
use crate::report::{Errors, Lat};

/// Per-request timeout for ordinary (non-long-poll) requests.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// What every scenario needs to know about the run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The broker.
    pub target: Target,
    /// Processes whose CPU and memory are reported.
    pub watch: Watch,
    /// `--label`, copied into the report.
    pub label: String,
    /// Prefix of the fresh queue names.
    pub queue_prefix: String,
    /// `consumerGroup` for pops and acks; `None` = queue mode.
    pub group: Option<String>,
    /// `--queue-options`: the `options` object sent with `POST
    /// /api/v1/configure` (e.g. `{"retentionSeconds": 5}`); `{}` by default.
    pub queue_options: serde_json::Value,
}

impl Ctx {
    /// A fresh queue name, unique per run: `<prefix>-<what>-<unix ms>-<pid>`.
    pub fn fresh_queue(&self, what: &str) -> String {
        let ms = payload::now_unix_ns() / 1_000_000;
        format!("{}-{what}-{ms}-{}", self.queue_prefix, std::process::id())
    }

    /// Creates the queue with `POST /api/v1/configure`. A failure is returned
    /// as a note, not fatal: push creates missing queues anyway.
    pub fn configure(&self, queue: &str) -> Result<(), String> {
        let mut c = Client::new(self.target.clone(), HTTP_TIMEOUT);
        let body = serde_json::json!({ "queue": queue, "options": self.queue_options }).to_string();
        match c.post("/api/v1/configure", body.as_bytes()) {
            Ok(s) if (200..300).contains(&s) => Ok(()),
            Ok(s) => Err(format!(
                "configure {queue}: HTTP {s} {}",
                String::from_utf8_lossy(&c.body()[..c.body().len().min(200)])
            )),
            Err(e) => Err(format!("configure {queue}: {e}")),
        }
    }
}

/// Warm-up, measure, stop: flipped by the main thread, read by workers
/// after every request.
#[derive(Debug, Clone)]
pub struct Phase(Arc<AtomicU8>);

impl Default for Phase {
    /// Starts in warm-up.
    fn default() -> Phase {
        Phase(Arc::new(AtomicU8::new(Phase::WARMUP)))
    }
}

impl Phase {
    const WARMUP: u8 = 0;
    const MEASURE: u8 = 1;
    const STOP: u8 = 2;

    /// Starts the measured window.
    pub fn measure(&self) {
        self.0.store(Self::MEASURE, Ordering::Release);
    }

    /// Tells workers to finish their current request and return.
    pub fn stop(&self) {
        self.0.store(Self::STOP, Ordering::Release);
    }

    /// True inside the measured window.
    pub fn measuring(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::MEASURE
    }

    /// True once stopped.
    pub fn stopped(&self) -> bool {
        self.0.load(Ordering::Acquire) == Self::STOP
    }

    /// The timed part every closed-loop scenario shares: `warmup` of
    /// warm-up, then the measured window of `duration` with the process
    /// figures taken over it, then stop. Returns the window's length in
    /// seconds and those figures.
    pub fn run_window(
        &self,
        watch: &Watch,
        warmup: Duration,
        duration: Duration,
    ) -> (f64, ProcReport) {
        std::thread::sleep(warmup);
        self.measure();
        let t0 = Instant::now();
        let window = watch.start();
        std::thread::sleep(duration);
        self.stop();
        (t0.elapsed().as_secs_f64(), window.finish())
    }
}

/// Joins worker threads and sums what they counted (a worker that
/// panicked counts nothing).
pub fn join_stats(workers: Vec<std::thread::JoinHandle<WorkerStats>>) -> WorkerStats {
    let mut st = WorkerStats::default();
    for w in workers {
        if let Ok(s) = w.join() {
            st.merge(&s);
        }
    }
    st
}

/// What one worker thread counted.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Latency of the main request, completions inside the window.
    pub lat: Lat,
    /// Latency of ack requests inside the window.
    pub ack_lat: Lat,
    /// Push-to-pop latency (latency scenario).
    pub e2e: Lat,
    /// Errors over the whole run.
    pub errors: Errors,
    /// Messages completed inside the window.
    pub msgs: u64,
    /// Requests completed inside the window.
    pub reqs: u64,
    /// Messages accepted over the whole run (pushes) or acked (drain).
    pub total: u64,
    /// Items the broker called `duplicate`.
    pub duplicates: u64,
}

impl WorkerStats {
    /// Adds another worker's counts into this one.
    pub fn merge(&mut self, o: &WorkerStats) {
        self.lat.merge(&o.lat);
        self.ack_lat.merge(&o.ack_lat);
        self.e2e.merge(&o.e2e);
        self.errors.merge(&o.errors);
        self.msgs += o.msgs;
        self.reqs += o.reqs;
        self.total += o.total;
        self.duplicates += o.duplicates;
    }
}

/// One connection's push loop state: reused buffers and a private RNG.
#[derive(Debug)]
pub struct Pusher {
    /// The connection.
    pub client: Client,
    /// Body buffer, reused.
    body: Vec<u8>,
    /// Transaction-id source.
    rng: Rng,
    /// Partition names `p0..pN`, built once.
    partitions: Arc<Vec<String>>,
    /// Payload size in bytes.
    payload_bytes: usize,
    /// Item `i` of a request goes to partition `part + i` instead of `part`:
    /// a pre-fill over more partitions than it has requests (the scale runs
    /// of issue 18 fill 100,000 partitions with one or two messages each).
    pub spread: bool,
}

/// Outcome of one push request.
#[derive(Debug, Clone, Copy)]
pub struct Pushed {
    /// Items the broker took (2xx minus `failed`).
    pub accepted: u64,
    /// Wall time of the request.
    pub elapsed: Duration,
}

impl Pusher {
    /// A pusher over `partitions` (names shared between threads).
    pub fn new(
        target: &Target,
        partitions: Arc<Vec<String>>,
        payload_bytes: usize,
        stream: u64,
    ) -> Pusher {
        Pusher {
            client: Client::new(target.clone(), HTTP_TIMEOUT),
            body: Vec::with_capacity(32 * 1024),
            rng: Rng::new(stream),
            partitions,
            payload_bytes,
            spread: false,
        }
    }

    /// Partition names this pusher spreads over.
    pub fn nr_partitions(&self) -> usize {
        self.partitions.len()
    }

    /// Pushes `n` items of `queue` into partition number `part` (or, with
    /// `spread`, `part`, `part + 1`, ...), with sequence numbers from `seq`
    /// and timestamp `ts`. Errors are counted into `st.errors`;
    /// `st.duplicates` is bumped for `duplicate` items.
    pub fn push(
        &mut self,
        queue: &str,
        part: usize,
        n: usize,
        seq: u64,
        ts: u64,
        st: &mut WorkerStats,
    ) -> Pushed {
        let step = usize::from(self.spread);
        let nr = self.partitions.len();
        let items: Vec<Item<'_>> = (0..n)
            .map(|i| Item {
                queue,
                partition: &self.partitions[(part + i * step) % nr],
                seq: seq + i as u64,
                ts,
            })
            .collect();
        payload::write_push_body(&mut self.body, &mut self.rng, &items, self.payload_bytes);
        let t = Instant::now();
        let r = self.client.post("/api/v1/push", &self.body);
        let elapsed = t.elapsed();
        let accepted = match r {
            Ok(s) if (200..300).contains(&s) => {
                let b = self.client.body();
                let failed = (http::count(b, b"\"status\":\"failed\"")
                    + http::count(b, b"\"status\": \"failed\""))
                    as u64;
                st.duplicates += (http::count(b, b"\"status\":\"duplicate\"")
                    + http::count(b, b"\"status\": \"duplicate\""))
                    as u64;
                if failed > 0 {
                    st.errors.items_failed += failed;
                    st.errors.sample(|| {
                        format!(
                            "push: {failed} item(s) failed: {}",
                            String::from_utf8_lossy(&b[..b.len().min(200)])
                        )
                    });
                }
                n as u64 - failed.min(n as u64)
            }
            Ok(s) => {
                st.errors.status("push", s, self.client.body());
                0
            }
            Err(e) => {
                st.errors.transport("push", &e);
                0
            }
        };
        Pushed { accepted, elapsed }
    }
}

/// A pop response, reduced to what the bench reads.
#[derive(Debug, Default, Deserialize)]
pub struct PopBody {
    /// Delivered messages (absent or empty = nothing to deliver).
    #[serde(default)]
    pub messages: Vec<PopMsg>,
    /// Lease of the whole batch; messages may also carry their own.
    #[serde(default, rename = "leaseId")]
    pub lease_id: Option<String>,
}

/// One delivered message.
#[derive(Debug, Deserialize)]
pub struct PopMsg {
    /// Echoed back in the ack.
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    /// Echoed back in the ack.
    #[serde(rename = "partitionId")]
    pub partition_id: String,
    /// Per-message lease, when the broker sends one.
    #[serde(default, rename = "leaseId")]
    pub lease_id: Option<String>,
    /// The payload; only its `ts` is read.
    #[serde(default)]
    pub data: Option<PayloadTs>,
}

/// The bench's own payload, reduced to its send timestamp.
#[derive(Debug, Deserialize)]
pub struct PayloadTs {
    /// Unix ns at send.
    #[serde(default)]
    pub ts: Option<u64>,
}

/// One pop: `Some(body)` on 200 (possibly empty), `None` on 204, errors
/// counted. The latency is returned for the caller to record.
pub fn pop(client: &mut Client, path: &str, errors: &mut Errors) -> (Option<PopBody>, Duration) {
    let t = Instant::now();
    let r = client.get(path);
    let elapsed = t.elapsed();
    let body = match r {
        Ok(204) => None,
        Ok(s) if (200..300).contains(&s) => {
            if client.body().is_empty() {
                None
            } else {
                match serde_json::from_slice::<PopBody>(client.body()) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        errors.unparsed += 1;
                        errors.sample(|| format!("pop: unparsed body ({e})"));
                        None
                    }
                }
            }
        }
        Ok(s) => {
            errors.status("pop", s, client.body());
            None
        }
        Err(e) => {
            errors.transport("pop", &e);
            None
        }
    };
    (body, elapsed)
}

/// The deliveries of a pop, each with its lease.
pub fn deliveries(body: &PopBody) -> Vec<Delivery> {
    let batch_lease = body.lease_id.clone().unwrap_or_default();
    body.messages
        .iter()
        .map(|m| Delivery {
            transaction_id: m.transaction_id.clone(),
            partition_id: m.partition_id.clone(),
            lease_id: m
                .lease_id
                .clone()
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| batch_lease.clone()),
        })
        .collect()
}

/// One element of an `ack/batch` answer.
#[derive(Debug, Deserialize)]
struct AckResult {
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    error: Option<String>,
}

/// `POST /api/v1/ack/batch`; returns how many acks the broker confirmed and
/// the request's wall time. Refused acks are counted in `errors`.
pub fn ack(
    client: &mut Client,
    buf: &mut Vec<u8>,
    ds: &[Delivery],
    group: Option<&str>,
    errors: &mut Errors,
) -> (u64, Duration) {
    payload::write_ack_body(buf, ds, group);
    let t = Instant::now();
    let r = client.post("/api/v1/ack/batch", buf);
    let elapsed = t.elapsed();
    let ok = match r {
        Ok(s) if (200..300).contains(&s) => {
            match serde_json::from_slice::<Vec<AckResult>>(client.body()) {
                Ok(rs) => {
                    let refused: Vec<&AckResult> =
                        rs.iter().filter(|r| r.success == Some(false)).collect();
                    if let Some(first) = refused.first() {
                        errors.acks_failed += refused.len() as u64;
                        let why = first.error.clone().unwrap_or_default();
                        errors.sample(|| format!("ack: {} refused, e.g. {why}", refused.len()));
                    }
                    (rs.len() - refused.len()) as u64
                }
                Err(e) => {
                    errors.unparsed += 1;
                    errors.sample(|| format!("ack: unparsed body ({e})"));
                    0
                }
            }
        }
        Ok(s) => {
            errors.status("ack", s, client.body());
            0
        }
        Err(e) => {
            errors.transport("ack", &e);
            0
        }
    };
    (ok, elapsed)
}

/// Partition names `p0..p{n-1}`.
pub fn partition_names(n: usize) -> Arc<Vec<String>> {
    Arc::new((0..n.max(1)).map(|i| format!("p{i}")).collect())
}

/// Microseconds of a duration, for histograms.
pub fn us(d: Duration) -> u64 {
    d.as_micros() as u64
}
