//! The streams routes (http-api.md §19): the server half of the clients'
//! stream processing (`queen.streams` in the Python package). The SDK runs
//! the pipeline; the broker registers queries, holds their state and commits
//! each step of a (query, source partition) atomically.
//!
//! - [`queries`]: `POST /streams/v1/queries` (register or find by name) and
//!   `GET /streams/v1/queries` (the dashboard's list; our addition);
//! - [`cycle`]: `POST /streams/v1/cycle`, state ops + sink pushes + the source
//!   ack in one transaction under the (query, partition) advisory lock;
//! - [`state`]: `POST /streams/v1/state/get`.
//!
//! SQL: `sql/functions/streams.sql`, tables `sql/schema/011_streams.sql`.
//! Every call carries the request's tenant: another tenant's query answers as
//! one that does not exist.

pub mod cycle;
pub mod queries;
pub mod state;

use super::reply::ok_json;
use serde_json::{json, Map, Value};
use shards::http::Response;

/// The 200 `{success: false, error}` answer of a cycle or state read that
/// applied nothing (http-api.md §19: failures of a cycle are 200s).
fn refused(error: impl Into<String>) -> Response {
    ok_json(&json!({ "success": false, "error": error.into() }))
}

/// `query_id` of `m`: a UUID string.
fn query_id(m: &Map<String, Value>) -> Result<&str, String> {
    match m.get("query_id") {
        Some(Value::String(s)) if crate::ids::is_uuid(s) => Ok(s),
        Some(Value::String(_)) => Err("query_id must be a UUID".into()),
        _ => Err("query_id is required".into()),
    }
}

/// `partition_id` of `m`: the source partition as the SDK names it (its id),
/// 1 to 512 bytes without NUL.
fn partition_id(m: &Map<String, Value>) -> Result<&str, String> {
    match m.get("partition_id") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 512 && !s.contains('\0') => Ok(s),
        Some(Value::String(_)) => Err("partition_id must be 1 to 512 bytes without \\u0000".into()),
        _ => Err("partition_id is required".into()),
    }
}

/// A state key: at most 1024 bytes, no NUL (PostgreSQL text cannot hold it).
fn check_key(k: &str, field: &str) -> Result<(), String> {
    if k.len() > 1024 || k.contains('\0') {
        return Err(format!(
            "{field} must be at most 1024 bytes without \\u0000"
        ));
    }
    Ok(())
}
