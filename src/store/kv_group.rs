//! Group commit for the KV pool (`super::kv_pool`): the KV and lock calls a
//! KV thread finds queued together share one PostgreSQL commit.
//!
//! # Why
//! Under `synchronous_commit = on` every call alone is one WAL flush; at
//! 5,000 puts/s that is half of what PostgreSQL commits per second on a
//! 2-core box, and the flushes queue up (put p99 26 ms; a bigger pool made it
//! worse). A group of N calls pays one flush and one round trip.
//!
//! # How a group runs
//! A group is one statement, `queen.kv_group(calls)` (sql/functions/kv.sql),
//! in its own implicit transaction. It runs each call inside a PL/pgSQL
//! `BEGIN ... EXCEPTION` block, which is a savepoint: released when the
//! call succeeds, rolled back to when it raises, so a failed call applies
//! nothing and the others still apply. The statement's answer is read up to
//! PostgreSQL's ReadyForQuery, which comes after the implicit commit, so no
//! answer leaves before its commit; a failed statement (a commit failure, a
//! lost connection, the statement timeout) answers every call of the group
//! with that error and nothing of the group is applied.
//!
//! # What groups, and in what order
//! - Only [`KvCall`]s (a `POST /api/v1/kv` call, a `POST /api/v1/locks`
//!   call). Timers, the sweep and the switch recheck stay closures that run
//!   alone in their own transactions (the fire round's claim-push-delete
//!   must be one transaction of its own).
//! - Read-only calls (only get/getMany/getPrefix; lock `get`) form their own
//!   group, run and answered before the writes: a read-only commit flushes
//!   no WAL, and a read never waits for the writers' flush. All calls in a
//!   group were in flight together, so any order among them is a valid one.
//! - Writes run sorted by their first written key (tenant, namespace, key),
//!   so two groups on two connections take the row locks of single-key
//!   calls in one global order and cannot deadlock on them.
//! - A call that still meets a deadlock (multi-key calls in crossing orders)
//!   or a serialization failure inside its savepoint is rolled back to it,
//!   and run once more alone, in a transaction of its own, after its group
//!   committed: the group's locks are gone by then, so the cycle that chose
//!   it as the victim cannot form again with that group. Retrying it inside
//!   the group would wait on the same other group that waits on us.
//! - A group of one runs alone, as a call did before grouping.

use super::jobs::StoreError;
use super::pooled::Conn;
use super::sql_error::{classify, classify_code};
use postgres::types::{Json, Type};
use serde::Serialize;
use serde_json::Value;

/// Most ops (summed over its calls) one group carries, bounding how long
/// the last call of a group waits behind the ones before it: a call has at
/// most `QUEEN_KV_MAX_OPS_PER_CALL` (256) ops, a typical one 1.
pub const KV_GROUP_MAX_OPS: usize = 1024;

/// SQLSTATEs of a call that is retried alone after its group committed.
const RETRY_ALONE: [&str; 2] = ["40P01", "40001"];

/// What the call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    /// `queen.kv_call(tenant, ops, max_read, has_required)`.
    Kv,
    /// `queen.lock_apply(tenant, ops)`.
    Lock,
}

/// One KV or lock call: validated ops of one tenant, one result.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KvCall {
    /// KV ops or lock ops.
    pub kind: CallKind,
    /// The request's tenant (a uuid).
    pub tenant: String,
    /// The normalised ops (`src/api/kv/ops.rs`, `src/api/locks.rs`).
    pub ops: Value,
    /// KV: the bound on bytes read by getMany/getPrefix.
    pub max_read: i64,
    /// KV: some op is `required`.
    pub has_required: bool,
}

/// A call's answer: its result and how many calls shared its commit.
#[derive(Debug)]
pub struct CallAnswer {
    /// The call's jsonb result (`{results}` or a precondition object).
    pub value: Value,
    /// Calls in the group it committed with (1: alone).
    pub group: usize,
}

impl KvCall {
    /// A KV call of `ops`.
    pub fn kv(tenant: String, ops: Value, max_read: i64, has_required: bool) -> KvCall {
        KvCall {
            kind: CallKind::Kv,
            tenant,
            ops,
            max_read,
            has_required,
        }
    }

    /// A lock call of `ops`.
    pub fn lock(tenant: String, ops: Value) -> KvCall {
        KvCall {
            kind: CallKind::Lock,
            tenant,
            ops,
            max_read: 0,
            has_required: false,
        }
    }

    /// Its number of ops (for [`KV_GROUP_MAX_OPS`]).
    pub fn len(&self) -> usize {
        self.ops.as_array().map_or(1, Vec::len).max(1)
    }

    /// Whether no op writes.
    pub fn read_only(&self) -> bool {
        self.write_ops().next().is_none()
    }

    /// The ops that take row locks.
    fn write_ops(&self) -> impl Iterator<Item = &Value> {
        let reads: &[&str] = match self.kind {
            CallKind::Kv => &["get", "getMany", "getPrefix"],
            CallKind::Lock => &["get"],
        };
        self.ops
            .as_array()
            .into_iter()
            .flatten()
            .filter(move |o| !reads.contains(&o["op"].as_str().unwrap_or("")))
    }

    /// Whether `other` first writes the row this call first writes: the
    /// two are not grouped. Measured on the shared box: incr on one hot key
    /// ran at half its ungrouped rate when grouped (likely because one
    /// transaction updating a row again and again grows a version chain
    /// nobody can prune and locks it from a new savepoint each time; not
    /// verified). Reads never collide.
    pub fn same_first_row(&self, other: &KvCall) -> bool {
        !self.read_only() && !other.read_only() && self.lock_order() == other.lock_order()
    }

    /// The row its first write locks: (namespace, key) within the tenant.
    fn lock_order(&self) -> (&str, &str, &str) {
        let first = self.write_ops().next();
        fn s(v: Option<&Value>) -> &str {
            v.and_then(Value::as_str).unwrap_or("")
        }
        match self.kind {
            CallKind::Kv => (
                &self.tenant,
                s(first.map(|o| &o["ns"])),
                s(first.map(|o| &o["key"])),
            ),
            CallKind::Lock => (&self.tenant, "_locks", s(first.map(|o| &o["name"]))),
        }
    }

    /// Runs the call alone: one statement, its own implicit transaction.
    pub fn run_alone(&self, c: &mut Conn) -> Result<Value, StoreError> {
        let rows = match self.kind {
            CallKind::Kv => c.query_prepared(
                "SELECT queen.kv_call($1, $2, $3, $4)",
                &[
                    (&self.tenant, Type::TEXT),
                    (&self.ops, Type::JSONB),
                    (&self.max_read, Type::INT8),
                    (&self.has_required, Type::BOOL),
                ],
            ),
            CallKind::Lock => c.query_prepared(
                "SELECT queen.lock_apply($1, $2)",
                &[(&self.tenant, Type::TEXT), (&self.ops, Type::JSONB)],
            ),
        }
        .map_err(classify)?;
        c.first_json(&rows)
    }
}

/// Runs `calls` (all started: their shards wait for them) on `c` and hands
/// each answer to `answer(index, result)` once it is committed: reads first,
/// then the writes (see the module doc).
pub fn run(
    c: &mut Conn,
    calls: &[KvCall],
    mut answer: impl FnMut(usize, Result<CallAnswer, StoreError>),
) {
    let (reads, mut writes): (Vec<usize>, Vec<usize>) =
        (0..calls.len()).partition(|&i| calls[i].read_only());
    writes.sort_by(|&a, &b| calls[a].lock_order().cmp(&calls[b].lock_order()));
    for part in [reads, writes] {
        run_part(c, calls, &part, &mut answer);
    }
}

/// One group (or one call alone) and its retries.
fn run_part(
    c: &mut Conn,
    calls: &[KvCall],
    part: &[usize],
    answer: &mut impl FnMut(usize, Result<CallAnswer, StoreError>),
) {
    let alone = |c: &mut Conn, i: usize| {
        calls[i]
            .run_alone(c)
            .map(|value| CallAnswer { value, group: 1 })
    };
    match part {
        [] => {}
        [i] => answer(*i, alone(c, *i)),
        _ => {
            let group = part.len();
            let members: Vec<&KvCall> = part.iter().map(|&i| &calls[i]).collect();
            let results = match run_group(c, &members) {
                Ok(r) => r,
                Err(e) => {
                    for &i in part {
                        answer(i, Err(e.clone()));
                    }
                    return;
                }
            };
            let mut retry = Vec::new();
            for (&i, r) in part.iter().zip(results) {
                match r {
                    Member::Done(value) => answer(i, Ok(CallAnswer { value, group })),
                    Member::Retry => retry.push(i),
                    Member::Failed(e) => answer(i, Err(e)),
                }
            }
            for i in retry {
                answer(i, alone(c, i));
            }
        }
    }
}

/// One call's outcome inside a committed group.
enum Member {
    Done(Value),
    /// Rolled back to its savepoint on a deadlock: run it again alone.
    Retry,
    Failed(StoreError),
}

/// `SELECT queen.kv_group($1)`: one statement, one commit.
fn run_group(c: &mut Conn, calls: &[&KvCall]) -> Result<Vec<Member>, StoreError> {
    let rows = c
        .query_prepared("SELECT queen.kv_group($1)", &[(&Json(calls), Type::JSONB)])
        .map_err(classify)?;
    let out = c.first_json(&rows)?;
    let Value::Array(items) = out else {
        return Err(StoreError::Db("kv_group: not an array".into()));
    };
    if items.len() != calls.len() {
        return Err(StoreError::Db("kv_group: one result per call".into()));
    }
    Ok(items.into_iter().map(member).collect())
}

/// `{"r": result}` or `{"sqlstate", "message"}` (the call's savepoint was
/// rolled back).
fn member(mut v: Value) -> Member {
    if let Some(r) = v.get_mut("r") {
        return Member::Done(r.take());
    }
    let code = v["sqlstate"].as_str().unwrap_or_default();
    if RETRY_ALONE.contains(&code) {
        log::debug!("KV group: a call met {code}; retried alone after the commit");
        return Member::Retry;
    }
    Member::Failed(classify_code(code, v["message"].as_str().unwrap_or("")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_are_told_from_writes_and_writes_order_by_their_first_key() {
        let t = "11111111-1111-4111-8111-111111111111".to_string();
        let get = KvCall::kv(
            t.clone(),
            json!([{"op": "get", "ns": "a", "key": "z"}]),
            0,
            false,
        );
        let put = |k: &str| {
            KvCall::kv(
                t.clone(),
                json!([{"op": "get", "ns": "a", "key": "0"}, {"op": "put", "ns": "a", "key": k}]),
                0,
                false,
            )
        };
        assert!(get.read_only());
        assert!(!put("k").read_only());
        assert_eq!(put("k").lock_order(), (t.as_str(), "a", "k"));
        assert!(put("b").lock_order() < put("c").lock_order());
        let lock_get = KvCall::lock(t.clone(), json!([{"op": "get", "name": "n"}]));
        assert!(lock_get.read_only());
        let acquire = KvCall::lock(t.clone(), json!([{"op": "acquire", "name": "n"}]));
        assert_eq!(acquire.lock_order(), (t.as_str(), "_locks", "n"));
        assert_eq!(acquire.len(), 1);
    }

    #[test]
    fn a_deadlocked_member_is_retried_and_others_keep_their_error() {
        assert!(matches!(
            member(json!({"r": {"results": []}})),
            Member::Done(_)
        ));
        assert!(matches!(
            member(json!({"sqlstate": "40P01", "message": "deadlock detected"})),
            Member::Retry
        ));
        assert!(matches!(
            member(json!({"sqlstate": "55P03", "message": "lock timeout"})),
            Member::Failed(StoreError::Db(_))
        ));
    }
}
