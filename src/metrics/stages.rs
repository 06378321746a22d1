//! Where one message's time goes inside the broker (issue 18): a latency
//! histogram per stage of the push → long-poll wake → pop path, rendered as
//! `queen_stage_duration_seconds{stage}`.
//!
//! Stages, in the order a message meets them:
//! - `push`: a push request, parsed → its answer ready (lane, DB, reply);
//! - `db_queue`: a job waiting in the DB job queue for a DB thread;
//! - `db_push`, `db_pop`, `db_ack`, `db_call`: a DB thread running the job
//!   (one round trip, its commit included), by kind;
//! - `db_reply`: the DB thread's reply → the shard's drain hands it over;
//! - `notice`: a local `pushed` notice, the pushing shard → another shard
//!   applying it (through the mesh thread);
//! - `wake`: a queue's signal fired → the parked pop running again;
//! - `pop_woken`: a parked pop woken → its answer ready (the claim included),
//!   for the pops that then deliver.
//!
//! Each shard writes its own [`StageStats`] in its slot (plain atomics only
//! their shard writes, as every counter of [`super::ShardStats`]); a scrape
//! sums the slots. Hand-rendered, as [`super::streams`], because a
//! `prometheus_client` histogram cannot be filled from per-shard counts.

use super::bump;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A stage of a message's path (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A push request, parsed → answered.
    Push,
    /// A job in the DB job queue.
    DbQueue,
    /// A DB thread running a push batch.
    DbPush,
    /// A DB thread running a pop.
    DbPop,
    /// A DB thread running an ack batch.
    DbAck,
    /// A DB thread running any other call.
    DbCall,
    /// A reply from the DB thread to the shard.
    DbReply,
    /// A local notice, shard → mesh thread → shard.
    Notice,
    /// A fired signal → the parked pop running.
    Wake,
    /// A woken pop → its answer.
    PopWoken,
}

/// Label of each stage, by `Stage as usize`.
const NAMES: [&str; 10] = [
    "push",
    "db_queue",
    "db_push",
    "db_pop",
    "db_ack",
    "db_call",
    "db_reply",
    "notice",
    "wake",
    "pop_woken",
];

/// Upper bounds of the buckets, seconds: from a thread hand-off (tens of µs)
/// to a saturated pool (a second).
const BUCKETS_S: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// One stage's counts.
#[derive(Debug, Default)]
struct Hist {
    /// Per bucket of [`BUCKETS_S`]: observations at or under its bound and
    /// over the one before (not cumulative).
    buckets: [AtomicU64; BUCKETS_S.len()],
    /// Every observation (the `+Inf` bucket).
    count: AtomicU64,
    /// Sum of all observations, µs.
    sum_us: AtomicU64,
}

/// One shard's stage histograms. Written by its owner only.
#[derive(Debug, Default)]
pub struct StageStats {
    /// By `Stage as usize`.
    hists: [Hist; NAMES.len()],
}

impl StageStats {
    /// Counts one pass through `stage` that took `took`.
    pub fn observe(&self, stage: Stage, took: Duration) {
        let h = &self.hists[stage as usize];
        let s = took.as_secs_f64();
        if let Some(i) = BUCKETS_S.iter().position(|&b| s <= b) {
            bump(&h.buckets[i], 1);
        }
        bump(&h.count, 1);
        bump(&h.sum_us, took.as_micros() as u64);
    }
}

/// The family as exposition text (no end marker), summed over `slots`.
pub fn render<'a>(slots: impl Iterator<Item = &'a StageStats> + Clone) -> String {
    let mut out = String::with_capacity(8 * 1024);
    out.push_str(
        "# HELP queen_stage_duration_seconds Time one request or notice spends in each stage \
         of the push to long-poll pop path.\n\
         # TYPE queen_stage_duration_seconds histogram\n",
    );
    for (k, name) in NAMES.iter().enumerate() {
        let (mut count, mut sum_us) = (0u64, 0u64);
        let mut buckets = [0u64; BUCKETS_S.len()];
        for s in slots.clone() {
            let h = &s.hists[k];
            count += h.count.load(Relaxed);
            sum_us += h.sum_us.load(Relaxed);
            for (b, a) in buckets.iter_mut().zip(&h.buckets) {
                *b += a.load(Relaxed);
            }
        }
        let mut cumulative = 0;
        for (bound, n) in BUCKETS_S.iter().zip(buckets) {
            cumulative += n;
            // Writing into a String cannot fail.
            let _ = writeln!(
                out,
                "queen_stage_duration_seconds_bucket{{stage=\"{name}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = write!(
            out,
            "queen_stage_duration_seconds_bucket{{stage=\"{name}\",le=\"+Inf\"}} {count}\n\
             queen_stage_duration_seconds_sum{{stage=\"{name}\"}} {}\n\
             queen_stage_duration_seconds_count{{stage=\"{name}\"}} {count}\n",
            sum_us as f64 / 1e6
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_sum_over_shards_and_buckets_are_cumulative() {
        let a = StageStats::default();
        let b = StageStats::default();
        a.observe(Stage::Wake, Duration::from_micros(40));
        a.observe(Stage::Wake, Duration::from_millis(4));
        b.observe(Stage::Wake, Duration::from_secs(3));
        b.observe(Stage::DbPush, Duration::from_micros(1500));
        let t = render([&a, &b].into_iter());
        let has = |s: &str| assert!(t.contains(s), "{s} missing in\n{t}");
        has("queen_stage_duration_seconds_bucket{stage=\"wake\",le=\"0.00005\"} 1\n");
        has("queen_stage_duration_seconds_bucket{stage=\"wake\",le=\"0.005\"} 2\n");
        has("queen_stage_duration_seconds_bucket{stage=\"wake\",le=\"1\"} 2\n");
        has("queen_stage_duration_seconds_bucket{stage=\"wake\",le=\"+Inf\"} 3\n");
        has("queen_stage_duration_seconds_count{stage=\"wake\"} 3\n");
        has("queen_stage_duration_seconds_bucket{stage=\"db_push\",le=\"0.002\"} 1\n");
        has("queen_stage_duration_seconds_count{stage=\"notice\"} 0\n");
        assert_eq!(t.matches("_count{").count(), NAMES.len());
    }
}
