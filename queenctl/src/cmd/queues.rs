//! Queues: `queues` (the catalogue with counts), `queue NAME` (configuration and
//! per-partition depth), `configure` and `delete`.

use serde_json::{json, Map, Value};

use super::Ctx;
use crate::cli::ConfigureArgs;
use crate::client::enc;
use crate::error::{Error, Result};
use crate::render::{self, count, text, when};

/// Most queues listed. `GET /api/v1/status/queues` pages; one page this large
/// covers any deployment a terminal table is useful for.
const LIST_LIMIT: u32 = 1000;

/// `queues`: from `GET /api/v1/status/queues`, the one view that carries completed
/// and dead-letter counts next to pending and processing (one request, not one per
/// queue).
pub fn list(ctx: &Ctx) -> Result<()> {
    let path = format!("/api/v1/status/queues?limit={LIST_LIMIT}");
    let ans = ctx.client.get(&path)?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let queues = ans.body["queues"]
        .as_array()
        .ok_or_else(|| Error::BadAnswer {
            what: format!("GET {path}"),
            detail: "no queues array".into(),
        })?;
    if queues.is_empty() {
        return render::out("no queues");
    }
    let rows = queues
        .iter()
        .map(|q| {
            let m = &q["messages"];
            vec![
                text(&q["name"]),
                count(&q["partitions"]),
                count(&m["pending"]),
                count(&m["processing"]),
                count(&m["completed"]),
                count(&m["deadLetter"]),
            ]
        })
        .collect();
    let header = [
        "name",
        "partitions",
        "pending",
        "processing",
        "completed",
        "dlq",
    ];
    render::out(&render::table(&header, &header[1..], rows))
}

/// `queue NAME`.
pub fn show(ctx: &Ctx, name: &str) -> Result<()> {
    let ans = ctx
        .client
        .get(&format!("/api/v1/resources/queues/{}", enc(name)))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let b = &ans.body;
    let mut head = vec![
        ("queue".to_string(), text(&b["name"])),
        ("namespace".to_string(), text(&b["namespace"])),
        ("task".to_string(), text(&b["task"])),
        ("created".to_string(), when(&b["createdAt"])),
    ];
    if let Some(cfg) = b["config"].as_object() {
        head.extend(cfg.iter().map(|(k, v)| (k.clone(), text(v))));
    }
    render::out(&render::pairs(head))?;
    render::out("")?;
    let parts = b["partitions"].as_array().cloned().unwrap_or_default();
    let rows = parts
        .iter()
        .map(|p| {
            let s = &p["stats"];
            vec![
                text(&p["name"]),
                count(&s["pending"]),
                count(&s["processing"]),
                count(&s["completed"]),
                count(&s["failed"]),
                count(&s["deadLetter"]),
                when(&p["oldestMessage"]),
                when(&p["newestMessage"]),
            ]
        })
        .collect();
    let header = [
        "partition",
        "pending",
        "processing",
        "completed",
        "failed",
        "dlq",
        "oldest",
        "newest",
    ];
    render::out(&render::table(&header, &header[1..6], rows))
}

/// The options object of a configure: only the flags given, so the broker's merge
/// keeps every other stored value.
fn options(a: &ConfigureArgs) -> Map<String, Value> {
    let mut o = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            o.insert(k.to_string(), v);
        }
    };
    put("leaseTime", a.lease_time.map(Value::from));
    put("retryLimit", a.retry_limit.map(Value::from));
    put("retryDelay", a.retry_delay.map(Value::from));
    put("priority", a.priority.map(Value::from));
    put("delayedProcessing", a.delayed_processing.map(Value::from));
    put("windowBuffer", a.window_buffer.map(Value::from));
    put("retentionSeconds", a.retention_seconds.map(Value::from));
    put(
        "retentionEnabled",
        a.retention_seconds.map(|s| json!(s > 0)),
    );
    put(
        "completedRetentionSeconds",
        a.completed_retention_seconds.map(Value::from),
    );
    put(
        "maxWaitTimeSeconds",
        a.max_wait_time_seconds.map(Value::from),
    );
    put("encryptionEnabled", a.encryption.map(Value::from));
    o
}

/// `configure QUEUE ...`.
pub fn configure(ctx: &Ctx, a: &ConfigureArgs) -> Result<()> {
    let mut body = json!({ "queue": a.queue, "options": options(a), "mode": "merge" });
    if let Some(ns) = &a.namespace {
        body["namespace"] = json!(ns);
    }
    if let Some(t) = &a.task {
        body["task"] = json!(t);
    }
    let ans = ctx.client.post("/api/v1/configure", &body)?;
    if ctx.json {
        return render::json(&ans.body);
    }
    render::out(&format!("configured {}", text(&ans.body["queue"])))?;
    let opts = ans.body["options"].as_object().cloned().unwrap_or_default();
    render::out(&render::pairs(
        opts.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
    ))
}

/// `delete QUEUE --yes`.
pub fn delete(ctx: &Ctx, queue: &str, yes: bool) -> Result<()> {
    if !yes {
        return Err(Error::Usage(format!(
            "delete removes {queue:?} with all its messages, cursors and dead letters; add --yes to do it"
        )));
    }
    let ans = ctx
        .client
        .delete(&format!("/api/v1/resources/queues/{}", enc(queue)))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    if ans.body["existed"].as_bool() == Some(false) {
        render::out(&format!("{queue} did not exist; nothing deleted"))
    } else {
        render::out(&format!("deleted {queue}"))
    }
}
