//! One push batch as one round trip: the items go to PostgreSQL as one typed
//! array per column, and its compact answer is expanded here into one typed
//! [`Pushed`] per item, which the push endpoint serialises.
//!
//! Runs on the DB threads. Why typed arrays: with one jsonb document
//! PostgreSQL parsed every id, transaction id and name of every item as JSON
//! and then pulled each back out as text and cast it; with binary `uuid[]`,
//! `text[]` and `jsonb[]` parameters it only parses the payloads. The broker
//! also sends the distinct (queue, partition) pairs once, with an index per
//! item, so PostgreSQL joins nothing per item to find its partition. The
//! answer carries only what the broker does not know: the ids of each pair
//! and, for the items not inserted, the id of the message already there.

use super::payload::Payload;
use super::pooled::{Conn, Params};
use super::sql_error::classify;
use super::{PushItem, PushStatus, Pushed, StoreError};
use postgres::types::{ToSql, Type};
use std::collections::HashMap;
use uuid::Uuid;

/// The statement a push batch runs (`queen.push_typed`, sql/functions/push.sql).
const SQL: &str = "SELECT pids, dup_ord, dup_id \
                   FROM queen.push_typed($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// [`SQL`]'s parameter types, in order: tenant, then the columns.
const TYPES: [Type; 10] = [
    Type::UUID,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT4_ARRAY,
    Type::UUID_ARRAY,
    Type::TEXT_ARRAY,
    Type::UUID_ARRAY,
    Type::JSONB_ARRAY,
    Type::BOOL_ARRAY,
    Type::TEXT_ARRAY,
];

/// The batch's columns, borrowed from its items.
#[derive(Debug, Default)]
struct Columns<'a> {
    /// Distinct queue names, one per pair, in first-seen order.
    qn: Vec<&'a str>,
    /// Distinct partition names, parallel to `qn`.
    pn: Vec<&'a str>,
    /// Each item's pair, 1-based.
    pair: Vec<i32>,
    id: Vec<Uuid>,
    txid: Vec<&'a str>,
    trace: Vec<Option<Uuid>>,
    /// The payloads' JSON text, sent as it came (jsonb's binary input is a
    /// version byte and the text).
    payload: Vec<&'a Payload>,
    enc: Vec<bool>,
    sub: Vec<Option<&'a str>>,
}

/// Splits `items` into columns.
fn columns(items: &[PushItem]) -> Columns<'_> {
    let n = items.len();
    let mut c = Columns {
        pair: Vec::with_capacity(n),
        id: Vec::with_capacity(n),
        txid: Vec::with_capacity(n),
        trace: Vec::with_capacity(n),
        payload: Vec::with_capacity(n),
        enc: Vec::with_capacity(n),
        sub: Vec::with_capacity(n),
        ..Columns::default()
    };
    let mut pairs: HashMap<(&str, &str), i32> = HashMap::new();
    for item in items {
        let (queue, part) = (item.queue.as_str(), item.partition.as_str());
        let k = *pairs.entry((queue, part)).or_insert_with(|| {
            c.qn.push(queue);
            c.pn.push(part);
            c.qn.len() as i32
        });
        c.pair.push(k);
        c.id.push(item.id);
        c.txid.push(&item.txid);
        c.trace.push(item.trace);
        c.payload.push(&item.payload);
        c.enc.push(item.encrypted);
        c.sub.push(item.sub.as_deref());
    }
    c
}

/// What `queen.push_typed` answered.
#[derive(Debug)]
struct Answer {
    /// Partition id per pair.
    pids: Vec<Uuid>,
    /// 1-based indexes of the items not inserted.
    dup_ord: Vec<i32>,
    /// The message already holding each one's transaction id (None: vanished).
    dup_id: Vec<Option<Uuid>>,
}

/// Payload bytes above which a batch goes as several statements in one
/// transaction. Why: tokio-postgres encodes each statement into a buffer of
/// the connection's and copies it into the socket's write buffer, and both
/// keep the size of the largest statement the connection ever sent. One
/// 32 MiB request cost 64 MiB more, for as long as its connection lived
/// (bench/rss.sh bigpush); in pieces it costs twice a piece.
pub const PIECE_BYTES: usize = 1 << 20;

/// Pushes `items` for `tenant` in one transaction; one answer per item, in
/// order. A batch up to [`PIECE_BYTES`] of payload is one round trip; a
/// larger one is `BEGIN`, one statement per piece, `COMMIT` (a later piece
/// sees the earlier pieces' rows, so duplicates across them are found as
/// within one statement).
pub fn call(c: &mut Conn, tenant: &str, items: &[PushItem]) -> Result<Vec<Pushed>, StoreError> {
    let pieces = pieces(items, PIECE_BYTES);
    if pieces.len() <= 1 {
        return statement(|p| c.query_prepared(SQL, p), tenant, items);
    }
    let types: Vec<Type> = TYPES.to_vec();
    let stmt = c.prepared(SQL, &types).map_err(classify)?;
    let mut tx = c.transaction().map_err(classify)?;
    let mut out = Vec::with_capacity(items.len());
    for piece in pieces {
        let run = |p: &Params<'_>| {
            let values: Vec<&(dyn ToSql + Sync)> = p.iter().map(|(v, _)| *v).collect();
            tx.query(&stmt, &values)
        };
        out.extend(statement(run, tenant, piece)?);
    }
    tx.commit().map_err(classify)?;
    Ok(out)
}

/// `items` cut, in order, into runs of at most `max` payload bytes (a
/// single larger item is a run of its own).
fn pieces(items: &[PushItem], max: usize) -> Vec<&[PushItem]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let n = item.payload.len();
        if i > start && bytes + n > max {
            out.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += n;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// One `queen.push_typed` statement for `items` (its own transaction unless
/// `c` is in one).
fn statement(
    run: impl FnOnce(&Params<'_>) -> Result<Vec<postgres::Row>, postgres::Error>,
    tenant: &str,
    items: &[PushItem],
) -> Result<Vec<Pushed>, StoreError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let cols = columns(items);
    let tenant = Uuid::parse_str(tenant).ok();
    let values: [&(dyn ToSql + Sync); 10] = [
        &tenant,
        &cols.qn,
        &cols.pn,
        &cols.pair,
        &cols.id,
        &cols.txid,
        &cols.trace,
        &cols.payload,
        &cols.enc,
        &cols.sub,
    ];
    let params: Vec<(&(dyn ToSql + Sync), Type)> = values.into_iter().zip(TYPES).collect();
    let rows = run(&params).map_err(classify)?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Db("push_typed: no result row".into()))?;
    let shape = |e: postgres::Error| StoreError::Db(format!("push_typed answer: {e}"));
    let answer = Answer {
        pids: row
            .try_get::<_, Option<_>>(0)
            .map_err(shape)?
            .unwrap_or_default(),
        dup_ord: row
            .try_get::<_, Option<_>>(1)
            .map_err(shape)?
            .unwrap_or_default(),
        dup_id: row
            .try_get::<_, Option<_>>(2)
            .map_err(shape)?
            .unwrap_or_default(),
    };
    expand(&cols, &answer).map_err(|why| StoreError::Db(format!("push_typed: {why}")))
}

/// One answer per item from PostgreSQL's.
fn expand(cols: &Columns<'_>, a: &Answer) -> Result<Vec<Pushed>, String> {
    if a.pids.len() != cols.qn.len() {
        return Err(format!(
            "{} partition ids for {} pairs",
            a.pids.len(),
            cols.qn.len()
        ));
    }
    let mut out: Vec<Pushed> = cols
        .pair
        .iter()
        .zip(&cols.id)
        .zip(&cols.trace)
        .map(|((k, id), trace)| Pushed {
            status: PushStatus::Queued,
            message_id: Some(*id),
            // pair indexes are 1..=pairs: made by `columns`
            partition_id: Some(a.pids[*k as usize - 1]),
            trace_id: *trace,
        })
        .collect();
    for (ord, existing) in a.dup_ord.iter().zip(&a.dup_id) {
        let slot = usize::try_from(*ord - 1)
            .ok()
            .and_then(|i| out.get_mut(i))
            .ok_or_else(|| format!("bad duplicate index {ord}"))?;
        slot.status = PushStatus::Duplicate;
        slot.message_id = *existing;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const I0: &str = "0193a000-0000-7000-8000-000000000010";
    const I1: &str = "0193a000-0000-7000-8000-000000000011";
    const I2: &str = "0193a000-0000-7000-8000-000000000012";

    fn items() -> Vec<PushItem> {
        let v = vec![
            json!({"queue": "q", "partition": "a", "id": I0, "txid": "t0", "traceId": null,
                   "payload": {"x": 1}}),
            json!({"queue": "q", "partition": "b", "id": I1, "txid": "t1",
                   "traceId": "0193A000-0000-7000-8000-000000000001", "payload": 2}),
            json!({"queue": "q", "partition": "a", "id": I2, "txid": "t2"}),
        ];
        v.into_iter()
            .map(|i| serde_json::from_value(i).unwrap())
            .collect()
    }

    #[test]
    fn items_share_their_pair_and_keep_their_columns() {
        let items = items();
        let c = columns(&items);
        assert_eq!(c.qn, ["q", "q"]);
        assert_eq!(c.pn, ["a", "b"]);
        assert_eq!(c.pair, [1, 2, 1]);
        assert_eq!(c.txid, ["t0", "t1", "t2"]);
        assert_eq!(c.payload[0].as_bytes(), br#"{"x":1}"#);
        assert_eq!(c.payload[2].as_bytes(), b"null");
        assert!(c.trace[1].is_some() && c.trace[0].is_none());
    }

    #[test]
    fn a_batch_is_cut_into_pieces_by_payload_bytes_in_order() {
        let items = items(); // payloads of 7, 1 and 4 bytes
        let lens = |p: Vec<&[PushItem]>| p.iter().map(|s| s.len()).collect::<Vec<_>>();
        assert_eq!(lens(pieces(&items, 1 << 20)), [3]);
        assert_eq!(lens(pieces(&items, 8)), [2, 1]);
        assert_eq!(lens(pieces(&items, 2)), [1, 1, 1]);
        assert_eq!(lens(pieces(&items[..0], 8)), Vec::<usize>::new());
    }

    #[test]
    fn inserted_and_duplicate_items_get_their_answers_in_order() {
        let items = items();
        let c = columns(&items);
        let (pa, pb, old) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(4));
        let a = Answer {
            pids: vec![pa, pb],
            dup_ord: vec![2],
            dup_id: vec![Some(old)],
        };
        let r = expand(&c, &a).unwrap();
        let id = |s: &str| Some(Uuid::parse_str(s).unwrap());
        assert_eq!(r[0].status, PushStatus::Queued);
        assert_eq!(r[0].message_id, id(I0));
        assert_eq!(r[0].partition_id, Some(pa));
        assert_eq!(r[1].status, PushStatus::Duplicate);
        assert_eq!(r[1].message_id, Some(old));
        assert_eq!(r[1].partition_id, Some(pb));
        assert_eq!(r[1].trace_id, id("0193a000-0000-7000-8000-000000000001"));
        assert_eq!(r[2].status, PushStatus::Queued);
        assert_eq!(r[2].message_id, id(I2));
        assert_eq!(r[2].partition_id, Some(pa));
        assert_eq!(r[2].trace_id, None);
    }

    #[test]
    fn an_answer_missing_a_pair_or_with_a_bad_index_is_an_error() {
        let items = items();
        let c = columns(&items);
        let short = Answer {
            pids: vec![Uuid::nil()],
            dup_ord: vec![],
            dup_id: vec![],
        };
        assert!(expand(&c, &short).is_err());
        let bad = Answer {
            pids: vec![Uuid::nil(), Uuid::nil()],
            dup_ord: vec![9],
            dup_id: vec![None],
        };
        assert!(expand(&c, &bad).is_err());
    }
}
