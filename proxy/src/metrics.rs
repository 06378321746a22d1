//! The proxy's own metrics, served as Prometheus text at
//! `/metrics/prometheus` on the proxy port to a live operator only:
//! requests by route class and status code, and upstream latency.
//!
//! # Threads and ownership
//! One [`Slot`] per shard, in a [`Board`] made in `main` and shared by
//! `Arc`; shard `i` alone writes slot `i` (relaxed atomics, no contention),
//! and the shard answering a scrape sums every slot.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::route::Class;

/// Status codes counted on their own; the rest count as "other".
const CODES: [u16; 19] = [
    200, 201, 204, 400, 401, 403, 404, 405, 408, 409, 413, 421, 422, 429, 500, 502, 503, 504, 0,
];
/// Upper bounds of the upstream latency buckets, in seconds.
const BOUNDS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];
/// Classes counted (Class::LABELS) plus "none" for requests refused
/// before classification (unknown cluster, control data unavailable).
const NR_CLASSES: usize = Class::LABELS.len() + 1;

/// One shard's counters.
#[derive(Debug)]
pub struct Slot {
    /// Requests by class (or none) and code.
    requests: Vec<AtomicU64>,
    /// Upstream latency: one counter per bound, then +Inf.
    latency: Vec<AtomicU64>,
    /// Sum of upstream latencies, in microseconds.
    latency_sum_us: AtomicU64,
}

/// Every shard's slot.
#[derive(Debug)]
pub struct Board {
    /// Slot `i` belongs to shard `i`.
    slots: Vec<Slot>,
}

fn code_index(status: u16) -> usize {
    CODES
        .iter()
        .position(|c| *c == status)
        .unwrap_or(CODES.len() - 1)
}

impl Board {
    /// A board for `nr_shards` shards.
    pub fn new(nr_shards: usize) -> Board {
        let zeros = |n| (0..n).map(|_| AtomicU64::new(0)).collect();
        Board {
            slots: (0..nr_shards)
                .map(|_| Slot {
                    requests: zeros(NR_CLASSES * CODES.len()),
                    latency: zeros(BOUNDS.len() + 1),
                    latency_sum_us: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Counts one answered request on `shard`.
    pub fn count(&self, shard: usize, class: Option<Class>, status: u16) {
        let c = class.map_or(NR_CLASSES - 1, Class::index);
        self.slots[shard].requests[c * CODES.len() + code_index(status)].fetch_add(1, Relaxed);
    }

    /// Records one upstream exchange's duration on `shard`.
    pub fn upstream(&self, shard: usize, took: Duration) {
        let slot = &self.slots[shard];
        let s = took.as_secs_f64();
        let i = BOUNDS.iter().position(|b| s <= *b).unwrap_or(BOUNDS.len());
        slot.latency[i].fetch_add(1, Relaxed);
        slot.latency_sum_us
            .fetch_add(took.as_micros() as u64, Relaxed);
    }

    /// The Prometheus text exposition of every slot summed.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP queen_proxy_requests_total Requests answered, by route class and status code.\n");
        out.push_str("# TYPE queen_proxy_requests_total counter\n");
        for c in 0..NR_CLASSES {
            let class = Class::LABELS.get(c).copied().unwrap_or("none");
            for (k, code) in CODES.iter().enumerate() {
                let n: u64 = self
                    .slots
                    .iter()
                    .map(|s| s.requests[c * CODES.len() + k].load(Relaxed))
                    .sum();
                if n == 0 {
                    continue;
                }
                let code = if *code == 0 {
                    "other".to_string()
                } else {
                    code.to_string()
                };
                let _ = writeln!(
                    out,
                    "queen_proxy_requests_total{{class=\"{class}\",code=\"{code}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP queen_proxy_upstream_seconds Time from sending a request to the broker to its whole response.\n");
        out.push_str("# TYPE queen_proxy_upstream_seconds histogram\n");
        let mut cumulative = 0u64;
        for i in 0..=BOUNDS.len() {
            cumulative += self
                .slots
                .iter()
                .map(|s| s.latency[i].load(Relaxed))
                .sum::<u64>();
            let le = BOUNDS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "queen_proxy_upstream_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let sum_us: u64 = self
            .slots
            .iter()
            .map(|s| s.latency_sum_us.load(Relaxed))
            .sum();
        let _ = writeln!(
            out,
            "queen_proxy_upstream_seconds_sum {}",
            sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "queen_proxy_upstream_seconds_count {cumulative}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_over_shards_and_histogram_is_cumulative() {
        let b = Board::new(2);
        b.count(0, Some(Class::Produce), 201);
        b.count(1, Some(Class::Produce), 201);
        b.count(1, None, 421);
        b.count(0, Some(Class::Read), 299);
        b.upstream(0, Duration::from_micros(800));
        b.upstream(1, Duration::from_secs(9));
        let text = b.render();
        assert!(
            text.contains("queen_proxy_requests_total{class=\"produce\",code=\"201\"} 2"),
            "{text}"
        );
        assert!(text.contains("queen_proxy_requests_total{class=\"none\",code=\"421\"} 1"));
        assert!(text.contains("queen_proxy_requests_total{class=\"read\",code=\"other\"} 1"));
        assert!(text.contains("queen_proxy_upstream_seconds_bucket{le=\"0.001\"} 1"));
        assert!(text.contains("queen_proxy_upstream_seconds_bucket{le=\"+Inf\"} 2"));
    }
}
