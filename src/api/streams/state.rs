//! `POST /streams/v1/state/get` (http-api.md §19): a (query, partition)'s
//! state rows ordered by key: all of them, the named `keys`, those under
//! `key_prefix`, and with `ripe_at_or_before` (ISO time or epoch ms) only rows
//! whose value's `windowEnd` (epoch ms, as the SDK's window operators store
//! it) is at or before the bound: the windows the SDK's idle flush may close
//! (inferred from `Runner._flush_partition`; rows without a numeric
//! `windowEnd` never match the bound). Failures are 400 `{success:false, error}`.

use super::super::params;
use super::super::reply::{json, ok_json};
use super::{check_key, partition_id, query_id};
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Most keys one read may name.
const MAX_KEYS: usize = 10_000;

fn bad(error: impl Into<String>) -> Response {
    json(400, &json!({ "success": false, "error": error.into() }))
}

/// `ripe_at_or_before` as epoch ms: a number, or an RFC 3339 time.
fn ripe_ms(v: &Value) -> Result<Option<f64>, String> {
    const WHAT: &str =
        "ripe_at_or_before must be epoch milliseconds or a UTC time (YYYY-MM-DDTHH:MM:SS[.fff]Z)";
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n.as_f64().map(Some).ok_or_else(|| WHAT.to_string()),
        Value::String(s) => super::super::pop_autopilot::iso_micros(s)
            .map(|us| Some(us as f64 / 1000.0))
            .ok_or_else(|| WHAT.to_string()),
        _ => Err(WHAT.into()),
    }
}

/// Handles `POST /streams/v1/state/get`.
pub async fn get(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let (qid, pid) = match (query_id(&body), partition_id(&body)) {
        (Ok(q), Ok(p)) => (q, p),
        (Err(e), _) | (_, Err(e)) => return Ok(bad(e)),
    };
    let keys: Vec<&str> = match body.get("keys") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.len() <= MAX_KEYS => {
            match a.iter().map(Value::as_str).collect::<Option<Vec<_>>>() {
                Some(k) => k,
                None => return Ok(bad("keys must be an array of strings")),
            }
        }
        Some(Value::Array(_)) => return Ok(bad(format!("keys may name at most {MAX_KEYS}"))),
        Some(_) => return Ok(bad("keys must be an array of strings")),
    };
    if let Some(e) = keys.iter().find_map(|k| check_key(k, "keys[]").err()) {
        return Ok(bad(e));
    }
    let prefix = match body.get("key_prefix") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match check_key(s, "key_prefix") {
            Ok(()) => Some(s.as_str()),
            Err(e) => return Ok(bad(e)),
        },
        Some(_) => return Ok(bad("key_prefix must be a string")),
    };
    let ripe = match ripe_ms(body.get("ripe_at_or_before").unwrap_or(&Value::Null)) {
        Ok(r) => r,
        Err(e) => return Ok(bad(e)),
    };
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let arg = json!({"tenant": tenant, "query_id": qid, "partition_id": pid,
                     "keys": keys, "key_prefix": prefix, "ripe_ms": ripe});
    match shard.db.call(Proc::StreamsStateGet, arg).await {
        Ok(r) => Ok(ok_json(&json!({"success": true, "rows": r["rows"]}))),
        Err(StoreError::Db(m)) => Ok(bad(m)),
        Err(e) => Err(e.into()),
    }
}
