//! Validation of KV ops (http-api.md §15): every limit and refused field is
//! checked here, before anything reaches PostgreSQL, so a refused call writes
//! nothing. An accepted op is rewritten into the one normalised shape
//! `queen.kv_apply` reads (sql/functions/kv.sql):
//! `{op, ns, key?, value?, ttl: <seconds>|null, expect?, required, delta?,
//! min?, max?, keys?, prefix?, after?, limit?, keysOnly?}`.
//!
//! Decisions where §15 is silent (inferred):
//! - reasons of our own for what §15 names none: `kv_bad_key` (empty, too
//!   long, or holding NUL or U+10FFFF, which the prefix scan's upper bound
//!   uses), `kv_bad_value` (a string with NUL, which jsonb cannot hold),
//!   `kv_bad_field` (a field of the wrong type: `delta`, `keys`, `required`...),
//!   `kv_bad_body` (a body that is neither `{operations: [...]}` nor an array);
//! - `forever` must be `true` when given; `ttlSeconds` is a whole number of
//!   seconds in 1..=2^31-1; both or neither is `kv_expiry_not_specified`;
//! - `putIfAbsent` takes `expect: 0` only (it is put with `expect: 0`); any
//!   `expect` on `incr` is `kv_bad_expect`;
//! - an unknown field other than the tenant ones is ignored, like the other
//!   endpoints do; `tenant`, `tenantId` and `tenant_id` are refused anywhere.

use crate::config::kv::{KvConfig, KV_MAX_OPS_IN_TRANSACTION, KV_PREFIX_DEFAULT_LIMIT};
use crate::error::ApiError;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// The fields that would name a tenant: never an input (SEC-21).
pub const TENANT_FIELDS: [&str; 3] = ["tenant", "tenantId", "tenant_id"];

/// The op names, in the order of `queen_kv_ops_total{op}`.
pub const OP_NAMES: [&str; 7] = crate::metrics::KV_OPS;

/// Longest TTL accepted, seconds (i32 range; about 68 years).
const MAX_TTL_SECONDS: u64 = i32::MAX as u64;

/// A validated call.
#[derive(Debug)]
pub struct Parsed {
    /// The normalised ops, in order.
    pub ops: Vec<Value>,
    /// Each op's index in [`OP_NAMES`] (for the metrics).
    pub kinds: Vec<usize>,
    /// Whether some op is `required` (the call then runs in a subtransaction).
    pub has_required: bool,
}

/// 400 `kv_bad_request` with `reason`.
pub fn bad(reason: &'static str, detail: impl Into<String>) -> ApiError {
    ApiError::Coded {
        status: 400,
        error: "kv_bad_request",
        reason,
        detail: detail.into(),
    }
}

/// The ops of a `POST /api/v1/kv` body: `{operations: [...]}` or a bare array.
pub fn body_ops(body: &Value) -> Result<&[Value], ApiError> {
    match body {
        Value::Array(a) => Ok(a),
        Value::Object(m) => {
            refuse_tenant(m, "the body")?;
            match m.get("operations") {
                Some(Value::Array(a)) => Ok(a),
                _ => Err(bad(
                    "kv_bad_body",
                    "the body must be {\"operations\": [...]} or an array of ops",
                )),
            }
        }
        _ => Err(bad(
            "kv_bad_body",
            "the body must be {\"operations\": [...]} or an array of ops",
        )),
    }
}

fn refuse_tenant(m: &Map<String, Value>, what: &str) -> Result<(), ApiError> {
    match TENANT_FIELDS.iter().find(|f| m.contains_key(**f)) {
        Some(f) => Err(bad(
            "kv_tenant_not_an_input",
            format!("{what} carries {f}: the tenant comes from the request, never from the body"),
        )),
        None => Ok(()),
    }
}

/// Validates `raw` ops (standalone call, or a transaction's KV riders).
pub fn parse(raw: &[Value], cfg: &KvConfig, in_txn: bool) -> Result<Parsed, ApiError> {
    let max_ops = if in_txn {
        KV_MAX_OPS_IN_TRANSACTION
    } else {
        cfg.max_ops
    };
    if raw.len() > max_ops {
        return Err(bad(
            "kv_too_many_ops",
            format!("{} ops in one call; at most {max_ops}", raw.len()),
        ));
    }
    let mut out = Parsed {
        ops: Vec::with_capacity(raw.len()),
        kinds: Vec::with_capacity(raw.len()),
        has_required: false,
    };
    let mut written: HashSet<(String, String)> = HashSet::new();
    let mut nr_keys = 0usize;
    for (i, op) in raw.iter().enumerate() {
        let Value::Object(m) = op else {
            return Err(bad("kv_unknown_op", format!("ops[{i}] must be an object")));
        };
        refuse_tenant(m, &format!("ops[{i}]"))?;
        let name = m.get("op").and_then(Value::as_str).unwrap_or("");
        let Some(kind) = OP_NAMES.iter().position(|n| *n == name) else {
            return Err(bad(
                "kv_unknown_op",
                format!("ops[{i}].op {name:?} is not one of {}", OP_NAMES.join(", ")),
            ));
        };
        let at = |f: &str| format!("ops[{i}].{f}");
        let ns = namespace(m, &at("ns"))?;
        let mut n = json!({"op": name, "ns": ns});
        let required = match m.get("required") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(bad(
                    "kv_bad_field",
                    format!("{} must be a boolean", at("required")),
                ))
            }
        };
        match name {
            "get" => {
                n["key"] = json!(key(m.get("key"), cfg, &at("key"))?);
                nr_keys += 1;
            }
            "getMany" => {
                let Some(Value::Array(keys)) = m.get("keys") else {
                    return Err(bad(
                        "kv_bad_field",
                        format!("{} must be an array of keys", at("keys")),
                    ));
                };
                if keys.is_empty() {
                    return Err(bad(
                        "kv_bad_field",
                        format!("{} must not be empty", at("keys")),
                    ));
                }
                let keys = keys
                    .iter()
                    .enumerate()
                    .map(|(j, k)| key(Some(k), cfg, &format!("ops[{i}].keys[{j}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                nr_keys += keys.len();
                n["keys"] = json!(keys);
            }
            "getPrefix" => {
                if in_txn {
                    return Err(bad(
                        "kv_get_prefix_not_allowed_in_transaction",
                        format!("ops[{i}]: getPrefix is not allowed inside a transaction"),
                    ));
                }
                let prefix = match m.get("prefix") {
                    Some(Value::String(p)) if !p.is_empty() => p.clone(),
                    _ => {
                        return Err(bad(
                            "kv_prefix_required",
                            format!("{} must be a non-empty string: a namespace is not a table to enumerate", at("prefix")),
                        ))
                    }
                };
                key(Some(&Value::String(prefix.clone())), cfg, &at("prefix"))?;
                n["prefix"] = json!(prefix);
                if let Some(a) = m.get("after").filter(|v| !v.is_null()) {
                    n["after"] = json!(key(Some(a), cfg, &at("after"))?);
                }
                // clamped, never rejected; a limit that is not a number is the default
                let limit = m
                    .get("limit")
                    .and_then(Value::as_i64)
                    .map_or(KV_PREFIX_DEFAULT_LIMIT, |l| {
                        l.clamp(1, cfg.prefix_limit as i64) as usize
                    })
                    .min(cfg.prefix_limit);
                n["limit"] = json!(limit);
                n["keysOnly"] = json!(m.get("keysOnly").and_then(Value::as_bool).unwrap_or(false));
            }
            _ => {
                // the writes
                let k = key(m.get("key"), cfg, &at("key"))?;
                nr_keys += 1;
                if !written.insert((ns.clone(), k.clone())) {
                    return Err(bad(
                        "kv_duplicate_key_in_call",
                        format!("ops[{i}] writes {ns}/{k} a second time; a key is written at most once per call"),
                    ));
                }
                n["key"] = json!(k);
                n["required"] = json!(required);
                out.has_required |= required;
                match name {
                    "put" | "putIfAbsent" => {
                        let v = m.get("value").ok_or_else(|| {
                            bad("kv_bad_value", format!("{} is required", at("value")))
                        })?;
                        value(v, cfg, &at("value"))?;
                        n["value"] = v.clone();
                        n["ttl"] = expiry(m, &format!("ops[{i}]"))?;
                    }
                    "incr" => {
                        let delta = int(m.get("delta"), &at("delta"))?.ok_or_else(|| {
                            bad(
                                "kv_bad_field",
                                format!("{} (an integer) is required", at("delta")),
                            )
                        })?;
                        n["delta"] = json!(delta);
                        if let Some(v) = int(m.get("min"), &at("min"))? {
                            n["min"] = json!(v);
                        }
                        if let Some(v) = int(m.get("max"), &at("max"))? {
                            n["max"] = json!(v);
                        }
                        n["ttl"] = expiry(m, &format!("ops[{i}]"))?;
                    }
                    _ => {}
                }
                let expect = match m.get("expect") {
                    None => None,
                    Some(Value::Number(x)) if x.as_u64().is_some() => x.as_u64(),
                    Some(_) => {
                        return Err(bad(
                            "kv_bad_expect",
                            format!("{} must be 0 (must not exist) or a version", at("expect")),
                        ))
                    }
                };
                match (name, expect) {
                    ("incr", Some(_)) => {
                        return Err(bad(
                            "kv_bad_expect",
                            format!("ops[{i}]: incr takes no expect"),
                        ))
                    }
                    ("putIfAbsent", Some(e)) if e != 0 => {
                        return Err(bad(
                            "kv_bad_expect",
                            format!(
                            "ops[{i}]: putIfAbsent is put with expect 0; it takes no other expect"
                        ),
                        ))
                    }
                    ("putIfAbsent", _) => n["expect"] = json!(0),
                    (_, Some(e)) => n["expect"] = json!(e),
                    _ => {}
                }
            }
        }
        out.ops.push(n);
        out.kinds.push(kind);
    }
    if nr_keys > cfg.max_keys {
        return Err(bad(
            "kv_too_many_keys",
            format!("{nr_keys} keys in one call; at most {}", cfg.max_keys),
        ));
    }
    Ok(out)
}

fn namespace(m: &Map<String, Value>, at: &str) -> Result<String, ApiError> {
    let ok = |s: &str| {
        let b = s.as_bytes();
        !b.is_empty()
            && b.len() <= 64
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b".-_".contains(c))
    };
    match m.get("ns") {
        Some(Value::String(s)) if ok(s) => Ok(s.clone()),
        _ => Err(bad(
            "kv_bad_namespace",
            format!("{at} must match ^[a-z0-9][a-z0-9._-]{{0,63}}$"),
        )),
    }
}

/// A key: a non-empty string of at most `max_key_bytes` bytes.
pub fn key(v: Option<&Value>, cfg: &KvConfig, at: &str) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= cfg.max_key_bytes
                && !s.contains(['\0', '\u{10FFFF}']) =>
        {
            Ok(s.clone())
        }
        _ => Err(bad(
            "kv_bad_key",
            format!(
                "{at} must be a non-empty string of at most {} bytes, without NUL or U+10FFFF",
                cfg.max_key_bytes
            ),
        )),
    }
}

/// A value: any JSON whose compact text fits `max_value_bytes` (413 beyond)
/// and whose strings hold no NUL.
pub fn value(v: &Value, cfg: &KvConfig, at: &str) -> Result<(), ApiError> {
    let size = serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    if size > cfg.max_value_bytes {
        return Err(ApiError::Coded {
            status: 413,
            error: "payload_too_large",
            reason: "kv_value_too_large",
            detail: format!(
                "{at} is {size} bytes of JSON; at most {} (QUEEN_KV_MAX_VALUE_BYTES)",
                cfg.max_value_bytes
            ),
        });
    }
    if has_nul(v) {
        return Err(bad(
            "kv_bad_value",
            format!("{at} holds a NUL character (\\u0000), which PostgreSQL's jsonb cannot store"),
        ));
    }
    Ok(())
}

fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(m) => m.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The expiry of a write: `{ttl: seconds}` or `{ttl: null}` for `forever`.
pub fn expiry(m: &Map<String, Value>, at: &str) -> Result<Value, ApiError> {
    let ttl = m.get("ttlSeconds").filter(|v| !v.is_null());
    let forever = m.get("forever").filter(|v| !v.is_null());
    match (ttl, forever) {
        (Some(t), None) => match t.as_u64() {
            Some(s) if (1..=MAX_TTL_SECONDS).contains(&s) => Ok(json!(s)),
            _ => Err(bad(
                "kv_bad_ttl",
                format!(
                    "{at}.ttlSeconds must be a whole number of seconds in 1..={MAX_TTL_SECONDS}"
                ),
            )),
        },
        (None, Some(Value::Bool(true))) => Ok(Value::Null),
        _ => Err(bad(
            "kv_expiry_not_specified",
            format!("{at} needs exactly one of ttlSeconds (a positive integer) or forever: true"),
        )),
    }
}

fn int(v: Option<&Value>, at: &str) -> Result<Option<i64>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
        Some(_) => Err(bad("kv_bad_field", format!("{at} must be an integer"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> KvConfig {
        KvConfig::from_env(&crate::env::Env::new(&|_| None)).unwrap()
    }

    fn reason(ops: Value, in_txn: bool) -> &'static str {
        match parse(ops.as_array().unwrap(), &cfg(), in_txn) {
            Err(ApiError::Coded { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refusals_name_their_reason() {
        let put = |extra: Value| {
            let mut o = json!({"op": "put", "ns": "a", "key": "k", "value": 1});
            o.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            json!([o])
        };
        assert_eq!(reason(put(json!({})), false), "kv_expiry_not_specified");
        assert_eq!(
            reason(put(json!({"ttlSeconds": 1, "forever": true})), false),
            "kv_expiry_not_specified"
        );
        assert_eq!(reason(put(json!({"ttlSeconds": 0})), false), "kv_bad_ttl");
        assert_eq!(reason(put(json!({"ttlSeconds": 1.5})), false), "kv_bad_ttl");
        assert_eq!(
            reason(put(json!({"forever": true, "expect": -1})), false),
            "kv_bad_expect"
        );
        assert_eq!(
            reason(put(json!({"forever": true, "tenant": "x"})), false),
            "kv_tenant_not_an_input"
        );
        assert_eq!(
            reason(json!([{"op": "get", "ns": "A", "key": "k"}]), false),
            "kv_bad_namespace"
        );
        assert_eq!(
            reason(json!([{"op": "nope", "ns": "a"}]), false),
            "kv_unknown_op"
        );
        assert_eq!(
            reason(json!([{"op": "getPrefix", "ns": "a", "prefix": ""}]), false),
            "kv_prefix_required"
        );
        assert_eq!(
            reason(json!([{"op": "getPrefix", "ns": "a", "prefix": "p"}]), true),
            "kv_get_prefix_not_allowed_in_transaction"
        );
        assert_eq!(
            reason(
                json!([{"op": "delete", "ns": "a", "key": "k"}, {"op": "delete", "ns": "a", "key": "k"}]),
                false
            ),
            "kv_duplicate_key_in_call"
        );
        assert_eq!(
            reason(
                json!([{"op": "incr", "ns": "a", "key": "k", "delta": 1, "forever": true, "expect": 0}]),
                false
            ),
            "kv_bad_expect"
        );
        let many: Vec<Value> = (0..65)
            .map(|i| json!({"op": "get", "ns": "a", "key": i.to_string()}))
            .collect();
        assert_eq!(reason(Value::Array(many), true), "kv_too_many_ops");
    }

    #[test]
    fn put_if_absent_is_put_with_expect_zero() {
        let p = parse(
            json!([{"op": "putIfAbsent", "ns": "a", "key": "k", "value": {"x": 1}, "ttlSeconds": 5}])
                .as_array()
                .unwrap(),
            &cfg(),
            false,
        )
        .unwrap();
        assert_eq!(p.ops[0]["expect"], 0);
        assert_eq!(p.ops[0]["ttl"], 5);
        assert!(!p.has_required);
    }
}
