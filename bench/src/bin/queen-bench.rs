//! `queen-bench`: push, drain and latency scenarios against a running Queen
//! broker, and `summarize` for the suite's JSON lines. See bench/README.md.

use std::process::ExitCode;
use std::time::Duration;

use queen_bench::args::{ArgError, Args};
use queen_bench::http::Target;
use queen_bench::procstat::Watch;
use queen_bench::report::Report;
use queen_bench::scenario::{drain, ephemeral, latency, push, Ctx};
use queen_bench::summarize;

const USAGE: &str = "\
usage: queen-bench [flags] <push|drain|latency|summarize> [flags]

global:  --url http://127.0.0.1:6632  --pid <broker pid>  --pg-pid <postmaster pid>
         --json (one JSON line on stdout)  --label TEXT  --queue-prefix bench
         --consumer-group NAME (default: queue mode)
         --queue-options JSON (configure options of the fresh queue, default {})
push:    --batch 1 --conns 50 --partitions 1 --duration 10 --warmup 2 --payload-bytes 100
         [--rate N: offer N msg/s in total on a fixed schedule instead of closed loop]
drain:   --prefill 100000 --partitions 100 --prefill-conns 20 --batch 100 --conns 10
         [--auto-ack] --wait-ms 1000 --idle-secs 5 --max-secs 120 --warmup-msgs 2000
         --payload-bytes 100 [--spread: pre-fill items over consecutive partitions]
         --claim 1 (pop `partitions=`: partitions one pop may claim)
latency: --rate 1000 --batch 1 --producers 64 --consumers 1 --partitions 10
         --duration 10 --warmup 2 [--auto-ack] --pop-batch 100 --wait-ms 1000
         --grace-secs 5 --payload-bytes 100
ephemeral: --batch 100 --pop-batch 100 --conns 4 (pushers; as many poppers)
         --partitions 8 --duration 10 --warmup 2 --payload-bytes 100
         (RAM-only queues; --queue-options sets the ephemeral configure options)
summarize: --input results.jsonl   (markdown table of medians and ratios)

Exit status: 0 ok, 1 usage or setup error, 3 the run lost messages.";

/// Words that select what to run.
const SCENARIOS: [&str; 8] = [
    "push",
    "drain",
    "latency",
    "ephemeral",
    "summarize",
    "help",
    "--help",
    "-h",
];

fn secs(a: &Args, name: &str, default: f64) -> Result<Duration, ArgError> {
    Ok(Duration::from_secs_f64(a.get(name, default)?.max(0.0)))
}

fn ctx(a: &Args) -> Result<Ctx, String> {
    let url = a
        .get("url", "http://127.0.0.1:6632".to_string())
        .map_err(|e| e.to_string())?;
    Ok(Ctx {
        target: Target::parse(&url)?,
        watch: Watch {
            pid: a.get_opt("pid").map_err(|e| e.to_string())?,
            pg_pid: a.get_opt("pg-pid").map_err(|e| e.to_string())?,
        },
        label: a.get("label", String::new()).map_err(|e| e.to_string())?,
        queue_prefix: a
            .get("queue-prefix", "bench".to_string())
            .map_err(|e| e.to_string())?,
        group: a.get_str("consumer-group"),
        queue_options: match a.get_str("queue-options") {
            None => serde_json::json!({}),
            Some(t) => serde_json::from_str(&t).map_err(|e| format!("--queue-options: {e}"))?,
        },
    })
}

fn push_opts(a: &Args) -> Result<push::PushOpts, ArgError> {
    Ok(push::PushOpts {
        batch: a.get("batch", 1usize)?.max(1),
        conns: a.get("conns", 50usize)?.max(1),
        partitions: a.get("partitions", 1usize)?.max(1),
        duration: secs(a, "duration", 10.0)?,
        warmup: secs(a, "warmup", 2.0)?,
        payload_bytes: a.get("payload-bytes", 100usize)?,
        rate: a.get_opt("rate")?,
    })
}

fn drain_opts(a: &Args) -> Result<drain::DrainOpts, ArgError> {
    let batch = a.get("batch", 100usize)?.max(1);
    let conns = a.get("conns", 10usize)?.max(1);
    Ok(drain::DrainOpts {
        prefill: a.get("prefill", 100_000u64)?,
        partitions: a.get("partitions", 100usize)?.max(1),
        prefill_conns: a.get("prefill-conns", 20usize)?.max(1),
        batch,
        conns,
        auto_ack: a.switch("auto-ack"),
        wait_ms: a.get("wait-ms", 1000u64)?,
        idle: secs(a, "idle-secs", 5.0)?,
        max: secs(a, "max-secs", 120.0)?,
        warmup_msgs: a.get("warmup-msgs", (batch * conns * 2) as u64)?,
        payload_bytes: a.get("payload-bytes", 100usize)?,
        spread: a.switch("spread"),
        claim: a.get("claim", 1usize)?.clamp(1, 64),
    })
}

fn latency_opts(a: &Args) -> Result<latency::LatencyOpts, ArgError> {
    Ok(latency::LatencyOpts {
        rate: a.get("rate", 1000.0f64)?,
        batch: a.get("batch", 1usize)?.max(1),
        producers: a.get("producers", 64usize)?.max(1),
        consumers: a.get("consumers", 1usize)?.max(1),
        partitions: a.get("partitions", 10usize)?.max(1),
        duration: secs(a, "duration", 10.0)?,
        warmup: secs(a, "warmup", 2.0)?,
        auto_ack: a.switch("auto-ack"),
        pop_batch: a.get("pop-batch", 100usize)?.max(1),
        wait_ms: a.get("wait-ms", 1000u64)?,
        grace: secs(a, "grace-secs", 5.0)?,
        payload_bytes: a.get("payload-bytes", 100usize)?,
    })
}

fn ephemeral_opts(a: &Args) -> Result<ephemeral::EphemeralOpts, ArgError> {
    Ok(ephemeral::EphemeralOpts {
        batch: a.get("batch", 100usize)?.max(1),
        pop_batch: a.get("pop-batch", 100usize)?.max(1),
        conns: a.get("conns", 4usize)?.max(1),
        partitions: a.get("partitions", 8usize)?.max(1),
        duration: secs(a, "duration", 10.0)?,
        warmup: secs(a, "warmup", 2.0)?,
        payload_bytes: a.get("payload-bytes", 100usize)?,
    })
}

fn run(words: &[String]) -> Result<ExitCode, String> {
    // The scenario may come before or after the flags: it is the first word
    // naming one (flag values never do).
    let at = words
        .iter()
        .position(|w| SCENARIOS.contains(&w.as_str()))
        .ok_or(USAGE)?;
    let cmd = &words[at];
    let rest: Vec<String> = words
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, w)| w.clone())
        .collect();
    let a = Args::parse(&rest).map_err(|e| e.to_string())?;
    if cmd == "summarize" {
        let path = a.get_str("input").ok_or("summarize needs --input FILE")?;
        a.finish().map_err(|e| e.to_string())?;
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        print!("{}", summarize::markdown(&text));
        return Ok(ExitCode::SUCCESS);
    }
    let c = ctx(&a)?;
    let json = a.switch("json");
    let e = |e: ArgError| e.to_string();
    let report: Report = match cmd.as_str() {
        "push" => {
            let o = push_opts(&a).map_err(e)?;
            a.finish().map_err(|e| e.to_string())?;
            push::run(&c, &o)
        }
        "drain" => {
            let o = drain_opts(&a).map_err(e)?;
            a.finish().map_err(|e| e.to_string())?;
            drain::run(&c, &o)
        }
        "latency" => {
            let o = latency_opts(&a).map_err(e)?;
            a.finish().map_err(|e| e.to_string())?;
            latency::run(&c, &o)
        }
        "ephemeral" => {
            let o = ephemeral_opts(&a).map_err(e)?;
            a.finish().map_err(|e| e.to_string())?;
            ephemeral::run(&c, &o)
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            return Ok(ExitCode::SUCCESS);
        }
        other => return Err(format!("unknown scenario {other:?}\n{USAGE}")),
    };
    report.print_human();
    if json {
        println!("{}", report.json_line());
    }
    let lost = report.verify.as_ref().is_some_and(|v| !v.ok);
    Ok(if lost {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    match run(&words) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("queen-bench: {msg}");
            ExitCode::from(1)
        }
    }
}
