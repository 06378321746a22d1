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
        if i > 0 && (s.len() - i).is_multiple_of(3) {
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
            "pg-insert" | "pg-claim" | "pg-claimack" => 0,
            "push" => 1,
            "drain" => 2,
            "latency" => 3,
            _ => 4,
        };
        groups.entry((order, key)).or_default().push(v);
    }
    // PostgreSQL's limit per (mode, batch): the best over client counts of
    // each count's median, as issue 18 asks (a ceiling taken at one client
    // count flatters or punishes the ratio depending on the count). A run
    // whose pre-loaded rows ran out does not count.
    let mut limit: BTreeMap<(String, u64), (f64, String)> = BTreeMap::new();
    for ((o, key), runs) in &groups {
        let ok: Vec<Value> = runs
            .iter()
            .filter(|r| r.get("exhausted").and_then(Value::as_bool) != Some(true))
            .cloned()
            .collect();
        let (Some(b), Some(rate)) = (batch_of(runs), med(&ok, "rows_per_s")) else {
            continue;
        };
        if *o != 0 {
            continue;
        }
        let mode = runs[0]
            .get("scenario")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let best = limit.entry((mode, b)).or_insert((rate, key.clone()));
        if rate > best.0 {
            *best = (rate, key.clone());
        }
    }
    let ceiling = |mode: &str, b: u64| limit.get(&(mode.to_string(), b)).map(|(r, _)| *r);

    let mut out = String::new();
    out.push_str("| scenario | runs | msg/s | req p50 ms | req p99 ms | e2e p50 ms | e2e p99 ms | errors | lost | broker CPU % | PG CPU % | bench CPU % | broker RSS MiB | vs PG ceiling | vs original |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for ((order, key), runs) in &groups {
        let n = runs.len();
        if *order == 0 {
            let _ = writeln!(
                out,
                "| {key} (PostgreSQL alone){} | {n} | {} rows/s, {} commits/s | {} | {} | | | {} | | | {} | {} | | | |",
                if runs.iter().any(|r| r.get("exhausted").and_then(Value::as_bool) == Some(true)) {
                    " EXHAUSTED"
                } else {
                    ""
                },
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
                (ratio(rate, ceiling("pg-insert", b)), ratio(rate, orig))
            }
            (2, b) => {
                let auto =
                    runs[0].pointer("/params/auto_ack").and_then(Value::as_bool) == Some(true);
                let (orig, mode) = if auto {
                    (original::DRAIN_AUTO, "pg-claim")
                } else {
                    (original::DRAIN_ACK, "pg-claimack")
                };
                let lim = b.and_then(|b| ceiling(mode, b));
                (ratio(rate, lim), ratio(rate, Some(orig)))
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
    if !limit.is_empty() {
        out.push_str(
            "\nPostgreSQL's limit, best over client counts (the figure the ratios divide by):",
        );
        for ((mode, b), (rate, key)) in &limit {
            let _ = write!(out, " {mode} b{b} {} rows/s ({key});", fmt_num(Some(*rate)));
        }
        out.push('\n');
    }
    out.push_str(
        "\nMedians over runs (errors and lost are summed). Ratios are ours ÷ reference: \
         for msg/s above 1× is better, for latency below 1× is better. \
         \"vs PG ceiling\" divides push bN by PostgreSQL's multi-row INSERT bN, pop b100 + ack \
         by claim + ack (two commits per batch) and autoAck pop by the claim alone, each the \
         best over client counts on the same cluster with the broker stopped; \"vs original\" uses the original broker's fixed \
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
            r#"{"scenario":"pg-insert","key":"INSERT b100 c2","params":{"batch":100},"rows_per_s":25000,"commits_per_s":250,"errors":0}"#,
            r#"{"scenario":"pg-claimack","key":"CLAIMACK b100 c2","params":{"batch":100},"rows_per_s":30000,"errors":0}"#,
            r#"{"scenario":"pg-claimack","key":"CLAIMACK b100 c4","params":{"batch":100},"rows_per_s":90000,"exhausted":true,"errors":0}"#,
            r#"{"scenario":"drain","key":"drain b100 c10 ack","params":{"batch":100,"auto_ack":false},"msg_per_s":21000,"errors":{"transport":0}}"#,
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
        // The best client count is the limit; an exhausted run is not one.
        assert!(
            md.contains("pg-insert b100 40,000 rows/s (INSERT b100 c8)"),
            "{md}"
        );
        assert!(
            md.contains("pg-claimack b100 30,000 rows/s (CLAIMACK b100 c2)"),
            "{md}"
        );
        assert!(
            md.contains("| 0.70× | 2.65× |"),
            "drain vs claimack, vs original: {md}"
        );
        assert!(md.contains("EXHAUSTED"), "{md}");
    }
}
