//! `POST /api/v1/locks` (http-api.md §17): leases on a name, built on the KV
//! (rows of `queen.kv` in the reserved namespace `_locks`, which no KV call
//! can name; token = the row's version). One call is one transaction on the
//! KV pool (`queen.lock_apply`, sql/functions/kv.sql; or one savepoint of a
//! group commit, `crate::store::kv_group`), ops in order,
//! index-aligned results; the KV kill switch stops locks too (503
//! `kv_unavailable`). Errors are the KV family's (`kv_bad_request`).
//!
//! Inferred (§17 gives only the shapes): every result also carries `index`,
//! `op` and `name`; a refused acquire reports the current `holder` and
//! `expiresAt` with `token: null`; renew keeps the token (a holder's token
//! stays its fence for the whole lease) and answers the new `expiresAt`;
//! `owner` is a string of at most 256 bytes; names follow the KV key rules;
//! at most `QUEEN_KV_MAX_OPS_PER_CALL` ops, applied in order (a name may
//! appear in several: acquire then get sees the acquire).

use super::kv::{gate, ops};
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::kv_group::KvCall;
use serde_json::{json, Map, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Longest `owner` accepted, bytes.
const MAX_OWNER_BYTES: usize = 256;

/// `POST /api/v1/locks`.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    gate(shard)?;
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?.into_owned();
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ops::bad("kv_bad_body", format!("Invalid JSON: {e}")))?;
    let raw = ops::body_ops(&body)?;
    let checked = parse(raw, shard)?;
    let call = KvCall::lock(tenant, Value::Array(checked));
    let out = shard
        .db
        .kv_group_call(call)
        .await
        .map_err(ApiError::from_kv_store)?;
    shard.counters.kv_call(out.group);
    Ok(ok_json(&out.value))
}

fn parse(raw: &[Value], shard: &Shard) -> Result<Vec<Value>, ApiError> {
    let cfg = &shard.cfg.kv;
    if raw.len() > cfg.max_ops {
        return Err(ops::bad(
            "kv_too_many_ops",
            format!("{} ops in one call; at most {}", raw.len(), cfg.max_ops),
        ));
    }
    raw.iter()
        .enumerate()
        .map(|(i, op)| {
            let Value::Object(m) = op else {
                return Err(ops::bad("kv_unknown_op", format!("ops[{i}] must be an object")));
            };
            if let Some(f) = ops::TENANT_FIELDS.iter().find(|f| m.contains_key(**f)) {
                return Err(ops::bad(
                    "kv_tenant_not_an_input",
                    format!("ops[{i}] carries {f}: the tenant comes from the request"),
                ));
            }
            let name = ops::key(m.get("name"), cfg, &format!("ops[{i}].name"))?;
            let op = m.get("op").and_then(Value::as_str).unwrap_or("");
            let mut n = json!({"op": op, "name": name});
            match op {
                "acquire" => {
                    n["ttl"] = ttl(m, i)?;
                    n["owner"] = match m.get("owner") {
                        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_OWNER_BYTES => {
                            json!(s)
                        }
                        _ => {
                            return Err(ops::bad(
                                "kv_bad_field",
                                format!("ops[{i}].owner must be a non-empty string of at most {MAX_OWNER_BYTES} bytes"),
                            ))
                        }
                    };
                }
                "renew" => {
                    n["ttl"] = ttl(m, i)?;
                    n["token"] = token(m, i)?;
                }
                "release" => n["token"] = token(m, i)?,
                "get" => {}
                other => {
                    return Err(ops::bad(
                        "kv_unknown_op",
                        format!("ops[{i}].op {other:?} is not one of acquire, renew, release, get"),
                    ))
                }
            }
            Ok(n)
        })
        .collect()
}

fn ttl(m: &Map<String, Value>, i: usize) -> Result<Value, ApiError> {
    match m.get("ttlSeconds").and_then(Value::as_u64) {
        Some(s) if (1..=i32::MAX as u64).contains(&s) => Ok(json!(s)),
        _ => Err(ops::bad(
            "kv_bad_ttl",
            format!("ops[{i}].ttlSeconds must be a positive whole number of seconds"),
        )),
    }
}

fn token(m: &Map<String, Value>, i: usize) -> Result<Value, ApiError> {
    let t = match m.get("token") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        _ => None,
    };
    t.filter(|t| *t <= i64::MAX as u64)
        .map(|t| json!(t))
        .ok_or_else(|| {
            ops::bad(
                "kv_bad_field",
                format!("ops[{i}].token must be the token acquire answered"),
            )
        })
}
