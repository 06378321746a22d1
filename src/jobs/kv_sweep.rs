//! The KV expiry sweep: deletes keys past their expiry in bounded rounds.
//! Reads never see an expired key whether or not it was swept (every read
//! filters `expires_at > now()`), so the sweep only reclaims space and its
//! cadence is not a correctness matter.
//!
//! # Threads and ownership
//! Shard 0 owns the schedule (every [`SWEEP_EVERY_MS`]); each round is one
//! `queen.kv_sweep(limit)` on the KV pool (sql/functions/kv.sql): at most
//! [`SWEEP_BATCH`] rows, claimed `FOR UPDATE SKIP LOCKED` so several brokers
//! sweeping at once, and KV calls touching a key, never wait on each other.
//! Full rounds chain up to [`super::schedule::MAX_ROUNDS`] per cycle. While
//! the KV is switched off at runtime the sweep pauses too.

use crate::shard::Shard;
use crate::store::sql_error::classify;
use std::rc::Rc;

/// Sweep cadence, ms: expired rows cost only space until swept.
pub const SWEEP_EVERY_MS: u64 = 10_000;
/// Rows deleted per round (one short transaction).
pub const SWEEP_BATCH: i32 = 1_000;

/// Starts the sweep schedule on this shard (shard 0).
pub fn spawn(shard: &Rc<Shard>) {
    super::schedule::schedule(shard, "kv_sweep", SWEEP_EVERY_MS, |s| async move {
        cycle(&s).await
    });
}

/// Rounds until one comes back short.
async fn cycle(shard: &Rc<Shard>) {
    for _ in 0..super::schedule::MAX_ROUNDS {
        if !shard.kv_enabled() || shard.stopping.is_fired() {
            return;
        }
        let swept = shard
            .db
            .kv_run(|c| {
                let row = c
                    .query_one("SELECT queen.kv_sweep($1)", &[&SWEEP_BATCH])
                    .map_err(classify)?;
                Ok(row.get::<_, i32>(0))
            })
            .await;
        match swept {
            Ok(n) => {
                if n > 0 {
                    log::debug!("background job kv_sweep: {n} expired keys");
                }
                if n < SWEEP_BATCH {
                    return;
                }
            }
            Err(e) => {
                log::debug!("background job kv_sweep: {e}");
                return;
            }
        }
    }
}
