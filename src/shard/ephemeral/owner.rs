//! Who owns an ephemeral partition: which broker (rendezvous hashing over
//! the live mesh members) and, on it, which shard (a hash of tenant, queue
//! and partition modulo the shard count). The one place either is picked.
//!
//! Members are learnt from `Notice::EphMember` beacons: every broker's shard
//! 0 sends its server id, HTTP address and boot nonce through the mesh once
//! a heartbeat, and every shard keeps its own table (a `Shard` field). A
//! member unheard for the mesh's dead threshold stops counting. Brokers
//! that see the same members pick the same owner; while two disagree (a
//! broker joining or dying), a forwarded request that lands on a broker
//! which is not the owner by its own table answers `503 owner_moved` rather
//! than forwarding again.
//!
//! The hash is FNV-1a with a 64-bit finaliser, written out here rather than
//! std's `DefaultHasher`, whose output may change between Rust releases: two
//! brokers built by different compilers must agree.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One broker of the mesh, as its beacon describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// `QUEEN_SERVER_ID`: the rendezvous identity.
    pub id: String,
    /// `host:port` of its HTTP listener (forwarding target).
    pub http: String,
    /// Its boot nonce.
    pub boot: u64,
}

/// The members this shard knows.
#[derive(Debug)]
pub struct Members {
    /// This broker.
    pub me: Member,
    /// Peers by server id, with when their beacon was last heard.
    peers: HashMap<String, (Member, Instant)>,
    /// Silence after which a peer stops counting.
    dead_after: Duration,
}

/// Stable 64-bit hash of byte strings (FNV-1a, then a splitmix finaliser).
pub fn hash64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab","c") and ("a","bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The shard of this broker that owns (tenant, queue, partition).
pub fn shard_of(tenant: &str, queue: &str, partition: &str, nr_shards: usize) -> usize {
    let h = hash64(&[tenant.as_bytes(), queue.as_bytes(), partition.as_bytes()]);
    (h % nr_shards.max(1) as u64) as usize
}

impl Members {
    /// A table holding only this broker.
    pub fn new(me: Member, dead_after: Duration) -> Members {
        Members {
            me,
            peers: HashMap::new(),
            dead_after,
        }
    }

    /// Records a beacon (this broker's own are ignored). Returns whether
    /// the member set changed (a new member or a new incarnation).
    pub fn heard(&mut self, m: Member, now: Instant) -> bool {
        if m.id == self.me.id {
            return false;
        }
        let changed = self
            .peers
            .get(&m.id)
            .is_none_or(|(old, seen)| old != &m || now.duration_since(*seen) >= self.dead_after);
        self.peers.insert(m.id.clone(), (m, now));
        changed
    }

    /// The peers alive now.
    pub fn live_peers(&self, now: Instant) -> Vec<&Member> {
        let mut v: Vec<&Member> = self
            .peers
            .values()
            .filter(|(_, seen)| now.duration_since(*seen) < self.dead_after)
            .map(|(m, _)| m)
            .collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// The server ids alive now, this broker included, sorted.
    pub fn live_ids(&self, now: Instant) -> Vec<String> {
        let mut v: Vec<String> = self.live_peers(now).iter().map(|m| m.id.clone()).collect();
        v.push(self.me.id.clone());
        v.sort();
        v
    }

    /// The broker owning (tenant, queue, partition): `None` when it is this one.
    pub fn owner(
        &self,
        tenant: &str,
        queue: &str,
        partition: &str,
        now: Instant,
    ) -> Option<&Member> {
        let score = |id: &str| {
            hash64(&[
                id.as_bytes(),
                tenant.as_bytes(),
                queue.as_bytes(),
                partition.as_bytes(),
            ])
        };
        let mine = (score(&self.me.id), self.me.id.as_str());
        let best = self
            .live_peers(now)
            .into_iter()
            .map(|m| ((score(&m.id), m.id.as_str()), m))
            .max_by(|a, b| a.0.cmp(&b.0))?;
        (best.0 > mine).then_some(best.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str) -> Member {
        Member {
            id: id.into(),
            http: format!("{id}:1"),
            boot: 1,
        }
    }

    #[test]
    fn rendezvous_moves_only_what_the_new_member_wins() {
        let now = Instant::now();
        let mut a = Members::new(m("a"), Duration::from_secs(5));
        let parts: Vec<String> = (0..200).map(|i| i.to_string()).collect();
        assert!(parts.iter().all(|p| a.owner("t", "q", p, now).is_none()));
        assert!(a.heard(m("b"), now));
        let to_b = parts
            .iter()
            .filter(|p| a.owner("t", "q", p, now).is_some())
            .count();
        assert!(to_b > 50 && to_b < 150, "{to_b}");
        // b's own table agrees
        let mut b = Members::new(m("b"), Duration::from_secs(5));
        b.heard(m("a"), now);
        for p in &parts {
            assert_eq!(
                a.owner("t", "q", p, now).is_some(),
                b.owner("t", "q", p, now).is_none()
            );
        }
        // silence makes b dead again
        let later = now + Duration::from_secs(6);
        assert!(parts.iter().all(|p| a.owner("t", "q", p, later).is_none()));
        assert_eq!(a.live_ids(later), vec!["a".to_string()]);
    }

    #[test]
    fn shards_spread() {
        let mut n = [0; 2];
        for i in 0..100 {
            n[shard_of("t", "q", &i.to_string(), 2)] += 1;
        }
        assert!(n[0] > 20 && n[1] > 20, "{n:?}");
    }
}
