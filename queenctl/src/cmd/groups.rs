//! Consumer groups: `groups`, `group NAME` (cursor and lag per partition) and `seek`.

use serde_json::json;

use super::Ctx;
use crate::cli::SeekArgs;
use crate::client::enc;
use crate::error::{Error, Result};
use crate::render::{self, count, secs, text, when, yes_no};

/// `groups`: one row per (group, queue).
pub fn list(ctx: &Ctx) -> Result<()> {
    let ans = ctx.client.get("/api/v1/consumer-groups")?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let groups = ans.body.as_array().ok_or_else(|| Error::BadAnswer {
        what: "GET /api/v1/consumer-groups".into(),
        detail: "not an array".into(),
    })?;
    if groups.is_empty() {
        return render::out("no consumer groups");
    }
    let rows = groups
        .iter()
        .map(|g| {
            vec![
                text(&g["name"]),
                text(&g["queueName"]),
                count(&g["members"]),
                count(&g["partitionsWithLag"]),
                secs(&g["maxTimeLag"]),
                text(&g["state"]),
                text(&g["subscriptionMode"]),
            ]
        })
        .collect();
    let header = [
        "group",
        "queue",
        "leased",
        "lagging partitions",
        "max lag",
        "state",
        "mode",
    ];
    render::out(&render::table(&header, &header[2..5], rows))
}

/// `group NAME`: the answer is an object keyed by queue name.
pub fn show(ctx: &Ctx, name: &str) -> Result<()> {
    let ans = ctx
        .client
        .get(&format!("/api/v1/consumer-groups/{}", enc(name)))?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let queues = ans.body.as_object().cloned().unwrap_or_default();
    let mut rows = Vec::new();
    for (queue, q) in &queues {
        for p in q["partitions"].as_array().into_iter().flatten() {
            rows.push(vec![
                queue.clone(),
                text(&p["partition"]),
                count(&p["totalConsumed"]),
                count(&p["offsetLag"]),
                secs(&p["timeLagSeconds"]),
                yes_no(&p["leaseActive"]),
                when(&p["lastConsumedAt"]),
            ]);
        }
    }
    if rows.is_empty() {
        return render::out(&format!("group {name} has no cursors"));
    }
    let header = [
        "queue",
        "partition",
        "consumed",
        "lag",
        "time lag",
        "leased",
        "last consumed",
    ];
    render::out(&render::table(&header, &header[2..5], rows))
}

/// `seek GROUP QUEUE --to-end | --timestamp T`.
pub fn seek(ctx: &Ctx, a: &SeekArgs) -> Result<()> {
    let body = match &a.timestamp {
        Some(t) => json!({ "timestamp": t }),
        None => json!({ "toEnd": true }),
    };
    let path = format!(
        "/api/v1/consumer-groups/{}/queues/{}/seek",
        enc(&a.group),
        enc(&a.queue)
    );
    let ans = ctx.client.post(&path, &body)?;
    if ctx.json {
        return render::json(&ans.body);
    }
    let to = match &a.timestamp {
        Some(t) => format!("to {t}"),
        None => "to the end".into(),
    };
    render::out(&format!(
        "moved {} on {} {to}: {} partition(s) updated",
        a.group,
        a.queue,
        count(&ans.body["partitionsUpdated"])
    ))
}
