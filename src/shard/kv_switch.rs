//! The runtime kill switches of the KV and the timers (security.md SEC-23,
//! http-api.md §13): `kv_enabled`, `timers_schedule_enabled` and
//! `timers_fire_enabled` in `queen.system_state` (absent = on).
//!
//! # Threads and ownership
//! One [`KvSwitch`] per process (an `Arc` main makes, like `metrics::Board`),
//! read by every shard on every KV or timer request (three relaxed atomic
//! loads), written by the shard that serves `POST /api/v1/system/kv-timers`,
//! by any shard applying a `Notice::KvSwitch` from a peer broker, and by
//! shard 0's once-a-second recheck of `queen.system_state`. Process-wide and
//! not per shard because a switch is one fact for the whole broker: the POST
//! is then seen by every shard of this broker the moment it stores it, with
//! no wait for the other shards to apply a notice.
//!
//! The recheck reads the database, then stores what it read only if no
//! notice or POST landed meanwhile ([`KvSwitch::generation`]), so a read
//! that started before a switch cannot undo it.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The three switches, all on until the database says otherwise.
#[derive(Debug)]
pub struct KvSwitch {
    kv: AtomicBool,
    schedule: AtomicBool,
    fire: AtomicBool,
    /// Bumped by every store from a notice or a POST.
    generation: AtomicU64,
}

impl Default for KvSwitch {
    fn default() -> Self {
        KvSwitch {
            kv: AtomicBool::new(true),
            schedule: AtomicBool::new(true),
            fire: AtomicBool::new(true),
            generation: AtomicU64::new(0),
        }
    }
}

/// The switches' values (`None`: leave that one as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    /// `kvEnabled`.
    pub kv: Option<bool>,
    /// `timersScheduleEnabled`.
    pub schedule: Option<bool>,
    /// `timersFireEnabled`.
    pub fire: Option<bool>,
}

impl Switches {
    /// Reads `{kvEnabled, timersScheduleEnabled, timersFireEnabled}` (the
    /// shape of `queen.kv_switch_get` and of the POST body); other fields
    /// are not looked at.
    pub fn from_json(v: &Value) -> Switches {
        Switches {
            kv: v.get("kvEnabled").and_then(Value::as_bool),
            schedule: v.get("timersScheduleEnabled").and_then(Value::as_bool),
            fire: v.get("timersFireEnabled").and_then(Value::as_bool),
        }
    }
}

impl KvSwitch {
    /// Whether KV calls (and locks) are served.
    pub fn kv_enabled(&self) -> bool {
        self.kv.load(Ordering::Relaxed)
    }

    /// Whether timers may be scheduled or rescheduled.
    pub fn timers_schedule_enabled(&self) -> bool {
        self.schedule.load(Ordering::Relaxed)
    }

    /// Whether due timers are fired.
    pub fn timers_fire_enabled(&self) -> bool {
        self.fire.load(Ordering::Relaxed)
    }

    /// Stores what a POST or a notice says (the fields it carries).
    pub fn apply(&self, s: Switches) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.store(s);
    }

    /// The generation to hand back to [`KvSwitch::apply_read`].
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Stores a database read that started at generation `gen`, unless a
    /// POST or notice landed since (it is newer than the read).
    pub fn apply_read(&self, gen: u64, s: Switches) {
        if self.generation.load(Ordering::Acquire) == gen {
            self.store(s);
        }
    }

    fn store(&self, s: Switches) {
        for (cell, v) in [
            (&self.kv, s.kv),
            (&self.schedule, s.schedule),
            (&self.fire, s.fire),
        ] {
            if let Some(v) = v {
                cell.store(v, Ordering::Relaxed);
            }
        }
    }

    /// The three current values, as `POST /api/v1/system/kv-timers` answers.
    pub fn to_json(&self) -> Value {
        json!({
            "kvEnabled": self.kv_enabled(),
            "timersScheduleEnabled": self.timers_schedule_enabled(),
            "timersFireEnabled": self.timers_fire_enabled(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_older_than_a_post_is_dropped() {
        let s = KvSwitch::default();
        assert!(s.kv_enabled() && s.timers_fire_enabled());
        let gen = s.generation();
        s.apply(Switches {
            kv: Some(false),
            ..Default::default()
        });
        s.apply_read(
            gen,
            Switches {
                kv: Some(true),
                ..Default::default()
            },
        );
        assert!(!s.kv_enabled());
        let gen = s.generation();
        s.apply_read(
            gen,
            Switches::from_json(&json!({"kvEnabled": true, "timersFireEnabled": false})),
        );
        assert!(s.kv_enabled());
        assert!(!s.timers_fire_enabled());
        assert!(s.timers_schedule_enabled());
    }
}
