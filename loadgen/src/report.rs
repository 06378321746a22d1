//! What a run reports: latency summaries, error counts, the no-loss check,
//! and the one JSON line (`--json`) that `run.sh` collects.
//!
//! Every worker keeps its own [`Stats`] (no sharing on the hot path) and the
//! main thread merges them once at the end.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::procstat::ProcReport;

/// Highest latency a histogram holds, in µs (60 s); larger values are clamped.
const MAX_LATENCY_US: u64 = 60_000_000;

/// How many error texts are kept to print.
const ERROR_SAMPLES: usize = 5;

/// A latency histogram in microseconds.
#[derive(Debug, Clone)]
pub struct Lat(Histogram<u64>);

impl Default for Lat {
    fn default() -> Lat {
        // 3 significant digits over 1 µs..60 s: ~200 KB per histogram.
        Lat(Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds"))
    }
}

impl Lat {
    /// Records one sample in µs (clamped into range).
    pub fn record_us(&mut self, us: u64) {
        self.0.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    /// Adds another histogram into this one.
    pub fn merge(&mut self, other: &Lat) {
        // Same bounds on both sides, so `add` cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Percentiles in milliseconds.
    pub fn summary(&self) -> LatSummary {
        let ms = |us: u64| us as f64 / 1000.0;
        LatSummary {
            count: self.0.len(),
            p50_ms: ms(self.0.value_at_quantile(0.50)),
            p90_ms: ms(self.0.value_at_quantile(0.90)),
            p99_ms: ms(self.0.value_at_quantile(0.99)),
            max_ms: ms(self.0.max()),
            mean_ms: self.0.mean() / 1000.0,
        }
    }
}

/// Percentiles of one histogram, in ms.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatSummary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

/// Error counts. Every one of these is printed; a run with any is flagged.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Errors {
    /// Connect, read or write failures and timeouts.
    pub transport: u64,
    /// Responses with a status outside 2xx.
    pub http_status: u64,
    /// Push items answered `"failed"` inside a 2xx.
    pub items_failed: u64,
    /// Acks answered `"success": false`.
    pub acks_failed: u64,
    /// 2xx bodies that did not parse as expected.
    pub unparsed: u64,
    /// The first few distinct error texts.
    pub samples: Vec<String>,
}

impl Errors {
    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        self.transport + self.http_status + self.items_failed + self.acks_failed + self.unparsed
    }

    /// Keeps `text` if it is new and fewer than [`ERROR_SAMPLES`] are kept,
    /// so one frequent error does not hide the others.
    pub fn sample(&mut self, text: impl FnOnce() -> String) {
        if self.samples.len() < ERROR_SAMPLES {
            let t = text();
            if !self.samples.contains(&t) {
                self.samples.push(t);
            }
        }
    }

    /// Records a non-2xx answer with the start of its body.
    pub fn status(&mut self, what: &str, status: u16, body: &[u8]) {
        self.http_status += 1;
        self.sample(|| {
            let b = String::from_utf8_lossy(&body[..body.len().min(200)]);
            format!("{what}: HTTP {status} {b}")
        });
    }

    /// Records a transport failure.
    pub fn transport(&mut self, what: &str, e: &dyn std::fmt::Display) {
        self.transport += 1;
        self.sample(|| format!("{what}: {e}"));
    }

    /// Adds another set of counts into this one.
    pub fn merge(&mut self, o: &Errors) {
        self.transport += o.transport;
        self.http_status += o.http_status;
        self.items_failed += o.items_failed;
        self.acks_failed += o.acks_failed;
        self.unparsed += o.unparsed;
        for s in &o.samples {
            self.sample(|| s.clone());
        }
    }
}

/// The end-of-run check that nothing was lost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verify {
    /// Messages that should have come through (pre-filled or sent in the window).
    pub expected: u64,
    /// Distinct messages that did (acked, or received in the window).
    pub got: u64,
    /// `expected - got` when positive.
    pub lost: u64,
    /// Deliveries beyond the first of the same message.
    pub duplicates: u64,
    /// True when nothing was lost.
    pub ok: bool,
}

impl Verify {
    /// Builds the check from counts.
    pub fn new(expected: u64, got: u64, duplicates: u64) -> Verify {
        Verify {
            expected,
            got,
            lost: expected.saturating_sub(got),
            duplicates,
            ok: got >= expected,
        }
    }
}

/// One scenario run: the JSON line and the human summary come from this.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// `push`, `drain`, `latency` (pg-ceiling writes its own lines).
    pub scenario: String,
    /// Scenario plus its shape, e.g. `push b100 p1000 c50`: runs with the
    /// same key are grouped when medians are taken.
    pub key: String,
    /// Free text from `--label`.
    pub label: String,
    /// The fresh queue this run used.
    pub queue: String,
    /// The scenario's flags, for the record.
    pub params: serde_json::Value,
    /// Length of the measured window, s.
    pub duration_s: f64,
    /// Messages completed in the window (pushed, acked or received).
    pub messages: u64,
    /// `messages / duration_s`.
    pub msg_per_s: f64,
    /// Requests completed in the window.
    pub requests: u64,
    /// Latency of the main request: push; for drain, pops that delivered;
    /// for latency, the producers' pushes.
    pub req_latency: LatSummary,
    /// `ack/batch` latency (drain with explicit acks).
    pub ack_latency: Option<LatSummary>,
    /// Push-to-pop latency (latency scenario).
    pub e2e_latency: Option<LatSummary>,
    /// Error counts over the whole run, warm-up included.
    pub errors: Errors,
    /// The no-loss check, where the scenario has one.
    pub verify: Option<Verify>,
    /// Broker, PostgreSQL and bench CPU and memory over the window.
    pub proc: ProcReport,
    /// Notes worth reading next to the numbers (e.g. the configure call failed).
    pub notes: Vec<String>,
}

impl Report {
    /// Human summary for stderr.
    pub fn print_human(&self) {
        let l = &self.req_latency;
        eprintln!(
            "{:<24} {:>10.0} msg/s  {:>8} msgs in {:.1}s  req p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms",
            self.key, self.msg_per_s, self.messages, self.duration_s, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms
        );
        if let Some(a) = &self.ack_latency {
            eprintln!(
                "{:<24} ack p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms",
                "", a.p50_ms, a.p90_ms, a.p99_ms, a.max_ms
            );
        }
        if let Some(e) = &self.e2e_latency {
            eprintln!(
                "{:<24} push-to-pop p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms ({} msgs)",
                "", e.p50_ms, e.p90_ms, e.p99_ms, e.max_ms, e.count
            );
        }
        let p = &self.proc;
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
        eprintln!(
            "{:<24} cpu%: broker {} pg {} bench {:.0} machine {}  mem MiB: broker rss {} hwm {} pg pss {}",
            "",
            f(p.broker_cpu_pct),
            f(p.pg_cpu_pct),
            p.bench_cpu_pct,
            f(p.machine_busy_pct),
            f(p.broker_rss_peak_mb),
            f(p.broker_hwm_mb),
            f(p.pg_pss_peak_mb)
        );
        let e = &self.errors;
        if e.total() > 0 {
            eprintln!(
                "{:<24} ERRORS: transport {} http {} items_failed {} acks_failed {} unparsed {}",
                "", e.transport, e.http_status, e.items_failed, e.acks_failed, e.unparsed
            );
            for s in &e.samples {
                eprintln!("{:<24}   {s}", "");
            }
        }
        if let Some(v) = &self.verify {
            eprintln!(
                "{:<24} verify: {} expected {} got {} lost {} duplicates {}",
                "",
                if v.ok { "OK" } else { "LOST MESSAGES" },
                v.expected,
                v.got,
                v.lost,
                v.duplicates
            );
        }
        for n in &self.notes {
            eprintln!("{:<24} note: {n}", "");
        }
    }

    /// The single JSON line for `--json`.
    pub fn json_line(&self) -> String {
        // A struct of numbers, strings and Values always serializes.
        serde_json::to_string(self).expect("report serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reports_ms() {
        let mut l = Lat::default();
        for us in 1..=1000 {
            l.record_us(us * 10);
        }
        let s = l.summary();
        assert!((s.p50_ms - 5.0).abs() < 0.05, "{s:?}");
        assert!((s.max_ms - 10.0).abs() < 0.05);
    }

    #[test]
    fn verify_counts_loss() {
        let v = Verify::new(10, 8, 1);
        assert!(!v.ok);
        assert_eq!(v.lost, 2);
    }
}
