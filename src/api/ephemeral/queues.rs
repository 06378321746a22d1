//! `GET /api/v1/ephemeral/queues` and `GET /api/v1/ephemeral/queues/{queue}/depth`
//! (http-api.md §18): figures read from the rings of this broker's shards
//! (one hand-over per shard), no database behind them.
//!
//! Decisions (inferred): figures are this broker's (the partitions it owns);
//! the listing adds `members`, the mesh members this broker counts for
//! ownership (server ids, itself included), so an operator or a test can
//! see that brokers agree; depth's `pending` counts, for the group (queue
//! mode when none is named), undelivered, leased and to-be-redelivered
//! messages, and a group never seen counts the whole ring.

use super::{all_shards, check_name, Scope};
use crate::error::ApiError;
use crate::shard::ephemeral::handover::{Answer, Op};
use crate::shard::ephemeral::{EphError, QueueStat, QUEUE_MODE_GROUP};
use crate::shard::Shard;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// One queue summed over shards.
#[derive(Default)]
struct Sum {
    depth: u64,
    bytes: u64,
    partitions: BTreeMap<String, u64>,
    groups: BTreeSet<String>,
    drops: [u64; 3],
}

async fn gather(
    shard: &Rc<Shard>,
    scope: &Scope,
    queue: Option<&str>,
    group: &str,
) -> BTreeMap<String, Sum> {
    let answers = all_shards(shard, || Op::Stats {
        tenant: scope.tenant.clone(),
        queue: queue.map(str::to_string),
        group: group.to_string(),
    })
    .await;
    let mut out: BTreeMap<String, Sum> = BTreeMap::new();
    for a in answers {
        let Answer::Stats(v) = a else { continue };
        for s in v {
            add(out.entry(s.queue.clone()).or_default(), s);
        }
    }
    out
}

fn add(sum: &mut Sum, s: QueueStat) {
    sum.depth += s.depth;
    sum.bytes += s.bytes;
    sum.partitions.extend(s.partitions);
    sum.groups.extend(s.groups);
    sum.drops[0] += s.drops.bounds;
    sum.drops[1] += s.drops.ttl;
    sum.drops[2] += s.drops.retry;
}

/// Handles the listing.
pub async fn list(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let scope = Scope::of(shard, req)?;
    let mut sums = gather(shard, &scope, None, QUEUE_MODE_GROUP).await;
    for (q, _) in shard.eph.declared(&scope.tenant) {
        sums.entry(q).or_default();
    }
    let queues: Vec<Value> = sums
        .iter()
        .map(|(q, s)| {
            let (o, declared) = shard.eph.options(&scope.key(q));
            json!({
                "queue": q,
                "tier": if declared { "declared" } else { "implicit" },
                "depth": s.depth,
                "bytes": s.bytes,
                "partitions": s.partitions.len(),
                "groups": s.groups.len(),
                "drops": {"bounds": s.drops[0], "ttl": s.drops[1], "retry": s.drops[2]},
                "options": o.to_json(),
            })
        })
        .collect();
    let members = shard.eph.members.borrow().live_ids(Instant::now());
    Ok(super::super::reply::ok_json(&json!({
        "count": queues.len(),
        "queues": queues,
        "cellBytes": shard.eph.gauges.bytes.load(Relaxed),
        "members": members,
    })))
}

/// Handles the depth of one queue.
pub async fn depth(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    check_name(queue, "queue")?;
    let scope = Scope::of(shard, req)?;
    let group = req.query_param("group");
    let g = group.as_deref().unwrap_or(QUEUE_MODE_GROUP);
    let mut sums = gather(shard, &scope, Some(queue), g).await;
    let (_, declared) = shard.eph.options(&scope.key(queue));
    let Some(s) = sums.remove(queue).or_else(|| declared.then(Sum::default)) else {
        return Err(EphError::NotFound {
            queue: queue.to_string(),
        }
        .into());
    };
    let pending: u64 = s.partitions.values().sum();
    let parts: Vec<Value> = s
        .partitions
        .iter()
        .map(|(p, n)| json!({"partition": p, "pending": n}))
        .collect();
    Ok(super::super::reply::ok_json(&json!({
        "queue": queue,
        "group": group,
        "pending": pending,
        "partitionsPending": s.partitions.values().filter(|n| **n > 0).count(),
        "partitions": parts,
        "bytes": s.bytes,
        "tier": if declared { "declared" } else { "implicit" },
    })))
}
