//! `POST /api/v1/configure`: create or update a queue and its `Default`
//! partition (http-api.md §2). Option types are checked here so that a bad
//! value is a 400 naming the option, never a database error.

use super::params;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Integer options (all ≥ 0) and boolean options the broker knows.
const INT_OPTIONS: &[&str] = &[
    "leaseTime",
    "retryLimit",
    "retryDelay",
    "maxSize",
    "ttl",
    "priority",
    "delayedProcessing",
    "windowBuffer",
    "retentionSeconds",
    "completedRetentionSeconds",
    "maxWaitTimeSeconds",
    "dedupWindowSeconds",
];
const BOOL_OPTIONS: &[&str] = &[
    "deadLetterQueue",
    "dlqAfterMaxRetries",
    "retentionEnabled",
    "encryptionEnabled",
];

/// The configure answer's `warning` when the flag is set without a key.
pub const ENCRYPTION_WITHOUT_KEY: &str = "encryptionEnabled is set but QUEEN_ENCRYPTION_KEY is missing or invalid: payloads of this queue are stored in plaintext";

/// Handles `POST /api/v1/configure`.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let queue = match body.get("queue") {
        Some(Value::String(q)) => q.clone(),
        _ => return Err(ApiError::BadRequest("queue is required".into())),
    };
    params::check_name(&queue, "queue")?;
    let namespace = params::opt_str(&body, "namespace", "namespace")?;
    let task = params::opt_str(&body, "task", "task")?;
    let mode = params::opt_str(&body, "mode", "mode")?.unwrap_or("merge");
    if mode != "merge" && mode != "replace" {
        return Err(ApiError::BadRequest(
            "mode must be \"merge\" or \"replace\"".into(),
        ));
    }
    let options = match body.get("options") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(o)) => check_options(o)?,
        Some(_) => return Err(ApiError::BadRequest("options must be an object".into())),
    };
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let encryption_asked = options.get("encryptionEnabled") == Some(&Value::Bool(true));
    let arg = json!({
        "tenant": tenant, "queue": queue, "namespace": namespace, "task": task,
        "options": options, "mode": mode,
    });
    let mut result = shard.db.call(Proc::Configure, arg).await?;
    shard.queues.forget(&tenant, &queue);
    // Other shards and brokers drop their cached settings too (the mesh).
    shard.notify(crate::mesh::Notice::Configured {
        tenant: tenant.to_string(),
        queue: queue.clone(),
    });
    if encryption_asked && crate::crypto::cipher().is_none() {
        // SEC-33: not an error, but the operator must hear about it.
        log::warn!("queue {queue:?} has encryptionEnabled but no valid QUEEN_ENCRYPTION_KEY is set: its payloads are stored in plaintext");
        if let Value::Object(o) = &mut result {
            o.insert(
                "warning".into(),
                Value::String(ENCRYPTION_WITHOUT_KEY.into()),
            );
        }
    }
    Ok(ok_json(&result))
}

/// Keeps the known options, checking their types; unknown keys are ignored.
fn check_options(
    o: &serde_json::Map<String, Value>,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let mut out = serde_json::Map::new();
    for (k, v) in o {
        if v.is_null() {
            continue;
        }
        if INT_OPTIONS.contains(&k.as_str()) {
            let n = v.as_i64().filter(|n| {
                (0..=i32::MAX as i64).contains(n) || (k == "priority" && *n >= i32::MIN as i64)
            });
            match n {
                Some(n) => out.insert(k.clone(), json!(n)),
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "options.{k} must be a non-negative integer"
                    )))
                }
            };
        } else if BOOL_OPTIONS.contains(&k.as_str()) {
            match v.as_bool() {
                Some(b) => out.insert(k.clone(), json!(b)),
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "options.{k} must be a boolean"
                    )))
                }
            };
        }
    }
    Ok(out)
}
