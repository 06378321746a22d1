//! Why an ephemeral request was refused: each refusal of http-api.md §18
//! with its status and machine code. Becomes an `ApiError::Refused` at the
//! edge (`From` below), so handlers never build error bodies.

use crate::error::ApiError;
use std::fmt;

/// An ephemeral refusal. Sent between shards, so it owns its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EphError {
    /// Bad input (400 `ephemeral_bad_request`); the text names the field.
    BadRequest(String),
    /// The ring is full and the policy is `reject` (429 `queue_full`).
    QueueFull {
        /// Queue name.
        queue: String,
    },
    /// The broker-wide RAM ceiling, or a hand-over queue, is full
    /// (503 `ephemeral_unavailable`).
    Unavailable(&'static str),
    /// No such queue (404 `ephemeral_queue_not_found`).
    NotFound {
        /// Queue name.
        queue: String,
    },
    /// The partition's owner changed while the request was on its way or
    /// parked (503 `owner_moved`).
    OwnerMoved,
}

impl fmt::Display for EphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EphError::BadRequest(m) => f.write_str(m),
            EphError::QueueFull { queue } => {
                write!(f, "ephemeral queue {queue:?} is full (policy reject)")
            }
            EphError::Unavailable(why) => write!(f, "ephemeral queues unavailable: {why}"),
            EphError::NotFound { queue } => write!(f, "ephemeral queue {queue:?} not found"),
            EphError::OwnerMoved => {
                f.write_str("the partition's owner changed during the request; retry")
            }
        }
    }
}

impl From<EphError> for ApiError {
    fn from(e: EphError) -> ApiError {
        let (status, code, retry_after) = match &e {
            EphError::BadRequest(_) => (400, "ephemeral_bad_request", None),
            EphError::QueueFull { .. } => (429, "queue_full", Some(1)),
            EphError::Unavailable(_) => (503, "ephemeral_unavailable", Some(1)),
            EphError::NotFound { .. } => (404, "ephemeral_queue_not_found", None),
            EphError::OwnerMoved => (503, "owner_moved", Some(1)),
        };
        ApiError::Refused {
            status,
            code,
            message: e.to_string(),
            retry_after,
        }
    }
}
