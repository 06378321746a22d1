//! The body of a pop answer (http-api.md §4) from an attempt read as columns
//! (`store::pop_compact::Popped`), written straight into bytes: each payload's
//! JSON text is copied in once, from the result row, never parsed into a
//! `serde_json::Value` tree (issue 18: the trees held every popped payload
//! several times over). Runs on the shard serving the pop.
//!
//! The keys come in the order a `serde_json::Map` (sorted) gives them, and
//! everything but the payloads is written as `serde_json` writes it, so the
//! answer reads as the tree path's did. A payload goes out as PostgreSQL's
//! jsonb gave it (its own key order, blanks between tokens dropped), except
//! an encrypted one, which is opened and written from its decrypted value.

use super::pop_autopilot::iso_micros;
use crate::store::pop_compact::{iso, Popped, PoppedMessage};
use crate::store::pop_texts::compact_into;
use serde::Serialize;
use serde_json::{Map, Value};
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

/// The answer body: `top`'s keys in order, the messages of `p` (each with
/// `leaseId` = `lease` and `consumerGroup` = `group`) at `messages`.
pub fn body(p: &Popped, top: &Map<String, Value>, lease: &str, group: &str) -> Vec<u8> {
    // the payload column is looked up in the row once per answer, not per message
    let column = p.texts.bytes();
    let data = |m: &PoppedMessage| m.data.map(|t| t.in_column(column));
    let payloads: usize = p
        .messages
        .iter()
        .map(|m| data(m).map_or(4, <[u8]>::len))
        .sum();
    let mut out = Vec::with_capacity(payloads + p.messages.len() * 360 + 256);
    let (lease, group) = (json_bytes(lease), json_bytes(group));
    let cipher = crate::crypto::cipher();
    out.push(b'{');
    for (i, (k, v)) in top.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        put(&mut out, k);
        out.push(b':');
        if k != "messages" {
            put(&mut out, v);
            continue;
        }
        out.push(b'[');
        for (j, m) in p.messages.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            message(&mut out, p, m, data(m), &lease, &group, cipher);
        }
        out.push(b']');
    }
    out.push(b'}');
    out
}

/// One message, keys in sorted order (as a `serde_json::Map` writes them).
fn message(
    out: &mut Vec<u8>,
    p: &Popped,
    m: &PoppedMessage,
    data: Option<&[u8]>,
    lease: &[u8],
    group: &[u8],
    cipher: Option<&'static crate::crypto::Cipher>,
) {
    let part = p.partition_of(m);
    out.extend_from_slice(b"{\"consumerGroup\":");
    out.extend_from_slice(group);
    out.extend_from_slice(b",\"createdAt\":\"");
    out.extend_from_slice(iso(m.created_at).as_bytes());
    out.extend_from_slice(b"\",\"data\":");
    match data {
        None => out.extend_from_slice(b"null"),
        Some(text) => {
            let opened = std::str::from_utf8(text)
                .ok()
                .and_then(|t| crate::crypto::open_text(cipher, t, m.encrypted));
            match opened {
                Some(opened) => out.extend_from_slice(opened.as_bytes()),
                None => compact_into(out, text),
            }
        }
    }
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
