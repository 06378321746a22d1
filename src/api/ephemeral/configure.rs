//! `POST /api/v1/ephemeral/configure` (http-api.md §18): `{queue, options:
//! {maxBytes?, maxLength?, policy?, ttlSeconds?, leaseSeconds?, retryLimit?,
//! windowBuffer?: {ms, count}}}` → 201 `{queue, options}` with the effective
//! values. Any unknown option or out-of-range value → 400
//! `ephemeral_bad_request`, nothing stored.
//!
//! The declaration is stored in PostgreSQL first (the only durable part of
//! an ephemeral queue), then applied on every shard of this broker before
//! the answer (so the next push, whichever shard owns it, obeys it), and
//! announced to the peers with `EphNotice::Declared`. Re-declaring keeps
//! the contents; new bounds apply to the next push.

use super::{all_shards, check_name, object_body, required_str, Scope};
use crate::error::ApiError;
use crate::mesh::{EphNotice, Notice};
use crate::shard::ephemeral::handover::Op;
use crate::shard::ephemeral::options::Options;
use crate::shard::ephemeral::EphError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Handles the configure.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = object_body(req)?;
    let queue = required_str(&body, "queue")?.to_string();
    check_name(&queue, "queue")?;
    let given = match body.get("options") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => return Err(EphError::BadRequest("options must be an object".into()).into()),
    };
    let options = Options::parse(&given, &shard.eph.cfg)?;
    let scope = Scope::of(shard, req)?;
    shard
        .db
        .call(
            Proc::EphDeclare,
            json!({"tenant": scope.tenant, "queue": queue, "options": given}),
        )
        .await?;
    let key = scope.key(&queue);
    all_shards(shard, || Op::Declare {
        key: key.clone(),
        options: Some(options.clone()),
    })
    .await;
    shard.notify(Notice::Ephemeral(EphNotice::Declared {
        from: shard.eph.members.borrow().me.id.clone(),
        tenant: scope.tenant,
        queue: queue.clone(),
        options: Some(Value::Object(given).to_string()),
    }));
    Ok(super::super::reply::json(
        201,
        &json!({"queue": queue, "options": options.to_json()}),
    ))
}
