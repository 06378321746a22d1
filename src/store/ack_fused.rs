//! A fused ack batch (`Job::AckBatch`) on a DB thread: one
//! `queen.ack_typed` call for the acks of several requests, each request
//! answered from its slice; when PostgreSQL rejects the fused call, each
//! request runs again alone on the items this thread already holds, so only
//! the request PostgreSQL refuses fails and the shard keeps no copy.

use super::pooled::Conn;
use super::sql_error::classify;
use super::StoreError;
use postgres::types::Type;
use serde::Serialize;
use uuid::Uuid;

/// One validated acknowledgement (`src/api/ack.rs` checks it).
#[derive(Debug, Clone, PartialEq)]
pub struct AckItem {
    /// The message's `transactionId`.
    pub txid: String,
    /// Its partition.
    pub pid: Uuid,
    /// One of `completed`, `success`, `failed`, `dlq`, `retry`.
    pub status: &'static str,
    /// The consumer group (`__QUEUE_MODE__` for queue mode).
    pub group: String,
    /// The lease the ack is made under, if the client named one.
    pub lease: Option<Uuid>,
    /// The client's error text (failed acks).
    pub error: Option<String>,
}

/// One acknowledgement's answer, as the HTTP API gives it: `{index,
/// transactionId, partitionId, success, error, queueName, partitionName,
/// leaseReleased, dlq}` (fields in the order serde_json's sorted maps wrote
/// them before this was typed, so the bytes on the wire did not change).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AckAnswer {
    /// Went to the dead-letter queue.
    pub dlq: Option<bool>,
    /// Why the ack was refused.
    pub error: Option<String>,
    /// Position of the item in its request.
    pub index: usize,
    /// The partition's lease ended with this ack.
    #[serde(rename = "leaseReleased")]
    pub released: Option<bool>,
    /// The item's partition, as a canonical uuid.
    #[serde(rename = "partitionId")]
    pub pid: Uuid,
    /// The partition's name.
    #[serde(rename = "partitionName")]
    pub partition: Option<String>,
    /// The queue's name.
    #[serde(rename = "queueName")]
    pub queue: Option<String>,
    /// Applied.
    pub success: Option<bool>,
    /// The item's `transactionId`.
    #[serde(rename = "transactionId")]
    pub txid: String,
}

/// Runs the batch; one result per request (`counts`), in order, each
/// answer indexed within its request.
pub fn run(
    c: &mut Conn,
    tenant: &str,
    items: &[AckItem],
    counts: &[usize],
) -> Vec<Result<Vec<AckAnswer>, StoreError>> {
    match call(c, tenant, items) {
        Ok(results) => {
            let mut it = results.into_iter();
            counts
                .iter()
                .map(|&n| Ok(reindexed(it.by_ref().take(n).collect())))
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

/// A request's slice of a fused batch, indexed from 0 again.
fn reindexed(mut answers: Vec<AckAnswer>) -> Vec<AckAnswer> {
    for (i, a) in answers.iter_mut().enumerate() {
        a.index = i;
    }
    answers
}

/// The statement of one ack round trip: the items as binary arrays
/// (`queen.ack_typed`, sql/functions/ack.sql), so PostgreSQL neither reads a
/// jsonb document nor checks a uuid by regex per item.
const SQL: &str = "SELECT ok, err, qname, pname, released, dlq \
                   FROM queen.ack_typed(queen.try_uuid($1), $2, $3, $4, $5, $6, $7, false)";

/// The items as `queen.ack_typed`'s parallel arrays.
#[derive(Default)]
struct Cols<'a> {
    txid: Vec<&'a str>,
    pid: Vec<Uuid>,
    grp: Vec<&'a str>,
    status: Vec<&'a str>,
    lease: Vec<Option<Uuid>>,
    err: Vec<Option<&'a str>>,
}

fn cols(items: &[AckItem]) -> Cols<'_> {
    let mut c = Cols::default();
    for it in items {
        c.txid.push(&it.txid);
        c.pid.push(it.pid);
        c.grp.push(&it.group);
        c.status.push(it.status);
        c.lease.push(it.lease);
        c.err.push(it.error.as_deref());
    }
    c
}

/// One `queen.ack_typed` round trip; checks one result per item came back.
fn call(c: &mut Conn, tenant: &str, items: &[AckItem]) -> Result<Vec<AckAnswer>, StoreError> {
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
    answers(row, items).map_err(|e| StoreError::Db(format!("ack_typed answer: {e}")))
}

/// One answer per item from the result's arrays and the items' own ids.
fn answers(row: &postgres::Row, items: &[AckItem]) -> Result<Vec<AckAnswer>, String> {
    let n = items.len();
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
    let mut cols = (
        ok.into_iter(),
        err.into_iter(),
        qname.into_iter(),
        pname.into_iter(),
        rel.into_iter(),
        dlq.into_iter(),
    );
    Ok(items
        .iter()
        .enumerate()
        .map(|(index, it)| AckAnswer {
            dlq: cols.5.next().flatten(),
            error: cols.1.next().flatten(),
            index,
            released: cols.4.next().flatten(),
            pid: it.pid,
            partition: cols.3.next().flatten(),
            queue: cols.2.next().flatten(),
            success: cols.0.next().flatten(),
            txid: it.txid.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(index: usize, success: bool) -> AckAnswer {
        AckAnswer {
            dlq: Some(false),
            error: None,
            index,
            released: Some(true),
            pid: Uuid::nil(),
            partition: Some("p".into()),
            queue: Some("q".into()),
            success: Some(success),
            txid: format!("t{index}"),
        }
    }

    #[test]
    fn an_answer_serialises_as_the_api_gives_it() {
        let text = serde_json::to_string(&answer(3, true)).unwrap();
        assert_eq!(
            text,
            r#"{"dlq":false,"error":null,"index":3,"leaseReleased":true,"partitionId":"00000000-0000-0000-0000-000000000000","partitionName":"p","queueName":"q","success":true,"transactionId":"t3"}"#
        );
    }

    #[test]
    fn a_request_slice_is_indexed_from_zero() {
        let got = reindexed(vec![answer(5, true), answer(6, false)]);
        assert_eq!(got.iter().map(|a| a.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(got[1].txid, "t6");
    }
}
