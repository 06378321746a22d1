//! Messages in and out: `push` (one payload, or a stream from stdin in batches with
//! a progress bar), `pop` (one claim) and `tail` (long-poll, print, ack, repeat).

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use super::Ctx;
use crate::cli::{PopArgs, PushArgs, TailArgs};
use crate::client::{enc, query};
use crate::error::{Error, Result};
use crate::{render, stop};

/// Items per push request from stdin: the batch size, large enough that a
/// file of thousands of lines is a few dozen requests, small enough that Ctrl-C
/// stops within one request.
const PUSH_BATCH: usize = 100;
/// Lines buffered between the stdin reader thread and the pusher.
const STDIN_QUEUE: usize = 4 * PUSH_BATCH;
/// How often the pusher looks at the Ctrl-C flag while stdin is silent.
const STOP_POLL: Duration = Duration::from_millis(100);
/// How long one `tail` long poll parks on the broker. Short, so Ctrl-C is noticed
/// within about a second while nothing arrives; the poll wakes on a push anyway.
const TAIL_POLL_MS: u64 = 1000;
/// Messages one `tail` pop may take; each is printed and then acked.
const TAIL_BATCH: u64 = 10;
/// Pause after a pop answered `paused` (pop maintenance), which returns at once.
const PAUSED_BACKOFF: Duration = Duration::from_millis(500);
/// Width of a payload in the human `pop`/`tail` output.
const PAYLOAD_WIDTH: usize = 80;

/// What a stream of pushes achieved.
#[derive(Debug, Default)]
struct Tally {
    /// Answered `queued`.
    queued: u64,
    /// Answered `duplicate`.
    duplicate: u64,
    /// Answered `buffered` (spooled during maintenance or an outage).
    buffered: u64,
    /// Answered `failed`.
    failed: u64,
    /// The first failure's text.
    first_failure: Option<String>,
}

impl Tally {
    fn pushed(&self) -> u64 {
        self.queued + self.duplicate + self.buffered
    }

    fn add(&mut self, answer: &Value) -> Result<()> {
        let items = answer.as_array().ok_or_else(|| Error::BadAnswer {
            what: "POST /api/v1/push".into(),
            detail: "not an array".into(),
        })?;
        for it in items {
            match it["status"].as_str() {
                Some("queued") => self.queued += 1,
                Some("duplicate") => self.duplicate += 1,
                Some("buffered") => self.buffered += 1,
                _ => {
                    self.failed += 1;
                    if self.first_failure.is_none() {
                        self.first_failure = Some(render::text(&it["error"]));
                    }
                }
            }
        }
        Ok(())
    }

    fn summary(&self) -> String {
        let mut s = format!("pushed {}", self.pushed());
        if self.duplicate > 0 {
            s.push_str(&format!(" ({} duplicate)", self.duplicate));
        }
        if self.buffered > 0 {
            s.push_str(&format!(" ({} buffered in the spool)", self.buffered));
        }
        s
    }

    fn json(&self, interrupted: bool) -> Value {
        json!({
            "pushed": self.pushed(), "queued": self.queued, "duplicate": self.duplicate,
            "buffered": self.buffered, "failed": self.failed, "interrupted": interrupted,
        })
    }

    fn check(&self) -> Result<()> {
        if self.failed == 0 {
            return Ok(());
        }
        Err(Error::PushFailed {
            pushed: self.pushed(),
            failed: self.failed,
            first: self.first_failure.clone().unwrap_or_default(),
        })
    }
}

fn parse_payload(text: &str, line: Option<usize>) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::BadPayload {
        line,
        detail: e.to_string(),
    })
}

fn item(a: &PushArgs, payload: Value) -> Value {
    let mut it = json!({ "queue": a.queue, "payload": payload });
    if let Some(p) = &a.partition {
        it["partition"] = json!(p);
    }
    if let Some(t) = &a.txid {
        it["transactionId"] = json!(t);
    }
    it
}

/// `push`.
pub fn push(ctx: &Ctx, a: &PushArgs) -> Result<ExitCode> {
    if a.stdin {
        return push_stdin(ctx, a);
    }
    let text = a.payload.as_deref().unwrap_or_default();
    let payload = parse_payload(text, None)?;
    let ans = ctx
        .client
        .post("/api/v1/push", &json!({ "items": [item(a, payload)] }))?;
    let mut tally = Tally::default();
    tally.add(&ans.body)?;
    if ctx.json {
        render::json(&ans.body)?;
    } else if let Some(it) = ans.body.get(0) {
        render::out(&format!(
            "{} {} (message {})",
            render::text(&it["status"]),
            render::text(&it["transaction_id"]),
            render::text(&it["message_id"]),
        ))?;
    }
    tally.check()?;
    Ok(ExitCode::SUCCESS)
}

/// Reads stdin on a helper thread so a blocked terminal read does not keep the
/// main thread from seeing Ctrl-C. Lines arrive numbered from 1; a read error ends
/// the stream with that error.
fn stdin_lines() -> mpsc::Receiver<std::io::Result<(usize, String)>> {
    let (tx, rx) = mpsc::sync_channel(STDIN_QUEUE);
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            for (i, line) in std::io::stdin().lock().lines().enumerate() {
                let stop = line.is_err();
                if tx.send(line.map(|l| (i + 1, l))).is_err() || stop {
                    return;
                }
            }
        })
        .map(|_| ())
        .unwrap_or_else(|e| eprintln!("queenctl: cannot start the stdin reader: {e}"));
    rx
}

fn progress() -> ProgressBar {
    // indicatif draws only when stderr is a terminal, so pipes and tests see nothing.
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} pushed {pos} ({per_sec}) {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// `push --stdin`: one payload per non-blank line, [`PUSH_BATCH`] per request.
fn push_stdin(ctx: &Ctx, a: &PushArgs) -> Result<ExitCode> {
    stop::install();
    let lines = stdin_lines();
    let bar = progress();
    let mut tally = Tally::default();
    let mut batch: Vec<Value> = Vec::with_capacity(PUSH_BATCH);
    let flush = |batch: &mut Vec<Value>, tally: &mut Tally| -> Result<()> {
        for chunk in std::mem::take(batch).chunks(PUSH_BATCH) {
            let ans = ctx
                .client
                .post("/api/v1/push", &json!({ "items": chunk }))?;
            tally.add(&ans.body)?;
            bar.set_position(tally.pushed());
        }
        Ok(())
    };
    let mut interrupted = false;
    let outcome: Result<()> = 'read: loop {
        if stop::requested() {
            interrupted = true;
            // Lines already read are pushed too: stopping loses nothing that was read.
            while let Ok(Ok((n, line))) = lines.try_recv() {
                if !line.trim().is_empty() {
                    match parse_payload(&line, Some(n)) {
                        Ok(p) => batch.push(item(a, p)),
                        Err(e) => break 'read flush(&mut batch, &mut tally).and(Err(e)),
                    }
                }
            }
            break flush(&mut batch, &mut tally);
        }
        match lines.recv_timeout(STOP_POLL) {
            Ok(Ok((n, line))) => {
                if line.trim().is_empty() {
                    continue;
                }
                match parse_payload(&line, Some(n)) {
                    Ok(p) => batch.push(item(a, p)),
                    Err(e) => break flush(&mut batch, &mut tally).and(Err(e)),
                }
                if batch.len() == PUSH_BATCH {
                    if let Err(e) = flush(&mut batch, &mut tally) {
                        break Err(e);
                    }
                }
            }
            Ok(Err(e)) => break flush(&mut batch, &mut tally).and(Err(e.into())),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break flush(&mut batch, &mut tally),
        }
    };
    bar.finish_and_clear();
    if let Err(e) = outcome {
        // Say what made it before the failure, then the failure itself.
        if tally.pushed() > 0 {
            eprintln!("queenctl: {} before the error", tally.summary());
        }
        return Err(e);
    }
    if ctx.json {
        render::json(&tally.json(interrupted))?;
    } else if interrupted {
        render::out(&format!("{} (stopped by Ctrl-C)", tally.summary()))?;
    } else {
        render::out(&tally.summary())?;
    }
    tally.check()?;
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn pop_path(queue: &str, partition: Option<&str>) -> String {
    match partition {
        Some(p) => format!("/api/v1/pop/queue/{}/partition/{}", enc(queue), enc(p)),
        None => format!("/api/v1/pop/queue/{}", enc(queue)),
    }
}

/// The delivered messages of a pop answer (none for 204 or a `paused` answer).
fn delivered(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

fn message_row(m: &Value) -> Vec<String> {
    vec![
        render::when(&m["createdAt"]),
        render::text(&m["partition"]),
        render::text(&m["transactionId"]),
        render::payload(&m["data"], PAYLOAD_WIDTH),
    ]
}

const MESSAGE_HEADER: [&str; 4] = ["created", "partition", "transaction id", "data"];

/// `pop`.
pub fn pop(ctx: &Ctx, a: &PopArgs) -> Result<()> {
    let wait = a.wait.map(|s| Duration::from_secs_f64(s.max(0.0)));
    let q = query(&[
        ("batch", Some(a.batch.max(1).to_string())),
        ("consumerGroup", a.group.clone()),
        ("autoAck", a.ack.then(|| "true".into())),
        ("wait", wait.map(|_| "true".into())),
        ("timeout", wait.map(|w| w.as_millis().to_string())),
    ]);
    let path = format!("{}{q}", pop_path(&a.queue, a.partition.as_deref()));
    let ans = ctx.client.get_waiting(&path, wait.unwrap_or_default())?;
    let msgs = delivered(&ans.body);
    if ctx.json {
        let body = if ans.body.is_null() {
            json!({ "messages": [] })
        } else {
            ans.body
        };
        return render::json(&body);
    }
    if msgs.is_empty() {
        let why = if ans.body["paused"].as_bool() == Some(true) {
            " (pop maintenance is on)"
        } else {
            ""
        };
        return render::out(&format!("no messages{why}"));
    }
    let rows = msgs.iter().map(message_row).collect();
    render::out(&render::table(&MESSAGE_HEADER, &[], rows))?;
    let n = msgs.len();
    if a.ack {
        render::out(&format!("{n} message(s), acknowledged on delivery"))
    } else {
        render::out(&format!(
            "{n} message(s) leased under {} (not acked: redelivered when the lease expires)",
            render::text(&ans.body["leaseId"])
        ))
    }
}

/// Acks one delivered message with its lease.
fn ack(ctx: &Ctx, m: &Value, group: Option<&str>) -> Result<()> {
    let body = json!({
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "leaseId": m["leaseId"],
        "consumerGroup": group,
        "status": "completed",
    });
    let ans = ctx.client.post("/api/v1/ack", &body)?;
    let r = &ans.body[0];
    if r["success"].as_bool() == Some(true) {
        return Ok(());
    }
    Err(Error::BadAnswer {
        what: format!("ack of {}", render::text(&m["transactionId"])),
        detail: format!("refused: {}", render::text(&r["error"])),
    })
}

/// `tail`: long-poll, print each message, ack it, until `--count` or Ctrl-C. Ctrl-C
/// is noticed between polls, so the batch in hand is printed and acked first and no
/// lease is left behind.
pub fn tail(ctx: &Ctx, a: &TailArgs) -> Result<()> {
    stop::install();
    let mut seen: u64 = 0;
    let want = a.count.unwrap_or(u64::MAX);
    if !ctx.json && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        eprintln!("tailing {} (Ctrl-C stops)", a.queue);
    }
    while seen < want && !stop::requested() {
        let batch = (want - seen).min(TAIL_BATCH);
        let q = query(&[
            ("batch", Some(batch.to_string())),
            ("consumerGroup", a.group.clone()),
            ("wait", Some("true".into())),
            ("timeout", Some(TAIL_POLL_MS.to_string())),
        ]);
        let path = format!("{}{q}", pop_path(&a.queue, None));
        let ans = ctx
            .client
            .get_waiting(&path, Duration::from_millis(TAIL_POLL_MS))?;
        let msgs = delivered(&ans.body);
        if msgs.is_empty() && ans.body["paused"].as_bool() == Some(true) {
            std::thread::sleep(PAUSED_BACKOFF);
        }
        for m in &msgs {
            if ctx.json {
                render::json_line(m)?;
            } else {
                render::out(&message_row(m).join("  "))?;
            }
            ack(ctx, m, a.group.as_deref())?;
            seen += 1;
        }
    }
    if stop::requested() {
        eprintln!("queenctl: stopped after {seen} message(s), all acked");
    }
    Ok(())
}
