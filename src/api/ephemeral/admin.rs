//! `POST /api/v1/ephemeral/reset` (`{queue}` → 200 `{queue, dropped}`) and
//! `DELETE /api/v1/ephemeral/queue/{queue}` (→ 200 `{queue, deleted,
//! declared}`), http-api.md §18.
//!
//! Both act on every shard of this broker before answering and tell the
//! peers with `EphNotice::Dropped` (they empty the rings they own; their
//! counts are not waited for, so `dropped` counts this broker's messages).
//! Reset keeps the declaration; delete removes it from PostgreSQL too.
//! Neither refuses an unknown queue: reset answers `dropped: 0`, delete
//! `deleted: false`.

use super::{all_shards, check_name, object_body, required_str, Scope};
use crate::error::ApiError;
use crate::mesh::{EphNotice, Notice};
use crate::shard::ephemeral::handover::{Answer, Op};
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::json;
use shards::http::{Request, Response};
use std::rc::Rc;

fn count(answers: Vec<Answer>) -> usize {
    answers
        .into_iter()
        .map(|a| match a {
            Answer::Count(n) => n,
            _ => 0,
        })
        .sum()
}

fn dropped(shard: &Shard, scope: Scope, queue: &str, undeclare: bool) {
    shard.notify(Notice::Ephemeral(EphNotice::Dropped {
        from: shard.eph.members.borrow().me.id.clone(),
        tenant: scope.tenant,
        queue: queue.to_string(),
        undeclare,
    }));
}

/// Handles the reset.
pub async fn reset(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = object_body(req)?;
    let queue = required_str(&body, "queue")?.to_string();
    check_name(&queue, "queue")?;
    let scope = Scope::of(shard, req)?;
    let key = scope.key(&queue);
    let n = count(all_shards(shard, || Op::Reset { key: key.clone() }).await);
    dropped(shard, scope, &queue, false);
    Ok(super::super::reply::ok_json(
        &json!({"queue": queue, "dropped": n}),
    ))
}

/// Handles the delete.
pub async fn delete(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    check_name(queue, "queue")?;
    let scope = Scope::of(shard, req)?;
    let r = shard
        .db
        .call(
            Proc::EphUndeclare,
            json!({"tenant": scope.tenant, "queue": queue}),
        )
        .await?;
    let declared = r["declared"].as_bool().unwrap_or(false);
    let key = scope.key(queue);
    let had = count(
        all_shards(shard, || Op::Drop {
            key: key.clone(),
            undeclare: true,
        })
        .await,
    );
    dropped(shard, scope, queue, true);
    Ok(super::super::reply::ok_json(&json!({
        "queue": queue,
        "deleted": declared || had > 0,
        "declared": declared,
    })))
}
