//! `timers`: schedule a message for later, list, show, count and cancel
//! timers (http-api.md §16). A schedule's payload is JSON given on the
//! command line, sent base64-encoded as the wire wants; without `--txn` a
//! fresh transaction id is made here, as the 1.3.0 client does, so a later
//! `absent` can be checked against the destination queue.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

use super::Ctx;
use crate::cli::TimersAction;
use crate::client::{enc, query};
use crate::error::{Error, Result};
use crate::render::{self, count, text};

/// `/api/v1/timers/{queue}/{key}` with every segment of the key encoded (a
/// key may hold `/`, which stays a separator).
fn key_path(queue: &str, key: &str) -> String {
    let key: Vec<String> = key.split('/').map(enc).collect();
    format!("/api/v1/timers/{}/{}", enc(queue), key.join("/"))
}

/// A transaction id nobody else will pick: time and process based.
fn fresh_txn() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("queenctl-{}-{nanos}", std::process::id())
}

/// Runs one `timers` action.
pub fn run(ctx: &Ctx, action: &TimersAction) -> Result<()> {
    let ans = match action {
        TimersAction::Schedule {
            queue,
            key,
            payload,
            delay_ms,
            partition,
            txn,
        } => {
            let data: Value = serde_json::from_str(payload)
                .map_err(|e| Error::Usage(format!("payload is not JSON: {e}")))?;
            let op = json!({"op": "schedule", "queue": queue, "timerKey": key,
                "payload": B64.encode(data.to_string()), "delayMs": delay_ms,
                "txn": txn.clone().unwrap_or_else(fresh_txn), "partition": partition});
            let a = ctx
                .client
                .post("/api/v1/timers", &json!({ "operations": [op] }))?;
            return result(ctx, &a.body["results"][0]);
        }
        TimersAction::Cancel { queue, key, txn } => {
            let a = ctx.client.delete(&format!(
                "{}{}",
                key_path(queue, key),
                query(&[("txn", txn.clone())])
            ))?;
            return result(ctx, &a.body);
        }
        TimersAction::Show { queue, key } => ctx.client.get(&key_path(queue, key))?,
        TimersAction::Count { queue, prefix } => ctx.client.get(&format!(
            "/api/v1/timers/{}{}",
            enc(queue),
            query(&[("mode", Some("count".into())), ("prefix", prefix.clone())])
        ))?,
        TimersAction::List {
            queue,
            after,
            limit,
        } => ctx.client.get(&format!(
            "/api/v1/timers/{}{}",
            enc(queue),
            query(&[("after", after.clone()), ("limit", Some(limit.to_string()))])
        ))?,
        TimersAction::Pending => ctx.client.get("/api/v1/resources/timers")?,
    };
    if ctx.json {
        return render::json(&ans.body);
    }
    let b = &ans.body;
    match action {
        TimersAction::List { .. } => {
            let rows = b["rows"].as_array().cloned().unwrap_or_default();
            let rows = rows
                .iter()
                .map(|r| {
                    vec![
                        text(&r["timerKey"]),
                        text(&r["deliverAt"]),
                        text(&r["txn"]),
                        text(&r["partition"]),
                        count(&r["attempts"]),
                    ]
                })
                .collect();
            let mut out = render::table(
                &["KEY", "DUE", "TXN", "PARTITION", "ATTEMPTS"],
                &["ATTEMPTS"],
                rows,
            );
            if b["truncated"] == true {
                out.push_str(&format!("\nmore: --after {}", text(&b["nextAfter"])));
            }
            render::out(&out)
        }
        TimersAction::Pending => {
            let rows = b["queues"].as_array().cloned().unwrap_or_default();
            let rows = rows
                .iter()
                .map(|q| {
                    vec![
                        text(&q["queue"]),
                        count(&q["pending"]),
                        text(&q["nextDeliverAt"]),
                    ]
                })
                .collect();
            render::out(&render::table(
                &["QUEUE", "PENDING", "NEXT DUE"],
                &["PENDING"],
                rows,
            ))
        }
        TimersAction::Count { .. } => render::out(&count(&b["count"])),
        _ if b["found"] == false => render::out("not found"),
        _ => {
            let keys = [
                "queue",
                "timerKey",
                "partition",
                "deliverAt",
                "txn",
                "messageId",
                "attempts",
                "lastError",
                "encrypted",
            ];
            render::out(&render::pairs(
                keys.iter().map(|k| (k.to_string(), text(&b[*k]))).collect(),
            ))
        }
    }
}

/// One op's verdict: `scheduled <key> (txn …, due …)`, `cancelled …`,
/// `absent …`, `too_late …`.
fn result(ctx: &Ctx, r: &Value) -> Result<()> {
    if ctx.json {
        return render::json(r);
    }
    let mut line = format!("{} {}", text(&r["status"]), text(&r["timerKey"]));
    line.push_str(&format!(" (txn {}", text(&r["txn"])));
    if r.get("deliverAt").is_some() {
        line.push_str(&format!(", due {}", text(&r["deliverAt"])));
    }
    line.push(')');
    render::out(&line)
}
