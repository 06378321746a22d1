//! The three pop forms (http-api.md §4) and long polling (semantics.md §6).
//!
//! One attempt is one `queen.pop` call (claim + read in one transaction).
//! With `wait=true` an empty attempt parks the request on its shard, holding
//! no connection, until the first of: a `pushed` notice for the queue (from
//! any shard, via the mesh thread), the backoff recheck timer (the fallback
//! when a notice is lost), the deadline, or shutdown. The generation of the
//! queue's signal is read before each attempt, so a push that commits during
//! the attempt triggers an immediate retry instead of a lost wake-up.
//!
//! Conflation (§17) is a branch per attempt in `pop_conflation` (its own SQL
//! function, `queen.pop_conflated`); autopilot sizing (§18) happens in
//! `parse` through `pop_autopilot`, which also observes every attempt.

use super::pop_answer::{self, Attempt};
use super::reply::ok_json;
use super::{params, pop_autopilot, pop_conflation};
use crate::config::SubscriptionDefault;
use crate::error::ApiError;
use crate::ids::uuid_v7;
use crate::metrics::stages::Stage;
use crate::shard::{sweeps, Shard};
use futures_lite::future::or;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The group a pop without `consumerGroup` uses.
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";
/// Largest `batch` accepted.
const MAX_BATCH: i64 = 10_000;
/// Largest long-poll `timeout` accepted, in ms (one hour).
const MAX_TIMEOUT_MS: i64 = 3_600_000;
/// Longest `leaseSeconds` accepted (one week).
const MAX_LEASE_SECONDS: i64 = 7 * 86_400;
/// Most partitions one pop may claim.
const MAX_PARTITIONS: i64 = 64;

/// Which partitions a pop may claim.
#[derive(Debug)]
pub struct Scope {
    queue: Option<String>,
    partition: Option<String>,
    namespace: Option<String>,
    task: Option<String>,
}

impl Scope {
    /// Any partition of `queue`.
    pub fn queue(q: &str) -> Scope {
        Scope {
            queue: Some(q.into()),
            partition: None,
            namespace: None,
            task: None,
        }
    }
    /// Exactly one partition.
    pub fn partition(q: &str, p: &str) -> Scope {
        Scope {
            queue: Some(q.into()),
            partition: Some(p.into()),
            namespace: None,
            task: None,
        }
    }
    /// Every queue matching `namespace`/`task` from the query.
    pub fn discovery(req: &Request) -> Scope {
        let nonempty = |n: &str| req.query_param(n).filter(|s| !s.is_empty());
        Scope {
            queue: None,
            partition: None,
            namespace: nonempty("namespace"),
            task: nonempty("task"),
        }
    }
}

/// A parsed pop request.
#[derive(Debug)]
struct PopRequest {
    arg: Value,
    group: String,
    auto_ack: bool,
    wait: bool,
    timeout: Duration,
    /// Batch/width as applied, and the autopilot part (`pop_autopilot`).
    sizing: pop_autopilot::Sizing,
    /// The conflation policy branch (`pop_conflation`); `None` in queue mode.
    conflation: Option<pop_conflation::Conflation>,
}

fn parse(shard: &Shard, req: &Request, scope: Scope) -> Result<PopRequest, ApiError> {
    let cfg = &shard.cfg.pop;
    let batch_given = params::int_in(req, "batch", 1, MAX_BATCH)?;
    let partitions_given = req
        .query_param("partitions")
        .and_then(|p| p.trim().parse::<i64>().ok())
        .map(|n| n.clamp(1, MAX_PARTITIONS));
    let timeout_ms =
        params::int_in(req, "timeout", 0, MAX_TIMEOUT_MS)?.unwrap_or(cfg.default_timeout_ms as i64);
    let lease = params::int_in(req, "leaseSeconds", 1, MAX_LEASE_SECONDS)?;
    let group = req
        .query_param("consumerGroup")
        .filter(|g| !g.is_empty())
        .unwrap_or_else(|| QUEUE_MODE.into());
    params::check_group(&group)?;
    let auto_ack = params::flag(req, "autoAck");
    if auto_ack && params::flag(req, "conflation") {
        return Err(ApiError::BadRequest(
            "conflation cannot be combined with autoAck=true".into(),
        ));
    }
    let (mode, from) = subscription(req, &group, cfg.default_subscription)?;
    for (label, v) in [("queue", &scope.queue), ("partition", &scope.partition)] {
        if let Some(v) = v {
            params::check_name(v, label)?;
        }
    }
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let scope_key = scope.queue.clone().unwrap_or_else(|| {
        let part = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".into());
        format!("{}:{}", part(&scope.namespace), part(&scope.task))
    });
    let key = || (tenant.to_string(), scope_key.clone(), group.clone());
    let sizing = pop_autopilot::size(
        pop_autopilot::Controller {
            cfg: &cfg.autopilot,
            lanes: &shard.autopilot,
        },
        params::flag(req, "autopilot"),
        key,
        batch_given,
        partitions_given,
        scope.partition.is_some(),
        cfg.default_batch as i64,
    );
    let (batch, partitions) = (sizing.batch, sizing.partitions);
    let conflation = pop_conflation::Conflation::new(
        params::flag(req, "conflation"),
        group == QUEUE_MODE,
        key(),
        batch,
        sizing.width_set.then_some(partitions),
    )?;
    let arg = json!({
        "tenant": tenant,
        "queue": scope.queue, "partition": scope.partition,
        "namespace": scope.namespace, "task": scope.task,
        "group": group, "batch": batch, "partitions": partitions,
        "leaseSeconds": lease, "autoAck": auto_ack,
        "subMode": mode, "subFrom": from, "leaseId": Value::Null,
    });
    Ok(PopRequest {
        arg,
        group,
        auto_ack,
        wait: params::flag(req, "wait"),
        timeout: Duration::from_millis(timeout_ms as u64),
        sizing,
        conflation,
    })
}

/// Where a new named group starts: (`all`|`new`|`timestamp`, the timestamp).
fn subscription(
    req: &Request,
    group: &str,
    default: SubscriptionDefault,
) -> Result<(&'static str, Option<String>), ApiError> {
    if group == QUEUE_MODE {
        return Ok(("all", None));
    }
    if let Some(from) = req
        .query_param("subscriptionFrom")
        .filter(|s| !s.is_empty())
    {
        if from.eq_ignore_ascii_case("now") {
            return Ok(("new", None));
        }
        if !looks_like_timestamp(&from) {
            return Err(ApiError::BadRequest(
                "subscriptionFrom must be \"now\" or an ISO-8601 timestamp".into(),
            ));
        }
        return Ok(("timestamp", Some(from)));
    }
    Ok(
        match req
            .query_param("subscriptionMode")
            .map(|m| m.to_ascii_lowercase())
        {
            Some(m) if matches!(m.as_str(), "new" | "new-only" | "new_only" | "newonly") => {
                ("new", None)
            }
            Some(_) => ("all", None),
            None if default == SubscriptionDefault::New => ("new", None),
            None => ("all", None),
        },
    )
}

/// `YYYY-MM-DD` followed by nothing or `T`/space and a time; PostgreSQL parses the rest.
fn looks_like_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
        && (b.len() == 10 || b[10] == b'T' || b[10] == b' ')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-:.+ TZ".contains(c))
}

/// Handles the three pop forms.
pub async fn handle(shard: &Rc<Shard>, req: &Request, scope: Scope) -> Result<Response, ApiError> {
    if shard.spool.pop_paused.get() {
        // Pop maintenance (semantics.md §15): answer at once, no database.
        return Ok(ok_json(&json!({"messages": [], "paused": true})));
    }
    let deadline = Instant::now();
    let mut pop = parse(shard, req, scope)?;
    let deadline = deadline + pop.timeout;
    let signal = shard.waiters.signal(pop.arg["queue"].as_str());
    let lane = lane(&pop.arg);
    let cfg = &shard.cfg.pop;
    let mut interval = Duration::from_millis(cfg.wait_initial_ms);
    let mut empties = 0u32;
    // When a notice last woke this pop (for the `pop_woken` stage).
    let mut woken: Option<Instant> = None;
    // Set while this pop answers for a wake it was picked for (waiters.rs).
    let mut baton = None;
    // A lane whose deep sweep just came back empty, with nothing pushed
    // since, starts as a re-check does: without the sweep (shard::sweeps).
    let wide = !pop.arg["partition"].is_string();
    let mut sweeps = sweeps::Plan::start(&shard.sweeps, &lane, wide, Instant::now());
    loop {
        let generation = signal.generation();
        let (deep, counted) = sweeps.next();
        // Re-checks skip the candidates' deep sweep (queen.pop_sweep_depth): the
        // first attempt already looked for backlog; what is new since is found
        // by the cheap sources.
        pop.arg["recheck"] = Value::Bool(!deep);
        pop.arg["leaseId"] = Value::String(uuid_v7());
        let result =
            match pop_conflation::try_conflated(shard, &mut pop.conflation, &pop.arg).await? {
                Some(conflated) => Attempt::Tree(conflated),
                None => {
                    let asked = Instant::now();
                    let rows = shard.db.pop(pop.arg.clone()).await?;
                    if counted {
                        shard.counters.swept(!deep);
                        if deep && rows.messages.is_empty() {
                            let (l, s) = (lane.clone(), signal.clone());
                            shard.sweeps.record(l, s, generation, asked);
                        }
                    }
                    Attempt::Rows(rows)
                }
            };
        let ctl = pop_autopilot::Controller {
            cfg: &cfg.autopilot,
            lanes: &shard.autopilot,
        };
        pop_autopilot::observe(ctl, &pop.sizing, result.claimed(), result.oldest_us());
        let delivered = result.len();
        if let Some(b) = baton.take() {
            settle(b, &pop.arg, &result, delivered);
        }
        // The queue for the per-queue rates: named, or the one a namespace/task pop hit.
        let named = (pop.arg["queue"].as_str())
            .or_else(|| result.first_queue())
            .map(str::to_string);
        if let Some(resp) = answer(&pop, result) {
            if let Some(w) = woken {
                shard.counters.stage(Stage::PopWoken, w.elapsed());
            }
            shard.counters.popped(named.as_deref(), delivered);
            return Ok(resp);
        }
        let now = Instant::now();
        if !pop.wait || now >= deadline || shard.stopping.is_fired() {
            shard.counters.popped(named.as_deref(), 0);
            return Ok(empty(&pop));
        }
        let nap = interval.min(deadline - now);
        let backoff = (empties >= cfg.wait_backoff_threshold).then_some(interval);
        let _parked = shard.counters.parked(pop.arg["queue"].as_str(), backoff);
        baton = or(
            or(signal.parked(generation, lane.clone()), async {
                glommio::timer::sleep(nap).await;
                None
            }),
            async {
                shard.stopping.wait().await;
                None
            },
        )
        .await;
        if baton.is_some() {
            let now = Instant::now();
            if let Some(fired) = signal.fired_at() {
                shard
                    .counters
                    .stage(Stage::Wake, now.saturating_duration_since(fired));
            }
            woken = Some(now);
        }
        empties += 1;
        sweeps.recheck(Instant::now());
        if empties >= cfg.wait_backoff_threshold {
            let next = interval.as_secs_f64() * cfg.wait_backoff_multiplier;
            interval = Duration::from_secs_f64(next).min(Duration::from_millis(cfg.wait_max_ms));
        }
    }
}

/// The wake lane of a pop: pops with the same tenant, scope, partition and
/// group would claim the same messages, so a notice wakes one of them.
fn lane(arg: &Value) -> Rc<str> {
    let f = |k: &str| arg[k].as_str().unwrap_or("");
    ["tenant", "queue", "partition", "namespace", "task", "group"]
        .map(f)
        .join("\u{1f}")
        .into()
}

/// After a woken pop's attempt: keep the wake if it took less than it
/// could (its lane is drained), else let the baton wake the next pop of
/// the lane (a full batch, or every partition it may claim in one pop
/// claimed: more may be waiting).
fn settle(baton: crate::shard::waiters::Baton, arg: &Value, result: &Attempt, delivered: usize) {
    let batch = arg["batch"].as_i64().unwrap_or(1).max(1) as usize;
    let width = arg["partitions"].as_i64().unwrap_or(1).max(1);
    let claimed = result.claimed().max(1);
    let one_partition = arg["partition"].is_string();
    let full = delivered >= batch || (delivered > 0 && !one_partition && claimed >= width);
    if !full {
        baton.settle();
    }
}

/// Shapes a non-empty attempt into the §4 answer; `None` when empty.
fn answer(pop: &PopRequest, attempt: Attempt) -> Option<Response> {
    let lease = if pop.auto_ack {
        String::new()
    } else {
        pop.arg["leaseId"].as_str().unwrap_or("").to_string()
    };
    let r = match attempt {
        Attempt::Tree(r) => r,
        Attempt::Rows(p) => {
            let mut top = pop_answer::top_keys(&p, &lease, &pop.group)?;
            extras(pop, &mut top);
            return Some(pop_answer::answer(&p, &top, &lease, &pop.group));
        }
    };
    answer_tree(pop, r, lease)
}

/// The §4 answer from a conflated pop's jsonb; `None` when empty.
fn answer_tree(pop: &PopRequest, mut r: Value, lease: String) -> Option<Response> {
    let mut messages = match r.get_mut("messages").map(Value::take) {
        Some(Value::Array(m)) if !m.is_empty() => m,
        _ => return None,
    };
    for m in &mut messages {
        if let Value::Object(o) = m {
            crate::crypto::open_message(o);
            o.insert("leaseId".into(), Value::String(lease.clone()));
            o.insert("consumerGroup".into(), Value::String(pop.group.clone()));
        }
    }
    let first = &messages[0];
    let mut body = json!({
        "success": true,
        "queue": first.get("queue").cloned().unwrap_or(Value::Null),
        "partition": first.get("partition").cloned().unwrap_or(Value::Null),
        "partitionId": first.get("partitionId").cloned().unwrap_or(Value::Null),
        "leaseId": lease,
        "consumerGroup": pop.group,
        "partitionsClaimed": r.get("partitionsClaimed").cloned().unwrap_or(json!(1)),
        "messages": messages,
    });
    if let Value::Object(o) = &mut body {
        extras(pop, o);
    }
    Some(ok_json(&body))
}

/// Adds the `autopilot` echo and the conflation keys to an answer.
fn extras(pop: &PopRequest, body: &mut serde_json::Map<String, Value>) {
    pop_conflation::decorate(&pop.conflation, body);
    let width = match &pop.conflation {
        Some(c) if c.applied => c.width(),
        _ => pop.sizing.partitions,
    };
    if let Some(echo) = pop.sizing.echo(width) {
        body.insert("autopilot".into(), echo);
    }
}

/// The answer when nothing was delivered: 204, or the §4 200 body when
/// conflation is in play.
fn empty(pop: &PopRequest) -> Response {
    match pop_conflation::empty_body(&pop.conflation) {
        Some(mut body) => {
            extras(pop, &mut body);
            ok_json(&Value::Object(body))
        }
        None => Response::no_content(),
    }
}

#[cfg(test)]
mod tests {
    use super::looks_like_timestamp;

    #[test]
    fn timestamps() {
        assert!(looks_like_timestamp("2025-01-31T12:34:56.123456Z"));
        assert!(looks_like_timestamp("2025-01-31"));
        assert!(!looks_like_timestamp("yesterday"));
        assert!(!looks_like_timestamp("2025-01-31T00:00:00'; drop"));
    }
}
