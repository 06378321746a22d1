//! The push batch's compact answer (`queen.push_fast`, sql/007) expanded
//! into one result per item, in the shape `queen.push_batch` answers
//! (`{message_id, status, partition_id, queue_id, trace_id, transaction_id}`),
//! so that the lanes, the spool replay and the push endpoint are unchanged.
//!
//! Runs on the DB threads. PostgreSQL returns only what the broker does not
//! know: the id of each (queue, partition) pair and, for the items it did not
//! insert, the id of the message already there. Everything else comes from
//! the items the broker sent, which saves PostgreSQL building a jsonb object
//! per item and the broker parsing it.

use serde_json::{Map, Value};
use std::collections::HashMap;

/// The statement a push batch runs.
pub const SQL: &str = "SELECT queen.push_fast($1::jsonb)";

/// Partition name of an item without one (as `queen.push_fast` reads it).
const DEFAULT_PARTITION: &str = "Default";

/// Per-item results for `items` from `queen.push_fast`'s `answer`; the error
/// says what was malformed.
pub fn expand(items: &[Value], answer: &Value) -> Result<Vec<Value>, String> {
    let mut pairs: HashMap<(&str, &str), (&Value, &Value)> = HashMap::new();
    for p in answer
        .get("pairs")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        match p.as_array().map(Vec::as_slice) {
            Some([Value::String(q), Value::String(part), pid, qid]) => {
                pairs.insert((q.as_str(), part.as_str()), (pid, qid));
            }
            _ => return Err(format!("bad pair {p}")),
        }
    }
    let mut dups: HashMap<usize, &Value> = HashMap::new();
    for d in answer
        .get("dups")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        match d.as_array().map(Vec::as_slice) {
            Some([Value::Number(i), id]) => {
                let i = i.as_u64().ok_or_else(|| format!("bad dup index {d}"))?;
                dups.insert(i as usize, id);
            }
            _ => return Err(format!("bad dup {d}")),
        }
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let queue = item.get("queue").and_then(Value::as_str).unwrap_or("");
            let part = item
                .get("partition")
                .and_then(Value::as_str)
                .unwrap_or(DEFAULT_PARTITION);
            let (pid, qid) = pairs
                .get(&(queue, part))
                .ok_or_else(|| format!("no partition id for item {i}"))?;
            let (status, id) = match dups.get(&i) {
                Some(existing) => ("duplicate", (*existing).clone()),
                None => ("queued", item.get("id").cloned().unwrap_or(Value::Null)),
            };
            let mut r = Map::with_capacity(6);
            r.insert("message_id".into(), id);
            r.insert("status".into(), Value::String(status.into()));
            r.insert("partition_id".into(), (*pid).clone());
            r.insert("queue_id".into(), (*qid).clone());
            r.insert("trace_id".into(), trace(item.get("traceId")));
            r.insert(
                "transaction_id".into(),
                item.get("txid").cloned().unwrap_or(Value::Null),
            );
            Ok(Value::Object(r))
        })
        .collect()
}

/// The trace id as PostgreSQL would print the uuid (lower case, hyphenated).
fn trace(t: Option<&Value>) -> Value {
    match t.and_then(Value::as_str) {
        Some(s) => match uuid::Uuid::parse_str(s) {
            Ok(u) => Value::String(u.hyphenated().to_string()),
            Err(_) => Value::Null,
        },
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inserted_and_duplicate_items_get_their_results_in_order() {
        let items = vec![
            json!({"queue": "q", "partition": "a", "id": "i0", "txid": "t0", "traceId": null}),
            json!({"queue": "q", "partition": "b", "id": "i1", "txid": "t1",
                   "traceId": "0193A000-0000-7000-8000-000000000001"}),
        ];
        let answer = json!({"pairs": [["q", "a", "pa", "qq"], ["q", "b", "pb", "qq"]],
                            "dups": [[1, "old"]]});
        let r = expand(&items, &answer).unwrap();
        assert_eq!(r[0]["status"], "queued");
        assert_eq!(r[0]["message_id"], "i0");
        assert_eq!(r[0]["partition_id"], "pa");
        assert_eq!(r[1]["status"], "duplicate");
        assert_eq!(r[1]["message_id"], "old");
        assert_eq!(r[1]["partition_id"], "pb");
        assert_eq!(r[1]["trace_id"], "0193a000-0000-7000-8000-000000000001");
        assert_eq!(r[1]["transaction_id"], "t1");
    }

    #[test]
    fn an_item_without_its_pair_is_an_error() {
        let items = vec![json!({"queue": "q", "partition": "z", "id": "i", "txid": "t"})];
        assert!(expand(&items, &json!({"pairs": [], "dups": []})).is_err());
    }
}
