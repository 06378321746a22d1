//! The timer firing job (semantics.md §20): turns due timers into messages,
//! exactly once across every broker on the database.
//!
//! # Threads and ownership
//! One glommio task on shard 0 (like every job) loops: one
//! `Proc::TimersFire` round on the KV pool (`queen.timers_fire`:
//! claim up to `QUEEN_SWEEPER_CLAIM_BATCH` due rows `FOR UPDATE SKIP
//! LOCKED`, push them through `queen.push_items` with their stored txn and
//! message id, delete them, one transaction), then wakes long-polling pops
//! of the queues it fed (the `Pushed` notice a push sends: this shard's
//! waiters, the other shards and the peers through the mesh).
//!
//! # Cadence (the p99 < 200 ms past due target at 1,000 timers/s)
//! - A full round (it claimed a whole batch) is followed at once by the
//!   next: a burst of 10,000 due in one second drains at one transaction per
//!   200 timers, with no sleep in between.
//! - Otherwise the round's answer carries the nearest pending deliverAt, and
//!   the job sleeps until then, but at least `QUEEN_SWEEPER_MIN_SLEEP_MS`
//!   (5 ms: rows due now but held by another broker are not spun on) and at
//!   most `QUEEN_SWEEPER_MAX_SLEEP_MS` (50 ms: a timer scheduled meanwhile,
//!   on any broker, is picked up by the next round without any wake-up
//!   signal between brokers). Lateness is then at most one sleep plus one
//!   round trip: ~50 ms + a few ms at 1,000/s, well inside 200 ms; an idle
//!   broker pays 20 cheap rounds a second (see the constant's doc).
//! - `timersFireEnabled` switched off (`POST /api/v1/system/kv-timers`):
//!   the job claims nothing and looks at the switch again every max sleep.
//! - PostgreSQL unreachable or the KV pool full: the round fails, nothing was claimed (a round
//!   is one transaction), and the job retries with a backoff of 100 ms
//!   doubling to 1 s, so due timers fire within a second of PostgreSQL's
//!   return. A broker killed mid-round loses its connection; PostgreSQL
//!   rolls the round back and the rows are due again for any broker.

use crate::config::TimersConfig;
use crate::mesh::Notice;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use std::rc::Rc;
use std::time::Duration;

/// First retry delay after a failed round (PostgreSQL away, job queue full).
const RETRY_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay after failed rounds: bounds how late timers fire
/// once PostgreSQL is back.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Starts the firing job on this shard (shard 0), unless `QUEEN_SWEEPER` is off.
pub fn spawn(shard: &Rc<Shard>) {
    if !shard.cfg.timers.sweeper {
        log::info!("timer firing: off on this broker (QUEEN_SWEEPER=false)");
        return;
    }
    let s = shard.clone();
    glommio::spawn_local(async move { run(s).await }).detach();
}

async fn run(shard: Rc<Shard>) {
    let cfg = &shard.cfg.timers;
    let arg = json!({
        "batch": cfg.claim_batch,
        "maxAttempts": cfg.max_attempts,
        "backoffMinMs": cfg.backoff_min_ms,
        "backoffMaxMs": cfg.backoff_max_ms,
    });
    let mut retry = RETRY_MIN;
    while !shard.stopping.is_fired() {
        if !shard.kv_switch.timers_fire_enabled() {
            // switched off at runtime: nothing is claimed, due timers wait
            glommio::timer::sleep(Duration::from_millis(cfg.max_sleep_ms)).await;
            continue;
        }
        let pause = match shard.db.kv_call(Proc::TimersFire, arg.clone()).await {
            Ok(r) => {
                retry = RETRY_MIN;
                after_round(&shard, &r)
            }
            Err(e) => {
                log::debug!("timer fire round failed: {e}");
                let p = retry;
                retry = (retry * 2).min(RETRY_MAX);
                p
            }
        };
        if !pause.is_zero() {
            glommio::timer::sleep(pause).await;
        } else {
            futures_lite::future::yield_now().await;
        }
    }
}

/// Counts and announces a round's messages; how long to wait before the next.
fn after_round(shard: &Shard, r: &Value) -> Duration {
    let cfg = &shard.cfg.timers;
    let fired = r["fired"].as_u64().unwrap_or(0);
    let failed = r["failed"].as_u64().unwrap_or(0);
    if fired > 0 {
        shard.counters.timers_fired(fired);
    }
    if failed > 0 {
        log::warn!("timer fire: {failed} timers failed and back off (see their lastError)");
    }
    for q in r["queues"].as_array().into_iter().flatten() {
        if let Some(queue) = q.as_str() {
            shard.notify(Notice::Pushed {
                queue: queue.to_string(),
            });
        }
    }
    pause(
        cfg,
        r["claimed"].as_u64().unwrap_or(0),
        r["nextDueMs"].as_i64(),
    )
}

/// The wait before the next round: none after a full one, else until the
/// nearest due timer (`next_due_ms`, none pending: `None`) within the sleep bounds.
fn pause(cfg: &TimersConfig, claimed: u64, next_due_ms: Option<i64>) -> Duration {
    if claimed >= u64::from(cfg.claim_batch) {
        return Duration::ZERO;
    }
    let next = next_due_ms.map_or(cfg.max_sleep_ms, |ms| ms.max(0) as u64);
    Duration::from_millis(next.clamp(cfg.min_sleep_ms, cfg.max_sleep_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_rounds_chain_and_others_sleep_until_the_nearest_due_within_bounds() {
        let lookup = |_: &str| None;
        let cfg = TimersConfig::from_env(&crate::env::Env::new(&lookup)).unwrap();
        let ms = Duration::from_millis;
        assert_eq!(pause(&cfg, u64::from(cfg.claim_batch), Some(10_000)), ms(0));
        assert_eq!(pause(&cfg, 3, Some(20)), ms(20));
        assert_eq!(pause(&cfg, 3, Some(-40)), ms(cfg.min_sleep_ms));
        assert_eq!(pause(&cfg, 0, Some(3_600_000)), ms(cfg.max_sleep_ms));
        assert_eq!(pause(&cfg, 0, None), ms(cfg.max_sleep_ms));
    }
}
