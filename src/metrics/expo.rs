//! The text exposition's building blocks, shared by every renderer of a
//! scrape ([`super::prom`], [`super::families`]) and by the DB snapshot's
//! per-queue block ([`queue_block`], rendered once per refresh by
//! [`super::dbsnap`]): label lists, registered gauges, counters and
//! families, and the end marker. Knows nothing of shards or inputs.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;
use std::sync::atomic::AtomicU64;

/// Labels of one series.
pub type Labels = Vec<(String, String)>;
/// A float gauge family.
pub type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// Registers a float gauge set to `v`.
pub fn gauge(r: &mut Registry, name: &str, help: &str, v: f64) {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(v);
    r.register(name, help, g);
}

/// Registers a counter at `v`.
pub fn counter(r: &mut Registry, name: &str, help: &str, v: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(v);
    r.register(name, help, c);
}

/// Registers a float gauge family and returns it to be filled.
pub fn family(r: &mut Registry, name: &str, help: &str) -> GaugeFamily {
    let f = GaugeFamily::default();
    r.register(name, help, f.clone());
    f
}

/// A label list from `(name, value)` pairs.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The OpenMetrics end marker `encode` writes last.
pub const EOF: &str = "# EOF\n";

/// The per-queue families of a snapshot as exposition text without the end
/// marker (rendered once per snapshot refresh: with 10,000 queues this is most
/// of a scrape's work).
pub fn queue_block(snap: &Value) -> String {
    let mut r = Registry::default();
    let push_pm = family(
        &mut r,
        "queen_queue_push_messages_per_minute",
        "Messages pushed in the last minute",
    );
    let lag = family(
        &mut r,
        "queen_queue_pop_lag_milliseconds",
        "Age of the oldest unconsumed message per cursor",
    );
    let dlq_q = family(&mut r, "queen_dlq_depth_by_queue", "Dead letters per queue");
    let empty = Vec::new();
    let queues = snap
        .get("queues")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for q in queues {
        let name = q.get("queue").and_then(Value::as_str).unwrap_or("");
        let num = |k: &str| q.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        push_pm
            .get_or_create(&labels(&[("queue", name)]))
            .set(num("pushMessagesPerMinute"));
        lag.get_or_create(&labels(&[("queue", name), ("stat", "avg")]))
            .set(num("lagMsAvg"));
        lag.get_or_create(&labels(&[("queue", name), ("stat", "max")]))
            .set(num("lagMsMax"));
        dlq_q
            .get_or_create(&labels(&[("queue", name)]))
            .set(num("dlq"));
    }
    let mut out = String::with_capacity(256 + queues.len() * 300);
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &r);
    let body_len = out.strip_suffix(EOF).map_or(out.len(), str::len);
    out.truncate(body_len);
    out
}
