//! A fused ack batch (`Job::AckBatch`) on a DB thread: one
//! `queen.ack_typed` call for the acks of several requests, each request
//! answered from its slice; when PostgreSQL rejects the fused call, each
//! request runs again alone on the items this thread already holds, so only
//! the request PostgreSQL refuses fails and the shard keeps no copy.

use super::pooled::Conn;
use super::sql_error::classify;
use super::StoreError;
use postgres::types::Type;
use serde_json::Value;
use uuid::Uuid;

/// Runs the batch; one result per request (`counts`), in order.
pub fn run(
    c: &mut Conn,
    tenant: &str,
    items: &[Value],
    counts: &[usize],
) -> Vec<Result<Vec<Value>, StoreError>> {
    match call(c, tenant, items) {
        Ok(results) => {
            let mut it = results.into_iter();
            counts
                .iter()
                .map(|&n| Ok(it.by_ref().take(n).collect()))
                .collect()
        }
        Err(StoreError::Db(why)) if counts.len() > 1 => {
            log::debug!("ack lane: fused batch refused ({why}); retrying request by request");
            let mut at = 0;
            counts
                .iter()
                .map(|&n| {
                    let r = call(c, tenant, &items[at..at + n]);
                    at += n;
                    r
                })
                .collect()
        }
        Err(e) => counts.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// The statement of one ack round trip: the items as binary arrays
/// (`queen.ack_typed`, sql/functions/ack.sql), so PostgreSQL neither reads a
/// jsonb document nor checks a uuid by regex per item.
const SQL: &str = "SELECT ok, err, qname, pname, released, dlq \
                   FROM queen.ack_typed(queen.try_uuid($1), $2, $3, $4, $5, $6, $7, false)";

/// The group of an item that names none (`src/api/ack.rs` always names one).
const QUEUE_MODE: &str = "__QUEUE_MODE__";

/// The items as `queen.ack_typed`'s parallel arrays (the shard validated
/// them: `src/api/ack.rs`; a partition or lease id that is not a uuid goes
/// as NULL, as `queen.try_uuid` would make it).
#[derive(Default)]
struct Cols<'a> {
    txid: Vec<Option<&'a str>>,
    pid: Vec<Option<Uuid>>,
    grp: Vec<&'a str>,
    status: Vec<String>,
    lease: Vec<Option<Uuid>>,
    err: Vec<Option<&'a str>>,
}

fn cols(items: &[Value]) -> Cols<'_> {
    let mut c = Cols::default();
    for it in items {
        let s = |k: &str| it.get(k).and_then(Value::as_str);
        let id = |k: &str| s(k).and_then(|t| Uuid::parse_str(t).ok());
        c.txid.push(s("transactionId"));
        c.pid.push(id("partitionId"));
        c.grp
            .push(s("group").filter(|g| !g.is_empty()).unwrap_or(QUEUE_MODE));
        c.status
            .push(s("status").unwrap_or("completed").to_ascii_lowercase());
        c.lease.push(id("leaseId"));
        c.err.push(s("error"));
    }
    c
}

/// One `queen.ack_typed` round trip; checks one result per item came back.
fn call(c: &mut Conn, tenant: &str, items: &[Value]) -> Result<Vec<Value>, StoreError> {
    let a = cols(items);
    let rows = c
        .query_prepared(
            SQL,
            &[
                (&tenant, Type::TEXT),
                (&a.txid, Type::TEXT_ARRAY),
                (&a.pid, Type::UUID_ARRAY),
                (&a.grp, Type::TEXT_ARRAY),
                (&a.status, Type::TEXT_ARRAY),
                (&a.lease, Type::UUID_ARRAY),
                (&a.err, Type::TEXT_ARRAY),
            ],
        )
        .map_err(classify)?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Db("ack_typed: no result row".into()))?;
    answers(row, &a).map_err(|e| StoreError::Db(format!("ack_typed answer: {e}")))
}

/// One answer per item, as `queen.ack_items` gives it: `{index,
/// transactionId, partitionId, success, error, queueName, partitionName,
/// leaseReleased, dlq}` from the answer's arrays and the items' own ids.
fn answers(row: &postgres::Row, a: &Cols<'_>) -> Result<Vec<Value>, String> {
    let n = a.txid.len();
    let flags = |i| {
        row.try_get::<_, Vec<Option<bool>>>(i)
            .map_err(|e| e.to_string())
    };
    let texts = |i| {
        row.try_get::<_, Vec<Option<String>>>(i)
            .map_err(|e| e.to_string())
    };
    let (ok, err, qname, pname) = (flags(0)?, texts(1)?, texts(2)?, texts(3)?);
    let (rel, dlq) = (flags(4)?, flags(5)?);
    let lens = [
        ok.len(),
        err.len(),
        qname.len(),
        pname.len(),
        rel.len(),
        dlq.len(),
    ];
    if lens.iter().any(|&l| l != n) {
        return Err(format!("{lens:?} answers for {n} items"));
    }
    let s = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
    Ok((0..n)
        .map(|i| {
            serde_json::json!({
                "index": i,
                "transactionId": a.txid[i],
                "partitionId": a.pid[i].map(|u| u.hyphenated().to_string()),
                "success": ok[i],
                "error": s(&err[i]),
                "queueName": s(&qname[i]),
                "partitionName": s(&pname[i]),
                "leaseReleased": rel[i],
                "dlq": dlq[i],
            })
        })
        .collect())
}
