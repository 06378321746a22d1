//! `POST /api/v1/transaction` (http-api.md §7): pushes and acks applied in
//! one PostgreSQL transaction by `queen.transaction`, all or nothing.
//!
//! Shape errors (no `operations`, an item without a queue) are 400s. An
//! unknown operation type, an expired `requiredLeases` entry or a refused
//! ack fail the transaction as a whole: 200 with `success: false` and
//! nothing applied (the procedure raises, PostgreSQL rolls back).

use super::ack::{self, parse_ack};
use super::reply::ok_json;
use super::{params, push_items};
use crate::error::ApiError;
use crate::ids::uuid_v7;
use crate::mesh::Notice;
use crate::shard::Shard;
use crate::store::{Proc, StoreError};
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::collections::BTreeSet;
use std::rc::Rc;

/// Most operations in one transaction.
const MAX_OPERATIONS: usize = 10_000;

fn refused(error: impl Into<String>) -> Response {
    ok_json(&json!({ "success": false, "error": error.into(), "results": [] }))
}

/// Handles `POST /api/v1/transaction`.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::object_body(req)?;
    let Some(Value::Array(ops)) = body.get("operations") else {
        return Err(ApiError::BadRequest("operations array required".into()));
    };
    // KV riders (§15): validated whole here, applied by queen.transaction after
    // the operations, in the same PostgreSQL transaction.
    let kv = super::kv::txn_riders(shard, body.get("kv"))?;
    if ops.is_empty() && kv.ops.is_empty() {
        return Err(ApiError::BadRequest(
            "operations array cannot be empty".into(),
        ));
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(ApiError::BadRequest(format!(
            "operations must hold at most {MAX_OPERATIONS} entries"
        )));
    }
    let leases: Vec<String> = match body.get("requiredLeases") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|l| {
                l.as_str().map(str::to_string).ok_or_else(|| {
                    ApiError::BadRequest("requiredLeases must be an array of strings".into())
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "requiredLeases must be an array of strings".into(),
            ))
        }
    };
    if leases.iter().any(|l| !crate::ids::is_uuid(l)) {
        return Ok(refused("Invalid or expired lease"));
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let mut operations = Vec::with_capacity(ops.len());
    let mut queues = BTreeSet::new();
    for (i, op) in ops.iter().enumerate() {
        let Value::Object(m) = op else {
            return Err(ApiError::BadRequest(format!(
                "operations[{i}] must be an object"
            )));
        };
        match m.get("type").and_then(Value::as_str) {
            Some("push") => {
                let Some(Value::Array(items)) = m.get("items") else {
                    return Err(ApiError::BadRequest(format!(
                        "operations[{i}].items array is required"
                    )));
                };
                let mut items = push_items::from_values(items.clone())?;
                super::seal::seal(shard, req, &tenant, &mut items).await;
                queues.extend(items.iter().map(|it| it.queue.clone()));
                operations.push(json!({ "type": "push", "items": items }));
            }
            Some("ack") => {
                let a = parse_ack(m, None, &format!("operations[{i}]."))?;
                operations.push(ack::txn_operation(&a));
            }
            Some(other) => return Ok(refused(format!("Unknown operation type: {other}"))),
            None => return Ok(refused(format!("operations[{i}].type is required"))),
        }
    }
    let mut arg = json!({ "tenant": tenant, "requiredLeases": leases, "operations": operations });
    if !kv.ops.is_empty() {
        arg["kv"] = Value::Array(kv.ops);
        arg["kvMaxRead"] = json!(shard.cfg.kv.max_read_bytes);
    }
    match shard.db.call(Proc::Transaction, arg).await {
        Ok(mut r) => {
            for k in kv.kinds {
                shard.counters.kv_op(k);
            }
            shard
                .counters
                .transaction(queues.iter().map(String::as_str));
            for q in queues {
                shard.notify(Notice::Pushed { queue: q });
            }
            if let Value::Object(o) = &mut r {
                o.insert("transactionId".into(), json!(uuid_v7()));
                o.entry("success").or_insert(json!(true));
            }
            Ok(ok_json(&r))
        }
        Err(StoreError::Db(m)) => Ok(super::kv::txn_precondition(&m).unwrap_or_else(|| refused(m))),
        Err(e) => Err(e.into()),
    }
}
