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
}
