//! A push item's payload: its JSON text, checked once, held as shared bytes.
//!
//! Why bytes and not an owned string: a payload read from a push body is a
//! slice of that body (`Bytes::slice_ref`), so the request's payloads are
//! held once, in the body the socket filled, until the batch is written.
//! A 32 MiB push used to hold the body and a copy of every payload at once
//! (issue 18: "a single huge request may cost its own size once").
//!
//! The text is valid JSON by construction: every constructor takes text a
//! JSON parser produced or checked. It goes to PostgreSQL as jsonb's binary
//! input (a version byte, then the text), so PostgreSQL parses it once and
//! the broker not at all.

use bytes::{BufMut, Bytes, BytesMut};
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::error::Error;

/// The version byte of jsonb's binary input format.
const JSONB_VERSION: u8 = 1;

/// A payload's JSON text.
#[derive(Clone, PartialEq, Eq)]
pub struct Payload(Bytes);

impl Payload {
    /// The slice of `body` that `text` is: no copy. `text` must lie inside
    /// `body` and be JSON a parser read from it (a borrowed `&RawValue`).
    pub fn slice_of(body: &Bytes, text: &RawValue) -> Payload {
        Payload(body.slice_ref(text.get().as_bytes()))
    }

    /// Owned JSON text (a value serialised, a spool record read back).
    pub fn of_raw(raw: Box<RawValue>) -> Payload {
        let text: Box<str> = raw.into();
        Payload(Bytes::from(text.into_boxed_bytes()))
    }

    /// `v` serialised (compact). Serialising a `Value` cannot fail: its
    /// keys are strings and it holds no non-finite numbers.
    pub fn of_value(v: &serde_json::Value) -> Payload {
        Payload(Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
    }

    /// JSON `null`.
    pub fn null() -> Payload {
        Payload(Bytes::from_static(b"null"))
    }

    /// An empty object, what an item without a payload stores.
    pub fn empty_object() -> Payload {
        Payload(Bytes::from_static(b"{}"))
    }

    /// The text's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The text as a `&RawValue`, re-read (only the spool and jsonb paths
    /// need it; the push lanes send the bytes as they are).
    fn raw(&self) -> Result<&RawValue, String> {
        let s = std::str::from_utf8(&self.0).map_err(|e| e.to_string())?;
        serde_json::from_str(s).map_err(|e| e.to_string())
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw().map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        Box::<RawValue>::deserialize(d).map(Payload::of_raw)
    }
}

impl ToSql for Payload {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        if *ty == Type::JSONB {
            out.put_u8(JSONB_VERSION);
        }
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSONB || *ty == Type::JSON
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_value_is_the_compact_text() {
        let v = serde_json::json!({"a": [1, "é"], "b": null});
        assert_eq!(Payload::of_value(&v).as_bytes(), v.to_string().as_bytes());
    }

    #[test]
    fn a_slice_of_the_body_shares_its_bytes() {
        let body = Bytes::from_static(br#"{"items":[{"payload": {"a": [1, 2]} }]}"#);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(v.is_object());
        #[derive(Deserialize)]
        struct Item<'a> {
            #[serde(borrow)]
            payload: &'a RawValue,
        }
        #[derive(Deserialize)]
        struct Body<'a> {
            #[serde(borrow)]
            items: Vec<Item<'a>>,
        }
        let b: Body = serde_json::from_slice(&body).unwrap();
        let p = Payload::slice_of(&body, b.items[0].payload);
        assert_eq!(p.as_bytes(), br#"{"a": [1, 2]}"#);
        let start = p.as_bytes().as_ptr() as usize - body.as_ptr() as usize;
        assert_eq!(&body[start..start + p.len()], p.as_bytes());
    }

    #[test]
    fn it_serialises_as_the_json_it_holds_and_reads_back() {
        let p = Payload::of_raw(RawValue::from_string(r#"{"x": [true, null]}"#.into()).unwrap());
        #[derive(Serialize, Deserialize)]
        struct W {
            payload: Payload,
        }
        let text = serde_json::to_string(&W { payload: p.clone() }).unwrap();
        assert_eq!(text, r#"{"payload":{"x": [true, null]}}"#);
        let back: W = serde_json::from_str(&text).unwrap();
        assert_eq!(back.payload, p);
    }

    #[test]
    fn jsonb_gets_the_version_byte_and_json_does_not() {
        let p = Payload::empty_object();
        let mut out = BytesMut::new();
        p.to_sql(&Type::JSONB, &mut out).unwrap();
        assert_eq!(&out[..], b"\x01{}");
        out.clear();
        p.to_sql(&Type::JSON, &mut out).unwrap();
        assert_eq!(&out[..], b"{}");
        assert!(!<Payload as ToSql>::accepts(&Type::TEXT));
    }
}
