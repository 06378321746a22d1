//! `bench push | drain | latency`: the scenarios of `bench/`, run from the shared
//! `queen-loadgen` crate (the same code `queen-bench` runs), with a live progress
//! bar and the same summary. The scenario runs on its own thread (and its worker
//! threads); the main thread only draws the bar until it is joined.
//!
//! The load client speaks plain HTTP without a token: `--token` and `https://`
//! URLs are refused rather than silently ignored.

use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use queen_loadgen::http::Target;
use queen_loadgen::procstat::Watch;
use queen_loadgen::report::Report;
use queen_loadgen::scenario::{drain, latency, push, Ctx as LoadCtx};

use super::Ctx;
use crate::cli::{BenchArgs, BenchScenario};
use crate::error::{Error, Result};
use crate::render;

/// How often the bar is redrawn.
const TICK: Duration = Duration::from_millis(100);
/// Exit code of a run that lost messages (the same as `queen-bench`).
const EXIT_LOST: u8 = 3;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// `bench ...`.
pub fn run(ctx: &Ctx, url: &str, token: bool, a: &BenchArgs) -> Result<ExitCode> {
    if token {
        return Err(Error::Usage(
            "bench sends no token: run it against a broker without JWT, without --token".into(),
        ));
    }
    let load = LoadCtx {
        target: Target::parse(url.trim_end_matches('/')).map_err(Error::Usage)?,
        watch: Watch::default(),
        label: a.label.clone().unwrap_or_default(),
        queue_prefix: a.queue_prefix.clone(),
        group: a.group.clone(),
        queue_options: serde_json::json!({}),
    };
    // What the bar counts to: the scenario's planned length, or none (drain ends
    // when the queue is empty).
    let (planned, job): (Option<Duration>, Box<dyn FnOnce() -> Report + Send>) = match &a.scenario {
        BenchScenario::Push(p) => {
            let o = push::PushOpts {
                batch: p.batch.max(1),
                conns: p.conns.max(1),
                partitions: p.partitions.max(1),
                duration: secs(p.duration),
                warmup: secs(p.warmup),
                payload_bytes: p.payload_bytes,
                rate: p.rate,
            };
            let plan = o.warmup + o.duration;
            (Some(plan), Box::new(move || push::run(&load, &o)))
        }
        BenchScenario::Drain(d) => {
            let o = drain::DrainOpts {
                prefill: d.prefill,
                partitions: d.partitions.max(1),
                prefill_conns: d.prefill_conns.max(1),
                batch: d.batch.max(1),
                conns: d.conns.max(1),
                auto_ack: d.auto_ack,
                wait_ms: d.wait_ms,
                idle: secs(d.idle_secs),
                max: secs(d.max_secs),
                warmup_msgs: d.warmup_msgs.unwrap_or((d.batch * d.conns * 2) as u64),
                payload_bytes: d.payload_bytes,
                spread: false,
                claim: 1,
            };
            (None, Box::new(move || drain::run(&load, &o)))
        }
        BenchScenario::Latency(l) => {
            let o = latency::LatencyOpts {
                rate: l.rate,
                batch: l.batch.max(1),
                producers: l.producers.max(1),
                consumers: l.consumers.max(1),
                partitions: l.partitions.max(1),
                duration: secs(l.duration),
                warmup: secs(l.warmup),
                auto_ack: l.auto_ack,
                pop_batch: l.pop_batch.max(1),
                wait_ms: l.wait_ms,
                grace: secs(l.grace_secs),
                payload_bytes: l.payload_bytes,
            };
            let plan = o.warmup + o.duration;
            (Some(plan), Box::new(move || latency::run(&load, &o)))
        }
    };
    let report = with_bar(planned, job)?;
    report.print_human();
    if ctx.json {
        render::out(&report.json_line())?;
    }
    let lost = report.verify.as_ref().is_some_and(|v| !v.ok);
    if lost {
        eprintln!("queenctl: the run lost messages (see verify above)");
        return Ok(ExitCode::from(EXIT_LOST));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `job` on a thread and draws a bar on stderr (only on a terminal) until it
/// ends: a time bar over `planned`, or a spinner when the length is not known.
fn with_bar(planned: Option<Duration>, job: Box<dyn FnOnce() -> Report + Send>) -> Result<Report> {
    let worker = thread::Builder::new()
        .name("bench".into())
        .spawn(job)
        .map_err(Error::Io)?;
    let bar = match planned {
        Some(p) => {
            let bar = ProgressBar::new(p.as_millis() as u64);
            if let Ok(s) = ProgressStyle::with_template("{bar:40} {elapsed}/{msg} {wide_msg}") {
                bar.set_style(s);
            }
            bar.set_message(format!("{:.0}s", p.as_secs_f64()));
            bar
        }
        None => {
            let bar = ProgressBar::new_spinner();
            if let Ok(s) = ProgressStyle::with_template("{spinner} {elapsed} draining") {
                bar.set_style(s);
            }
            bar
        }
    };
    let t0 = Instant::now();
    while !worker.is_finished() {
        bar.set_position(t0.elapsed().as_millis() as u64);
        bar.tick();
        thread::sleep(TICK);
    }
    bar.finish_and_clear();
    worker.join().map_err(|_| Error::BadAnswer {
        what: "bench".into(),
        detail: "the scenario thread panicked".into(),
    })
}
