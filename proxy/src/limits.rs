//! The per-key request rate (proxy.md §5 step 5): a token bucket per API
//! key holding one second of its rate, refilled continuously. Per-shard
//! state (`Shard::buckets`): each shard enforces the key's whole rate on the
//! connections it serves, so a client spread over N shards may reach N
//! times the rate; a single keep-alive connection, as clients use, gets
//! exactly it. Shared buckets would put an atomic on every request of every
//! shard for a limit that is a guard, not a bill.

use std::collections::HashMap;
use std::time::Instant;

use uuid::Uuid;

/// One key's bucket.
#[derive(Debug)]
struct Bucket {
    /// Requests available now (at most the rate).
    tokens: f64,
    /// When `tokens` was computed.
    at: Instant,
}

/// Every key's bucket on one shard.
#[derive(Debug, Default)]
pub struct Buckets {
    /// By key id.
    by_key: HashMap<Uuid, Bucket>,
}

impl Buckets {
    /// Takes one request of `key` at `rate_rps`: `Ok` or the whole seconds
    /// until one is available (for `Retry-After`, at least 1).
    pub fn take(&mut self, key: Uuid, rate_rps: u32, now: Instant) -> Result<(), u64> {
        let rate = f64::from(rate_rps.max(1));
        let b = self.by_key.entry(key).or_insert(Bucket {
            tokens: rate,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(rate);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        Err((((1.0 - b.tokens) / rate).ceil() as u64).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_second_of_rate_then_refusal_then_refill() {
        let mut b = Buckets::default();
        let k = Uuid::from_u128(1);
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(b.take(k, 3, t), Ok(()));
        }
        assert_eq!(b.take(k, 3, t), Err(1));
        assert_eq!(b.take(k, 3, t + Duration::from_millis(400)), Ok(()));
        assert_eq!(
            b.take(Uuid::from_u128(2), 3, t),
            Ok(()),
            "keys are separate"
        );
    }
}
