//! Parsing helpers shared by the endpoints: JSON bodies, query parameters
//! and field checks. Each failure is an `ApiError::BadRequest` that names
//! the field.
//!
//! Query rules (http-api.md §0, decisions.md): booleans are true for `true`
//! or `1`; an integer that does not parse falls back to the default; one
//! that parses but is out of range is a 400 naming the parameter and bounds.

use crate::error::ApiError;
use serde_json::{Map, Value};
use shards::http::Request;

/// Parses a required JSON object body.
pub fn object_body(req: &Request) -> Result<Map<String, Value>, ApiError> {
    match optional_body(req)? {
        Some(m) => Ok(m),
        None => Err(ApiError::BadRequest("Empty request body".into())),
    }
}

/// Parses a body that may be absent (the 1.3.0 client sends none for `{}`).
pub fn optional_body(req: &Request) -> Result<Option<Map<String, Value>>, ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(ApiError::BadRequest(
            "Invalid JSON: the body must be a JSON object".into(),
        )),
        Err(e) => Err(ApiError::BadRequest(format!("Invalid JSON: {e}"))),
    }
}

/// A boolean query parameter.
pub fn flag(req: &Request, name: &str) -> bool {
    matches!(req.query_param(name).as_deref(), Some("true") | Some("1"))
}

/// An integer query parameter within `lo..=hi`; absent or unparseable → `None`.
pub fn int_in(req: &Request, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
    let Some(raw) = req.query_param(name) else {
        return Ok(None);
    };
    let Ok(v) = raw.trim().parse::<i64>() else {
        return Ok(None);
    };
    if v < lo || v > hi {
        return Err(ApiError::BadRequest(format!(
            "{name} must be between {lo} and {hi}"
        )));
    }
    Ok(Some(v))
}

/// An optional string field: absent or null → `None`; another type → 400.
pub fn opt_str<'a>(
    m: &'a Map<String, Value>,
    field: &str,
    label: &str,
) -> Result<Option<&'a str>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::BadRequest(format!("{label} must be a string"))),
    }
}

/// Rejects strings PostgreSQL's jsonb cannot hold (`\u0000`) anywhere in `v`.
pub fn check_storable(v: &Value, field: &str) -> Result<(), ApiError> {
    let bad = |s: &str| s.contains('\0');
    let ok = match v {
        Value::String(s) => !bad(s),
        Value::Array(a) => return a.iter().try_for_each(|x| check_storable(x, field)),
        Value::Object(o) => {
            for (k, x) in o {
                if bad(k) {
                    return Err(nul(field));
                }
                check_storable(x, field)?;
            }
            true
        }
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(nul(field))
    }
}

/// [`check_storable`] for JSON text: one walk of `text` that builds
/// nothing, rejecting a `\u0000` in any string or key, and a number no
/// JSON tree could hold (beyond f64, as the parsed-tree path refused it).
pub fn check_storable_raw(text: &[u8], field: &str) -> Result<(), ApiError> {
    match serde_json::from_slice::<Storable>(text) {
        Ok(Storable) => Ok(()),
        Err(e) if e.to_string().starts_with(NUL_SEEN) => Err(nul(field)),
        Err(e) => Err(ApiError::BadRequest(format!("{field}: {e}"))),
    }
}

/// The walk's error for a `\u0000`.
const NUL_SEEN: &str = "storable: nul";

/// A JSON value that PostgreSQL's jsonb can store (see `check_storable_raw`).
struct Storable;

impl<'de> serde::Deserialize<'de> for Storable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Storable, D::Error> {
        d.deserialize_any(Storable)
    }
}

impl<'de> serde::de::Visitor<'de> for Storable {
    type Value = Storable;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Storable, E> {
        if s.contains('\0') {
            Err(E::custom(NUL_SEEN))
        } else {
            Ok(Storable)
        }
    }
    fn visit_bool<E>(self, _: bool) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_unit<E>(self) -> Result<Storable, E> {
        Ok(Storable)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut s: A) -> Result<Storable, A::Error> {
        while s.next_element::<Storable>()?.is_some() {}
        Ok(Storable)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Storable, A::Error> {
        while m.next_key::<Storable>()?.is_some() {
            m.next_value::<Storable>()?;
        }
        Ok(Storable)
    }
}

fn nul(field: &str) -> ApiError {
    ApiError::BadRequest(format!("{field} contains \\u0000, which cannot be stored"))
}

/// A consumer group name: non-empty, at most 255 characters, no control characters.
pub fn check_group(g: &str) -> Result<(), ApiError> {
    if g.is_empty() || g.chars().count() > 255 || g.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(
            "consumerGroup must be 1 to 255 characters without control characters".into(),
        ));
    }
    Ok(())
}

/// A queue or partition name: non-empty, at most 255 characters, no control characters.
pub fn check_name(v: &str, label: &str) -> Result<(), ApiError> {
    if v.is_empty() || v.chars().count() > 255 || v.chars().any(char::is_control) {
        return Err(ApiError::BadRequest(format!(
            "{label} must be 1 to 255 characters without control characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_found_deep_inside() {
        let v: Value = serde_json::from_str(r#"{"a":[1,{"b":"x\u0000y"}]}"#).unwrap();
        assert!(check_storable(&v, "payload").is_err());
        let v: Value = serde_json::from_str(r#"{"a":[1,{"b":"xy"}]}"#).unwrap();
        assert!(check_storable(&v, "payload").is_ok());
    }

    #[test]
    fn raw_text_takes_the_same_check() {
        let raw = |s: &'static str| s.as_bytes();
        let nul_key = raw(r#"{"a\u0000": 1}"#);
        assert!(check_storable_raw(nul_key, "payload").is_err());
        let deep = raw(r#"[1, {"b": ["x\u0000y"]}]"#);
        assert!(check_storable_raw(deep, "payload").is_err());
        // an escaped backslash followed by "u0000" is no NUL
        let fine = raw(r#"{"a": "\\u0000", "n": 1.5e300, "k": [true, null]}"#);
        assert!(check_storable_raw(fine, "payload").is_ok());
        let huge = raw("1e400");
        assert!(check_storable_raw(huge, "payload").is_err());
    }
}
