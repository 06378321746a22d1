//! Metrics: per-shard counters, their cross-shard sum, process figures, and
//! the cached per-queue DB snapshot behind `GET /metrics` and
//! `GET /metrics/prometheus` (rendered in [`prom`]).
//!
//! # Ownership and threads (decision)
//! Every shard owns one [`ShardStats`] slot of a process-wide [`Board`]
//! (`Arc<[ShardStats]>` created by main before the executors start). A slot is
//! a cache-line-aligned block of `AtomicU64`s written **only by its owning
//! shard**, with a Relaxed load and a Relaxed store (no read-modify-write, so
//! no locked instruction: the same cost as a `Cell<u64>`). A scrape on any
//! shard reads every slot with Relaxed loads: it never stops, waits for or
//! messages another shard, and each figure is at most one increment stale.
//! Figures of different slots are not a consistent cut; for counters that is
//! harmless. Nothing here takes a lock.
//!
//! Rates (`*_per_minute`, the JSON `rate`) are computed by each shard's own
//! sampler task (started by `crate::serve`, once a second, on the shard) from
//! a ring of its past counter values ([`Sampler`]), and published as gauges in
//! its slot. The same task measures event-loop lag (how late a 1 s timer fires).
//!
//! Counters that other per-shard structures already keep (`DbClient::nr_jobs`,
//! the push lanes' batch and request counts) are copied into the slot by the
//! sampler ([`Copied`]) rather than counted twice. This module knows nothing
//! of `Shard`: the shard holds its [`ShardCounters`], and its sampler task
//! hands the copied figures in.
//!
//! Per-queue rates and long-poll gauges live in [`queues`]: counted in the
//! shard's own map, published once a second by the sampler into the slot's
//! [`queues::Slot`] (the one place a scrape copies a pointer under a mutex).

pub mod dbsnap;
pub mod ephemeral;
pub mod expo;
pub mod families;
pub mod process;
pub mod prom;
pub mod queues;
pub mod scrape;
pub mod stages;
pub mod streams;

use crate::store::ack_fused::AckAnswer;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a shard samples its counters for rates and measures loop lag.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Samples kept: one minute of history plus the current one.
const RING: usize = 61;
/// Window of the JSON per-second `rate` (short enough to follow the chart,
/// long enough to smooth single bursts).
const RATE_WINDOW_S: usize = 5;

/// One shard's published figures. Written by its owner only.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ShardStats {
    /// HTTP requests routed.
    pub requests: AtomicU64,
    /// Push requests.
    pub push_requests: AtomicU64,
    /// Messages accepted by push.
    pub push_messages: AtomicU64,
    /// Pop requests.
    pub pop_requests: AtomicU64,
    /// Messages delivered by pop.
    pub pop_messages: AtomicU64,
    /// Pops that answered with nothing.
    pub pop_empty: AtomicU64,
    /// Pop attempts sent with the deep backlog sweep allowed
    /// (`queen.pop_sweep_depth`): a request's first, or the one it skipped
    /// and owes (`shard::sweeps::Plan`). The SQL may still stop short of it.
    pub pop_sweeps: AtomicU64,
    /// First pop attempts that skipped it: their lane's last sweep came back
    /// empty just before and nothing was pushed since (`shard::sweeps`).
    pub pop_sweeps_skipped: AtomicU64,
    /// Ack requests (single or batch).
    pub ack_requests: AtomicU64,
    /// Acknowledged items.
    pub ack_messages: AtomicU64,
    /// Ack items answered `success: false` (the ack itself failed).
    pub ack_failed: AtomicU64,
    /// Transactions.
    pub transactions: AtomicU64,
    /// KV ops served, by op (`KV_OPS` order; `queen_kv_ops_total{op}`).
    pub kv_ops: [AtomicU64; KV_OPS.len()],
    /// KV and lock calls that shared their commit with others
    /// (`queen_kv_grouped_calls_total`, `crate::store::kv_group`).
    pub kv_grouped: AtomicU64,
    /// Requests answered 5xx.
    pub errors: AtomicU64,
    /// Jobs handed to the DB threads (copied from `DbClient::nr_jobs`).
    pub db_jobs: AtomicU64,
    /// Push batches flushed (copied from the lanes).
    pub push_batches: AtomicU64,
    /// Push requests fused into those batches (copied from the lanes).
    pub push_fused: AtomicU64,
    /// Gauge: this shard's DB jobs submitted and not answered yet.
    pub db_inflight: AtomicU64,
    /// Gauge: pops parked in a long poll now.
    pub parked: AtomicU64,
    /// Gauge: last event-loop lag, µs.
    pub loop_lag_us: AtomicU64,
    /// Gauge: requests in the last minute.
    pub requests_pm: AtomicU64,
    /// Gauge: messages pushed + popped in the last minute.
    pub messages_pm: AtomicU64,
    /// Gauge: acked items in the last minute.
    pub acks_pm: AtomicU64,
    /// Gauge: DB jobs in the last minute.
    pub jobs_pm: AtomicU64,
    /// Gauge: 5xx answers in the last minute.
    pub errors_pm: AtomicU64,
    /// Gauge: requests per second ×1000 over the last `RATE_WINDOW_S` s.
    pub requests_rate_milli: AtomicU64,
    /// Gauge: messages per second ×1000 over the last `RATE_WINDOW_S` s.
    pub messages_rate_milli: AtomicU64,
    /// Acked items that went to the dead-letter queue.
    pub dlq_messages: AtomicU64,
    /// Timers this shard's firing job turned into messages.
    pub timers_fired: AtomicU64,
    /// Gauge: dead-lettered items in the last minute.
    pub dlq_pm: AtomicU64,
    /// Gauge: queues with a parked pop whose recheck interval backed off.
    pub backoff_queues: AtomicU64,
    /// Gauge: when the sampler last ran, ms since the board started (0: never).
    pub sampled_ms: AtomicU64,
    /// This shard's active queues, published by its sampler.
    pub queues: queues::Slot,
    /// Stream cycles answered and their latency (`crate::api::streams`).
    pub streams: streams::CycleStats,
    /// Time spent per stage of the push → pop path (`queen_stage_duration_seconds`).
    pub stages: stages::StageStats,
}

/// The KV op names, in the order of `ShardStats::kv_ops` (and of the API's
/// op table).
pub const KV_OPS: [&str; 7] = [
    "get",
    "getMany",
    "getPrefix",
    "put",
    "putIfAbsent",
    "delete",
    "incr",
];

/// Adds `n` to a counter only this thread writes.
#[inline]
fn bump(a: &AtomicU64, n: u64) {
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Every shard's slot, and the process start time.
#[derive(Debug)]
pub struct Board {
    /// Slot `i` belongs to shard `i`.
    pub shards: Box<[ShardStats]>,
    /// When the process started serving.
    pub started: Instant,
}

impl Board {
    /// A board with `n` zeroed slots.
    pub fn new(n: usize) -> Arc<Board> {
        Arc::new(Board {
            shards: (0..n).map(|_| ShardStats::default()).collect(),
            started: Instant::now(),
        })
    }

    /// The sum of one field over every shard.
    pub fn sum(&self, f: impl Fn(&ShardStats) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|s| f(s).load(Relaxed)).sum()
    }
}

/// A shard's writing handle on its own slot (owned by `Shard`).
#[derive(Debug)]
pub struct ShardCounters {
    /// The whole board (read by scrapes on this shard).
    pub board: Arc<Board>,
    /// This shard's slot index.
    idx: usize,
    /// Per-queue counters (this shard's thread only).
    pub per_queue: queues::QueueCounters,
}

impl ShardCounters {
    /// The handle of shard `idx`.
    pub fn new(board: Arc<Board>, idx: usize) -> ShardCounters {
        ShardCounters {
            board,
            idx,
            per_queue: queues::QueueCounters::default(),
        }
    }

    /// This shard's slot.
    pub fn mine(&self) -> &ShardStats {
        &self.board.shards[self.idx]
    }

    /// Counts one pass through a stage of the push → pop path.
    pub fn stage(&self, stage: stages::Stage, took: Duration) {
        self.mine().stages.observe(stage, took);
    }

    /// A request was routed; `status` is its answer.
    pub fn request(&self, status: u16) {
        let s = self.mine();
        bump(&s.requests, 1);
        if status >= 500 {
            bump(&s.errors, 1);
        }
    }

    /// The firing job turned `n` timers into messages.
    pub fn timers_fired(&self, n: u64) {
        bump(&self.mine().timers_fired, n);
    }

    /// A push request stored `n` messages.
    pub fn pushed(&self, n: usize) {
        bump(&self.mine().push_requests, 1);
        bump(&self.mine().push_messages, n as u64);
    }

    /// One push request's items as (queue name, items) per distinct
    /// (queue, partition): one request and its messages counted per queue it
    /// touched.
    ///
    /// Takes the request's pairs, not its items: the endpoint has grouped the
    /// items already, so only the few pairs are sorted and counted in runs.
    pub fn pushed_to<'a>(&self, pairs: impl Iterator<Item = (&'a str, u64)>) {
        let mut pairs: Vec<(&str, u64)> = pairs.collect();
        pairs.sort_unstable_by_key(|(q, _)| *q);
        for run in pairs.chunk_by(|a, b| a.0 == b.0) {
            self.per_queue.add(run[0].0, queues::PUSH_REQUESTS, 1);
            let n = run.iter().map(|(_, n)| n).sum();
            self.per_queue.add(run[0].0, queues::PUSH_MESSAGES, n);
        }
    }

    /// A pop attempt was sent with the deep sweep allowed, or skipped it
    /// under the empty-sweep memo (`shard::sweeps::Plan` says which count).
    pub fn swept(&self, skipped: bool) {
        let s = self.mine();
        bump(
            if skipped {
                &s.pop_sweeps_skipped
            } else {
                &s.pop_sweeps
            },
            1,
        );
    }

    /// A pop request on `queue` (when known) delivered `n` messages (0 = empty pop).
    pub fn popped(&self, queue: Option<&str>, n: usize) {
        let s = self.mine();
        bump(&s.pop_requests, 1);
        if n == 0 {
            bump(&s.pop_empty, 1);
        } else {
            bump(&s.pop_messages, n as u64);
        }
        if let Some(q) = queue {
            match n {
                0 => self.per_queue.add(q, queues::POP_EMPTY, 1),
                n => self.per_queue.add(q, queues::POP_MESSAGES, n as u64),
            }
        }
    }

    /// An ack request answered `answers`.
    pub fn acked(&self, answers: &[AckAnswer]) {
        let s = self.mine();
        bump(&s.ack_requests, 1);
        bump(&s.ack_messages, answers.len() as u64);
        for a in answers {
            if a.success == Some(false) {
                bump(&s.ack_failed, 1);
            }
            if a.dlq == Some(true) {
                bump(&s.dlq_messages, 1);
            }
            if let Some(q) = &a.queue {
                self.per_queue.add(q, queues::ACKS, 1);
            }
        }
    }

    /// A transaction ran, touching `queues`.
    /// A KV op of kind `k` (an index of [`KV_OPS`]) was served.
    pub fn kv_op(&self, k: usize) {
        if let Some(a) = self.mine().kv_ops.get(k) {
            bump(a, 1);
        }
    }

    /// A KV or lock call was answered after a commit shared by `group` calls.
    pub fn kv_call(&self, group: usize) {
        if group > 1 {
            bump(&self.mine().kv_grouped, 1);
        }
    }

    /// A transaction was committed, touching queues `names`.
    pub fn transaction<'a>(&self, names: impl Iterator<Item = &'a str>) {
        bump(&self.mine().transactions, 1);
        for q in names {
            self.per_queue.add(q, queues::TRANSACTIONS, 1);
        }
    }

    /// A pop parks on `queue` (when named), with its recheck interval when
    /// it has backed off; the gauges drop with the guard (see [`Parked`]).
    pub fn parked(&self, queue: Option<&str>, backoff: Option<Duration>) -> Parked<'_> {
        bump(&self.mine().parked, 1);
        let queue = queue.map(str::to_string);
        if let Some(q) = &queue {
            self.per_queue.park(q, backoff);
        }
        Parked {
            counters: self,
            queue,
            backoff,
        }
    }
}

/// Guard of a parked pop: the gauges drop when the pop leaves, however it leaves.
#[derive(Debug)]
pub struct Parked<'a> {
    /// The shard's counters.
    counters: &'a ShardCounters,
    /// The queue it parked on.
    queue: Option<String>,
    /// Its recheck interval, when backed off.
    backoff: Option<Duration>,
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let p = &self.counters.mine().parked;
        p.store(p.load(Relaxed).saturating_sub(1), Relaxed);
        if let Some(q) = &self.queue {
            self.counters.per_queue.unpark(q, self.backoff);
        }
    }
}

/// One sample of the counters the rates are computed from.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    requests: u64,
    messages: u64,
    acks: u64,
    jobs: u64,
    errors: u64,
    dlq: u64,
}

/// The figures a sample copies from the shard's other parts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Copied {
    /// How late the sampler's timer fired (event-loop lag).
    pub loop_lag: Duration,
    /// `DbClient::nr_jobs`.
    pub db_jobs: u64,
    /// The shard's DB jobs submitted and not answered yet.
    pub db_inflight: u64,
    /// Push batches flushed, over every push lane.
    pub push_batches: u64,
    /// Push requests fused into those batches.
    pub push_fused: u64,
}

/// A shard's rate ring: its last minute of samples. Owned by the shard's
/// sampler task, which calls [`Sampler::sample`] every [`SAMPLE_EVERY`].
#[derive(Debug)]
pub struct Sampler {
    /// Oldest first; at most [`RING`] samples.
    ring: VecDeque<Sample>,
}

impl Default for Sampler {
    fn default() -> Self {
        let mut ring = VecDeque::with_capacity(RING);
        // The counters start at zero with the shard: what happens before the
        // first tick belongs in the first minute's rates.
        ring.push_back(Sample::default());
        Sampler { ring }
    }
}

impl Sampler {
    /// Copies `copied` into the shard's slot, publishes its active queues,
    /// and computes the per-minute and per-second rates.
    pub fn sample(&mut self, counters: &ShardCounters, copied: Copied) {
        let s = counters.mine();
        s.loop_lag_us
            .store(copied.loop_lag.as_micros() as u64, Relaxed);
        s.db_jobs.store(copied.db_jobs, Relaxed);
        s.db_inflight.store(copied.db_inflight, Relaxed);
        s.push_batches.store(copied.push_batches, Relaxed);
        s.push_fused.store(copied.push_fused, Relaxed);
        let (active, backoff_queues) = counters.per_queue.tick();
        s.queues.store(active);
        s.backoff_queues.store(backoff_queues, Relaxed);
        let board = &counters.board;
        s.sampled_ms
            .store(board.started.elapsed().as_millis() as u64 + 1, Relaxed);
        let now = Sample {
            requests: s.requests.load(Relaxed),
            messages: s.push_messages.load(Relaxed) + s.pop_messages.load(Relaxed),
            acks: s.ack_messages.load(Relaxed),
            jobs: s.db_jobs.load(Relaxed),
            errors: s.errors.load(Relaxed),
            dlq: s.dlq_messages.load(Relaxed),
        };
        let ring = &mut self.ring;
        if ring.len() == RING {
            ring.pop_front();
        }
        ring.push_back(now);
        // The ring is never empty here: a sample was just pushed.
        let oldest = ring.front().copied().unwrap_or_default();
        s.requests_pm.store(now.requests - oldest.requests, Relaxed);
        s.messages_pm.store(now.messages - oldest.messages, Relaxed);
        s.acks_pm.store(now.acks - oldest.acks, Relaxed);
        s.jobs_pm.store(now.jobs - oldest.jobs, Relaxed);
        s.errors_pm.store(now.errors - oldest.errors, Relaxed);
        s.dlq_pm.store(now.dlq - oldest.dlq, Relaxed);
        let back = ring.len().saturating_sub(1).min(RATE_WINDOW_S);
        let then = ring[ring.len() - 1 - back];
        let secs = back.max(1) as u64;
        s.requests_rate_milli
            .store((now.requests - then.requests) * 1000 / secs, Relaxed);
        s.messages_rate_milli
            .store((now.messages - then.messages) * 1000 / secs, Relaxed);
    }
}
