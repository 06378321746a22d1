//! Pop autopilot (semantics.md §18, http-api.md §4, config.md §3): for a pop
//! with `autopilot=true` the broker fills the dimensions the client left out —
//! `batch` with `QUEEN_POP_AUTOPILOT_BATCH`, `partitions` (the sweep width)
//! from a per-lane width controller — and echoes
//! `{"autopilot": {"partitions", "batch", "waitMs"}}`. Explicit values are
//! never changed. Runs on the shard thread that serves the pop; the
//! controller's lanes are the shard's (`Shard::autopilot`, see
//! `shard/autopilot.rs`: one shard = one thread, no lock).
//!
//! Controller (one lane per (tenant, queue or `ns:task` scope, group) per
//! shard, at most `QUEEN_POP_AUTOPILOT_MAX_LANES`, least recently used lane
//! dropped first): a lane starts at width 1 (the legacy default). After each
//! attempt it observes the age of the oldest message the attempt delivered
//! (now − its `createdAt`). Older than the target age while every partition
//! of the width was claimed → widen (×2, ≤ 64); younger than a quarter of the
//! target, or nothing delivered → narrow (÷2, ≥ 1). A change needs both
//! `DWELL_MS` since the last change and `DWELL_POPS` observations.
//!
//! Decisions where the spec is silent:
//! - the age signal is the oldest *delivered* message (the pop answer already
//!   carries `createdAt`; no extra query on the pop path). Under conflation it
//!   is the newest message of a partition, so a conflated lane widens less;
//! - `QUEEN_POP_AUTOPILOT_BURST_CAP` > 0: when a widening is wanted but the
//!   dwell blocks it, the next pop of the lane uses width `BURST_CAP` once
//!   (one-shot; pop itself claims only ready partitions, so "up to ready
//!   partitions" holds). The lane's width is unchanged by a burst;
//! - `waitMs` is always 0 (no pacing advice): an empty non-conflating pop is
//!   a bodiless 204 that could not carry it anyway;
//! - `shadow`: the controller runs on the same observations, its width
//!   changes are logged at debug level, but the pop uses the normal defaults
//!   (batch `DEFAULT_POP_BATCH`, width 1) and the echo reports those — the echo
//!   always states what was applied;
//! - `off`: no controller; unset dimensions take the normal defaults and the
//!   echo is still sent (the spec: whenever the request carried `autopilot=true`);
//! - the partition form always has width 1, so only `batch` can be delegated.
//!
//! The settings (`AutopilotConfig`, with their spellings and ranges) are
//! parsed at boot in `crate::config::pop`.

use crate::config::pop::{AutopilotConfig, Mode, MAX_WIDTH};
pub use crate::shard::autopilot::LaneKey;
use crate::shard::autopilot::WidthLanes;
use serde_json::{json, Value};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One shard's width controller: the settings and the shard's lanes.
#[derive(Debug, Clone, Copy)]
pub struct Controller<'a> {
    /// `QUEEN_POP_AUTOPILOT*`.
    pub cfg: &'a AutopilotConfig,
    /// The serving shard's lanes (`Shard::autopilot`).
    pub lanes: &'a WidthLanes,
}

/// How one pop is sized, and what it echoes.
#[derive(Debug)]
pub struct Sizing {
    /// Batch applied.
    pub batch: i64,
    /// Width applied.
    pub partitions: i64,
    /// The width was given by the client or chosen by the controller (not the
    /// plain default 1); conflation uses it as a cap.
    pub width_set: bool,
    /// `Some` when the request carried `autopilot=true`.
    pub autopilot: Option<Autopilot>,
}

/// The autopilot part of a pop.
#[derive(Debug)]
pub struct Autopilot {
    /// The controller lane, when the width is delegated and a controller runs.
    lane: Option<LaneKey>,
    /// The width the controller would apply (differs from the applied one in shadow).
    lane_width: u32,
}

impl Sizing {
    /// The `autopilot` echo, when the request asked for it.
    pub fn echo(&self, partitions: i64) -> Option<Value> {
        self.autopilot
            .as_ref()
            .map(|_| json!({"partitions": partitions, "batch": self.batch, "waitMs": 0}))
    }
}

/// Sizes a pop. `batch`/`partitions` are the client's values (None = left out);
/// `default_batch` applies when batch is left out and autopilot does not decide.
pub fn size(
    ctl: Controller<'_>,
    requested: bool,
    lane: impl FnOnce() -> LaneKey,
    batch: Option<i64>,
    partitions: Option<i64>,
    partition_form: bool,
    default_batch: i64,
) -> Sizing {
    let cfg = ctl.cfg;
    let width_given = partitions.filter(|_| !partition_form);
    if !requested || cfg.mode == Mode::Off {
        return Sizing {
            batch: batch.unwrap_or(default_batch),
            partitions: width_given.unwrap_or(1),
            width_set: width_given.is_some(),
            autopilot: requested.then_some(Autopilot {
                lane: None,
                lane_width: 1,
            }),
        };
    }
    let applied_batch = match (batch, cfg.mode) {
        (Some(b), _) => b,
        (None, Mode::On) => i64::from(cfg.batch),
        (None, _) => default_batch,
    };
    if width_given.is_some() || partition_form {
        return Sizing {
            batch: applied_batch,
            partitions: width_given.unwrap_or(1),
            width_set: width_given.is_some(),
            autopilot: Some(Autopilot {
                lane: None,
                lane_width: 1,
            }),
        };
    }
    let key = lane();
    let w = lane_width(ctl, &key);
    let on = cfg.mode == Mode::On;
    Sizing {
        batch: applied_batch,
        partitions: if on { i64::from(w) } else { 1 },
        width_set: on,
        autopilot: Some(Autopilot {
            lane: Some(key),
            lane_width: w,
        }),
    }
}

/// The width the lane's next pop uses (burst included), creating the lane.
fn lane_width(ctl: Controller<'_>, key: &LaneKey) -> u32 {
    let cfg = ctl.cfg;
    ctl.lanes.touch(key, cfg.max_lanes, |lane| {
        if std::mem::take(&mut lane.burst_next) {
            lane.width.max(cfg.burst_cap).min(MAX_WIDTH)
        } else {
            lane.width
        }
    })
}

/// Feeds one attempt's outcome to the lane: the partitions it claimed and
/// the oldest `createdAt` it delivered (µs since the epoch).
pub fn observe(ctl: Controller<'_>, sizing: &Sizing, claimed: i64, oldest: Option<i64>) {
    let cfg = ctl.cfg;
    let Some(Autopilot {
        lane: Some(key),
        lane_width,
    }) = &sizing.autopilot
    else {
        return;
    };
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    let age_ms = oldest.map(|t| (now_us - t).max(0) as u64 / 1000);
    let applied = if cfg.mode == Mode::On { *lane_width } else { 1 };
    let target = cfg.target_age_ms;
    let wider = matches!(age_ms, Some(a) if a > target) && claimed >= i64::from(applied);
    let narrower = age_ms.is_none_or(|a| a * 4 < target);
    let now = Instant::now();
    ctl.lanes.with(key, |lane| {
        lane.pops = lane.pops.saturating_add(1);
        let dwell_ok = now.duration_since(lane.changed_at).as_millis() >= u128::from(cfg.dwell_ms)
            && lane.pops >= cfg.dwell_pops;
        let before = lane.width;
        if wider && dwell_ok && lane.width < MAX_WIDTH {
            lane.width = (lane.width * 2).min(MAX_WIDTH);
        } else if wider && cfg.burst_cap > lane.width {
            lane.burst_next = true;
        } else if narrower && dwell_ok && lane.width > 1 {
            lane.width = (lane.width / 2).max(1);
        }
        if lane.width != before {
            lane.changed_at = now;
            lane.pops = 0;
            log::debug!(
                "autopilot{} {:?}: width {before} -> {} (oldest age {age_ms:?} ms, claimed {claimed})",
                if cfg.mode == Mode::Shadow { " (shadow)" } else { "" },
                key,
                lane.width
            );
        }
    });
}

/// `YYYY-MM-DDTHH:MM:SS[.ffffff]Z` → µs since the epoch (the form `queen.iso` writes).
pub fn iso_micros(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, sec) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let frac = match s.get(19..s.len() - 1) {
        Some(f) if f.starts_with('.') && f.len() > 1 => {
            let digits = &f[1..f.len().min(7)];
            digits.parse::<i64>().ok()? * 10i64.pow(6 - digits.len() as u32)
        }
        _ => 0,
    };
    // days from civil (proleptic Gregorian), Howard Hinnant's algorithm
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (mo + if mo > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000_000 + sec * 1_000_000 + frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso() {
        assert_eq!(iso_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            iso_micros("2025-01-31T12:34:56.123456Z"),
            Some(1_738_326_896_123_456)
        );
        assert_eq!(
            iso_micros("2000-03-01T00:00:00.5Z"),
            Some(951_868_800_500_000)
        );
        assert_eq!(iso_micros("yesterday"), None);
    }

    #[test]
    fn explicit_values_are_never_changed() {
        let c = AutopilotConfig::default();
        let lanes = WidthLanes::default();
        let c = Controller {
            cfg: &c,
            lanes: &lanes,
        };
        let lane = || ("t".to_string(), "q".to_string(), "g".to_string());
        let s = size(c, true, lane, Some(7), Some(3), false, 200);
        assert_eq!((s.batch, s.partitions), (7, 3));
        let s = size(c, true, lane, None, None, false, 200);
        assert_eq!((s.batch, s.partitions), (100, 1));
        let s = size(c, false, lane, None, None, false, 200);
        assert_eq!((s.batch, s.partitions), (200, 1));
        assert!(s.echo(1).is_none());
    }

    #[test]
    fn widens_under_backlog_after_dwell() {
        let c = AutopilotConfig {
            dwell_ms: 0,
            dwell_pops: 2,
            ..AutopilotConfig::default()
        };
        let lanes = WidthLanes::default();
        let c = Controller {
            cfg: &c,
            lanes: &lanes,
        };
        let lane = || ("t".to_string(), "wide".to_string(), "g".to_string());
        let old = iso_micros("2000-01-01T00:00:00Z");
        let mut w = 0;
        for _ in 0..20 {
            let s = size(c, true, lane, None, None, false, 200);
            w = s.partitions;
            observe(c, &s, 64, old);
        }
        assert_eq!(w, 64);
        for _ in 0..20 {
            let s = size(c, true, lane, None, None, false, 200);
            w = s.partitions;
            observe(c, &s, 0, None);
        }
        assert_eq!(w, 1);
    }
}
