//! The pop autopilot's width lanes on one shard (`Shard::autopilot`): the
//! state of the width controller, whose rules (when to widen, narrow or
//! burst) are the pop endpoint's, in `api/pop_autopilot.rs`. Touched only by
//! the pops this shard serves.
//!
//! One lane per (tenant, queue or `ns:task` scope, group), at most
//! `QUEEN_POP_AUTOPILOT_MAX_LANES` of them: a new lane past that bound first
//! drops the least recently used one (a scan of the lanes, paid only when a
//! lane is created at the bound).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

/// A controller lane: (tenant, queue or scope, group).
pub type LaneKey = (String, String, String);

/// One controller lane.
#[derive(Debug)]
pub struct WidthLane {
    /// Current width.
    pub width: u32,
    /// Last width change.
    pub changed_at: Instant,
    /// Observations since the last change.
    pub pops: u32,
    /// The next pop uses the burst width once.
    pub burst_next: bool,
    /// Last use (eviction order); set by [`WidthLanes::touch`].
    seen: Instant,
}

/// This shard's lanes, by key.
#[derive(Debug, Default)]
pub struct WidthLanes {
    /// Key → lane.
    lanes: RefCell<HashMap<LaneKey, WidthLane>>,
}

impl WidthLanes {
    /// Runs `f` on `key`'s lane, marked used now; a missing lane is created
    /// at width 1, after dropping the least recently used lane when
    /// `max_lanes` are kept already.
    pub fn touch<R>(
        &self,
        key: &LaneKey,
        max_lanes: usize,
        f: impl FnOnce(&mut WidthLane) -> R,
    ) -> R {
        let now = Instant::now();
        let mut lanes = self.lanes.borrow_mut();
        if !lanes.contains_key(key) && lanes.len() >= max_lanes {
            let oldest = lanes
                .iter()
                .min_by_key(|(_, v)| v.seen)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                lanes.remove(&k);
            }
        }
        let lane = lanes.entry(key.clone()).or_insert(WidthLane {
            width: 1,
            changed_at: now,
            pops: 0,
            burst_next: false,
            seen: now,
        });
        lane.seen = now;
        f(lane)
    }

    /// Runs `f` on `key`'s lane when it exists (evicted: `None`); this is no
    /// use of the lane, its eviction order stays.
    pub fn with<R>(&self, key: &LaneKey, f: impl FnOnce(&mut WidthLane) -> R) -> Option<R> {
        self.lanes.borrow_mut().get_mut(key).map(f)
    }
}
