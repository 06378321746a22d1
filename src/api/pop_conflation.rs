//! Conflated ("last value") pop, semantics.md §17 and http-api.md §4: the
//! policy branch of a pop and the keys it adds to the answer. Runs on the
//! shard thread serving the pop; the policy cache is the shard's
//! (`Shard::conflation`, see `shard/conflation.rs`).
//!
//! A group's policy is stored with its subscription registration
//! (`consumer_groups_metadata.conflation`, see `sql/functions/conflation.sql`);
//! the first registration decides it, later declarations never change it.
//! `try_conflated` (called by `pop.rs` before its normal `queen.pop` call)
//! goes to `queen.pop_conflated` when the request asks for
//! conflation or the shard's cache says (or does not know whether) the group
//! conflates; that function registers, resolves the stored policy and either
//! delivers conflated or answers `{policy:false}`, after which the normal
//! `queen.pop` runs. A group known not to conflate goes straight to
//! `queen.pop`, so a non-conflating group pays one extra round trip per
//! `POLICY_TTL` (`shard/conflation.rs`) per shard, not per pop.
//!
//! Decisions where the spec is silent:
//! - queue mode (no `consumerGroup`) has no registration and so no stored
//!   policy: `conflation=true` there is a 400 (the client documents that
//!   conflation needs a consumer group), and queue-mode pops never conflate;
//! - a stored-conflating group popped with `autoAck=true` (without asking for
//!   conflation) is delivered conflated and auto-acked: the cursor jumps to
//!   the newest message at delivery. Only the explicit combination is refused;
//! - width of a conflated pop: one message per partition, so the batch is the
//!   number of partitions, clamped to 1..64; a width the client gave (or the
//!   autopilot chose) caps it further. The partition form stays at one;
//! - discovery pops (`namespace`/`task`) resolve the policy per queue:
//!   partitions of conflating queues deliver their newest message, the others
//!   are read normally, and the answer says `"conflation": true`;
//! - a non-conflating answer to a pop that asked gets `conflationConflict:
//!   true`; a pop of a queue that does not exist yet that asked is answered as
//!   conflating (that is the policy its first registration will store).
//!
//! Known limit: a shard that cached "not conflating" keeps using `queen.pop`
//! for up to `POLICY_TTL` after the group was deleted with its metadata and
//! registered again as conflating elsewhere; a `conflation=true` pop served in
//! that window registers the group as non-conflating if it is the first.

use crate::error::ApiError;
use crate::shard::conflation::PolicyKey;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Map, Value};

/// Most partitions a conflated pop claims (pop's own claim limit).
const MAX_CONFLATED_WIDTH: i64 = 64;

/// The conflation state of one pop request.
#[derive(Debug)]
pub struct Conflation {
    /// The request carried `conflation=true`.
    requested: bool,
    /// Partitions a conflated attempt may claim.
    width: i64,
    /// Cache key.
    key: PolicyKey,
    /// The last attempt was delivered conflated.
    pub applied: bool,
    /// The request asked but the stored policy is not conflating.
    pub conflict: bool,
}

impl Conflation {
    /// The state for a named-group pop; `None` in queue mode (never conflating).
    pub fn new(
        requested: bool,
        queue_mode: bool,
        key: PolicyKey,
        batch: i64,
        width: Option<i64>,
    ) -> Result<Option<Conflation>, ApiError> {
        if queue_mode {
            if requested {
                return Err(ApiError::BadRequest(
                    "conflation needs a consumerGroup (queue mode has no stored policy)".into(),
                ));
            }
            return Ok(None);
        }
        let per_batch = batch.clamp(1, MAX_CONFLATED_WIDTH);
        Ok(Some(Conflation {
            requested,
            width: width.map_or(per_batch, |w| w.clamp(1, per_batch)),
            key,
            applied: false,
            conflict: false,
        }))
    }

    /// Partitions a conflated attempt claims (for the autopilot echo).
    pub fn width(&self) -> i64 {
        self.width
    }
}

/// One conflated pop attempt when the group's policy calls for it; `None`
/// = the caller runs the normal pop (the request's conflict flag is set).
pub async fn try_conflated(
    shard: &Shard,
    state: &mut Option<Conflation>,
    arg: &Value,
) -> Result<Option<Value>, ApiError> {
    let Some(c) = state else {
        return Ok(None);
    };
    let policies = &shard.conflation;
    if policies.cached(&c.key) != Some(false) {
        let mut carg = arg.clone();
        carg["conflation"] = Value::Bool(c.requested);
        carg["partitions"] = json!(c.width);
        let r = shard.db.call(Proc::PopConflated, carg).await?;
        if r.get("policy").and_then(Value::as_bool) == Some(true) {
            policies.remember(&c.key, true);
            c.applied = true;
            c.conflict = false;
            return Ok(Some(r));
        }
        if r.get("registered").and_then(Value::as_bool) == Some(true) {
            policies.remember(&c.key, false);
        }
    }
    c.applied = false;
    c.conflict = c.requested;
    Ok(None)
}

/// Adds `conflation` / `conflationConflict` to an answer body.
pub fn decorate(state: &Option<Conflation>, body: &mut Map<String, Value>) {
    if let Some(c) = state {
        keys(c, body);
    }
}

fn keys(c: &Conflation, body: &mut Map<String, Value>) {
    if c.applied {
        body.insert("conflation".into(), Value::Bool(true));
    } else if c.conflict {
        body.insert("conflationConflict".into(), Value::Bool(true));
    }
}

/// The 200 body of an empty pop when conflation is in play; `None` = 204.
pub fn empty_body(state: &Option<Conflation>) -> Option<Map<String, Value>> {
    let c = state.as_ref().filter(|c| c.applied || c.conflict)?;
    let mut body = Map::new();
    body.insert("messages".into(), json!([]));
    keys(c, &mut body);
    Some(body)
}
