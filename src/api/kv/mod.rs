//! The key/value store (http-api.md §15, semantics.md §20): `POST
//! /api/v1/kv` with every op, the single-key `GET/PUT/DELETE
//! /api/v1/kv/{ns}/{*key}`, and the dashboard's KV browser
//! (`GET /api/v1/resources/kv/namespaces`, `POST /api/v1/resources/kv/list`).
//!
//! A call is validated whole first ([`ops`]: limits, refused fields; a
//! refused call writes nothing), then runs on the KV pool (`queen.kv_call`,
//! sql/functions/kv.sql): one PostgreSQL transaction (or one savepoint of a
//! group commit, `crate::store::kv_group`), ops in order, index-aligned
//! results. Keys are scoped by the request's tenant
//! (`crate::auth::tenant`; a `tenant` field is refused). While the KV is
//! switched off at runtime, every route here answers 503 `kv_unavailable`.
//!
//! Inferred (the spec is thin): the single-key GET answers 200 with
//! `found: false` for a missing key (it is "the get result"), with `ETag:
//! "<version>"` when found; PUT refuses `op`, `ns` and `key` in its body with
//! `reason: kv_field_not_allowed`; the KV browser's `limit` is 1..1000
//! (default 100).

pub mod ops;

use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::kv_group::KvCall;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// 503 `kv_unavailable` while the KV is switched off (SEC-23).
pub fn gate(shard: &Shard) -> Result<(), ApiError> {
    if shard.kv_enabled() {
        Ok(())
    } else {
        Err(ApiError::kv_unavailable(
            "kv_disabled",
            "the key/value store is switched off (POST /api/v1/system/kv-timers)",
        ))
    }
}

/// The request's JSON body (400 `kv_bad_request` when it is not JSON).
fn body(req: &Request) -> Result<Value, ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Err(ops::bad("kv_bad_body", "Empty request body"));
    }
    serde_json::from_slice(&req.body)
        .map_err(|e| ops::bad("kv_bad_body", format!("Invalid JSON: {e}")))
}

/// Runs validated ops on the KV pool: `{results}` or the precondition object.
/// The call may share its commit with other calls queued beside it
/// (`crate::store::kv_group`): it is still one transaction of its own as
/// far as anyone can see (its own savepoint; answered after the commit).
async fn run(shard: &Shard, tenant: String, parsed: ops::Parsed) -> Result<Value, ApiError> {
    let max_read = shard.cfg.kv.max_read_bytes as i64;
    let call = KvCall::kv(
        tenant,
        Value::Array(parsed.ops),
        max_read,
        parsed.has_required,
    );
    let out = shard
        .db
        .kv_group_call(call)
        .await
        .map_err(ApiError::from_kv_store)?;
    shard.counters.kv_call(out.group);
    for k in parsed.kinds {
        shard.counters.kv_op(k);
    }
    Ok(out.value)
}

/// `POST /api/v1/kv`.
pub async fn batch(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    gate(shard)?;
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?.into_owned();
    let body = body(req)?;
    let parsed = ops::parse(ops::body_ops(&body)?, &shard.cfg.kv, false)?;
    if parsed.ops.is_empty() {
        return Ok(ok_json(&json!({"results": []})));
    }
    Ok(ok_json(&run(shard, tenant, parsed).await?))
}

/// The single-key routes: one op, its one result.
async fn one(shard: &Rc<Shard>, req: &Request, op: Value) -> Result<Value, ApiError> {
    gate(shard)?;
    if !req.query.is_empty() {
        return Err(ops::bad(
            "kv_no_query_string",
            "the single-key KV routes take no query string (keys and options never go in a URL)",
        ));
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?.into_owned();
    let parsed = ops::parse(std::slice::from_ref(&op), &shard.cfg.kv, false)?;
    let mut out = run(shard, tenant, parsed).await?;
    Ok(out["results"][0].take())
}

/// The key of a single-key route: the path segments after the namespace.
fn tail_key(tail: &[&str]) -> String {
    tail.join("/")
}

/// `GET /api/v1/kv/{ns}/{*key}`.
pub async fn get_one(
    shard: &Rc<Shard>,
    req: &Request,
    ns: &str,
    tail: &[&str],
) -> Result<Response, ApiError> {
    let r = one(
        shard,
        req,
        json!({"op": "get", "ns": ns, "key": tail_key(tail)}),
    )
    .await?;
    let resp = ok_json(&r);
    Ok(match r["version"].as_i64() {
        Some(v) if r["found"] == true => resp.with_header("ETag", format!("\"{v}\"")),
        _ => resp,
    })
}

/// `PUT /api/v1/kv/{ns}/{*key}`: the body is a put op without `op`/`ns`/`key`.
pub async fn put_one(
    shard: &Rc<Shard>,
    req: &Request,
    ns: &str,
    tail: &[&str],
) -> Result<Response, ApiError> {
    gate(shard)?;
    let Value::Object(mut m) = body(req)? else {
        return Err(ops::bad("kv_bad_body", "the body must be a JSON object"));
    };
    if let Some(f) = ["op", "ns", "key"].iter().find(|f| m.contains_key(**f)) {
        return Err(ops::bad(
            "kv_field_not_allowed",
            format!("the body may not carry {f}: it comes from the path"),
        ));
    }
    m.insert("op".into(), json!("put"));
    m.insert("ns".into(), json!(ns));
    m.insert("key".into(), json!(tail_key(tail)));
    Ok(ok_json(&one(shard, req, Value::Object(m)).await?))
}

/// `DELETE /api/v1/kv/{ns}/{*key}`.
pub async fn delete_one(
    shard: &Rc<Shard>,
    req: &Request,
    ns: &str,
    tail: &[&str],
) -> Result<Response, ApiError> {
    let op = json!({"op": "delete", "ns": ns, "key": tail_key(tail)});
    Ok(ok_json(&one(shard, req, op).await?))
}

/// `GET /api/v1/resources/kv/namespaces`: live keys per namespace.
pub async fn namespaces(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let r = shard
        .db
        .call(Proc::KvNamespaces, json!({"tenant": tenant}))
        .await?;
    Ok(ok_json(&r))
}

/// `POST /api/v1/resources/kv/list` `{ns, after?, limit?}`: a key page.
pub async fn list(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let Value::Object(m) = body(req)? else {
        return Err(ops::bad("kv_bad_body", "the body must be a JSON object"));
    };
    let probe = json!({"op": "get", "ns": m.get("ns").cloned().unwrap_or(Value::Null), "key": "-"});
    ops::parse(std::slice::from_ref(&probe), &shard.cfg.kv, false)?;
    let after = match m.get("after").filter(|v| !v.is_null()) {
        Some(a) => Some(ops::key(Some(a), &shard.cfg.kv, "after")?),
        None => None,
    };
    let limit = m
        .get("limit")
        .and_then(Value::as_i64)
        .unwrap_or(100)
        .clamp(1, 1000);
    let r = shard
        .db
        .call(
            Proc::KvList,
            json!({"tenant": tenant, "ns": m["ns"], "after": after, "limit": limit}),
        )
        .await?;
    Ok(ok_json(&r))
}

/// The KV riders of `POST /api/v1/transaction` (`kv`, optional): validated
/// as a transaction's (64 ops, no getPrefix); refused while the KV is off.
pub fn txn_riders(shard: &Shard, kv: Option<&Value>) -> Result<ops::Parsed, ApiError> {
    match kv {
        None | Some(Value::Null) => Ok(ops::Parsed {
            ops: Vec::new(),
            kinds: Vec::new(),
            has_required: false,
        }),
        Some(Value::Array(a)) => {
            if !a.is_empty() {
                gate(shard)?;
            }
            ops::parse(a, &shard.cfg.kv, true)
        }
        Some(_) => Err(ops::bad("kv_bad_field", "kv must be an array of KV ops")),
    }
}

/// The transaction's answer when its KV riders lost a required precondition:
/// `queen.transaction` raised `kv_precondition <object>` (so everything rolled
/// back); the object becomes the 200 body with `success: false`.
pub fn txn_precondition(raised: &str) -> Option<Response> {
    let text = raised.strip_prefix("kv_precondition ")?;
    let Ok(Value::Object(mut m)) = serde_json::from_str::<Value>(text) else {
        return None;
    };
    m.remove("ok");
    m.insert("success".into(), json!(false));
    m.insert(
        "error".into(),
        json!("a required KV precondition did not hold"),
    );
    Some(ok_json(&Value::Object(m)))
}
