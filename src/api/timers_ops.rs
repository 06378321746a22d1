//! Validation of timer ops (http-api.md §16): what `POST /api/v1/timers` and
//! the cancel route accept, every refusal with its named code, before
//! anything reaches PostgreSQL. Pure; runs on the shards. The handlers are
//! `timers.rs`.
//!
//! Refusals (decisions where §16 is silent, marked *):
//! - 400 `timers_bad_request` with a `reason`: `timers_server_owned_field`
//!   (the §16 list and any field starting with `_`), `timers_unknown_field`*
//!   (a field no op of that kind takes: a typo must not be a silent drop),
//!   `timers_unknown_op`, `timers_missing_field` (`schedule` without `txn`,
//!   a schedule without `payload` or `delayMs`), `timers_bad_field` (wrong
//!   type, empty or over-long names: queue and partition as push, timer key
//!   and txn at most 512 bytes*, no NUL), `timers_bad_payload` (not base64,
//!   or not JSON once decoded*: the delivered message's data is that JSON),
//!   `timers_zstd_unsupported`* (`payloadZstd: true`: this broker has no
//!   zstd, and storing bytes it cannot turn into the message would only fail
//!   at fire time), `timers_duplicate_key_in_call`, `timers_too_many_ops`,
//!   `timers_tenant_not_an_input` (a top-level `tenant`).
//! - 413 `payload_too_large` (reason `timers_payload_too_large`): decoded
//!   payload over the limit.
//! - 403 `timer_horizon_exceeded` (reason the same): `delayMs` past the horizon. A negative
//!   delay is legal (fires on the next round); one below minus the horizon
//!   is raised to it, which changes nothing (it is due either way).

use crate::config::TimersConfig;
use crate::error::ApiError;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Longest timer key and txn, bytes (as push's transactionId).
pub const MAX_KEY_BYTES: usize = 512;

/// Fields the server owns (http-api.md §16), refused in any op.
const SERVER_OWNED: &[&str] = &[
    "producerSub",
    "producer_sub",
    "messageId",
    "message_id",
    "tenant",
    "tenantId",
    "tenant_id",
    "deliverAt",
    "deliver_at",
    "delaySeconds",
    "delay_seconds",
    "attempts",
    "claimToken",
    "claim_token",
    "claimedUntil",
];

/// What an op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `schedule`: the upsert, `txn` required.
    Schedule,
    /// `reschedule`: the same upsert; without `txn` the stored one stays.
    Reschedule,
    /// `cancel`.
    Cancel,
}

impl OpKind {
    /// The op's wire name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Schedule => "schedule",
            OpKind::Reschedule => "reschedule",
            OpKind::Cancel => "cancel",
        }
    }
}

/// One validated op.
#[derive(Debug, Clone)]
pub struct TimerOp {
    /// Schedule, reschedule or cancel.
    pub kind: OpKind,
    /// Destination queue.
    pub queue: String,
    /// The timer's key within the queue.
    pub key: String,
    /// Destination partition (schedules; `None` = `Default`).
    pub partition: Option<String>,
    /// The decoded payload bytes (schedules), valid JSON.
    pub payload: Option<Vec<u8>>,
    /// Delay from now, ms (schedules), within the horizon.
    pub delay_ms: i64,
    /// The future message's transaction id (required for `schedule`).
    pub txn: Option<String>,
}

/// A 400 `timers_bad_request` with `reason`.
pub fn bad(reason: &'static str, detail: impl Into<String>) -> ApiError {
    ApiError::Coded {
        status: 400,
        error: "timers_bad_request",
        reason,
        detail: detail.into(),
    }
}

/// The ops of a `POST /api/v1/timers` body (`{operations: [...]}` or a bare
/// array), validated; an empty list is fine (answered `{results: []}`).
pub fn parse_batch(body: Value, cfg: &TimersConfig) -> Result<Vec<TimerOp>, ApiError> {
    let raw = match body {
        Value::Array(a) => a,
        Value::Object(mut m) => {
            if let Some(f) = ["tenant", "tenantId", "tenant_id"]
                .iter()
                .find(|f| m.contains_key(**f))
            {
                return Err(bad(
                    "timers_tenant_not_an_input",
                    format!("`{f}` is never accepted: the tenant comes from the request"),
                ));
            }
            match m.remove("operations") {
                Some(Value::Array(a)) => a,
                _ => {
                    return Err(bad(
                        "timers_missing_field",
                        "operations (array) is required",
                    ))
                }
            }
        }
        _ => return Err(bad("timers_bad_field", "the body must be a JSON object")),
    };
    if raw.len() > cfg.max_ops_per_call {
        return Err(bad(
            "timers_too_many_ops",
            format!(
                "{} operations; at most {} per call",
                raw.len(),
                cfg.max_ops_per_call
            ),
        ));
    }
    let ops = raw
        .into_iter()
        .enumerate()
        .map(|(i, v)| parse_op(v, i, cfg))
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        if !seen.insert((op.queue.as_str(), op.key.as_str())) {
            return Err(bad(
                "timers_duplicate_key_in_call",
                format!("operations[{i}]: (queue, timerKey) appears twice in one call"),
            ));
        }
    }
    Ok(ops)
}

/// A cancel op from the route's path and `?txn=`.
pub fn cancel_op(queue: &str, key: &str, txn: Option<String>) -> Result<TimerOp, ApiError> {
    check_name(queue, "queue", 0)?;
    check_key(key, "timerKey", 0)?;
    if let Some(t) = &txn {
        check_key(t, "txn", 0)?;
    }
    Ok(TimerOp {
        kind: OpKind::Cancel,
        queue: queue.to_string(),
        key: key.to_string(),
        partition: None,
        payload: None,
        delay_ms: 0,
        txn,
    })
}

fn parse_op(v: Value, i: usize, cfg: &TimersConfig) -> Result<TimerOp, ApiError> {
    let Value::Object(m) = v else {
        return Err(bad(
            "timers_bad_field",
            format!("operations[{i}] must be an object"),
        ));
    };
    for k in m.keys() {
        if SERVER_OWNED.contains(&k.as_str()) || k.starts_with('_') {
            return Err(bad(
                "timers_server_owned_field",
                format!("operations[{i}].{k} is server-owned and cannot be supplied"),
            ));
        }
    }
    let kind = match m.get("op").and_then(Value::as_str) {
        Some("schedule") => OpKind::Schedule,
        Some("reschedule") => OpKind::Reschedule,
        Some("cancel") => OpKind::Cancel,
        _ => {
            return Err(bad(
                "timers_unknown_op",
                format!("operations[{i}].op must be schedule, reschedule or cancel"),
            ))
        }
    };
    let allowed: &[&str] = match kind {
        OpKind::Cancel => &["op", "queue", "timerKey", "txn"],
        _ => &[
            "op",
            "queue",
            "timerKey",
            "payload",
            "delayMs",
            "txn",
            "partition",
            "payloadZstd",
        ],
    };
    if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            "timers_unknown_field",
            format!("operations[{i}].{k} is not a field of {}", kind.name()),
        ));
    }
    let queue = req_str(&m, "queue", i)?;
    check_name(queue, "queue", i)?;
    let key = req_str(&m, "timerKey", i)?;
    check_key(key, "timerKey", i)?;
    let txn = opt_str(&m, "txn", i)?;
    if let Some(t) = txn {
        check_key(t, "txn", i)?;
    }
    let mut op = TimerOp {
        kind,
        queue: queue.to_string(),
        key: key.to_string(),
        partition: None,
        payload: None,
        delay_ms: 0,
        txn: txn.map(str::to_string),
    };
    if kind == OpKind::Cancel {
        return Ok(op);
    }
    if kind == OpKind::Schedule && op.txn.is_none() {
        return Err(bad(
            "timers_missing_field",
            format!("operations[{i}].txn is required for schedule"),
        ));
    }
    if let Some(p) = opt_str(&m, "partition", i)? {
        check_name(p, "partition", i)?;
        op.partition = Some(p.to_string());
    }
    match m.get("payloadZstd") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(bad(
                "timers_zstd_unsupported",
                format!(
                    "operations[{i}].payloadZstd: this broker stores uncompressed payloads only"
                ),
            ))
        }
        Some(_) => {
            return Err(bad(
                "timers_bad_field",
                format!("operations[{i}].payloadZstd must be a boolean"),
            ))
        }
    }
    op.delay_ms = delay_ms(&m, i, cfg)?;
    op.payload = Some(payload(&m, i, cfg)?);
    Ok(op)
}

fn delay_ms(m: &Map<String, Value>, i: usize, cfg: &TimersConfig) -> Result<i64, ApiError> {
    let d = match m.get("delayMs") {
        None | Some(Value::Null) => {
            return Err(bad(
                "timers_missing_field",
                format!("operations[{i}].delayMs is required"),
            ))
        }
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Some(_) => None,
    };
    let Some(d) = d else {
        return Err(bad(
            "timers_bad_field",
            format!("operations[{i}].delayMs must be an integer number of milliseconds"),
        ));
    };
    let max = cfg.max_delay_ms();
    if d > max {
        return Err(ApiError::Coded {
            status: 403,
            error: "timer_horizon_exceeded",
            reason: "timer_horizon_exceeded",
            detail: format!(
                "operations[{i}].delayMs {d} is beyond the horizon of {} s",
                cfg.max_horizon_s
            ),
        });
    }
    Ok(d.max(-max))
}

fn payload(m: &Map<String, Value>, i: usize, cfg: &TimersConfig) -> Result<Vec<u8>, ApiError> {
    let Some(text) = m.get("payload").and_then(Value::as_str) else {
        return Err(bad(
            "timers_missing_field",
            format!("operations[{i}].payload (base64 string) is required"),
        ));
    };
    // a cheap bound before decoding: base64 holds 3 bytes per 4 characters
    if text.len() / 4 * 3 > cfg.max_payload_bytes + 3 {
        return Err(too_large(i, cfg));
    }
    let bytes = B64.decode(text.trim()).map_err(|_| {
        bad(
            "timers_bad_payload",
            format!("operations[{i}].payload is not base64"),
        )
    })?;
    if bytes.len() > cfg.max_payload_bytes {
        return Err(too_large(i, cfg));
    }
    let json: Value = serde_json::from_slice(&bytes).map_err(|_| {
        bad(
            "timers_bad_payload",
            format!("operations[{i}].payload does not decode to JSON"),
        )
    })?;
    super::params::check_storable(&json, "payload")
        .map_err(|e| bad("timers_bad_payload", format!("operations[{i}]: {e}")))?;
    Ok(bytes)
}

fn too_large(i: usize, cfg: &TimersConfig) -> ApiError {
    ApiError::Coded {
        status: 413,
        error: "payload_too_large",
        reason: "timers_payload_too_large",
        detail: format!(
            "operations[{i}].payload is over {} bytes",
            cfg.max_payload_bytes
        ),
    }
}

fn req_str<'a>(m: &'a Map<String, Value>, f: &str, i: usize) -> Result<&'a str, ApiError> {
    match m.get(f) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(bad(
            "timers_missing_field",
            format!("operations[{i}].{f} is required"),
        )),
        Some(_) => Err(bad(
            "timers_bad_field",
            format!("operations[{i}].{f} must be a string"),
        )),
    }
}

fn opt_str<'a>(m: &'a Map<String, Value>, f: &str, i: usize) -> Result<Option<&'a str>, ApiError> {
    match m.get(f) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(
            "timers_bad_field",
            format!("operations[{i}].{f} must be a string"),
        )),
    }
}

fn check_name(v: &str, f: &str, i: usize) -> Result<(), ApiError> {
    super::params::check_name(v, f)
        .map_err(|e| bad("timers_bad_field", format!("operations[{i}]: {e}")))
}

fn check_key(v: &str, f: &str, i: usize) -> Result<(), ApiError> {
    if v.is_empty() || v.len() > MAX_KEY_BYTES || v.contains('\0') {
        return Err(bad(
            "timers_bad_field",
            format!("operations[{i}].{f} must be 1 to {MAX_KEY_BYTES} bytes without \\u0000"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> TimersConfig {
        let lookup = |_: &str| None;
        TimersConfig::from_env(&crate::env::Env::new(&lookup)).unwrap()
    }

    fn code(r: Result<Vec<TimerOp>, ApiError>) -> (u16, &'static str, &'static str) {
        match r {
            Err(ApiError::Coded {
                status,
                error,
                reason,
                ..
            }) => (status, error, reason),
            other => panic!("expected a coded refusal, got {other:?}"),
        }
    }

    fn sched(extra: Value) -> Value {
        let mut op = json!({"op": "schedule", "queue": "q", "timerKey": "k",
                            "payload": B64.encode(b"{\"a\":1}"), "delayMs": 10, "txn": "t"});
        for (k, v) in extra.as_object().unwrap() {
            op[k] = v.clone();
        }
        op
    }

    #[test]
    fn a_valid_batch_parses() {
        let ops = parse_batch(
            json!({"operations": [sched(json!({})),
            {"op": "cancel", "queue": "q", "timerKey": "other"}]}),
            &cfg(),
        )
        .unwrap();
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].payload.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(ops[1].kind, OpKind::Cancel);
    }

    #[test]
    fn every_refusal_has_its_code() {
        let c = cfg();
        let b = |op: Value| parse_batch(json!({ "operations": [op] }), &c);
        let r400 = |reason| (400, "timers_bad_request", reason);
        for f in SERVER_OWNED.iter().chain(&["_x"]) {
            assert_eq!(
                code(b(sched(json!({ *f: 1 })))),
                r400("timers_server_owned_field"),
                "{f}"
            );
        }
        assert_eq!(
            code(b(sched(json!({"bogus": 1})))),
            r400("timers_unknown_field")
        );
        assert_eq!(
            code(b(sched(json!({"op": "fire"})))),
            r400("timers_unknown_op")
        );
        assert_eq!(
            code(b(sched(json!({"txn": null})))),
            r400("timers_missing_field")
        );
        assert_eq!(
            code(b(sched(json!({"payloadZstd": true})))),
            r400("timers_zstd_unsupported")
        );
        assert_eq!(
            code(b(sched(json!({"payload": "%%%"})))),
            r400("timers_bad_payload")
        );
        let not_json = B64.encode(b"not json");
        assert_eq!(
            code(b(sched(json!({ "payload": not_json })))),
            r400("timers_bad_payload")
        );
        assert_eq!(
            code(b(sched(json!({"delayMs": "5"})))),
            r400("timers_bad_field")
        );
        assert_eq!(
            code(b(sched(json!({"timerKey": ""})))),
            r400("timers_bad_field")
        );
        assert_eq!(
            code(b(sched(json!({"delayMs": 7_776_000_001i64})))),
            (403, "timer_horizon_exceeded", "timer_horizon_exceeded")
        );
        let big = B64.encode(vec![b' '; c.max_payload_bytes + 1]);
        assert_eq!(
            code(b(sched(json!({ "payload": big })))),
            (413, "payload_too_large", "timers_payload_too_large")
        );
        let dup = json!({"operations": [sched(json!({})), sched(json!({}))]});
        assert_eq!(
            code(parse_batch(dup, &c)),
            r400("timers_duplicate_key_in_call")
        );
        let many: Vec<Value> = (0..=c.max_ops_per_call)
            .map(|n| sched(json!({ "timerKey": n.to_string() })))
            .collect();
        assert_eq!(
            code(parse_batch(json!({ "operations": many }), &c)),
            r400("timers_too_many_ops")
        );
        let tenant = json!({"tenant": "x", "operations": []});
        assert_eq!(
            code(parse_batch(tenant, &c)),
            r400("timers_tenant_not_an_input")
        );
    }

    #[test]
    fn a_past_delay_is_legal_and_bounded() {
        let ops = parse_batch(json!([sched(json!({"delayMs": i64::MIN / 2}))]), &cfg()).unwrap();
        assert_eq!(ops[0].delay_ms, -cfg().max_delay_ms());
    }
}
