//! Looking at messages: `dlq QUEUE`, `dlq retry ID`, `messages QUEUE` and
//! `message PID TXID`.

use serde_json::Value;

use super::Ctx;
use crate::cli::{DlqAction, DlqArgs, MessagesArgs};
use crate::client::{enc, query};
use crate::error::{Error, Result};
use crate::render::{self, count, text, when};

/// Width of an error message in the `dlq` table.
const ERROR_WIDTH: usize = 60;

fn rows_of<'a>(body: &'a Value, what: &str) -> Result<&'a Vec<Value>> {
    body["messages"].as_array().ok_or_else(|| Error::BadAnswer {
        what: what.to_string(),
        detail: "no messages array".into(),
    })
}

/// `dlq QUEUE` or `dlq retry ID`.
pub fn dlq(ctx: &Ctx, a: &DlqArgs) -> Result<()> {
    if let Some(DlqAction::Retry { id }) = &a.action {
        return retry(ctx, id);
    }
    let queue = a.queue.clone().unwrap_or_default();
    let q = query(&[
        ("queue", Some(queue.clone())),
        ("consumerGroup", a.group.clone()),
        ("limit", Some(a.limit.to_string())),
    ]);
    let ans = ctx.client.get(&format!("/api/v1/dlq{q}"))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let msgs = rows_of(&ans.body, "GET /api/v1/dlq")?;
    if msgs.is_empty() {
        return render::out(&format!("no dead letters in {queue}"));
    }
    let rows = msgs
        .iter()
        .map(|m| {
            vec![
                text(&m["id"]),
                text(&m["partition"]),
                text(&m["consumerGroup"]),
                text(&m["transactionId"]),
                count(&m["retryCount"]),
                when(&m["failedAt"]),
                render::payload(&m["errorMessage"], ERROR_WIDTH),
            ]
        })
        .collect();
    let header = [
        "id",
        "partition",
        "group",
        "transaction id",
        "retries",
        "failed",
        "error",
    ];
    render::out(&render::table(&header, &["retries"], rows))?;
    render::out(&format!(
        "{} of {} dead letter(s); `queenctl dlq retry ID` replays one",
        msgs.len(),
        count(&ans.body["total"])
    ))
}

/// `dlq retry ID`.
fn retry(ctx: &Ctx, id: &str) -> Result<()> {
    let ans = ctx
        .client
        .post_empty(&format!("/api/v1/dlq/{}/replay", enc(id)))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let b = &ans.body;
    render::out(&format!(
        "replayed {} into {}/{} as {} ({})",
        text(&b["originalTransactionId"]),
        text(&b["queue"]),
        text(&b["partition"]),
        text(&b["replayedAs"]["transaction_id"]),
        text(&b["result"]),
    ))
}

/// `messages QUEUE [--status S]`.
pub fn messages(ctx: &Ctx, a: &MessagesArgs) -> Result<()> {
    let q = query(&[
        ("queue", Some(a.queue.clone())),
        ("status", a.status.map(|s| s.wire().to_string())),
        ("partition", a.partition.clone()),
        ("from", a.from.clone()),
        ("to", a.to.clone()),
        ("limit", Some(a.limit.to_string())),
    ]);
    let ans = ctx.client.get(&format!("/api/v1/messages{q}"))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let msgs = rows_of(&ans.body, "GET /api/v1/messages")?;
    if msgs.is_empty() {
        return render::out("no messages in the window (--from/--to widen it)");
    }
    let rows = msgs
        .iter()
        .map(|m| {
            vec![
                when(&m["createdAt"]),
                text(&m["partition"]),
                text(&m["status"]),
                text(&m["transactionId"]),
                text(&m["partitionId"]),
            ]
        })
        .collect();
    let header = [
        "created",
        "partition",
        "status",
        "transaction id",
        "partition id",
    ];
    render::out(&render::table(&header, &[], rows))?;
    render::out(&format!(
        "{} of {} message(s)",
        msgs.len(),
        count(&ans.body["total"])
    ))
}

/// `message PID TXID`.
pub fn message(ctx: &Ctx, pid: &str, txid: &str) -> Result<()> {
    let ans = ctx
        .client
        .get(&format!("/api/v1/messages/{}/{}", enc(pid), enc(txid)))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let b = &ans.body;
    let fields = [
        "queue",
        "partition",
        "transactionId",
        "id",
        "status",
        "createdAt",
        "traceId",
        "producerSub",
        "retryCount",
        "errorMessage",
        "leaseExpiresAt",
    ];
    let mut rows: Vec<(String, String)> = fields
        .iter()
        .map(|f| (f.to_string(), text(&b[*f])))
        .collect();
    for g in b["consumerGroups"].as_array().into_iter().flatten() {
        let state = if g["consumed"].as_bool() == Some(true) {
            "consumed"
        } else {
            "not consumed"
        };
        rows.push((format!("group {}", text(&g["name"])), state.into()));
    }
    render::out(&render::pairs(rows))?;
    let payload = if b["payload"].is_null() {
        &b["data"]
    } else {
        &b["payload"]
    };
    render::out(&serde_json::to_string_pretty(payload).unwrap_or_default())
}
