//! `POST /api/v1/ephemeral/push` (http-api.md §18): `{queue, partition?,
//! messages: [{payload}]}` → 201 `{pushed}`, all or nothing.
//!
//! Each payload is kept as the JSON text it arrived as (serde's `RawValue`
//! borrows it from the body; one copy into `Bytes` per message): no value
//! tree is built for a message, here or at pop. Refusals: 400
//! `ephemeral_bad_request` (shape, names, more than 10,000 messages), 429
//! `queue_full` (policy `reject`), 503 `ephemeral_unavailable` (the broker's
//! RAM ceiling), 503 `owner_moved`; a refused push stores nothing.

use super::forward::{forward, Forward};
use super::{check_name, place, Place, Scope, MAX_ITEMS};
use crate::error::ApiError;
use crate::mesh::{EphNotice, Notice};
use crate::shard::ephemeral::exec;
use crate::shard::ephemeral::handover::{Answer, Op};
use crate::shard::ephemeral::{EphError, DEFAULT_PARTITION};
use crate::shard::Shard;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use shards::http::{Request, Response};
use std::rc::Rc;
use std::time::Duration;

/// The body, borrowing every payload's text.
#[derive(Deserialize)]
struct Body<'a> {
    queue: String,
    #[serde(default)]
    partition: Option<String>,
    #[serde(borrow)]
    messages: Vec<Message<'a>>,
}

/// One message: only `payload` travels (§18).
#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// Handles the push.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Err(EphError::BadRequest("Empty request body".into()).into());
    }
    let body: Body = serde_json::from_slice(&req.body)
        .map_err(|e| EphError::BadRequest(format!("Invalid push body: {e}")))?;
    check_name(&body.queue, "queue")?;
    let partition = body.partition.as_deref().unwrap_or(DEFAULT_PARTITION);
    check_name(partition, "partition")?;
    if body.messages.len() > MAX_ITEMS {
        return Err(EphError::BadRequest(format!(
            "at most {MAX_ITEMS} messages per push, got {}",
            body.messages.len()
        ))
        .into());
    }
    let scope = Scope::of(shard, req)?;
    let owner = match place(shard, &scope, &body.queue, partition)? {
        Place::Peer(m) => {
            let f = Forward {
                method: "POST",
                target: "/api/v1/ephemeral/push".into(),
                body: req.body.clone(),
                req,
                wait: Duration::ZERO,
            };
            return Ok(forward(shard, &m, f).await?);
        }
        Place::Here(s) => s,
    };
    if body.messages.is_empty() {
        return Ok(pushed(0));
    }
    let payloads: Vec<Bytes> = body
        .messages
        .iter()
        .map(|m| Bytes::copy_from_slice(m.payload.get().as_bytes()))
        .collect();
    let op = Op::Push {
        key: scope.key(&body.queue),
        partition: partition.to_string(),
        payloads,
    };
    let n = match exec::call(shard, owner, op).await {
        Answer::Pushed(r) => r?,
        other => return Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    };
    shard.notify(Notice::Ephemeral(EphNotice::Pushed {
        tenant: scope.tenant,
        queue: body.queue,
    }));
    Ok(pushed(n))
}

fn pushed(n: usize) -> Response {
    Response::json(201, format!("{{\"pushed\":{n}}}").into_bytes())
}
