//! Push items from a request to [`PushItem`]s: read without building a JSON
//! tree, validated, ids minted. Every write path takes its items here: the
//! push endpoint reads them straight from the body bytes ([`from_body`]);
//! transaction and stream-cycle pushes, whose bodies are parsed whole
//! anyway, convert their item values ([`from_values`]).
//!
//! Why not a tree: the items of a fused batch stay alive while it is in
//! flight, and as `serde_json::Value` maps they were most of the broker's
//! peak RSS (issue 18). Here a payload is kept as the JSON text the client
//! sent, checked by one walk that allocates nothing.
//!
//! Any invalid item rejects the whole request with a 400 naming the field,
//! before anything reaches PostgreSQL.

use super::params;
use crate::error::ApiError;
use crate::ids::mint_v7;
use crate::store::payload::Payload;
use crate::store::push_item::DEFAULT_PARTITION;
use crate::store::PushItem;
use bytes::Bytes;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;

/// One item as the client sent it: the fields the store reads, each as
/// given (so a wrong type can be named), the payload as its text. Any other
/// key (a client's own `id`, `txid`, `encrypted` or `sub` too) is skipped.
#[derive(Debug, Default)]
pub struct RawItem {
    queue: Option<Value>,
    partition: Option<Value>,
    transaction_id: Option<Value>,
    trace_id: Option<Value>,
    payload: Option<Payload>,
}

/// The keys of an item that matter.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum Field {
    #[serde(rename = "queue")]
    Queue,
    #[serde(rename = "partition")]
    Partition,
    #[serde(rename = "transactionId")]
    TransactionId,
    #[serde(rename = "traceId")]
    TraceId,
    #[serde(rename = "payload")]
    Payload,
    #[serde(other)]
    Other,
}

/// The scalar visits of a visitor for which any non-container value reads
/// as `$none` (the caller names the error once it knows where it was).
macro_rules! scalars_read_as {
    ($t:ty, $none:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
            Ok($none)
        }
        fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
            Ok($none)
        }
        fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
            Ok($none)
        }
        fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
            Ok($none)
        }
        fn visit_str<E>(self, _: &str) -> Result<$t, E> {
            Ok($none)
        }
        fn visit_unit<E>(self) -> Result<$t, E> {
            Ok($none)
        }
    };
}

/// Reads one part of the body. Each reader carries the body, so that a
/// payload becomes a slice of it ([`Payload::slice_of`]) and not a copy.
struct In<'b, T> {
    body: &'b Bytes,
    what: std::marker::PhantomData<T>,
}

impl<'b, T> In<'b, T> {
    fn new(body: &'b Bytes) -> In<'b, T> {
        In {
            body,
            what: std::marker::PhantomData,
        }
    }
}

/// Each reader is its own visitor, and reads whatever value comes
/// (`deserialize_any`: a wrong type is named by the caller, not failed here).
impl<'de, T> DeserializeSeed<'de> for In<'_, T>
where
    Self: Visitor<'de, Value = T>,
{
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_any(self)
    }
}

/// An element of `items`: an object, or anything else (an error, named by
/// its index once the whole body has been read).
struct Slot(Option<RawItem>);

impl<'de> Visitor<'de> for In<'_, Slot> {
    type Value = Slot;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a push item")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Slot, A::Error> {
        let mut it = RawItem::default();
        // a repeated key keeps its last value, as a parsed object would
        while let Some(field) = m.next_key::<Field>()? {
            match field {
                Field::Queue => it.queue = m.next_value()?,
                Field::Partition => it.partition = m.next_value()?,
                Field::TransactionId => it.transaction_id = m.next_value()?,
                Field::TraceId => it.trace_id = m.next_value()?,
                Field::Payload => {
                    let text: &'de RawValue = m.next_value()?;
                    it.payload = Some(Payload::slice_of(self.body, text));
                }
                Field::Other => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Slot(Some(it)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Slot, A::Error> {
        IgnoredAny.visit_seq(s).map(|_| Slot(None))
    }

    scalars_read_as!(Slot, Slot(None));
}

/// `items`' value: an array of slots, or anything else (`None`: "no items
/// array"; `Option<Vec<_>>` would fail on a non-array instead).
struct Items(Option<Vec<Slot>>);

impl<'de> Visitor<'de> for In<'_, Items> {
    type Value = Items;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an items array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Items, A::Error> {
        let mut v = Vec::with_capacity(s.size_hint().unwrap_or(0));
        while let Some(slot) = s.next_element_seed(In::<Slot>::new(self.body))? {
            v.push(slot);
        }
        Ok(Items(Some(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Items, A::Error> {
        IgnoredAny.visit_map(m).map(|_| Items(None))
    }
    scalars_read_as!(Items, Items(None));
}

/// The push body: not an object at all, or an object with its `items` when
/// they are an array (`None`: absent or not an array). Every other key is
/// skipped.
enum Body {
    NotObject,
    Object(Option<Vec<Slot>>),
}

impl<'de> Visitor<'de> for In<'_, Body> {
    type Value = Body;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Body, A::Error> {
        let mut items = None;
        while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
            if k == "items" {
                items = m.next_value_seed(In::<Items>::new(self.body))?.0;
            } else {
                m.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Body::Object(items))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Body, A::Error> {
        IgnoredAny.visit_seq(s).map(|_| Body::NotObject)
    }
    scalars_read_as!(Body, Body::NotObject);
}

/// The items of a push body (`{"items": [...]}`), read from its bytes; their
/// payloads are slices of `body`.
pub fn from_body(body: &Bytes) -> Result<Vec<RawItem>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadRequest("Empty request body".into()));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = In::<Body>::new(body)
        .deserialize(&mut de)
        .and_then(|b| de.end().map(|()| b));
    let slots = match parsed {
        Ok(Body::Object(Some(slots))) => slots,
        Ok(Body::Object(None)) => {
            return Err(ApiError::BadRequest("items array is required".into()))
        }
        Ok(Body::NotObject) => {
            return Err(ApiError::BadRequest(
                "Invalid JSON: the body must be a JSON object".into(),
            ))
        }
        Err(e) => return Err(ApiError::BadRequest(format!("Invalid JSON: {e}"))),
    };
    slots
        .into_iter()
        .enumerate()
        .map(|(i, Slot(it))| it.ok_or_else(|| not_an_object(i)))
        .collect()
}

fn not_an_object(index: usize) -> ApiError {
    ApiError::BadRequest(format!("items[{index}] must be an object"))
}

/// Item values (from a body parsed whole) as raw items.
fn raw_of(item: Value, index: usize) -> Result<RawItem, ApiError> {
    let Value::Object(mut m) = item else {
        return Err(not_an_object(index));
    };
    let payload = match m.remove("payload") {
        Some(p) => Some(Payload::of_raw(
            serde_json::value::to_raw_value(&p)
                .map_err(|e| ApiError::BadRequest(format!("items[{index}].payload: {e}")))?,
        )),
        None => None,
    };
    let take = |k: &str, m: &mut Map<String, Value>| m.remove(k);
    Ok(RawItem {
        queue: take("queue", &mut m),
        partition: take("partition", &mut m),
        transaction_id: take("transactionId", &mut m),
        trace_id: take("traceId", &mut m),
        payload,
    })
}

/// Validates item values and mints their ids, consuming them.
pub fn from_values(items: Vec<Value>) -> Result<Vec<PushItem>, ApiError> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, it)| stored(raw_of(it, i)?))
        .collect()
}

/// Validates raw items and mints their ids, consuming them.
pub fn stored_all(items: Vec<RawItem>) -> Result<Vec<PushItem>, ApiError> {
    items.into_iter().map(stored).collect()
}

/// One validated item with its ids minted (a JSON `null` field reads as
/// absent, as it always has).
pub fn stored(it: RawItem) -> Result<PushItem, ApiError> {
    let nonnull = |v: Option<Value>| v.filter(|v| !v.is_null());
    let queue = match nonnull(it.queue) {
        Some(Value::String(q)) => {
            params::check_name(&q, "queue")?;
            q
        }
        _ => return Err(ApiError::BadRequest("Queue must be a string".into())),
    };
    let partition = match nonnull(it.partition) {
        None => DEFAULT_PARTITION.to_string(),
        Some(Value::String(p)) => {
            params::check_name(&p, "partition")?;
            p
        }
        Some(_) => return Err(ApiError::BadRequest("Partition must be a string".into())),
    };
    let id = mint_v7();
    let txid = match nonnull(it.transaction_id) {
        None => id.hyphenated().to_string(),
        Some(Value::String(t)) if t.is_empty() => id.hyphenated().to_string(),
        Some(Value::String(t)) => {
            if t.len() > 512 || t.contains('\0') {
                return Err(ApiError::BadRequest(
                    "TransactionId must be at most 512 bytes without \\u0000".into(),
                ));
            }
            t
        }
        Some(_) => {
            return Err(ApiError::BadRequest(
                "TransactionId must be a string".into(),
            ))
        }
    };
    let trace = match nonnull(it.trace_id) {
        None => None,
        Some(Value::String(t)) if crate::ids::is_uuid(&t) => uuid::Uuid::parse_str(&t).ok(),
        Some(Value::String(_)) => {
            return Err(ApiError::BadRequest("TraceId must be a UUID".into()))
        }
        Some(_) => return Err(ApiError::BadRequest("TraceId must be a string".into())),
    };
    let payload = match it.payload {
        Some(p) => {
            params::check_storable_raw(p.as_bytes(), "payload")?;
            p
        }
        // an item without a payload stores `{}` (a `null` one stores null)
        None => Payload::empty_object(),
    };
    Ok(PushItem {
        queue,
        partition,
        id,
        txid,
        trace,
        payload,
        encrypted: false,
        sub: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(body: &str) -> Result<Vec<PushItem>, String> {
        from_body(&Bytes::copy_from_slice(body.as_bytes()))
            .and_then(stored_all)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn items_keep_their_fields_and_their_payload_text() {
        let items = read(
            r#"{"other": [1, {"x": 2}], "items": [
                {"queue": "q", "payload": {"b": 1, "a": [true, null]}, "id": "mine", "sub": "me"},
                {"queue": "q", "partition": "p", "transactionId": "t", "payload": null,
                 "traceId": "0193a000-0000-7000-8000-000000000001"}]}"#,
        )
        .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].partition, DEFAULT_PARTITION);
        assert_eq!(
            items[0].payload.as_bytes(),
            br#"{"b": 1, "a": [true, null]}"#
        );
        assert_eq!(items[0].txid, items[0].id.hyphenated().to_string());
        assert_eq!(items[0].sub, None);
        assert_eq!(items[1].payload.as_bytes(), b"null");
        assert_eq!(items[1].txid, "t");
        assert!(items[1].trace.is_some());
        assert!(items[1].id > items[0].id);
    }

    #[test]
    fn payloads_are_slices_of_the_body_not_copies() {
        let body = Bytes::from_static(br#"{"items": [{"queue": "q", "payload": [1, "\u00e9"]}]}"#);
        let items = stored_all(from_body(&body).unwrap()).unwrap();
        let p = items[0].payload.as_bytes();
        assert_eq!(p, br#"[1, "\u00e9"]"#);
        let inside = body.as_ptr_range();
        assert!(inside.contains(&p.as_ptr()), "the payload was copied");
    }

    #[test]
    fn an_item_without_a_payload_stores_an_empty_object() {
        let items = read(r#"{"items": [{"queue": "q", "partition": null}]}"#).unwrap();
        assert_eq!(items[0].payload.as_bytes(), b"{}");
        assert_eq!(items[0].partition, DEFAULT_PARTITION);
    }

    #[test]
    fn bad_bodies_and_items_are_named() {
        let cases = [
            ("", "Empty request body"),
            ("[1]", "the body must be a JSON object"),
            ("{\"items\": 3}", "items array is required"),
            ("{}", "items array is required"),
            (
                "{\"items\": [{\"queue\": \"q\"}, 7]}",
                "items[1] must be an object",
            ),
            ("{\"items\": [{}]}", "Queue must be a string"),
            ("{\"items\": [{\"queue\": 1}]}", "Queue must be a string"),
            (
                "{\"items\": [{\"queue\": \"q\", \"partition\": 2}]}",
                "Partition must be",
            ),
            (
                "{\"items\": [{\"queue\": \"q\", \"traceId\": \"x\"}]}",
                "TraceId must be a UUID",
            ),
            (
                "{\"items\": [{\"queue\": \"q\", \"transactionId\": 5}]}",
                "TransactionId",
            ),
            (
                "{\"items\": [{\"queue\": \"q\", \"payload\": {\"a\": \"\\u0000\"}}]}",
                "\\u0000",
            ),
            (
                "{\"items\": [{\"queue\": \"q\", \"payload\": 1e400}]}",
                "payload",
            ),
            (
                "{\"items\": [{\"queue\": \"q\", \"payload\": [1,}]}",
                "Invalid JSON",
            ),
        ];
        for (body, want) in cases {
            let got = read(body).unwrap_err();
            assert!(got.contains(want), "{body}: {got}");
        }
    }

    #[test]
    fn values_take_the_same_rules() {
        let items = from_values(vec![json!({"queue": "q", "payload": {"k": [1]}})]).unwrap();
        assert_eq!(items[0].payload.as_bytes(), br#"{"k":[1]}"#);
        let err = from_values(vec![json!({"queue": "q"}), json!("x")]).unwrap_err();
        assert!(err.to_string().contains("items[1] must be an object"));
    }
}
