//! Which pop lanes' deep sweeps came back empty lately (per shard).
//!
//! A pop's first attempt lets `queen.pop_candidates` sweep up to 8,192
//! partitions per queue for backlog its cheap sources miss (pop.sql,
//! `queen.pop_sweep_depth`). On a wide queue that has nothing to give, that
//! sweep is most of the attempt's cost (~25-35 ms of PostgreSQL over 12,000
//! partitions against ~2.5 ms without it), and consumers that pop without
//! waiting repeat it back to back. After an empty sweep, what a new sweep
//! could find is what arrived since: a push fires the queue's signal (from
//! this shard, a sibling, a peer broker or the spool replay), and expired or
//! released leases are found by the cheap sources, as on a long-poll re-check.
//! So a pop of a lane whose sweep came back empty less than [`MEMO`] ago, with
//! no fire of its signal since, skips the sweep like a re-check does. [`MEMO`]
//! bounds what the memo can hide: backlog the last sweep did not reach (a
//! queue wider than the sweep, a partition it found locked by a concurrent
//! pop, a delay coming due) waits at most that long for the next one, also
//! for a long poll that started under the memo ([`Plan`]).

use super::waiters::Signal;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long an empty sweep stands for its lane.
pub const MEMO: Duration = Duration::from_millis(250);
/// Entries kept before expired ones are dropped (a shard sees few lanes).
const CAP: usize = 4096;

/// One lane's last empty sweep.
#[derive(Debug)]
struct Empty {
    at: Instant,
    /// Held, not only its generation: a signal nobody holds is dropped on
    /// fire and a new one starts from 0, which could match a stale number.
    signal: Rc<Signal>,
    generation: u64,
}

/// Per-shard memo, keyed by the pop's wake lane (`api::pop::lane`).
#[derive(Debug, Default)]
pub struct EmptySweeps {
    by_lane: RefCell<HashMap<Rc<str>, Empty>>,
}

impl EmptySweeps {
    /// Whether `lane`'s last sweep came back empty less than [`MEMO`] ago and
    /// its signal has not fired since.
    pub fn stands(&self, lane: &str, now: Instant) -> bool {
        self.by_lane.borrow().get(lane).is_some_and(|e| {
            now.saturating_duration_since(e.at) < MEMO && e.signal.generation() == e.generation
        })
    }

    /// Records an empty sweep of `lane`, attempted when `signal` stood at
    /// `generation` (read before the attempt: a push during it moves it).
    pub fn record(&self, lane: Rc<str>, signal: Rc<Signal>, generation: u64, now: Instant) {
        let mut map = self.by_lane.borrow_mut();
        if map.len() >= CAP {
            map.retain(|_, e| now.saturating_duration_since(e.at) < MEMO);
        }
        if map.len() < CAP {
            map.insert(
                lane,
                Empty {
                    at: now,
                    signal,
                    generation,
                },
            );
        }
    }
}

/// One pop request's use of the deep sweep, attempt by attempt.
#[derive(Debug)]
pub struct Plan {
    /// The next attempt may sweep deep.
    deep: bool,
    /// The next attempt is the request's first, or the sweep it skipped at
    /// its start, now owed: counted, and recorded when it comes back empty.
    counted: bool,
    /// When a sweep this request skipped at its start is owed: a long poll
    /// that started under a memo sweeps once [`MEMO`] has passed, so the memo
    /// hides nothing longer from a waiting pop than from one that does not wait.
    owed: Option<Instant>,
}

impl Plan {
    /// The plan of a pop of `lane` starting at `now`. A pop for one named
    /// partition (`wide` false) has nothing to sweep: it keeps no memo.
    pub fn start(memo: &EmptySweeps, lane: &str, wide: bool, now: Instant) -> Plan {
        if !wide {
            return Plan {
                deep: true,
                counted: false,
                owed: None,
            };
        }
        let skip = memo.stands(lane, now);
        Plan {
            deep: !skip,
            counted: true,
            owed: skip.then(|| now + MEMO),
        }
    }

    /// The next attempt: (may it sweep deep, is it counted). Later attempts
    /// are re-checks until [`Plan::recheck`] finds a sweep owed.
    pub fn next(&mut self) -> (bool, bool) {
        let now = (self.deep, self.counted);
        self.deep = false;
        self.counted = false;
        now
    }

    /// Before a long poll's re-check at `now`: the skipped sweep, once due.
    pub fn recheck(&mut self, now: Instant) {
        if self.owed.is_some_and(|t| now >= t) {
            self.owed = None;
            self.deep = true;
            self.counted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_started_under_a_memo_sweeps_once_the_memo_has_passed() {
        let memo = EmptySweeps::default();
        let signal = Rc::new(Signal::default());
        let t0 = Instant::now();
        let mut fresh = Plan::start(&memo, "l", true, t0);
        assert_eq!(
            fresh.next(),
            (true, true),
            "no memo: the first attempt sweeps"
        );
        assert_eq!(fresh.next(), (false, false), "re-checks do not");
        memo.record("l".into(), signal.clone(), signal.generation(), t0);
        let mut p = Plan::start(&memo, "l", true, t0);
        assert_eq!(p.next(), (false, true), "under the memo: skipped, counted");
        p.recheck(t0 + MEMO / 2);
        assert_eq!(p.next(), (false, false));
        p.recheck(t0 + MEMO);
        assert_eq!(p.next(), (true, true), "the skipped sweep, owed");
        p.recheck(t0 + 4 * MEMO);
        assert_eq!(p.next(), (false, false), "owed once only");
        let mut one = Plan::start(&memo, "l", false, t0);
        assert_eq!(
            one.next(),
            (true, false),
            "a one-partition pop: as before, uncounted"
        );
    }

    #[test]
    fn a_memo_stands_until_its_signal_fires_or_it_expires() {
        let memo = EmptySweeps::default();
        let signal = Rc::new(Signal::default());
        let t0 = Instant::now();
        assert!(!memo.stands("l", t0), "nothing recorded");
        memo.record("l".into(), signal.clone(), signal.generation(), t0);
        assert!(memo.stands("l", t0 + MEMO / 2));
        assert!(!memo.stands("other", t0));
        assert!(!memo.stands("l", t0 + MEMO), "expired");
        signal.fire();
        assert!(!memo.stands("l", t0), "a push arrived since");
        // A sweep attempted before a fire it did not see records a stale generation.
        memo.record("l".into(), signal.clone(), signal.generation() - 1, t0);
        assert!(!memo.stands("l", t0));
    }

    #[test]
    fn a_full_memo_drops_expired_entries_and_never_grows_past_its_cap() {
        let memo = EmptySweeps::default();
        let signal = Rc::new(Signal::default());
        let t0 = Instant::now();
        for i in 0..CAP {
            memo.record(i.to_string().into(), signal.clone(), 0, t0);
        }
        memo.record("late".into(), signal.clone(), 0, t0);
        assert!(
            !memo.stands("late", t0),
            "full of live entries: not recorded"
        );
        let later = t0 + MEMO;
        memo.record("late".into(), signal.clone(), 0, later);
        assert!(memo.stands("late", later), "expired entries made room");
        assert_eq!(memo.by_lane.borrow().len(), 1);
    }
}
