//! Reads a `POST /api/v1/push` body into stored items without building a
//! JSON tree of any payload: each payload is validated by one streaming pass
//! (serde_json's `RawValue`) and kept as the text the client sent, which
//! goes to PostgreSQL as is (`store::push_typed`).
//!
//! Why: parsing every payload into a `serde_json::Value` tree (a `BTreeMap`
//! per object) and serialising it again was about an eighth of the broker's
//! CPU on push b100, and the trees, alive while a fused batch is in flight,
//! were most of its peak RSS. The text costs its own size once.
//!
//! Only the item's own fields (queue, partition, transactionId, traceId)
//! are parsed; everything else a client sends is skipped unparsed.

use super::push::stored_item;
use crate::error::ApiError;
use crate::store::push_typed::PAYLOAD_JSON;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The body: only `items` is read, borrowed from the request buffer.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    items: Option<&'a RawValue>,
}

/// One item's fields as `push::stored_item` reads them; `payload` unparsed.
/// A field that is absent and one that is null are both `None`, except the
/// payload (`null` is a payload, absent is `{}`).
#[derive(Deserialize)]
struct Item<'a> {
    queue: Option<Value>,
    partition: Option<Value>,
    #[serde(rename = "transactionId")]
    transaction_id: Option<Value>,
    #[serde(rename = "traceId")]
    trace_id: Option<Value>,
    #[serde(borrow, default, deserialize_with = "present")]
    payload: Option<&'a RawValue>,
}

/// Keeps a JSON `null` payload as `Some("null")` (serde's `Option` would
/// read it as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The push body's items, each still its JSON text (borrowed); the whole
/// body has been checked to be well-formed JSON.
pub fn items(body: &[u8]) -> Result<Vec<&RawValue>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest("Empty request body".into()));
    }
    let body: Body<'_> = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) if e.is_data() => {
            return Err(ApiError::BadRequest(
                "Invalid JSON: the body must be a JSON object".into(),
            ))
        }
        Err(e) => return Err(ApiError::BadRequest(format!("Invalid JSON: {e}"))),
    };
    let required = || ApiError::BadRequest("items array is required".into());
    let raw = body.items.ok_or_else(required)?;
    if !raw.get().starts_with('[') {
        return Err(required());
    }
    serde_json::from_str(raw.get()).map_err(|_| required())
}

/// `items` validated and readied for the store (as `push::stored_items`
/// readies parsed ones, with the payload as text under `PAYLOAD_JSON`).
/// Errors are the 400s `stored_items` answers.
pub fn stored_items(raw: Vec<&RawValue>) -> Result<Vec<Value>, ApiError> {
    raw.into_iter()
        .enumerate()
        .map(|(i, it)| stored_raw(it, i))
        .collect()
}

/// One item: its fields checked by `stored_item`, its payload checked here.
fn stored_raw(raw: &RawValue, index: usize) -> Result<Value, ApiError> {
    let not_object = || ApiError::BadRequest(format!("items[{index}] must be an object"));
    if !raw.get().starts_with('{') {
        return Err(not_object());
    }
    let it: Item<'_> = serde_json::from_str(raw.get())
        .map_err(|e| ApiError::BadRequest(format!("items[{index}]: {e}")))?;
    let mut m = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    };
    put("queue", it.queue);
    put("partition", it.partition);
    put("transactionId", it.transaction_id);
    put("traceId", it.trace_id);
    // a stand-in, so that `stored_item` adds no `{}` of its own
    m.insert("payload".into(), Value::Null);
    let Value::Object(mut m) = stored_item(Value::Object(m), index)? else {
        unreachable!("stored_item answers an object");
    };
    m.remove("payload");
    let text = it.payload.map_or("{}", RawValue::get);
    if has_nul(text) {
        return Err(ApiError::BadRequest(
            "payload contains \\u0000, which cannot be stored".into(),
        ));
    }
    m.insert(PAYLOAD_JSON.into(), Value::String(text.to_string()));
    Ok(Value::Object(m))
}

/// Whether valid JSON text holds `\u0000` in a string or key (PostgreSQL's
/// jsonb refuses it). In valid JSON a backslash only starts an escape, so
/// skipping each escape's next byte is enough to tell `\\u0000` (a
/// backslash, then text) from `\u0000`.
fn has_nul(json: &str) -> bool {
    let b = json.as_bytes();
    let mut i = 0;
    while let Some(at) = b[i..].iter().position(|&c| c == b'\\') {
        let e = i + at;
        if b.get(e + 1..e + 6) == Some(b"u0000") {
            return true;
        }
        i = e + 2;
        if i >= b.len() {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(body: &str) -> Result<Vec<Value>, ApiError> {
        stored_items(super::items(body.as_bytes())?)
    }

    #[test]
    fn a_payload_is_kept_as_sent() {
        let it =
            items(r#"{"items":[{"queue":"q","payload":{"b":1, "a":[1.50,"\u00e9"]}}]}"#).unwrap();
        assert_eq!(it[0][PAYLOAD_JSON], r#"{"b":1, "a":[1.50,"\u00e9"]}"#);
        assert!(it[0].get("payload").is_none());
        assert_eq!(it[0]["partition"], "Default");
        assert_eq!(it[0]["txid"], it[0]["id"]);
    }

    #[test]
    fn absent_payload_is_an_empty_object_and_null_stays_null() {
        let it = items(r#"{"items":[{"queue":"q"},{"queue":"q","payload":null}]}"#).unwrap();
        assert_eq!(it[0][PAYLOAD_JSON], "{}");
        assert_eq!(it[1][PAYLOAD_JSON], "null");
    }

    #[test]
    fn fields_are_checked_as_for_parsed_items() {
        let code = |b: &str| items(b).unwrap_err().to_string();
        assert!(code(r#"{"items":[{"payload":1}]}"#).contains("Queue"));
        assert!(code(r#"{"items":[1]}"#).contains("items[0] must be an object"));
        assert!(code(r#"{"items":{}}"#).contains("items array is required"));
        assert!(code(r#"{}"#).contains("items array is required"));
        assert!(code(r#"[]"#).contains("must be a JSON object"));
        assert!(code(r#"{"items":[{"queue":"q","payload":{"a":}}]}"#).contains("Invalid JSON"));
        assert!(code(r#"{"items":[{"queue":"q","traceId":"x"}]}"#).contains("TraceId"));
        let own = items(
            r#"{"items":[{"queue":"q","id":"x","sub":"s","encrypted":true,"payloadJson":"1"}]}"#,
        )
        .unwrap();
        assert!(own[0].get("sub").is_none() && own[0].get("encrypted").is_none());
        assert_eq!(own[0][PAYLOAD_JSON], "{}");
    }

    #[test]
    fn nul_is_found_only_as_an_escape() {
        assert!(has_nul(r#"{"a":"x\u0000"}"#));
        assert!(has_nul(r#"{"\u0000":1}"#));
        assert!(!has_nul(r#"{"a":"x\\u0000"}"#));
        assert!(has_nul(r#"{"a":"x\\\u0000"}"#));
        assert!(has_nul(r#"{"a":"\u00001"}"#));
        assert!(!has_nul(r#""\\""#));
        let nul = items(r#"{"items":[{"queue":"q","payload":["\u0000"]}]}"#).unwrap_err();
        assert!(nul.to_string().contains("\\u0000"));
    }
}
