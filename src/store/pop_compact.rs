//! One pop attempt as one call of `queen.pop_compact` (sql/functions/pop.sql), its
//! column answer read into a typed [`Popped`]: the claimed partitions and, per
//! message, its columns with the payload kept as the JSON text PostgreSQL sent
//! (`src/api/pop_answer.rs` writes the §4 answer from it).
//!
//! Runs on the DB threads. Why columns: building one jsonb object per message
//! (ten keys, a `to_char` per timestamp) was most of a pop of 100 in
//! PostgreSQL (2.5–3.8 ms against ~0.3 ms to read the same rows as arrays).
//! The arrays come back in binary (uuids, timestamps), only the payloads are
//! JSON text. Why the payload stays text: parsing it into a `serde_json::Value`
//! tree only to serialise it again held every payload twice, the tree several
//! times the size of its text (issue 18, broker memory); the row is kept and
//! each payload is written into the answer straight from it
//! (`super::pop_texts`).
//!
//! Order: messages of one claimed partition are contiguous, partitions in
//! claim order; within a partition they are sorted here by (createdAt, id),
//! the append order (semantics.md §3), rather than trusting aggregate order.

use super::pooled::Conn;
pub use super::pop_texts::JsonText;
use super::pop_texts::{jsonb_array_spans, RawColumn, Texts};
use super::sql_error::classify;
use super::StoreError;
use postgres::types::{FromSql, Type};
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// The statement a pop attempt runs (the columns `Popped` needs; the
/// function's first_* and lease columns serve no caller).
const SQL: &str = "SELECT claimed, part_ids, part_names, queue_names, m_part, m_id, m_txid, \
                   m_trace, m_payload, m_sub, m_created, m_enc FROM queen.pop_compact($1::jsonb)";

/// One claimed partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// `partitionId`.
    pub id: Uuid,
    /// `partition` (its name).
    pub name: Option<String>,
    /// `queue` (its queue's name).
    pub queue: Option<String>,
}

/// One popped message, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoppedMessage {
    /// Index of its partition in [`Popped::partitions`]; `None` if
    /// PostgreSQL named none (answered with null partition fields).
    pub part: Option<usize>,
    /// `id`.
    pub id: Uuid,
    /// `transactionId`.
    pub transaction_id: Option<String>,
    /// `traceId`.
    pub trace_id: Option<Uuid>,
    /// `data`: where the payload's JSON text lies in [`Popped::texts`]
    /// (`None`: SQL NULL, answered as null).
    pub data: Option<JsonText>,
    /// `producerSub`.
    pub producer_sub: Option<String>,
    /// `createdAt`.
    pub created_at: SystemTime,
    /// The row's `is_encrypted` flag (`data` is an envelope to open).
    pub encrypted: bool,
}

/// What one pop attempt read: `queen.pop`'s answer, typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Popped {
    /// `partitionsClaimed`.
    pub claimed: i32,
    /// The claimed partitions, in claim order.
    pub partitions: Vec<Claimed>,
    /// The messages: partition in claim order, then append order.
    pub messages: Vec<PoppedMessage>,
    /// The payload texts the messages' `data` spans point into.
    pub texts: Texts,
}

impl Popped {
    /// The partition of `m`, when PostgreSQL named it.
    pub fn partition_of(&self, m: &PoppedMessage) -> Option<&Claimed> {
        m.part.and_then(|i| self.partitions.get(i))
    }

    /// The queue of the first message (a namespace/task pop's rates go to it).
    pub fn first_queue(&self) -> Option<&str> {
        let m = self.messages.first()?;
        self.partition_of(m)?.queue.as_deref()
    }

    /// The oldest `createdAt` among the messages, µs since the epoch.
    pub fn oldest_us(&self) -> Option<i64> {
        self.messages.iter().map(|m| micros(m.created_at)).min()
    }
}

/// Runs one pop attempt (`arg` as `queen.pop` takes it).
pub fn call(c: &mut Conn, arg: &Value) -> Result<Popped, StoreError> {
    let rows = c
        .query_prepared(SQL, &[(arg, Type::JSONB)])
        .map_err(classify)?;
    let r = rows
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::Db("pop_compact: no result row".into()))?;
    build(r).map_err(|e| StoreError::Db(format!("pop_compact answer: {e}")))
}

/// The result row's payload column (`m_payload`), whose bytes the answer's
/// payloads are read from.
struct PayloadColumn(postgres::Row);

/// Index of `m_payload` in [`SQL`]'s columns.
const PAYLOAD_COL: usize = 8;

impl AsRef<[u8]> for PayloadColumn {
    fn as_ref(&self) -> &[u8] {
        match self.0.try_get::<_, Option<RawColumn>>(PAYLOAD_COL) {
            Ok(Some(c)) => c.0,
            _ => &[],
        }
    }
}

/// A column that is NULL when nothing was claimed, as an empty vector.
fn col<'a, T: FromSql<'a>>(r: &'a postgres::Row, i: usize) -> Result<Vec<T>, postgres::Error> {
    Ok(r.try_get::<_, Option<Vec<T>>>(i)?.unwrap_or_default())
}

fn build(row: postgres::Row) -> Result<Popped, Box<dyn std::error::Error + Sync + Send>> {
    let r = &row;
    let claimed: i32 = r.try_get(0)?;
    let ids: Vec<Uuid> = col(r, 1)?;
    let mut names = col::<Option<String>>(r, 2)?.into_iter();
    let mut queues = col::<Option<String>>(r, 3)?.into_iter();
    let partitions: Vec<Claimed> = ids
        .into_iter()
        .map(|id| Claimed {
            id,
            name: names.next().flatten(),
            queue: queues.next().flatten(),
        })
        .collect();
    let k: Vec<i32> = col(r, 4)?;
    let (ids, txids, traces) = (
        col::<Uuid>(r, 5)?,
        col::<Option<String>>(r, 6)?,
        col::<Option<Uuid>>(r, 7)?,
    );
    let (subs, created, enc) = (
        col::<Option<String>>(r, 9)?,
        col::<SystemTime>(r, 10)?,
        col::<bool>(r, 11)?,
    );
    // the row itself is kept: the payloads are read from it, not copied out
    let texts = Texts::new(PayloadColumn(row));
    let spans = match texts.bytes() {
        [] => Vec::new(),
        column => jsonb_array_spans(column)?,
    };
    let mut cols = (
        ids.into_iter(),
        txids.into_iter(),
        traces.into_iter(),
        spans.into_iter(),
        subs.into_iter(),
        created.into_iter(),
        enc.into_iter(),
    );
    let mut messages = Vec::with_capacity(k.len());
    for k in k {
        // The arrays are aggregated from the same rows: equal lengths.
        // A short one ends the list.
        let (Some(id), Some(txid), Some(trace), Some(data), Some(sub), Some(created), Some(enc)) = (
            cols.0.next(),
            cols.1.next(),
            cols.2.next(),
            cols.3.next(),
            cols.4.next(),
            cols.5.next(),
            cols.6.next(),
        ) else {
            break;
        };
        messages.push(PoppedMessage {
            part: usize::try_from(k.saturating_sub(1))
                .ok()
                .filter(|i| *i < partitions.len()),
            id,
            transaction_id: txid,
            trace_id: trace,
            data,
            producer_sub: sub,
            created_at: created,
            encrypted: enc,
        });
    }
    // partition in claim order, then append order (an unnamed partition first, as
    // its index 0 sorted before)
    messages.sort_by_key(|m| (m.part.map_or(0, |i| i + 1), m.created_at, m.id));
    Ok(Popped {
        claimed,
        partitions,
        messages,
        texts,
    })
}

/// µs since the epoch (negative before it).
fn micros(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// `queen.iso`'s format: UTC, microseconds, `Z` (`2025-01-31T12:34:56.123456Z`).
pub fn iso(t: SystemTime) -> String {
    let us = micros(t);
    let secs = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian;
/// Howard Hinnant's civil-from-days).
fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::iso;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn iso_matches_queen_iso() {
        let t = |us: u64| iso(UNIX_EPOCH + Duration::from_micros(us));
        assert_eq!(t(0), "1970-01-01T00:00:00.000000Z");
        // 2026-11-30T02:24:49.153317Z
        assert_eq!(t(1_796_005_489_153_317), "2026-11-30T02:24:49.153317Z");
        // leap day 2024-02-29T23:59:59.999999Z
        assert_eq!(t(1_709_251_199_999_999), "2024-02-29T23:59:59.999999Z");
        assert_eq!(t(951_782_400_000_001), "2000-02-29T00:00:00.000001Z");
    }
}
