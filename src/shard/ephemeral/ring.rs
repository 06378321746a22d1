//! One ephemeral partition: the ring of messages in arrival order and, per
//! consumer group, a cursor over it with the leases and redeliveries of that
//! group. Pure data, owned by the partition's shard; no I/O, no clock of its
//! own (every call is given `now`), so the rules are unit-tested here.
//!
//! # Rules
//! - A message has a sequence number (`seq`) that only grows on its shard,
//!   so a partition's ring is sorted by it.
//! - Each group has its own cursor over the one ring: groups fan out, pops
//!   of one group compete. A group first seen starts at the oldest message
//!   still in the ring; the queue registers a group on each of its
//!   partitions when it first pops on the shard (`EphStore`), so a group
//!   that subscribed before a push sees it.
//! - A delivery is numbered (`attempt`, 1 on the first): the id a consumer
//!   gets names the attempt, so an ack of a delivery that expired and was
//!   handed out again is `stale`, never the new holder's ack.
//! - A failed or expired delivery comes back with `attempt + 1` before any
//!   new message of the group, until `retry_limit` deliveries failed: then
//!   it is dropped and counted.
//! - A message leaves the ring when every known group is past it (cursor
//!   beyond it, no lease, no pending redelivery), when it is older than the
//!   TTL, or when the bounds push it out (`dropOldest`). With no group yet,
//!   messages wait for the first consumer (bounded by the queue's bounds).
//! - A redelivery or lease of a message the TTL or the bounds dropped is
//!   forgotten when met.

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Bytes accounted per message on top of its payload: the ring slot, the
/// payload's allocation header and its share of the group maps. The same
/// figure feeds `maxBytes`, the broker ceiling and `queen_ephemeral_bytes`,
/// so a test or an operator can predict when a bound bites.
pub const MSG_OVERHEAD: u64 = 64;

/// A message in the ring.
#[derive(Debug)]
pub struct Msg {
    /// Position on the shard; grows with each push.
    pub seq: u64,
    /// When it was pushed (TTL).
    pub at: Instant,
    /// The payload's JSON text, as pushed.
    pub payload: Bytes,
}

impl Msg {
    /// Accounted bytes.
    pub fn size(&self) -> u64 {
        self.payload.len() as u64 + MSG_OVERHEAD
    }
}

/// A delivery handed out by [`Partition::take`].
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message's sequence number.
    pub seq: u64,
    /// Which delivery of it this is (1 = first).
    pub attempt: u32,
    /// The payload.
    pub payload: Bytes,
}

/// How an ack settles a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Done: forget it.
    Completed,
    /// Failed (`failed` or `retry`): deliver again, or drop at the limit.
    Failed,
}

/// What an ack did (the wire's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Settled (completed, or failed for the last allowed time and dropped).
    Acked,
    /// Failed and queued for another delivery.
    Redelivered,
    /// Not a valid holder: another incarnation, an expired or superseded
    /// delivery, or one already settled.
    Stale,
    /// No such delivery: never handed out to this group.
    Unknown,
}

impl Outcome {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acked => "acked",
            Outcome::Redelivered => "redelivered",
            Outcome::Stale => "stale",
            Outcome::Unknown => "unknown",
        }
    }
}

/// A lease a group holds on one message.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// When it expires.
    until: Instant,
    /// The delivery it belongs to.
    attempt: u32,
}

/// One group's view of the ring.
#[derive(Debug, Default)]
pub struct Group {
    /// Next sequence number not yet delivered to the group.
    cursor: u64,
    /// Messages out on lease, by seq.
    leased: BTreeMap<u64, Lease>,
    /// Failed or expired deliveries waiting to go out again: (seq, attempt).
    retry: VecDeque<(u64, u32)>,
}

impl Group {
    /// The oldest seq the group still needs.
    fn low_water(&self) -> u64 {
        let mut low = self.cursor;
        if let Some((&s, _)) = self.leased.iter().next() {
            low = low.min(s);
        }
        if let Some(&(s, _)) = self.retry.iter().min() {
            low = low.min(s);
        }
        low
    }
}

/// Messages dropped, by cause (`drops` of the listing).
#[derive(Debug, Default, Clone, Copy)]
pub struct Drops {
    /// Pushed out by `dropOldest`.
    pub bounds: u64,
    /// Older than the TTL.
    pub ttl: u64,
    /// Failed `retryLimit` times.
    pub retry: u64,
}

/// The delivery rules a pop or ack applies (the queue's options).
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Lease length.
    pub lease: Duration,
    /// Deliveries before a failing message is dropped.
    pub retry_limit: u32,
}

/// One partition's ring and groups.
#[derive(Debug, Default)]
pub struct Partition {
    /// Messages in arrival order.
    msgs: VecDeque<Msg>,
    /// Accounted bytes of `msgs`.
    bytes: u64,
    /// Groups by name.
    groups: HashMap<String, Group>,
    /// Drop counters.
    pub drops: Drops,
}

impl Partition {
    /// Messages in the ring.
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Accounted bytes in the ring.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Registers `group` (cursor at the oldest message still here) unless known.
    pub fn add_group(&mut self, group: &str) {
        if !self.groups.contains_key(group) {
            self.groups.insert(group.to_string(), Group::default());
        }
    }

    /// Group names.
    pub fn groups(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// How many of `incoming` messages (of `incoming_bytes`) must the front
    /// lose so the ring stays within `max_len` and `max_bytes`: (messages,
    /// bytes) taken from the front of ring-then-batch.
    pub fn overflow(&self, incoming: &[Bytes], max_len: u64, max_bytes: u64) -> (usize, u64, u64) {
        let in_bytes: u64 = incoming.iter().map(|p| p.len() as u64 + MSG_OVERHEAD).sum();
        let mut len = self.msgs.len() as u64 + incoming.len() as u64;
        let mut bytes = self.bytes + in_bytes;
        let (mut n, mut freed) = (0usize, 0u64);
        let sizes = self
            .msgs
            .iter()
            .map(Msg::size)
            .chain(incoming.iter().map(|p| p.len() as u64 + MSG_OVERHEAD));
        for s in sizes {
            if len <= max_len && bytes <= max_bytes {
                break;
            }
            len -= 1;
            bytes -= s;
            freed += s;
            n += 1;
        }
        (n, freed, in_bytes)
    }

    /// Appends `payloads` with sequence numbers from `next_seq`, then drops
    /// `drop_front` messages from the front (counted as bounds drops).
    /// Returns the accounted bytes added and dropped.
    pub fn push(
        &mut self,
        payloads: Vec<Bytes>,
        next_seq: &mut u64,
        now: Instant,
        drop_front: usize,
    ) -> (u64, u64) {
        let mut added = 0;
        for payload in payloads {
            let m = Msg {
                seq: *next_seq,
                at: now,
                payload,
            };
            *next_seq += 1;
            added += m.size();
            self.bytes += m.size();
            self.msgs.push_back(m);
        }
        let mut dropped = 0;
        for _ in 0..drop_front {
            if let Some(m) = self.msgs.pop_front() {
                self.bytes -= m.size();
                dropped += m.size();
                self.drops.bounds += 1;
            }
        }
        (added, dropped)
    }

    /// Drops messages older than `ttl`; returns the accounted bytes freed.
    pub fn expire_ttl(&mut self, ttl: Duration, now: Instant) -> u64 {
        let mut freed = 0;
        while let Some(m) = self.msgs.front() {
            if now.duration_since(m.at) < ttl {
                break;
            }
            freed += m.size();
            self.bytes -= m.size();
            self.msgs.pop_front();
            self.drops.ttl += 1;
        }
        freed
    }

    /// Moves every group's expired leases to redelivery (or drops them at
    /// the retry limit). Returns whether anything became deliverable.
    pub fn expire_leases(&mut self, rules: Rules, now: Instant) -> bool {
        let mut moved = false;
        for g in self.groups.values_mut() {
            let expired: Vec<(u64, u32)> = g
                .leased
                .iter()
                .filter(|(_, l)| l.until <= now)
                .map(|(&s, l)| (s, l.attempt))
                .collect();
            for (seq, attempt) in expired {
                g.leased.remove(&seq);
                moved |= fail(g, &mut self.drops, seq, attempt, rules.retry_limit);
            }
        }
        moved
    }

    fn find(&self, seq: u64) -> Option<&Msg> {
        self.msgs
            .binary_search_by_key(&seq, |m| m.seq)
            .ok()
            .map(|i| &self.msgs[i])
    }

    /// Hands up to `max` deliveries to `group`: its redeliveries first, then
    /// new messages from its cursor. With `auto_ack` nothing is leased (at
    /// most once). Expired leases are moved first.
    pub fn take(
        &mut self,
        group: &str,
        max: usize,
        auto_ack: bool,
        rules: Rules,
        now: Instant,
    ) -> Vec<Delivery> {
        self.expire_leases(rules, now);
        self.add_group(group);
        let mut out = Vec::new();
        // Split borrows: the group map and the ring are separate fields.
        let g = self.groups.get_mut(group).expect("inserted above");
        while out.len() < max {
            let Some((seq, attempt)) = g.retry.pop_front() else {
                break;
            };
            let Ok(i) = self.msgs.binary_search_by_key(&seq, |m| m.seq) else {
                continue; // dropped by TTL or bounds meanwhile
            };
            out.push(Delivery {
                seq,
                attempt,
                payload: self.msgs[i].payload.clone(),
            });
        }
        let start = self.msgs.partition_point(|m| m.seq < g.cursor);
        for m in self.msgs.iter().skip(start) {
            if out.len() >= max {
                break;
            }
            out.push(Delivery {
                seq: m.seq,
                attempt: 1,
                payload: m.payload.clone(),
            });
            g.cursor = m.seq + 1;
        }
        if !auto_ack {
            for d in &out {
                g.leased.insert(
                    d.seq,
                    Lease {
                        until: now + rules.lease,
                        attempt: d.attempt,
                    },
                );
            }
        }
        out
    }

    /// Gives deliveries back untouched (their answer could not be sent):
    /// they go out again with the same attempt, first.
    pub fn untake(&mut self, group: &str, deliveries: &[Delivery]) {
        let Some(g) = self.groups.get_mut(group) else {
            return;
        };
        for d in deliveries.iter().rev() {
            g.leased.remove(&d.seq);
            g.retry.push_front((d.seq, d.attempt));
        }
    }

    /// Settles `group`'s delivery (`seq`, `attempt`).
    pub fn ack(
        &mut self,
        group: &str,
        seq: u64,
        attempt: u32,
        status: AckStatus,
        rules: Rules,
    ) -> Outcome {
        let Some(g) = self.groups.get_mut(group) else {
            return Outcome::Unknown;
        };
        match g.leased.get(&seq) {
            Some(l) if l.attempt == attempt => {}
            Some(_) => return Outcome::Stale,
            None if seq < g.cursor => return Outcome::Stale,
            None => return Outcome::Unknown,
        }
        g.leased.remove(&seq);
        if status == AckStatus::Completed {
            return Outcome::Acked;
        }
        if fail(g, &mut self.drops, seq, attempt, rules.retry_limit) {
            Outcome::Redelivered
        } else {
            Outcome::Acked
        }
    }

    /// Drops what every group is done with; returns the bytes freed.
    pub fn trim(&mut self) -> u64 {
        let Some(low) = self.groups.values().map(Group::low_water).min() else {
            return 0;
        };
        let mut freed = 0;
        while self.msgs.front().is_some_and(|m| m.seq < low) {
            let m = self.msgs.pop_front().expect("front checked");
            freed += m.size();
            self.bytes -= m.size();
        }
        freed
    }

    /// Empties the ring and forgets every group (reset); returns (messages, bytes).
    pub fn clear(&mut self) -> (usize, u64) {
        let r = (self.msgs.len(), self.bytes);
        self.msgs.clear();
        self.groups.clear();
        self.bytes = 0;
        r
    }

    /// Messages `group` has not settled: undelivered, awaiting redelivery or
    /// on lease. A group not seen yet would get the whole ring.
    pub fn pending(&self, group: &str) -> u64 {
        match self.groups.get(group) {
            None => self.msgs.len() as u64,
            Some(g) => {
                let start = self.msgs.partition_point(|m| m.seq < g.cursor);
                let retry = g
                    .retry
                    .iter()
                    .filter(|(s, _)| self.find(*s).is_some())
                    .count();
                (self.msgs.len() - start + retry + g.leased.len()) as u64
            }
        }
    }
}

/// Requeues a failed delivery of `seq`, or drops it at the limit; true when requeued.
fn fail(g: &mut Group, drops: &mut Drops, seq: u64, attempt: u32, limit: u32) -> bool {
    if attempt >= limit {
        drops.retry += 1;
        false
    } else {
        g.retry.push_back((seq, attempt + 1));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        lease: Duration::from_secs(10),
        retry_limit: 2,
    };

    fn part(n: usize) -> (Partition, u64) {
        let mut p = Partition::default();
        let mut seq = 0;
        let msgs = (0..n).map(|i| Bytes::from(i.to_string())).collect();
        p.push(msgs, &mut seq, Instant::now(), 0);
        (p, seq)
    }

    fn text(d: &[Delivery]) -> Vec<String> {
        d.iter()
            .map(|d| String::from_utf8(d.payload.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn groups_fan_out_and_members_compete() {
        let (mut p, _) = part(4);
        let now = Instant::now();
        assert_eq!(text(&p.take("a", 2, false, RULES, now)), ["0", "1"]);
        assert_eq!(text(&p.take("a", 9, false, RULES, now)), ["2", "3"]);
        assert_eq!(
            text(&p.take("b", 9, true, RULES, now)),
            ["0", "1", "2", "3"]
        );
        assert!(p.take("a", 9, false, RULES, now).is_empty());
    }

    #[test]
    fn expiry_redelivers_then_drops_at_the_limit() {
        let (mut p, _) = part(1);
        let now = Instant::now();
        let d = p.take("g", 1, false, RULES, now);
        assert_eq!(d[0].attempt, 1);
        let later = now + Duration::from_secs(11);
        let d2 = p.take("g", 1, false, RULES, later);
        assert_eq!((d2[0].seq, d2[0].attempt), (d[0].seq, 2));
        // the first holder's ack is stale; the second's counts
        assert_eq!(
            p.ack("g", d[0].seq, 1, AckStatus::Completed, RULES),
            Outcome::Stale
        );
        assert_eq!(
            p.ack("g", d2[0].seq, 2, AckStatus::Failed, RULES),
            Outcome::Acked
        );
        assert_eq!(p.drops.retry, 1);
        assert!(p.take("g", 1, false, RULES, later).is_empty());
        assert!(p.trim() > 0);
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn failed_ack_redelivers_first() {
        let (mut p, _) = part(3);
        let now = Instant::now();
        let d = p.take("g", 1, false, RULES, now);
        assert_eq!(
            p.ack("g", d[0].seq, 1, AckStatus::Failed, RULES),
            Outcome::Redelivered
        );
        let again = p.take("g", 2, false, RULES, now);
        assert_eq!(text(&again), ["0", "1"]);
        assert_eq!(again[0].attempt, 2);
        assert_eq!(
            p.ack("g", 99, 1, AckStatus::Completed, RULES),
            Outcome::Unknown
        );
    }

    #[test]
    fn overflow_keeps_the_newest() {
        let (mut p, mut seq) = part(3);
        let incoming: Vec<Bytes> = vec![Bytes::from("x"), Bytes::from("y")];
        let (n, _, _) = p.overflow(&incoming, 3, u64::MAX);
        assert_eq!(n, 2);
        p.push(incoming, &mut seq, Instant::now(), n);
        assert_eq!(
            text(&p.take("g", 9, true, RULES, Instant::now())),
            ["2", "x", "y"]
        );
        assert_eq!(p.drops.bounds, 2);
    }

    #[test]
    fn trim_waits_for_every_group() {
        let (mut p, _) = part(2);
        let now = Instant::now();
        p.take("a", 9, true, RULES, now);
        p.take("b", 1, true, RULES, now);
        p.trim();
        assert_eq!(p.len(), 1);
        assert_eq!(p.pending("b"), 1);
        assert_eq!(p.pending("new"), 1);
    }
}
