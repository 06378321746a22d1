//! A fused ack batch (`Job::AckBatch`) on a DB thread: one
//! `queen.ack_batch` call for the acks of several requests, each request
//! answered from its slice; when PostgreSQL rejects the fused call, each
//! request runs again alone on the items this thread already holds, so only
//! the request PostgreSQL refuses fails and the shard keeps no copy.

use super::{Proc, StoreError};
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use serde_json::Value;

/// Runs the batch; one result per request (`counts`), in order.
pub fn run(
    c: &mut postgres::Client,
    tenant: &str,
    items: &[Value],
    counts: &[usize],
    classify: fn(postgres::Error) -> StoreError,
) -> Vec<Result<Vec<Value>, StoreError>> {
    match call(c, tenant, items, classify) {
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
                    let r = call(c, tenant, &items[at..at + n], classify);
                    at += n;
                    r
                })
                .collect()
        }
        Err(e) => counts.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// One `queen.ack_batch` round trip; checks one result per item came back.
fn call(
    c: &mut postgres::Client,
    tenant: &str,
    items: &[Value],
    classify: fn(postgres::Error) -> StoreError,
) -> Result<Vec<Value>, StoreError> {
    let arg = Arg {
        tenant,
        txn: false,
        items,
    };
    let rows = c
        .query_typed(Proc::AckBatch.sql(), &[(&arg, Type::JSONB)])
        .map_err(classify)?;
    match rows.first().map(|r| r.try_get::<_, Value>(0)) {
        Some(Ok(Value::Array(a))) if a.len() == items.len() => Ok(a),
        other => Err(StoreError::Db(format!(
            "ack_batch returned an unexpected shape: {}",
            format!("{other:?}").chars().take(200).collect::<String>()
        ))),
    }
}

/// `queen.ack_batch`'s argument, serialised straight from the borrowed
/// items (a retry of one request's slice copies nothing).
#[derive(Debug, serde::Serialize)]
struct Arg<'a> {
    tenant: &'a str,
    txn: bool,
    items: &'a [Value],
}

impl ToSql for Arg<'_> {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use bytes::BufMut;
        out.put_u8(1); // jsonb binary format version
        let mut w = out.writer();
        serde_json::to_writer(&mut w, self)?;
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB
    }
    to_sql_checked!();
}
