//! Running an [`Op`] on the shard that owns it: [`call`] runs it here when
//! this shard is the owner and otherwise hands it over on the owner's inbox;
//! [`serve`] is the owner's side of a hand-over (spawned per call by the
//! shard's ephemeral drain, `crate::serve`).
//!
//! A long poll on one partition parks on the owner, on the partition's
//! signal: a push there fires it directly, with no notice in between. The
//! park is a select over that signal, the deadline, shutdown and (for a
//! hand-over) the asker going away; deliveries whose answer cannot be sent
//! are given back untouched, so a client that hung up loses nothing.

use super::handover::{Answer, Call, Op};
use super::ring::Delivery;
use super::{EphError, QKey};
use crate::shard::Shard;
use futures_channel::oneshot;
use futures_lite::future::or;
use std::rc::Rc;
use std::time::Instant;

/// Runs `op` on shard `owner` of this broker and waits for its answer.
pub async fn call(shard: &Rc<Shard>, owner: usize, op: Op) -> Answer {
    if owner == shard.id.0 {
        return run(shard, op, None).await;
    }
    let (tx, rx) = oneshot::channel();
    let Some(link) = shard.eph.links.get(owner) else {
        return refused(&op, EphError::Unavailable("no such shard"));
    };
    if let Err(call) = link.try_send(Call { op, reply: tx }) {
        return refused(
            &call.op,
            EphError::Unavailable("the owning shard is saturated"),
        );
    }
    match rx.await {
        Ok(a) => a,
        // The owner dropped the call: only at shutdown.
        Err(_) => Answer::Popped(Err(EphError::Unavailable("the owning shard stopped"))),
    }
}

/// The owner's side of a hand-over: runs it and answers; deliveries the
/// asker is no longer there to receive go back to their rings.
pub async fn serve(shard: Rc<Shard>, call: Call) {
    let Call { op, mut reply } = call;
    let undo = match &op {
        Op::Pop {
            key,
            group,
            auto_ack: false,
            ..
        } => Some((key.clone(), group.clone())),
        _ => None,
    };
    let answer = run(&shard, op, Some(&mut reply)).await;
    if let Err(Answer::Popped(Ok(taken))) = reply.send(answer) {
        if let Some((key, group)) = undo {
            shard.eph.untake(&key, &group, &taken);
        }
    }
}

fn refused(op: &Op, e: EphError) -> Answer {
    match op {
        Op::Push { .. } => Answer::Pushed(Err(e)),
        _ => Answer::Popped(Err(e)),
    }
}

async fn run(shard: &Rc<Shard>, op: Op, reply: Option<&mut oneshot::Sender<Answer>>) -> Answer {
    let eph = &shard.eph;
    match op {
        Op::Push {
            key,
            partition,
            payloads,
        } => Answer::Pushed(eph.push(&key, &partition, payloads)),
        Op::Pop {
            key,
            partition: None,
            group,
            max,
            auto_ack,
            ..
        } => Answer::Popped(Ok(eph.take_any(&key, &group, max, auto_ack))),
        Op::Pop {
            key,
            partition: Some(p),
            group,
            max,
            auto_ack,
            wait_until,
        } => {
            let pop = OnePop {
                key,
                partition: p,
                group,
                max,
                auto_ack,
            };
            Answer::Popped(pop_one(shard, pop, wait_until, reply).await)
        }
        Op::Ack { key, group, items } => Answer::Acked(
            items
                .into_iter()
                .map(|(i, p, seq, attempt, status)| {
                    (i, eph.ack(&key, &p, &group, seq, attempt, status))
                })
                .collect(),
        ),
        Op::Reset { key } => Answer::Count(eph.reset(&key)),
        Op::Drop { key, undeclare } => {
            if undeclare {
                eph.declare(key.clone(), None);
            }
            Answer::Count(usize::from(eph.drop_queue(&key)))
        }
        Op::Declare { key, options } => {
            eph.declare(key, options);
            Answer::Done
        }
        Op::Stats {
            tenant,
            queue,
            group,
        } => Answer::Stats(eph.stats(&tenant, queue.as_deref(), &group)),
    }
}

/// A pop of one partition.
struct OnePop {
    key: QKey,
    partition: String,
    group: String,
    max: usize,
    auto_ack: bool,
}

/// Takes from one partition, parking until `wait_until` while it is empty.
async fn pop_one(
    shard: &Rc<Shard>,
    pop: OnePop,
    wait_until: Option<Instant>,
    mut reply: Option<&mut oneshot::Sender<Answer>>,
) -> Result<Vec<(String, Delivery)>, EphError> {
    let eph = &shard.eph;
    let signal = eph.signal(&pop.key, &pop.partition);
    let mut windowed = false;
    loop {
        let generation = signal.generation();
        let d = eph.take(&pop.key, &pop.partition, &pop.group, pop.max, pop.auto_ack);
        if !d.is_empty() {
            return Ok(d.into_iter().map(|d| (pop.partition.clone(), d)).collect());
        }
        let now = Instant::now();
        let Some(until) = wait_until.filter(|u| *u > now && !shard.stopping.is_fired()) else {
            return Ok(Vec::new());
        };
        let canceled = async {
            match reply.as_mut() {
                Some(r) => r.cancellation().await,
                None => std::future::pending().await,
            }
        };
        or(
            or(
                signal.changed(generation),
                glommio::timer::sleep(until - now),
            ),
            or(shard.stopping.wait(), canceled),
        )
        .await;
        if reply.as_ref().is_some_and(|r| r.is_canceled()) {
            return Ok(Vec::new());
        }
        if eph
            .members
            .borrow()
            .owner(&pop.key.0, &pop.key.1, &pop.partition, Instant::now())
            .is_some()
        {
            return Err(EphError::OwnerMoved);
        }
        // windowBuffer: once woken, let the batch fatten for up to `ms`.
        if let (false, Some((ms, count))) = (windowed, eph.options(&pop.key).0.window) {
            windowed = true;
            if ms > 0 && (count as usize) > 1 {
                let left = until.saturating_duration_since(Instant::now());
                glommio::timer::sleep(std::time::Duration::from_millis(ms).min(left)).await;
            }
        }
    }
}
