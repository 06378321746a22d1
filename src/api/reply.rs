//! The JSON answers handlers build (success bodies only: errors become JSON
//! in `ApiError::into_response`). Below every endpoint file, so that the
//! route table in `mod.rs` stands above the handlers it lists.

use shards::http::Response;

/// A 200 JSON answer.
pub fn ok_json(v: &serde_json::Value) -> Response {
    json(200, v)
}

/// A 200 JSON answer from a typed body (one whose every map has string
/// keys, so it always serialises).
pub fn ok_typed(v: &impl serde::Serialize) -> Response {
    Response::json(200, serde_json::to_vec(v).unwrap_or_default())
}

/// A JSON answer with `status`.
pub fn json(status: u16, v: &serde_json::Value) -> Response {
    // to_vec writes the bytes directly (to_string goes through fmt::Write);
    // a Value has string keys only, so it always serialises
    Response::json(status, serde_json::to_vec(v).unwrap_or_default())
}
