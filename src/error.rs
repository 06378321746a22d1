//! The broker's request errors and the one function that turns them into an
//! HTTP status and JSON body. Handlers return `Result<Response, ApiError>`
//! and never build error bodies themselves.

use crate::store::StoreError;
use shards::http::Response;
use std::fmt;

/// Why a request failed.
#[derive(Debug)]
pub enum ApiError {
    /// The request is invalid; the text names the field and what is wrong.
    BadRequest(String),
    /// No route has this path.
    NoSuchRoute,
    /// The named group, queue, partition or message does not exist (the text says which).
    NotFound(String),
    /// The path exists with other methods.
    MethodNotAllowed,
    /// No valid token (401; the text is one of `auth::reason`).
    Unauthorized(&'static str),
    /// A valid token without the route's access level (403).
    Forbidden,
    /// `x-queen-tenant` names a reserved tenant (403, SEC-20).
    ReservedTenant,
    /// A body that is not JSON (415; the text says what to send).
    UnsupportedMediaType(String),
    /// A state-changing request from a foreign `Origin` (403).
    CrossOrigin(String),
    /// A `Host` outside `QUEEN_ALLOWED_HOSTS` (421).
    MisdirectedHost(String),
    /// PostgreSQL is unreachable or saturated; retry later.
    Unavailable(String),
    /// Anything else (the text is safe to show: it never holds secrets).
    Internal(String),
    /// A refusal with its own status and machine code (ephemeral queues,
    /// http-api.md §18), with `Retry-After` seconds where retrying helps.
    Refused {
        /// HTTP status.
        status: u16,
        /// The `code` of the body.
        code: &'static str,
        /// The `error` text.
        message: String,
        /// `Retry-After` in seconds.
        retry_after: Option<u32>,
    },
    /// An error of the KV family (http-api.md §15): answered as
    /// `{"error": error, "reason": reason, "detail": detail}`.
    Coded {
        /// HTTP status.
        status: u16,
        /// The machine code (`kv_bad_request`, `kv_unavailable`, ...).
        error: &'static str,
        /// The sub-code (`kv_bad_namespace`, ...).
        reason: &'static str,
        /// A human sentence naming what is wrong (never database text).
        detail: String,
    },
}

impl ApiError {
    fn status_code(&self) -> (u16, &'static str) {
        match self {
            ApiError::BadRequest(_) => (400, "bad_request"),
            ApiError::NoSuchRoute => (404, "no_such_route"),
            ApiError::NotFound(_) => (404, "not_found"),
            ApiError::MethodNotAllowed => (405, "method_not_allowed"),
            ApiError::Unauthorized(_) => (401, "unauthorized"),
            ApiError::Forbidden => (403, "forbidden"),
            ApiError::ReservedTenant => (403, "reserved_tenant"),
            ApiError::UnsupportedMediaType(_) => (415, "unsupported_media_type"),
            ApiError::CrossOrigin(_) => (403, "cross_origin"),
            ApiError::MisdirectedHost(_) => (421, "misdirected_host"),
            ApiError::Unavailable(_) => (503, "unavailable"),
            ApiError::Internal(_) => (500, "internal"),
            ApiError::Refused { status, code, .. } => (*status, code),
            ApiError::Coded { status, error, .. } => (*status, error),
        }
    }

    /// The HTTP answer for this error.
    pub fn into_response(self) -> Response {
        let (status, code) = self.status_code();
        let retry_after = match &self {
            ApiError::Refused { retry_after, .. } => *retry_after,
            _ => (status == 503).then_some(1),
        };
        let body = match self {
            // SEC-11: the auth answers are exactly `{"error": ...}`.
            ApiError::Unauthorized(_) | ApiError::Forbidden => {
                serde_json::json!({ "error": self.to_string() })
            }
            ApiError::Coded {
                error,
                reason,
                ref detail,
                ..
            } => serde_json::json!({ "error": error, "reason": reason, "detail": detail }),
            _ => serde_json::json!({ "error": self.to_string(), "code": code }),
        };
        let mut r = Response::json(status, body.to_string().into_bytes());
        if let Some(s) = retry_after {
            r = r.with_header("Retry-After", s.to_string());
        }
        r
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::BadRequest(m)
            | ApiError::NotFound(m)
            | ApiError::Unavailable(m)
            | ApiError::UnsupportedMediaType(m)
            | ApiError::CrossOrigin(m)
            | ApiError::MisdirectedHost(m)
            | ApiError::Internal(m)
            | ApiError::Refused { message: m, .. } => f.write_str(m),
            ApiError::NoSuchRoute => f.write_str("Not found"),
            ApiError::MethodNotAllowed => f.write_str("Method not allowed"),
            ApiError::Unauthorized(m) => f.write_str(m),
            ApiError::Forbidden => f.write_str("Insufficient permissions"),
            ApiError::ReservedTenant => f.write_str("x-queen-tenant names a reserved tenant"),
            ApiError::Coded { detail, .. } => f.write_str(detail),
        }
    }
}

impl ApiError {
    /// 503 `kv_unavailable` (with `Retry-After`): the KV pool is full or
    /// PostgreSQL unreachable (`reason: kv_pool`), or the KV/timers are
    /// switched off at runtime (`reason: kv_disabled`).
    pub fn kv_unavailable(reason: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError::Coded {
            status: 503,
            error: "kv_unavailable",
            reason,
            detail: detail.into(),
        }
    }

    /// The KV family's answer to a store failure: a full pool or a lost
    /// database is 503 `kv_unavailable`, anything else 500 `kv_error` (the
    /// text is `classify`'s: our own RAISE texts or an incident number).
    pub fn from_kv_store(e: StoreError) -> ApiError {
        match e {
            StoreError::Busy => ApiError::kv_unavailable("kv_pool", "the KV pool is full; retry"),
            StoreError::Unavailable(_) => {
                ApiError::kv_unavailable("kv_pool", "the database is not reachable; retry")
            }
            StoreError::Db(m) => ApiError::Coded {
                status: 500,
                error: "kv_error",
                reason: "kv_error",
                detail: m,
            },
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Unavailable(_) | StoreError::Busy => ApiError::Unavailable(e.to_string()),
            StoreError::Db(m) => ApiError::Internal(m),
        }
    }
}
