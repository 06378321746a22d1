//! An ephemeral queue's options (http-api.md §18 `configure`): parsing with
//! every bound checked, the effective values (defaults from
//! `QUEEN_EPHEMERAL_*`), and their JSON.
//!
//! Ranges where the spec is silent (inferred): `maxBytes` 1..the queue
//! ceiling, `maxLength` 1..the queue ceiling, `ttlSeconds` 0..604,800 (0 =
//! no TTL; a week is far past any RAM-only use), `leaseSeconds` 1..86,400,
//! `retryLimit` 1..1,000, `windowBuffer.ms` 0..60,000 and
//! `windowBuffer.count` 1..10,000 (the pop batch bound).

use super::error::EphError;
use crate::config::ephemeral::{EphemeralConfig, MAX_EPH_LEASE_S, MAX_EPH_RETRY_LIMIT};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Longest `ttlSeconds` (a week).
pub const MAX_TTL_S: u64 = 604_800;
/// Longest `windowBuffer.ms`.
pub const MAX_WINDOW_MS: u64 = 60_000;
/// Largest `windowBuffer.count` (the pop batch bound).
pub const MAX_WINDOW_COUNT: u64 = 10_000;

/// What a full queue does with a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refuse the push (429 `queue_full`).
    Reject,
    /// Drop the oldest messages to make room (a feed).
    DropOldest,
}

/// A queue's effective options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Accounted-bytes bound of each partition ring.
    pub max_bytes: u64,
    /// Message-count bound of each partition ring.
    pub max_length: u64,
    /// What a full ring does.
    pub policy: Policy,
    /// Drop messages older than this; 0 = never.
    pub ttl_s: u64,
    /// Lease of a delivery.
    pub lease_s: u64,
    /// Deliveries before a failing message is dropped.
    pub retry_limit: u64,
    /// Let a woken long poll wait up to `ms` for `count` messages.
    pub window: Option<(u64, u64)>,
}

impl Options {
    /// The defaults of an implicit queue.
    pub fn defaults(c: &EphemeralConfig) -> Options {
        Options {
            max_bytes: c.queue_max_bytes,
            max_length: c.queue_max_length,
            policy: Policy::Reject,
            ttl_s: 0,
            lease_s: c.lease_s,
            retry_limit: c.retry_limit,
            window: None,
        }
    }

    /// Parses `options` over the defaults; any unknown key, wrong type or
    /// out-of-range value is refused naming it.
    pub fn parse(m: &Map<String, Value>, c: &EphemeralConfig) -> Result<Options, EphError> {
        let mut o = Options::defaults(c);
        for (k, v) in m {
            if v.is_null() {
                continue;
            }
            match k.as_str() {
                "maxBytes" => o.max_bytes = int(v, k, 1, c.queue_max_bytes)?,
                "maxLength" => o.max_length = int(v, k, 1, c.queue_max_length)?,
                "policy" => {
                    o.policy = match v.as_str() {
                        Some("reject") => Policy::Reject,
                        Some("dropOldest") => Policy::DropOldest,
                        _ => {
                            return Err(bad("options.policy must be \"reject\" or \"dropOldest\""))
                        }
                    }
                }
                "ttlSeconds" => o.ttl_s = int(v, k, 0, MAX_TTL_S)?,
                "leaseSeconds" => o.lease_s = int(v, k, 1, MAX_EPH_LEASE_S)?,
                "retryLimit" => o.retry_limit = int(v, k, 1, MAX_EPH_RETRY_LIMIT)?,
                "windowBuffer" => {
                    let Some(w) = v.as_object() else {
                        return Err(bad("options.windowBuffer must be an object {ms, count}"));
                    };
                    if let Some(extra) = w.keys().find(|k| *k != "ms" && *k != "count") {
                        return Err(bad(format!("unknown option windowBuffer.{extra}")));
                    }
                    let ms = w
                        .get("ms")
                        .map_or(Ok(0), |v| int(v, "windowBuffer.ms", 0, MAX_WINDOW_MS))?;
                    let count = w
                        .get("count")
                        .map_or(Ok(1), |v| int(v, "windowBuffer.count", 1, MAX_WINDOW_COUNT))?;
                    o.window = Some((ms, count));
                }
                other => return Err(bad(format!("unknown option {other}"))),
            }
        }
        Ok(o)
    }

    /// The effective values, as `configure` answers them.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "maxBytes": self.max_bytes,
            "maxLength": self.max_length,
            "policy": match self.policy { Policy::Reject => "reject", Policy::DropOldest => "dropOldest" },
            "ttlSeconds": self.ttl_s,
            "leaseSeconds": self.lease_s,
            "retryLimit": self.retry_limit,
        });
        if let Some((ms, count)) = self.window {
            v["windowBuffer"] = json!({"ms": ms, "count": count});
        }
        v
    }

    /// The TTL, when there is one.
    pub fn ttl(&self) -> Option<Duration> {
        (self.ttl_s > 0).then(|| Duration::from_secs(self.ttl_s))
    }

    /// The delivery rules of the ring.
    pub fn rules(&self) -> super::ring::Rules {
        super::ring::Rules {
            lease: Duration::from_secs(self.lease_s),
            retry_limit: self.retry_limit as u32,
        }
    }
}

fn bad(m: impl Into<String>) -> EphError {
    EphError::BadRequest(m.into())
}

fn int(v: &Value, name: &str, lo: u64, hi: u64) -> Result<u64, EphError> {
    match v.as_u64() {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(bad(format!(
            "options.{name} must be an integer between {lo} and {hi}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> EphemeralConfig {
        let lookup = |_: &str| None;
        EphemeralConfig::from_env(&crate::env::Env::new(&lookup)).unwrap()
    }

    fn parse(v: Value) -> Result<Options, EphError> {
        Options::parse(v.as_object().unwrap(), &cfg())
    }

    #[test]
    fn bounds_and_unknown_keys_are_refused() {
        assert!(parse(json!({"maxLength": 5, "policy": "dropOldest"})).is_ok());
        for bad in [
            json!({"maxLength": 0}),
            json!({"maxLength": 10_001}),
            json!({"maxBytes": "1"}),
            json!({"policy": "drop"}),
            json!({"leaseSeconds": 0}),
            json!({"retryLimit": 1001}),
            json!({"ttlSeconds": -1}),
            json!({"windowBuffer": {"ms": 1, "size": 2}}),
            json!({"ttl_second": 1}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
        let o = parse(json!({"windowBuffer": {"ms": 5, "count": 3}})).unwrap();
        assert_eq!(o.to_json()["windowBuffer"]["count"], 3);
    }
}
