//! The conflated pop's policy cache on one shard (`Shard::conflation`):
//! whether a group conflates, as last learned from `queen.pop_conflated`.
//! The policy itself and its use are the pop endpoint's
//! (`api/pop_conflation.rs`); this holds what one shard remembers of it,
//! touched only by the pops it serves.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a shard trusts a group's cached policy. Short, because a group
/// deleted with its metadata and registered again the other way should be
/// seen soon; long enough that the lookup is rare next to pops.
pub const POLICY_TTL: Duration = Duration::from_secs(5);
/// Most cached (tenant, scope, group) policies per shard; past it the cache starts over.
const MAX_CACHED: usize = 100_000;

/// (tenant, queue or `ns:task` scope, group).
pub type PolicyKey = (String, String, String);

/// This shard's cached policies.
#[derive(Debug, Default)]
pub struct PolicyCache {
    /// Key → (conflating, when learned).
    policies: RefCell<HashMap<PolicyKey, (bool, Instant)>>,
}

impl PolicyCache {
    /// The group's policy when learned less than [`POLICY_TTL`] ago.
    pub fn cached(&self, key: &PolicyKey) -> Option<bool> {
        self.policies
            .borrow()
            .get(key)
            .filter(|(_, at)| at.elapsed() < POLICY_TTL)
            .map(|(v, _)| *v)
    }

    /// Records the group's policy as learned now.
    pub fn remember(&self, key: &PolicyKey, conflating: bool) {
        let mut p = self.policies.borrow_mut();
        if p.len() >= MAX_CACHED {
            p.clear();
        }
        p.insert(key.clone(), (conflating, Instant::now()));
    }
}
