//! `POST /api/v1/ephemeral/ack` (http-api.md §18): `{queue, group?, acks:
//! [{id, status?: completed|failed|retry, error?}]}` → 200 `{results: [{id,
//! outcome: acked|redelivered|stale|unknown}]}`, in the order given.
//!
//! Each id names its partition, so each ack goes to the partition's owner:
//! this broker's shards get theirs in one hand-over per shard, each peer
//! gets its share as one forwarded ack. An id minted by another incarnation
//! of the owner (a restart) is `stale`; one this broker cannot read is
//! `unknown`. A forwarded ack whose partition this broker does not own
//! answers 503 `owner_moved`. `error` is accepted and not kept (no DLQ).

use super::forward::{forward, Forward};
use super::{check_name, place, required_str, Place, Scope, MAX_ITEMS};
use crate::error::ApiError;
use crate::shard::ephemeral::handover::{AckItem, Answer, Op};
use crate::shard::ephemeral::id::MsgId;
use crate::shard::ephemeral::owner::Member;
use crate::shard::ephemeral::ring::{AckStatus, Outcome};
use crate::shard::ephemeral::{ack_status, exec, EphError, QUEUE_MODE_GROUP};
use crate::shard::Shard;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// One parsed ack.
struct Item {
    /// The id as given.
    id: String,
    /// Decoded, when this broker minted it.
    decoded: Option<MsgId>,
    /// How to settle it.
    status: AckStatus,
    /// The entry as given (forwarded as is).
    raw: Value,
}

/// Handles the ack.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = super::object_body(req)?;
    let queue = required_str(&body, "queue")?.to_string();
    check_name(&queue, "queue")?;
    let group = match body.get("group") {
        None | Some(Value::Null) => QUEUE_MODE_GROUP.to_string(),
        Some(Value::String(g)) => g.clone(),
        Some(_) => return Err(EphError::BadRequest("group must be a string".into()).into()),
    };
    check_name(&group, "group")?;
    let items = parse_items(body.get("acks"))?;
    let scope = Scope::of(shard, req)?;
    let me = shard.eph.members.borrow().me.boot;
    let mut outcomes: Vec<Outcome> = vec![Outcome::Unknown; items.len()];
    let mut local: BTreeMap<usize, Vec<AckItem>> = BTreeMap::new();
    let mut remote: BTreeMap<String, (Member, Vec<usize>)> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        let Some(id) = &it.decoded else { continue };
        match place(shard, &scope, &queue, &id.partition)? {
            Place::Here(_) if id.boot != me => outcomes[i] = Outcome::Stale,
            Place::Here(s) => local.entry(s).or_default().push((
                i,
                id.partition.clone(),
                id.seq,
                id.attempt,
                it.status,
            )),
            Place::Peer(m) => remote
                .entry(m.id.clone())
                .or_insert((m, Vec::new()))
                .1
                .push(i),
        }
    }
    for (s, batch) in local {
        let op = Op::Ack {
            key: scope.key(&queue),
            group: group.clone(),
            items: batch,
        };
        match exec::call(shard, s, op).await {
            Answer::Acked(r) => r.into_iter().for_each(|(i, o)| outcomes[i] = o),
            Answer::Popped(Err(e)) => return Err(e.into()),
            other => return Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
        }
    }
    for (_, (peer, idx)) in remote {
        let sub: Vec<&Value> = idx.iter().map(|&i| &items[i].raw).collect();
        let f = Forward {
            method: "POST",
            target: "/api/v1/ephemeral/ack".into(),
            body: serde_json::to_vec(&json!({"queue": queue, "group": group, "acks": sub}))
                .unwrap_or_default(),
            req,
            wait: Duration::ZERO,
        };
        let r = forward(shard, &peer, f).await?;
        if r.status != 200 {
            return Ok(r);
        }
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        for (k, &i) in idx.iter().enumerate() {
            outcomes[i] = match v["results"][k]["outcome"].as_str() {
                Some("acked") => Outcome::Acked,
                Some("redelivered") => Outcome::Redelivered,
                Some("stale") => Outcome::Stale,
                _ => Outcome::Unknown,
            };
        }
    }
    let results: Vec<Value> = items
        .iter()
        .zip(&outcomes)
        .map(|(it, o)| json!({"id": it.id, "outcome": o.as_str()}))
        .collect();
    Ok(super::super::reply::ok_json(&json!({ "results": results })))
}

fn parse_items(v: Option<&Value>) -> Result<Vec<Item>, EphError> {
    let Some(Value::Array(acks)) = v else {
        return Err(EphError::BadRequest("acks (array) is required".into()));
    };
    if acks.len() > MAX_ITEMS {
        return Err(EphError::BadRequest(format!(
            "at most {MAX_ITEMS} acks per call, got {}",
            acks.len()
        )));
    }
    acks.iter()
        .enumerate()
        .map(|(i, a)| {
            let id = a.get("id").and_then(Value::as_str).ok_or_else(|| {
                EphError::BadRequest(format!("acks[{i}].id (string) is required"))
            })?;
            let status = match a.get("status") {
                None | Some(Value::Null) => ack_status(None)?,
                Some(Value::String(s)) => ack_status(Some(s))?,
                Some(_) => {
                    return Err(EphError::BadRequest(format!(
                        "acks[{i}].status must be a string"
                    )))
                }
            };
            Ok(Item {
                id: id.to_string(),
                decoded: MsgId::decode(id),
                status,
                raw: a.clone(),
            })
        })
        .collect()
}
