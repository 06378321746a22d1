//! Stream-cycle figures (issue 15): the cycles a shard answered, by outcome,
//! and a latency histogram of the whole cycle (parse, seal, the one DB round
//! trip, the answer). Each shard writes its own [`CycleStats`] in its slot,
//! as every counter of [`super::ShardStats`]; a scrape sums the slots and
//! renders `queen_streams_cycles_total{outcome}` and
//! `queen_streams_cycle_duration_seconds` as exposition text.
//!
//! The histogram is hand-rendered from fixed buckets: a `prometheus_client`
//! histogram cannot be filled from per-shard counts, and these are plain
//! atomics that only their shard writes (no read-modify-write on the hot path).

use super::bump;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds of the latency buckets, seconds: a cycle is one round trip,
/// so the interesting range is 0.5 ms (local, idle) to 1 s (a saturated pool).
const BUCKETS_S: [f64; 11] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// One shard's stream-cycle counters. Written by its owner only.
#[derive(Debug, Default)]
pub struct CycleStats {
    /// Cycles applied (`success: true`).
    pub applied: AtomicU64,
    /// Cycles refused (`success: false`: nothing applied).
    pub refused: AtomicU64,
    /// Per bucket of [`BUCKETS_S`]: cycles at or under its bound (not cumulative).
    buckets: [AtomicU64; BUCKETS_S.len()],
    /// Sum of all cycle latencies, µs.
    sum_us: AtomicU64,
}

impl CycleStats {
    /// Counts one cycle that took `took`, applied or refused.
    pub fn observe(&self, applied: bool, took: Duration) {
        bump(
            if applied {
                &self.applied
            } else {
                &self.refused
            },
            1,
        );
        let s = took.as_secs_f64();
        if let Some(i) = BUCKETS_S.iter().position(|&b| s <= b) {
            bump(&self.buckets[i], 1);
        }
        bump(&self.sum_us, took.as_micros() as u64);
    }
}

/// The two families as exposition text (no end marker), summed over `slots`.
pub fn render<'a>(slots: impl Iterator<Item = &'a CycleStats>) -> String {
    let (mut applied, mut refused, mut sum_us) = (0u64, 0u64, 0u64);
    let mut buckets = [0u64; BUCKETS_S.len()];
    for s in slots {
        applied += s.applied.load(Relaxed);
        refused += s.refused.load(Relaxed);
        sum_us += s.sum_us.load(Relaxed);
        for (b, a) in buckets.iter_mut().zip(&s.buckets) {
            *b += a.load(Relaxed);
        }
    }
    let count = applied + refused;
    let mut out = String::with_capacity(1024);
    // Writing into a String cannot fail.
    let _ = write!(
        out,
        "# HELP queen_streams_cycles Stream cycles answered, by outcome (refused: nothing applied).\n\
         # TYPE queen_streams_cycles counter\n\
         queen_streams_cycles_total{{outcome=\"applied\"}} {applied}\n\
         queen_streams_cycles_total{{outcome=\"refused\"}} {refused}\n\
         # HELP queen_streams_cycle_duration_seconds Latency of a stream cycle request.\n\
         # TYPE queen_streams_cycle_duration_seconds histogram\n"
    );
    let mut cumulative = 0;
    for (bound, n) in BUCKETS_S.iter().zip(buckets) {
        cumulative += n;
        let _ = writeln!(
            out,
            "queen_streams_cycle_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}"
        );
    }
    let _ = write!(
        out,
        "queen_streams_cycle_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n\
         queen_streams_cycle_duration_seconds_sum {}\n\
         queen_streams_cycle_duration_seconds_count {count}\n",
        sum_us as f64 / 1e6
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_inf_is_the_count() {
        let a = CycleStats::default();
        let b = CycleStats::default();
        a.observe(true, Duration::from_micros(300));
        a.observe(true, Duration::from_millis(3));
        b.observe(false, Duration::from_secs(2));
        let t = render([&a, &b].into_iter());
        assert!(
            t.contains("queen_streams_cycles_total{outcome=\"applied\"} 2\n"),
            "{t}"
        );
        assert!(
            t.contains("queen_streams_cycles_total{outcome=\"refused\"} 1\n"),
            "{t}"
        );
        assert!(t.contains("_bucket{le=\"0.0005\"} 1\n"), "{t}");
        assert!(t.contains("_bucket{le=\"0.005\"} 2\n"), "{t}");
        assert!(t.contains("_bucket{le=\"1\"} 2\n"), "{t}");
        assert!(t.contains("_bucket{le=\"+Inf\"} 3\n"), "{t}");
        assert!(
            t.contains("queen_streams_cycle_duration_seconds_count 3\n"),
            "{t}"
        );
    }
}
