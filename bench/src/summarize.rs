//! Turns the JSON lines of a suite (`queen-bench --json`, `pg-ceiling --json`)
//! into the markdown table of medians and ratios that `run.sh` prints.
//!
//! Runs are grouped by their `key`; every cell is the median of that column
//! over the group's runs (error and loss counts are summed instead, so one
//! bad run shows). Ratios are ours ÷ reference, so for throughput > 1 is
//! better and for latency < 1 is better.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

/// The original broker's figures (Queen MQ 0.15.1, C++, medians of 3 runs on
/// this kind of 2-core machine; from the yardstick README). Fixed numbers:
/// the original is not re-run.
pub mod original {
    /// Push batch 1, 50 connections, msg/s.
    pub const PUSH_B1: f64 = 2_479.0;
    /// Push batch 10, 50 connections, msg/s.
    pub const PUSH_B10: f64 = 11_466.0;
    /// Push batch 100, 50 connections, msg/s.
    pub const PUSH_B100: f64 = 18_500.0;
    /// Pop batch 100 + ack/batch, 10 connections, msg/s.
    pub const DRAIN_ACK: f64 = 7_934.0;
    /// Pop batch 100 with autoAck, 10 connections, msg/s.
    pub const DRAIN_AUTO: f64 = 21_419.0;
    /// Push-to-pop p50 at 1,000 msg/s offered, ms.
    pub const LATENCY_P50_MS: f64 = 20.3;
    /// Push-to-pop p99 at 1,000 msg/s offered, ms.
    pub const LATENCY_P99_MS: f64 = 134.0;
}

/// Number at a dotted path (`req_latency.p50_ms`), if present.
fn num(v: &Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(v, |v, k| v.get(k))?.as_f64()
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// Median of one column over a group of runs.
fn med(runs: &[Value], path: &str) -> Option<f64> {
    median(runs.iter().filter_map(|r| num(r, path)).collect())
}

fn sum(runs: &[Value], path: &str) -> f64 {
    runs.iter().filter_map(|r| num(r, path)).sum()
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x.abs() >= 1000.0 => group_thousands(x.round() as i64),
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

fn group_thousands(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn ratio(ours: Option<f64>, theirs: Option<f64>) -> String {
    match (ours, theirs) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

/// Batch size of a run (`params.batch`).
fn batch_of(runs: &[Value]) -> Option<u64> {
    runs.first()?.get("params")?.get("batch")?.as_u64()
}

/// Markdown for all lines of `jsonl` (lines that do not parse are skipped).
pub fn markdown(jsonl: &str) -> String {
    let mut groups: BTreeMap<(u8, String), Vec<Value>> = BTreeMap::new();
    for line in jsonl.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let scenario = v
            .get("scenario")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let key = v
            .get("key")
            .and_then(Value::as_str)
            .unwrap_or(&scenario)
            .to_string();
        let order = match scenario.as_str() {
            "pg-insert" => 0,
            "push" => 1,
            "drain" => 2,
            "latency" => 3,
            _ => 4,
        };
        groups.entry((order, key)).or_default().push(v);
    }
    // The INSERT ceiling per batch size, for the push ratios.
    let ceiling: BTreeMap<u64, f64> = groups
        .iter()
        .filter(|((o, _), _)| *o == 0)
        .filter_map(|(_, runs)| Some((batch_of(runs)?, med(runs, "rows_per_s")?)))
        .collect();

    let mut out = String::new();
    out.push_str("| scenario | runs | msg/s | req p50 ms | req p99 ms | e2e p50 ms | e2e p99 ms | errors | lost | broker CPU % | PG CPU % | bench CPU % | broker RSS MiB | vs PG ceiling | vs original |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for ((order, key), runs) in &groups {
        let n = runs.len();
        if *order == 0 {
            let _ = writeln!(
                out,
                "| {key} (PostgreSQL alone) | {n} | {} rows/s, {} commits/s | {} | {} | | | {} | | | {} | {} | | | |",
                fmt_num(med(runs, "rows_per_s")),
                fmt_num(med(runs, "commits_per_s")),
                fmt_num(med(runs, "commit_latency.p50_ms")),
                fmt_num(med(runs, "commit_latency.p99_ms")),
                sum(runs, "errors"),
                fmt_num(med(runs, "pg_cpu_pct")),
                fmt_num(med(runs, "client_cpu_pct")),
            );
            continue;
        }
        let rate = med(runs, "msg_per_s");
        let (vs_pg, vs_orig) = match (*order, batch_of(runs)) {
            (1, Some(b)) => {
                let orig = match b {
                    1 => Some(original::PUSH_B1),
                    10 => Some(original::PUSH_B10),
                    100 => Some(original::PUSH_B100),
                    _ => None,
                };
                (ratio(rate, ceiling.get(&b).copied()), ratio(rate, orig))
            }
            (2, _) => {
                let auto =
                    runs[0].pointer("/params/auto_ack").and_then(Value::as_bool) == Some(true);
                let orig = if auto {
                    original::DRAIN_AUTO
                } else {
                    original::DRAIN_ACK
                };
                ("–".into(), ratio(rate, Some(orig)))
            }
            // The original's latency figure was taken at batch 10 (4 + 4 connections).
            (3, Some(10)) => {
                let p50 = med(runs, "e2e_latency.p50_ms");
                let p99 = med(runs, "e2e_latency.p99_ms");
                (
                    "–".into(),
                    format!(
                        "p50 {} · p99 {}",
                        ratio(p50, Some(original::LATENCY_P50_MS)),
                        ratio(p99, Some(original::LATENCY_P99_MS))
                    ),
                )
            }
            _ => ("–".into(), "–".into()),
        };
        let errors = sum(runs, "errors.transport")
            + sum(runs, "errors.http_status")
            + sum(runs, "errors.items_failed")
            + sum(runs, "errors.acks_failed")
            + sum(runs, "errors.unparsed");
        let lost = runs
            .iter()
            .any(|r| r.get("verify").is_some_and(|v| !v.is_null()));
        let _ = writeln!(
            out,
            "| {key} | {n} | {} | {} | {} | {} | {} | {errors} | {} | {} | {} | {} | {} | {vs_pg} | {vs_orig} |",
            fmt_num(rate),
            fmt_num(med(runs, "req_latency.p50_ms")),
            fmt_num(med(runs, "req_latency.p99_ms")),
            fmt_num(med(runs, "e2e_latency.p50_ms")),
            fmt_num(med(runs, "e2e_latency.p99_ms")),
            if lost { format!("{}", sum(runs, "verify.lost")) } else { String::new() },
            fmt_num(med(runs, "proc.broker_cpu_pct")),
            fmt_num(med(runs, "proc.pg_cpu_pct")),
            fmt_num(med(runs, "proc.bench_cpu_pct")),
            fmt_num(med(runs, "proc.broker_rss_peak_mb")),
        );
    }
    out.push_str(
        "\nMedians over runs (errors and lost are summed). Ratios are ours ÷ reference: \
         for msg/s above 1× is better, for latency below 1× is better. \
         \"vs PG ceiling\" divides push bN by PostgreSQL's multi-row INSERT bN on the same \
         cluster with the broker stopped; \"vs original\" uses the original broker's fixed \
         figures (push b1 2,479, b10 11,466, b100 18,500 msg/s; drain 7,934 ack / 21,419 \
         autoAck msg/s; latency p50 20.3 ms, p99 134 ms). CPU % is of one core (200 % = both).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ratios() {
        let lines = [
            r#"{"scenario":"pg-insert","key":"INSERT b100 c8","params":{"batch":100},"rows_per_s":40000,"commits_per_s":400,"errors":0}"#,
            r#"{"scenario":"push","key":"push b100 p1 c50","params":{"batch":100},"msg_per_s":10000,"req_latency":{"p50_ms":5,"p99_ms":9},"errors":{"transport":0}}"#,
            r#"{"scenario":"push","key":"push b100 p1 c50","params":{"batch":100},"msg_per_s":30000,"req_latency":{"p50_ms":5,"p99_ms":9},"errors":{"transport":1}}"#,
            r#"{"scenario":"push","key":"push b100 p1 c50","params":{"batch":100},"msg_per_s":20000,"req_latency":{"p50_ms":5,"p99_ms":9},"errors":{"transport":0}}"#,
            r#"{"scenario":"latency","key":"latency r1000 b10","params":{"batch":10},"msg_per_s":1000,"e2e_latency":{"p50_ms":10.15,"p99_ms":67},"verify":{"lost":0}}"#,
            r#"{"scenario":"latency","key":"latency r1000 b1","params":{"batch":1},"msg_per_s":1000,"e2e_latency":{"p50_ms":99,"p99_ms":99},"verify":{"lost":0}}"#,
        ]
        .join("\n");
        let md = markdown(&lines);
        assert!(md.contains("| push b100 p1 c50 | 3 | 20,000 |"), "{md}");
        assert!(md.contains("0.50×"), "push vs ceiling: {md}");
        assert!(md.contains("1.08×"), "push vs original 18,500: {md}");
        assert!(md.contains("p50 0.50×"), "{md}");
        assert!(
            !md.contains("p50 4.88×"),
            "b1 latency has no original figure: {md}"
        );
        assert!(md.contains("40,000 rows/s"), "{md}");
    }
}
