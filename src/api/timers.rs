//! Timers (http-api.md §16): `POST /api/v1/timers` (schedule, reschedule,
//! cancel in one transaction), `DELETE /api/v1/timers/{queue}/{*timerKey}`
//! (the cancel route), `GET .../{queue}/{*timerKey}` (peek),
//! `GET /api/v1/timers/{queue}` (keyset page, or `?mode=count`), and the
//! dashboard's `GET /api/v1/resources/timers` (pending per queue). Runs on
//! the shards; ops are validated in `timers_ops.rs`, and each call is one
//! procedure of sql/functions/timers.sql. The firing is `crate::jobs::timers`.
//!
//! Every call is scoped by the request's tenant (SEC-21); a timer of
//! another tenant is `absent` / `found: false`, never an error that would
//! tell it exists. Decisions where §16 is silent:
//! - A batch holding a cancel needs READ_WRITE (the route is WRITE_ONLY):
//!   403 otherwise, nothing applied (§16 "(inferred)").
//! - The payload is stored as the decoded bytes; on a queue with
//!   `encryptionEnabled` and a valid key, as the JSON text of the AES-GCM
//!   envelope with `encrypted: true` (semantics.md §13), so the fired
//!   message is stored exactly as an encrypted push and peek shows the
//!   envelope. The message id is minted here (UUIDv7) and returned.
//! - `producerSub` of the fired message is the scheduling token's `sub`.
//! - `status` is `rescheduled` when the upsert replaced a pending timer,
//!   `scheduled` when it created one, whichever op name was sent.
//! - Kill switch (`POST /api/v1/system/kv-timers`): with
//!   `timersScheduleEnabled` off, a batch holding a schedule or reschedule
//!   is refused whole with 503 `kv_unavailable` (reason
//!   `timers_schedule_disabled`); cancels (either route), peek and list keep
//!   working, so a tenant can always stop what it scheduled. With
//!   `timersFireEnabled` off the firing job pauses (`crate::jobs::timers`).
//!   `kvEnabled` is the KV's own switch and does not stop timers.
//! - Every call runs on the KV pool (`QUEEN_KV_POOL_SIZE`); a full pool
//!   answers 503 `kv_unavailable` at once.
//! - List `limit`: default 100, clamped to 1..1000, never refused; count
//!   `prefix` over 128 bytes is 400 `timers_bad_request`.

use super::reply::ok_json;
use super::timers_ops::{self, OpKind, TimerOp};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::collections::BTreeSet;
use std::rc::Rc;

/// List page size when `limit` is absent (§16).
const LIST_DEFAULT_LIMIT: i64 = 100;
/// Largest list page (a larger `limit` is lowered to it).
const LIST_MAX_LIMIT: i64 = 1000;
/// Longest count `prefix`, bytes (§16).
const MAX_PREFIX_BYTES: usize = 128;

/// `POST /api/v1/timers`.
pub async fn batch(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest("Empty request body".into()));
    } else {
        serde_json::from_slice(&req.body)
            .map_err(|e| ApiError::BadRequest(format!("Invalid JSON: {e}")))?
    };
    let ops = timers_ops::parse_batch(body, &shard.cfg.timers)?;
    if ops.is_empty() {
        return Ok(ok_json(&json!({ "results": [] })));
    }
    if ops.iter().any(|o| o.kind != OpKind::Cancel) && !shard.kv_switch.timers_schedule_enabled() {
        return Err(ApiError::kv_unavailable(
            "timers_schedule_disabled",
            "timer scheduling is switched off (POST /api/v1/system/kv-timers); cancels still work",
        ));
    }
    if ops.iter().any(|o| o.kind == OpKind::Cancel)
        && !crate::auth::allows(
            &shard.cfg.auth,
            &shard.tokens,
            req,
            crate::auth::Level::ReadWrite,
        )
    {
        return Err(ApiError::Forbidden);
    }
    let results = apply(shard, req, ops).await?;
    Ok(ok_json(&json!({ "results": results })))
}

/// `DELETE /api/v1/timers/{queue}/{*timerKey}?txn=`.
pub async fn cancel(
    shard: &Rc<Shard>,
    req: &Request,
    queue: &str,
    key: &[&str],
) -> Result<Response, ApiError> {
    let txn = req.query_param("txn").filter(|t| !t.is_empty());
    let op = timers_ops::cancel_op(queue, &key.join("/"), txn)?;
    let mut results = apply(shard, req, vec![op]).await?;
    Ok(ok_json(&results.swap_remove(0)))
}

/// `GET /api/v1/timers/{queue}/{*timerKey}`.
pub async fn peek(
    shard: &Rc<Shard>,
    req: &Request,
    queue: &str,
    key: &[&str],
) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let arg = json!({ "tenant": tenant, "queue": queue, "timerKey": key.join("/") });
    Ok(ok_json(&call(shard, Proc::TimersPeek, arg).await?))
}

/// `GET /api/v1/timers/{queue}` (`?after=&limit=`, or `?mode=count&prefix=`).
pub async fn list(shard: &Rc<Shard>, req: &Request, queue: &str) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    if req.query_param("mode").as_deref() == Some("count") {
        let prefix = req.query_param("prefix").filter(|p| !p.is_empty());
        if prefix.as_ref().is_some_and(|p| p.len() > MAX_PREFIX_BYTES) {
            return Err(timers_ops::bad(
                "timers_prefix_too_long",
                format!("prefix is over {MAX_PREFIX_BYTES} bytes"),
            ));
        }
        let arg = json!({ "tenant": tenant, "queue": queue, "prefix": prefix });
        return Ok(ok_json(&call(shard, Proc::TimersCount, arg).await?));
    }
    let limit = req
        .query_param("limit")
        .and_then(|l| l.trim().parse::<i64>().ok())
        .unwrap_or(LIST_DEFAULT_LIMIT)
        .clamp(1, LIST_MAX_LIMIT);
    let after = req.query_param("after").filter(|a| !a.is_empty());
    let arg = json!({ "tenant": tenant, "queue": queue, "after": after, "limit": limit });
    Ok(ok_json(&call(shard, Proc::TimersList, arg).await?))
}

/// `GET /api/v1/resources/timers`: the tenant's pending timers per queue.
pub async fn pending(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let arg = json!({ "tenant": tenant });
    Ok(ok_json(&call(shard, Proc::TimersPending, arg).await?))
}

/// Runs one timers procedure on the KV pool: a full pool or a lost
/// database is 503 `kv_unavailable`, never a wait.
async fn call(shard: &Shard, proc: Proc, arg: Value) -> Result<Value, ApiError> {
    shard
        .db
        .kv_call(proc, arg)
        .await
        .map_err(ApiError::from_kv_store)
}

/// Seals the schedules' payloads and runs the ops in one transaction; the
/// index-aligned results.
async fn apply(
    shard: &Rc<Shard>,
    req: &Request,
    ops: Vec<TimerOp>,
) -> Result<Vec<Value>, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let sub = crate::auth::sub(&shard.cfg.auth, &shard.tokens, req);
    let encrypted = encrypted_queues(shard, &tenant, &ops).await;
    let stored: Vec<Value> = ops
        .into_iter()
        .map(|op| stored_op(op, &encrypted))
        .collect();
    let arg = json!({ "tenant": tenant, "sub": sub, "ops": stored });
    let r = call(shard, Proc::TimersApply, arg).await?;
    match r.get("results") {
        Some(Value::Array(a)) => Ok(a.clone()),
        _ => Err(ApiError::Internal("timers: no results".into())),
    }
}

/// The queues among the schedules whose payloads are encrypted at rest.
async fn encrypted_queues(shard: &Shard, tenant: &str, ops: &[TimerOp]) -> BTreeSet<String> {
    if crate::crypto::cipher().is_none() {
        return BTreeSet::new();
    }
    let names: BTreeSet<&str> = ops
        .iter()
        .filter(|o| o.kind != OpKind::Cancel)
        .map(|o| o.queue.as_str())
        .collect();
    if names.is_empty() {
        return BTreeSet::new();
    }
    // unknown (PostgreSQL unreachable) counts as encrypted, as on push
    let flags = shard
        .queues
        .encryption_flags(&shard.db, tenant, &names, true)
        .await;
    flags
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(q, _)| q)
        .collect()
}

/// One op as `queen.timers_apply` takes it.
fn stored_op(op: TimerOp, encrypted: &BTreeSet<String>) -> Value {
    let mut v = json!({
        "op": op.kind.name(), "queue": op.queue, "timerKey": op.key, "txn": op.txn,
    });
    let Some(bytes) = op.payload else {
        return v;
    };
    let (bytes, sealed) = match seal(&bytes, encrypted.contains(&op.queue)) {
        Some(env) => (env, true),
        None => (bytes, false),
    };
    v["payload"] = B64.encode(bytes).into();
    v["encrypted"] = sealed.into();
    v["delayMs"] = op.delay_ms.into();
    v["partition"] = op.partition.into();
    v["messageId"] = crate::ids::uuid_v7().into();
    v
}

/// The envelope's JSON text when the queue is encrypted and a key is set.
/// A failed encryption stores plaintext, as push does (semantics.md §13).
fn seal(bytes: &[u8], on: bool) -> Option<Vec<u8>> {
    if !on {
        return None;
    }
    let cipher = crate::crypto::cipher()?;
    // validated as JSON by timers_ops; re-parsing keeps the envelope's
    // plaintext the JSON text the fired message decrypts to
    let json: Value = serde_json::from_slice(bytes).ok()?;
    match cipher.encrypt(&json) {
        Some(env) => serde_json::to_vec(&env).ok(),
        None => {
            log::warn!("timer payload encryption failed; stored as plaintext");
            None
        }
    }
}
