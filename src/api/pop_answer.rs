//! The body of a pop answer (http-api.md §4) from an attempt read as columns
//! (`store::pop_compact::Popped`), written straight into bytes: each payload's
//! JSON text goes from the result row into the answer, never parsed into a
//! `serde_json::Value` tree (issue 18: the trees held every popped payload
//! several times over). Runs on the shard serving the pop.
//!
//! The keys come in the order a `serde_json::Map` (sorted) gives them, and
//! everything but the payloads is written as `serde_json` writes it, so the
//! answer reads as the tree path's did. A payload goes out as PostgreSQL's
//! jsonb gave it (its own key order, blanks between tokens dropped; in an
//! answer of [`SPLICE_AT`] or more payload bytes the blanks stay and the
//! payloads are not copied at all), except an encrypted one, which is opened
//! and written from its decrypted value.

use super::pop_autopilot::iso_micros;
use crate::store::pop_compact::{iso, Popped, PoppedMessage};
use crate::store::pop_texts::{compact_into, JsonText};
use serde::Serialize;
use serde_json::{Map, Value};
use shards::http::{Response, Spliced};
use uuid::Uuid;

/// What one pop attempt answered: the columns of `queen.pop_compact`, or the
/// jsonb a conflated pop (`queen.pop_conflated`) builds in SQL.
#[derive(Debug)]
pub enum Attempt {
    /// A plain pop, typed.
    Rows(Box<Popped>),
    /// A conflated pop's answer (`messages`, `partitionsClaimed`, ...).
    Tree(Value),
}

impl Attempt {
    /// `partitionsClaimed` (0 when absent).
    pub fn claimed(&self) -> i64 {
        match self {
            Attempt::Rows(p) => i64::from(p.claimed),
            Attempt::Tree(v) => v
                .get("partitionsClaimed")
                .and_then(Value::as_i64)
                .unwrap_or(0),
        }
    }

    /// The oldest delivered `createdAt`, µs since the epoch.
    pub fn oldest_us(&self) -> Option<i64> {
        match self {
            Attempt::Rows(p) => p.oldest_us(),
            Attempt::Tree(v) => tree_messages(v)
                .iter()
                .filter_map(|m| m.get("createdAt").and_then(Value::as_str))
                .filter_map(iso_micros)
                .min(),
        }
    }

    /// Messages delivered.
    pub fn len(&self) -> usize {
        match self {
            Attempt::Rows(p) => p.messages.len(),
            Attempt::Tree(v) => tree_messages(v).len(),
        }
    }

    /// The first message's queue.
    pub fn first_queue(&self) -> Option<&str> {
        match self {
            Attempt::Rows(p) => p.first_queue(),
            Attempt::Tree(v) => v.pointer("/messages/0/queue").and_then(Value::as_str),
        }
    }
}

/// A conflated answer's messages (none when it has no array).
fn tree_messages(v: &Value) -> &[Value] {
    v.get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The answer's top-level keys for `p`, but for `messages`, which holds a
/// placeholder (the writer puts the messages in its place): the first
/// message's partition, the lease, the group, `partitionsClaimed`. `None`
/// when nothing was delivered.
pub fn top_keys(p: &Popped, lease: &str, group: &str) -> Option<Map<String, Value>> {
    let first = p.partition_of(p.messages.first()?);
    let text = |s: Option<&String>| s.map_or(Value::Null, |s| Value::String(s.clone()));
    let mut top = Map::new();
    top.insert("success".into(), Value::Bool(true));
    top.insert("queue".into(), text(first.and_then(|c| c.queue.as_ref())));
    top.insert(
        "partition".into(),
        text(first.and_then(|c| c.name.as_ref())),
    );
    top.insert(
        "partitionId".into(),
        first.map_or(Value::Null, |c| {
            Value::String(c.id.hyphenated().to_string())
        }),
    );
    top.insert("leaseId".into(), Value::String(lease.into()));
    top.insert("consumerGroup".into(), Value::String(group.into()));
    top.insert("partitionsClaimed".into(), Value::from(p.claimed));
    top.insert("messages".into(), Value::Null);
    Some(top)
}

/// Payloads of at least this many bytes in one answer are spliced in from
/// the result row rather than copied (`shards::http::Spliced`): a pop that
/// big would otherwise hold its payloads twice, in the row and in the body,
/// while it is written (issue 18: a huge request costs its size once). Such
/// payloads go out as jsonb printed them, blanks after `:` and `,` kept;
/// smaller answers, the usual ones, are compacted as before.
pub const SPLICE_AT: usize = 1 << 20;

/// The answer: `top`'s keys in order, the messages of `p` (each with
/// `leaseId` = `lease` and `consumerGroup` = `group`) at `messages`.
pub fn answer(p: &Popped, top: &Map<String, Value>, lease: &str, group: &str) -> Response {
    let payloads = payload_bytes(p);
    let framing = p.messages.len() * 360 + 256;
    let mut out = if payloads < SPLICE_AT {
        Out::Flat(Vec::with_capacity(payloads + framing))
    } else {
        Out::Spliced(Spliced::new(p.texts.shared(), framing))
    };
    write(&mut out, p, top, lease, group);
    out.into_response()
}

/// The answer body as one buffer, payloads compacted (tests; `answer`
/// writes the same for answers below [`SPLICE_AT`]).
#[cfg(test)]
pub fn body(p: &Popped, top: &Map<String, Value>, lease: &str, group: &str) -> Vec<u8> {
    let mut out = Out::Flat(Vec::new());
    write(&mut out, p, top, lease, group);
    out.into_response().body
}

/// The payload bytes of `p`'s messages (a null counts as its 4 letters).
fn payload_bytes(p: &Popped) -> usize {
    let column = p.texts.bytes();
    p.messages
        .iter()
        .map(|m| m.data.map_or(4, |t| t.in_column(column).len()))
        .sum()
}

/// Where an answer is written.
enum Out {
    /// One buffer, payloads compacted into it.
    Flat(Vec<u8>),
    /// Framing text with the payloads spliced in from the row.
    Spliced(Spliced),
}

impl Out {
    /// The buffer framing text is appended to.
    fn text(&mut self) -> &mut Vec<u8> {
        match self {
            Out::Flat(v) => v,
            Out::Spliced(s) => s.text(),
        }
    }

    /// Appends the stored payload `t` (spans of `column`).
    fn payload(&mut self, column: &[u8], t: JsonText) {
        match self {
            Out::Flat(v) => compact_into(v, t.in_column(column)),
            Out::Spliced(s) => s.splice(t.range()),
        }
    }

    /// The 200 answer carrying what was written.
    fn into_response(self) -> Response {
        match self {
            Out::Flat(v) => Response::json(200, v),
            Out::Spliced(s) => Response::json_spliced(200, s),
        }
    }
}

/// Writes the answer into `out`.
fn write(out: &mut Out, p: &Popped, top: &Map<String, Value>, lease: &str, group: &str) {
    // the payload column is looked up in the row once per answer, not per message
    let column = p.texts.bytes();
    let (lease, group) = (json_bytes(lease), json_bytes(group));
    let cipher = crate::crypto::cipher();
    out.text().push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        let t = out.text();
        if i > 0 {
            t.push(b',');
        }
        put(t, k);
        t.push(b':');
        if k != "messages" {
            put(t, v);
            continue;
        }
        t.push(b'[');
        for (j, m) in p.messages.iter().enumerate() {
            if j > 0 {
                out.text().push(b',');
            }
            message(out, column, p, m, &lease, &group, cipher);
        }
        out.text().push(b']');
    }
    out.text().push(b'}');
}

/// One message, keys in sorted order (as a `serde_json::Map` writes them).
fn message(
    out: &mut Out,
    column: &[u8],
    p: &Popped,
    m: &PoppedMessage,
    lease: &[u8],
    group: &[u8],
    cipher: Option<&'static crate::crypto::Cipher>,
) {
    let part = p.partition_of(m);
    let t = out.text();
    t.extend_from_slice(b"{\"consumerGroup\":");
    t.extend_from_slice(group);
    t.extend_from_slice(b",\"createdAt\":\"");
    t.extend_from_slice(iso(m.created_at).as_bytes());
    t.extend_from_slice(b"\",\"data\":");
    match m.data {
        None => t.extend_from_slice(b"null"),
        Some(span) => {
            let opened = std::str::from_utf8(span.in_column(column))
                .ok()
                .and_then(|text| crate::crypto::open_text(cipher, text, m.encrypted));
            match opened {
                Some(opened) => t.extend_from_slice(opened.as_bytes()),
                None => out.payload(column, span),
            }
        }
    }
    let out = out.text();
    out.extend_from_slice(b",\"id\":");
    uuid(out, Some(&m.id));
    out.extend_from_slice(b",\"leaseId\":");
    out.extend_from_slice(lease);
    out.extend_from_slice(b",\"partition\":");
    put(out, &part.and_then(|c| c.name.as_deref()));
    out.extend_from_slice(b",\"partitionId\":");
    uuid(out, part.map(|c| &c.id));
    out.extend_from_slice(b",\"producerSub\":");
    put(out, &m.producer_sub);
    out.extend_from_slice(b",\"queue\":");
    put(out, &part.and_then(|c| c.queue.as_deref()));
    out.extend_from_slice(b",\"traceId\":");
    uuid(out, m.trace_id.as_ref());
    out.extend_from_slice(b",\"transactionId\":");
    put(out, &m.transaction_id);
    out.push(b'}');
}

/// A uuid as a quoted lowercase hyphenated string, or `null`.
fn uuid(out: &mut Vec<u8>, id: Option<&Uuid>) {
    let Some(id) = id else {
        out.extend_from_slice(b"null");
        return;
    };
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    out.push(b'"');
    out.extend_from_slice(id.hyphenated().encode_lower(&mut buf).as_bytes());
    out.push(b'"');
}

/// `v` as JSON text.
fn json_bytes<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    put(&mut out, v);
    out
}

/// Appends `v` as JSON. Cannot fail: writing to a `Vec` never errs, and
/// what is written here (strings, options of strings, a `Value`, whose
/// keys are strings) always serialises.
fn put<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    let _ = serde_json::to_writer(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pop_compact::Claimed;
    use crate::store::pop_texts::Texts;
    use std::time::{Duration, UNIX_EPOCH};

    fn popped() -> Popped {
        let at = |us| UNIX_EPOCH + Duration::from_micros(us);
        // as jsonb writes it: blanks after `:` and `,`, kept inside strings
        let texts = Texts::new(br#"{"a": [1, 2], "b": "x y"}"#.to_vec());
        let data = texts.span_of(texts.bytes());
        Popped {
            texts,
            claimed: 2,
            partitions: vec![
                Claimed {
                    id: Uuid::from_u128(7),
                    name: Some("p\"1".into()),
                    queue: Some("q".into()),
                },
                Claimed {
                    id: Uuid::from_u128(8),
                    name: Some("p2".into()),
                    queue: Some("q".into()),
                },
            ],
            messages: vec![
                PoppedMessage {
                    part: Some(0),
                    id: Uuid::from_u128(1),
                    transaction_id: Some("t1".into()),
                    trace_id: None,
                    data,
                    producer_sub: None,
                    created_at: at(1_796_005_489_153_317),
                    encrypted: false,
                },
                PoppedMessage {
                    part: None,
                    id: Uuid::from_u128(2),
                    transaction_id: None,
                    trace_id: Some(Uuid::from_u128(3)),
                    data: None,
                    producer_sub: Some("sub".into()),
                    created_at: at(5),
                    encrypted: false,
                },
            ],
        }
    }

    #[test]
    fn the_body_is_what_serde_json_writes_for_the_same_answer() {
        let p = popped();
        let mut top = top_keys(&p, "L", "__QUEUE_MODE__").unwrap();
        top.insert("autopilot".into(), serde_json::json!({"width": 2}));
        let bytes = body(&p, &top, "L", "__QUEUE_MODE__");
        let parsed: Value = serde_json::from_slice(&bytes).expect("valid JSON");
        // compact payloads with sorted keys: the tree writes the same bytes
        assert_eq!(serde_json::to_vec(&parsed).unwrap(), bytes);
        assert_eq!(parsed["queue"], "q");
        assert_eq!(parsed["partition"], "p\"1");
        assert_eq!(parsed["partitionId"], Uuid::from_u128(7).to_string());
        assert_eq!(parsed["partitionsClaimed"], 2);
        let m = &parsed["messages"];
        assert_eq!(m[0]["data"], serde_json::json!({"a": [1, 2], "b": "x y"}));
        assert_eq!(m[0]["createdAt"], "2026-11-30T02:24:49.153317Z");
        assert_eq!(m[0]["leaseId"], "L");
        assert_eq!(m[0]["consumerGroup"], "__QUEUE_MODE__");
        assert_eq!(m[0]["traceId"], Value::Null);
        assert_eq!(m[1]["data"], Value::Null);
        assert_eq!(m[1]["queue"], Value::Null);
        assert_eq!(m[1]["traceId"], Uuid::from_u128(3).to_string());
        assert_eq!(m[1]["producerSub"], "sub");
        assert!(m[0].get("isEncrypted").is_none());
    }

    #[test]
    fn a_big_answer_points_into_the_row_and_reads_as_the_flat_one() {
        let mut p = popped();
        let text = format!(r#"{{"a": [1, 2], "pad": "{}"}}"#, "y".repeat(SPLICE_AT));
        p.texts = Texts::new(text.into_bytes());
        p.messages[0].data = p.texts.span_of(p.texts.bytes());
        let top = top_keys(&p, "L", "g").unwrap();
        let flat = body(&p, &top, "L", "g");
        let r = answer(&p, &top, "L", "g");
        let spliced = r.spliced.as_ref().expect("spliced at SPLICE_AT");
        assert!(r.body.is_empty());
        assert_eq!(r.body_len(), spliced.len());
        let (a, b): (Value, Value) = (
            serde_json::from_slice(&spliced.to_vec()).expect("valid JSON"),
            serde_json::from_slice(&flat).unwrap(),
        );
        assert_eq!(a, b);
        // below the mark, one compact buffer as before
        let small = answer(&popped(), &top, "L", "g");
        assert!(small.spliced.is_none());
        assert_eq!(small.body, body(&popped(), &top, "L", "g"));
    }

    #[test]
    fn an_attempt_counts_the_same_either_way() {
        let p = popped();
        let rows = Attempt::Rows(Box::new(p));
        let tree = Attempt::Tree(serde_json::json!({
            "partitionsClaimed": 2,
            "messages": [{"queue": "q", "createdAt": "2026-11-30T02:24:49.153317Z"},
                         {"queue": null, "createdAt": "1970-01-01T00:00:00.000005Z"}],
        }));
        for a in [&rows, &tree] {
            assert_eq!(a.claimed(), 2);
            assert_eq!(a.len(), 2);
            assert_eq!(a.oldest_us(), Some(5));
            assert_eq!(a.first_queue(), Some("q"));
        }
        assert!(top_keys(&Popped::default(), "", "g").is_none());
    }
}
