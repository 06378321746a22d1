//! Per-queue operation rates and long-poll figures of one shard, and their
//! publication for scrapes on any shard.
//!
//! # Ownership and threads (decision)
//! Each shard counts, in its own `RefCell` map (shard thread only), the
//! pushes, pops, acks and transactions per queue name, and keeps gauges of the
//! pops parked on each queue and of those whose recheck interval has backed
//! off (http-api.md §4: ×multiplier after the threshold of empty tries).
//!
//! Per-minute figures come from a ring of cumulative samples taken every
//! [`RING_STEP`] ticks of the shard's 1 s sampler: a figure is "now minus the
//! oldest sample", so it covers the last 50–60 s and includes what happened a
//! moment ago (a workload shows in the next scrape after one sampler tick).
//! Once a second the sampler publishes the queues with any activity in the
//! window (or a parked pop) as an immutable `Arc<[QueueFigures]>` into the
//! shard's slot of the metrics board. The slot is a `Mutex<Arc<..>>` held only
//! to swap or clone one pointer (never across an await or I/O), so a scrape on
//! another shard copies a pointer and sums without waiting for this shard.
//!
//! A queue idle for the whole window with nothing parked is forgotten, so the
//! map is bounded by the queues active in the last minute. Queue names are
//! counted without their tenant: no series carries a tenant label (§1).
//! Figures are this broker's own; the DB snapshot's push rate
//! (`queen_queue_push_messages_per_minute`) is cluster-wide.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Cumulative operation counters of one queue.
pub const PUSH_REQUESTS: usize = 0;
/// Messages pushed.
pub const PUSH_MESSAGES: usize = 1;
/// Messages delivered by pops.
pub const POP_MESSAGES: usize = 2;
/// Pops that answered empty.
pub const POP_EMPTY: usize = 3;
/// Acknowledged items.
pub const ACKS: usize = 4;
/// Transactions that touched the queue.
pub const TRANSACTIONS: usize = 5;
/// Counters per queue.
pub const NR_OPS: usize = 6;

/// Sampler ticks (1 s each) between two ring samples.
pub const RING_STEP: u32 = 10;
/// Ring samples kept: six steps of 10 s make the one-minute window.
const RING_LEN: usize = 6;

/// One queue's published figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueFigures {
    /// Queue name.
    pub queue: String,
    /// Operations in the last minute, indexed by the counter constants.
    pub per_minute: [u64; NR_OPS],
    /// Pops parked on the queue now.
    pub parked: u64,
    /// Parked pops whose recheck interval has backed off.
    pub backed_off: u64,
    /// Sum of those pops' recheck intervals, ms (the mean is `sum / backed_off`).
    pub backoff_ms_sum: u64,
}

/// What a shard publishes: its active queues.
pub type Published = Arc<[QueueFigures]>;

/// A shard's publication slot (one per shard on the metrics board).
#[derive(Debug, Default)]
pub struct Slot(Mutex<Option<Published>>);

impl Slot {
    /// Replaces the published figures.
    pub fn store(&self, p: Published) {
        // A poisoned slot only means a panic elsewhere mid-swap; the pointer is still whole.
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
    }

    /// The last published figures (empty before the first publication).
    pub fn load(&self) -> Published {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| Arc::from(Vec::new()))
    }
}

/// One queue's state on the shard.
#[derive(Debug)]
struct Entry {
    /// Cumulative counts since the entry was created.
    counts: [u64; NR_OPS],
    /// Past samples of `counts`, oldest first (never empty: a zero sample at creation).
    ring: VecDeque<[u64; NR_OPS]>,
    /// Pops parked now.
    parked: u64,
    /// Parked pops in backoff now.
    backed_off: u64,
    /// Sum of their intervals, ms.
    backoff_ms_sum: u64,
}

impl Default for Entry {
    fn default() -> Entry {
        let mut ring = VecDeque::with_capacity(RING_LEN + 1);
        ring.push_back([0; NR_OPS]);
        Entry {
            counts: [0; NR_OPS],
            ring,
            parked: 0,
            backed_off: 0,
            backoff_ms_sum: 0,
        }
    }
}

impl Entry {
    fn per_minute(&self) -> [u64; NR_OPS] {
        let oldest = self.ring.front().copied().unwrap_or_default();
        std::array::from_fn(|k| self.counts[k].saturating_sub(oldest[k]))
    }
}

/// A shard's per-queue counters (shard thread only).
#[derive(Debug, Default)]
pub struct QueueCounters {
    map: RefCell<HashMap<String, Entry>>,
    /// Sampler ticks since the last ring sample.
    ticks: std::cell::Cell<u32>,
}

impl QueueCounters {
    fn with(&self, queue: &str, f: impl FnOnce(&mut Entry)) {
        let mut map = self.map.borrow_mut();
        match map.get_mut(queue) {
            Some(e) => f(e),
            None => f(map.entry(queue.to_string()).or_default()),
        }
    }

    /// Adds `n` to counter `op` of `queue`.
    pub fn add(&self, queue: &str, op: usize, n: u64) {
        if op < NR_OPS {
            self.with(queue, |e| e.counts[op] += n);
        }
    }

    /// A pop parks on `queue`; `backoff` is its recheck interval when past the threshold.
    pub fn park(&self, queue: &str, backoff: Option<Duration>) {
        self.with(queue, |e| {
            e.parked += 1;
            if let Some(d) = backoff {
                e.backed_off += 1;
                e.backoff_ms_sum += d.as_millis() as u64;
            }
        });
    }

    /// The pop of [`park`](Self::park) leaves.
    pub fn unpark(&self, queue: &str, backoff: Option<Duration>) {
        self.with(queue, |e| {
            e.parked = e.parked.saturating_sub(1);
            if let Some(d) = backoff {
                e.backed_off = e.backed_off.saturating_sub(1);
                e.backoff_ms_sum = e.backoff_ms_sum.saturating_sub(d.as_millis() as u64);
            }
        });
    }

    /// One sampler tick: every [`RING_STEP`] ticks takes a ring sample and
    /// forgets idle queues; every tick returns the active queues' figures
    /// and the number of queues with a backed-off pop.
    pub fn tick(&self) -> (Published, u64) {
        let step = self.ticks.get() + 1 >= RING_STEP;
        self.ticks.set(if step { 0 } else { self.ticks.get() + 1 });
        let mut map = self.map.borrow_mut();
        if step {
            map.retain(|_, e| {
                let idle = e.ring.len() >= RING_LEN && e.ring.iter().all(|s| *s == e.counts);
                e.ring.push_back(e.counts);
                if e.ring.len() > RING_LEN {
                    e.ring.pop_front();
                }
                !idle || e.parked > 0
            });
        }
        let mut backoff_queues = 0;
        let out: Vec<QueueFigures> = map
            .iter()
            .filter_map(|(q, e)| {
                backoff_queues += u64::from(e.backed_off > 0);
                let per_minute = e.per_minute();
                (e.parked > 0 || per_minute.iter().any(|&n| n > 0)).then(|| QueueFigures {
                    queue: q.clone(),
                    per_minute,
                    parked: e.parked,
                    backed_off: e.backed_off,
                    backoff_ms_sum: e.backoff_ms_sum,
                })
            })
            .collect();
        (Arc::from(out), backoff_queues)
    }
}

/// Sums the published figures of every shard by queue name, sorted by name.
pub fn sum<'a>(slots: impl Iterator<Item = &'a Slot>) -> Vec<QueueFigures> {
    let mut by_name: std::collections::BTreeMap<String, QueueFigures> = Default::default();
    for slot in slots {
        for f in slot.load().iter() {
            let t = by_name
                .entry(f.queue.clone())
                .or_insert_with(|| QueueFigures {
                    queue: f.queue.clone(),
                    ..Default::default()
                });
            for k in 0..NR_OPS {
                t.per_minute[k] += f.per_minute[k];
            }
            t.parked += f.parked;
            t.backed_off += f.backed_off;
            t.backoff_ms_sum += f.backoff_ms_sum;
        }
    }
    by_name.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_window_forgets_old_counts_and_idle_queues() {
        let c = QueueCounters::default();
        c.add("q", POP_MESSAGES, 5);
        let (p, _) = c.tick();
        assert_eq!(p[0].per_minute[POP_MESSAGES], 5);
        for _ in 0..(RING_STEP as usize * (RING_LEN + 1)) {
            c.tick();
        }
        let (p, _) = c.tick();
        assert!(p.is_empty(), "{p:?}");
        assert!(c.map.borrow().is_empty());
    }

    #[test]
    fn parked_and_backoff_gauges_follow_park_and_unpark() {
        let c = QueueCounters::default();
        c.park("q", None);
        c.park("q", Some(Duration::from_millis(400)));
        let (p, queues) = c.tick();
        assert_eq!(
            (p[0].parked, p[0].backed_off, p[0].backoff_ms_sum),
            (2, 1, 400)
        );
        assert_eq!(queues, 1);
        c.unpark("q", Some(Duration::from_millis(400)));
        c.unpark("q", None);
        let (p, queues) = c.tick();
        assert!(p.is_empty());
        assert_eq!(queues, 0);
    }
}
