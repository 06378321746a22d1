//! The ephemeral routes (http-api.md §18): one file per endpoint, and here
//! what they share: the request's scope (tenant, forwarded or not), where a
//! partition is served (a shard of this broker, or a peer), the fan-out over
//! this broker's shards, and the name checks.
//!
//! Forwarding: a request for a partition another broker owns goes there
//! (`forward`) with `x-queen-eph-fwd: <this server id>`; a request carrying
//! that header is served here or refused with `503 owner_moved`, never sent
//! on again, so two brokers that disagree about the members cannot loop.

pub mod ack;
pub mod admin;
pub mod configure;
pub mod forward;
pub mod pop;
pub mod push;
pub mod queues;

use crate::error::ApiError;
use crate::shard::ephemeral::exec;
use crate::shard::ephemeral::handover::{Answer, Op};
use crate::shard::ephemeral::owner::{self, Member};
use crate::shard::ephemeral::{EphError, QKey};
use crate::shard::Shard;
use shards::http::Request;
use std::rc::Rc;
use std::time::Instant;

/// The header that marks a forwarded request (its value: the sender's server id).
pub const FWD_HEADER: &str = "x-queen-eph-fwd";
/// Longest queue (and partition) name, bytes (§18).
pub const MAX_NAME_BYTES: usize = 512;
/// Most messages or acks per call (§18).
pub const MAX_ITEMS: usize = 10_000;

/// Who asks and how the request came.
#[derive(Debug)]
pub struct Scope {
    /// Tenant id.
    pub tenant: String,
    /// The request was forwarded by a peer: serve it here or refuse it.
    pub forwarded: bool,
}

impl Scope {
    /// The scope of `req`.
    pub fn of(shard: &Shard, req: &Request) -> Result<Scope, ApiError> {
        Ok(Scope {
            tenant: crate::auth::tenant(&shard.cfg.auth, req)?.into_owned(),
            forwarded: req.header(FWD_HEADER).is_some(),
        })
    }

    /// The queue key.
    pub fn key(&self, queue: &str) -> QKey {
        (self.tenant.clone(), queue.to_string())
    }
}

/// Where a partition is served.
#[derive(Debug)]
pub enum Place {
    /// On this broker's shard.
    Here(usize),
    /// On a peer broker.
    Peer(Member),
}

/// Where (tenant, queue, partition) is served, as seen now.
pub fn place(
    shard: &Shard,
    scope: &Scope,
    queue: &str,
    partition: &str,
) -> Result<Place, EphError> {
    let owner = shard
        .eph
        .members
        .borrow()
        .owner(&scope.tenant, queue, partition, Instant::now())
        .cloned();
    match owner {
        None => Ok(Place::Here(owner::shard_of(
            &scope.tenant,
            queue,
            partition,
            shard.cfg.nr_shards,
        ))),
        Some(_) if scope.forwarded => Err(EphError::OwnerMoved),
        Some(m) => Ok(Place::Peer(m)),
    }
}

/// Runs `make(shard)` on every shard of this broker in turn, gathering the answers.
pub async fn all_shards(shard: &Rc<Shard>, make: impl Fn() -> Op) -> Vec<Answer> {
    let mut out = Vec::with_capacity(shard.cfg.nr_shards);
    for i in 0..shard.cfg.nr_shards {
        out.push(exec::call(shard, i, make()).await);
    }
    out
}

/// Checks a queue, partition or group name: 1 to [`MAX_NAME_BYTES`] bytes,
/// no control characters (a queue name is stored in PostgreSQL, which
/// refuses NUL, and none of them is a sane name).
pub fn check_name(v: &str, field: &str) -> Result<(), EphError> {
    if v.is_empty() || v.len() > MAX_NAME_BYTES || v.chars().any(char::is_control) {
        return Err(EphError::BadRequest(format!(
            "{field} must be 1 to {MAX_NAME_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

/// A required string field of a JSON object.
pub fn required_str<'a>(
    m: &'a serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<&'a str, EphError> {
    m.get(field)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| EphError::BadRequest(format!("{field} (string) is required")))
}

/// Appends `s` to `out` as a JSON string.
pub fn json_str(out: &mut Vec<u8>, s: &str) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A required JSON object body; refusals carry the ephemeral code.
pub fn object_body(req: &Request) -> Result<serde_json::Map<String, serde_json::Value>, EphError> {
    super::params::object_body(req).map_err(|e| EphError::BadRequest(e.to_string()))
}
