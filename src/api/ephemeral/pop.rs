//! `GET /api/v1/ephemeral/pop` (http-api.md §18): query `queue`,
//! `partition?`, `batch?` (1..10,000; default 1 (inferred)), `wait?`,
//! `timeout?` (ms, ≤ 300,000; default 30,000 with `wait`), `group?`,
//! `autoAck?` → 200 `{queue, messages: [{id, partition, attempts,
//! payload}]}`, an empty list when there is nothing: never 204.
//!
//! With `partition`, the pop runs on the owning shard (of the owning
//! broker), which parks a long poll on that partition's signal. Without
//! it, this shard asks every shard of this broker in turn (itself first),
//! then, unless the request was forwarded, each live peer (without `wait`);
//! a long poll parks here on the queue's signal, fired by
//! `EphNotice::Pushed` from any shard or broker, with a slow recheck
//! ([`RECHECK`]) because a notice is a hint.
//!
//! The answer is written by hand around each payload's stored JSON text.

use super::forward::{forward, Forward};
use super::{check_name, place, Place, Scope};
use crate::error::ApiError;
use crate::shard::ephemeral::handover::{Answer, Op};
use crate::shard::ephemeral::id::MsgId;
use crate::shard::ephemeral::owner::Member;
use crate::shard::ephemeral::ring::Delivery;
use crate::shard::ephemeral::{exec, wait_key, EphError, QUEUE_MODE_GROUP};
use crate::shard::Shard;
use futures_lite::future::or;
use shards::http::{Request, Response};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Largest `batch`.
pub const MAX_BATCH: i64 = 10_000;
/// `batch` when absent (inferred: one message, as a job queue's take).
pub const DEFAULT_BATCH: i64 = 1;
/// Longest `timeout`, ms (§18).
pub const MAX_TIMEOUT_MS: i64 = 300_000;
/// `timeout` with `wait` and none given, ms (the client's default).
pub const DEFAULT_TIMEOUT_MS: i64 = 30_000;
/// Recheck of a long poll over all partitions: covers a lost notice and a
/// lease coming due elsewhere, at one round over the shards a second.
pub const RECHECK: Duration = Duration::from_secs(1);

/// A parsed pop.
struct Pop {
    queue: String,
    partition: Option<String>,
    group: String,
    batch: usize,
    auto_ack: bool,
    wait: Option<Duration>,
}

fn parse(req: &Request) -> Result<Pop, ApiError> {
    use super::super::params::{flag, int_in};
    let queue = req
        .query_param("queue")
        .ok_or_else(|| EphError::BadRequest("queue is required".into()))?;
    check_name(&queue, "queue")?;
    let partition = req.query_param("partition");
    if let Some(p) = &partition {
        check_name(p, "partition")?;
    }
    let group = req
        .query_param("group")
        .unwrap_or_else(|| QUEUE_MODE_GROUP.to_string());
    check_name(&group, "group")?;
    let bad = |e: ApiError| ApiError::from(EphError::BadRequest(e.to_string()));
    let batch = int_in(req, "batch", 1, MAX_BATCH)
        .map_err(bad)?
        .unwrap_or(DEFAULT_BATCH);
    let timeout = int_in(req, "timeout", 0, MAX_TIMEOUT_MS)
        .map_err(bad)?
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    Ok(Pop {
        queue,
        partition,
        group,
        batch: batch as usize,
        auto_ack: flag(req, "autoAck"),
        wait: flag(req, "wait").then(|| Duration::from_millis(timeout as u64)),
    })
}

/// Handles the pop.
pub async fn handle(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let pop = parse(req)?;
    let scope = Scope::of(shard, req)?;
    let deadline = Instant::now() + pop.wait.unwrap_or_default();
    let Some(partition) = pop.partition.clone() else {
        return pop_any(shard, req, &scope, &pop, deadline).await;
    };
    let owner = match place(shard, &scope, &pop.queue, &partition)? {
        Place::Peer(m) => return relay(shard, req, &m, pop.wait.unwrap_or_default()).await,
        Place::Here(s) => s,
    };
    let op = Op::Pop {
        key: scope.key(&pop.queue),
        partition: Some(partition),
        group: pop.group.clone(),
        max: pop.batch,
        auto_ack: pop.auto_ack,
        wait_until: pop.wait.map(|_| deadline),
    };
    let taken = popped(exec::call(shard, owner, op).await)?;
    shard.counters.popped(None, taken.len());
    Ok(answer(shard, &pop.queue, &taken))
}

/// The same request, sent to the owning peer.
async fn relay(
    shard: &Shard,
    req: &Request,
    to: &Member,
    wait: Duration,
) -> Result<Response, ApiError> {
    let f = Forward {
        method: "GET",
        target: format!("{}?{}", req.path, req.query),
        body: Vec::new(),
        req,
        wait,
    };
    Ok(forward(shard, to, f).await?)
}

fn popped(a: Answer) -> Result<Vec<(String, Delivery)>, ApiError> {
    match a {
        Answer::Popped(r) => Ok(r?),
        other => Err(ApiError::Internal(format!("unexpected answer {other:?}"))),
    }
}

/// A pop over every partition of the queue: this broker's shards, then the peers.
async fn pop_any(
    shard: &Rc<Shard>,
    req: &Request,
    scope: &Scope,
    pop: &Pop,
    deadline: Instant,
) -> Result<Response, ApiError> {
    let signal = shard
        .eph
        .waiters
        .signal(Some(&wait_key(&scope.tenant, &pop.queue)));
    let n = shard.cfg.nr_shards;
    loop {
        let generation = signal.generation();
        let mut taken = Vec::new();
        for i in (0..n).map(|k| (shard.id.0 + k) % n) {
            let op = Op::Pop {
                key: scope.key(&pop.queue),
                partition: None,
                group: pop.group.clone(),
                max: pop.batch - taken.len(),
                auto_ack: pop.auto_ack,
                wait_until: None,
            };
            taken.extend(popped(exec::call(shard, i, op).await)?);
            if taken.len() >= pop.batch {
                break;
            }
        }
        if !taken.is_empty() {
            shard.counters.popped(None, taken.len());
            return Ok(answer(shard, &pop.queue, &taken));
        }
        if !scope.forwarded {
            if let Some(r) = from_peers(shard, req, pop).await {
                return Ok(r);
            }
        }
        let now = Instant::now();
        if now >= deadline || shard.stopping.is_fired() {
            shard.counters.popped(None, 0);
            return Ok(answer(shard, &pop.queue, &[]));
        }
        let nap = RECHECK.min(deadline - now);
        or(
            or(signal.changed(generation), glommio::timer::sleep(nap)),
            shard.stopping.wait(),
        )
        .await;
    }
}

/// Asks each live peer for the queue (no wait); the first non-empty answer.
async fn from_peers(shard: &Rc<Shard>, req: &Request, pop: &Pop) -> Option<Response> {
    let peers: Vec<Member> = {
        let m = shard.eph.members.borrow();
        m.live_peers(Instant::now()).into_iter().cloned().collect()
    };
    for peer in peers {
        let mut q = format!("queue={}&batch={}", enc(&pop.queue), pop.batch);
        q.push_str(&format!("&group={}", enc(&pop.group)));
        if pop.auto_ack {
            q.push_str("&autoAck=true");
        }
        let f = Forward {
            method: "GET",
            target: format!("/api/v1/ephemeral/pop?{q}"),
            body: Vec::new(),
            req,
            wait: Duration::ZERO,
        };
        match forward(shard, &peer, f).await {
            Ok(r) if r.status == 200 && has_messages(&r.body) => return Some(r),
            Ok(_) => {}
            Err(e) => log::debug!("ephemeral: peer {} not asked: {e}", peer.id),
        }
    }
    None
}

/// Whether a pop answer body lists any message, without parsing payloads:
/// the first `"messages":[` is the answer's own key (the queue name before
/// it is an escaped string, where that byte run cannot occur), and a
/// payload that holds the same text comes after it.
fn has_messages(body: &[u8]) -> bool {
    const KEY: &[u8] = b"\"messages\":[";
    body.windows(KEY.len())
        .position(|w| w == KEY)
        .is_some_and(|i| body.get(i + KEY.len()) != Some(&b']'))
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The 200 answer around the deliveries' stored payload texts.
fn answer(shard: &Shard, queue: &str, taken: &[(String, Delivery)]) -> Response {
    let boot = shard.eph.members.borrow().me.boot;
    let size: usize = taken.iter().map(|(_, d)| d.payload.len() + 160).sum();
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(b"{\"queue\":");
    super::json_str(&mut out, queue);
    out.extend_from_slice(b",\"messages\":[");
    for (i, (partition, d)) in taken.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":\"");
        out.extend_from_slice(MsgId::encode(boot, d.seq, d.attempt, partition).as_bytes());
        out.extend_from_slice(b"\",\"partition\":");
        super::json_str(&mut out, partition);
        out.extend_from_slice(format!(",\"attempts\":{},\"payload\":", d.attempt).as_bytes());
        out.extend_from_slice(&d.payload);
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    Response::json(200, out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn empty_answers_are_told_apart() {
        assert!(!super::has_messages(br#"{"queue":"q","messages":[]}"#));
        assert!(super::has_messages(
            br#"{"queue":"q","messages":[{"id":"x"}]}"#
        ));
        assert!(super::has_messages(
            br#"{"queue":"q","messages":[{"payload":{"messages":[]}}]}"#
        ));
        assert_eq!(super::enc("a b/é"), "a%20b%2F%C3%A9");
    }
}
