//! Long-poll waiters: one [`Signal`] per queue a parked pop waits on, plus
//! one for pops over many queues (namespace/task). A `pushed` notice for a
//! queue fires its signal once, however many pops are parked on it and
//! however many pushes the notice stands for (wake-ups coalesce upstream in
//! the mesh thread and here: a fire only bumps a generation and wakes the
//! wakers registered since the last fire).
//!
//! A database long poll parks in a lane ([`Signal::parked`]): a fire wakes
//! the oldest pop of each lane, not all of them; a woken pop that took a
//! full load (or failed, or left) passes the wake to the next one of its
//! lane. Ephemeral pops wait with [`Signal::changed`], woken by every fire.
//!
//! Lost-wake-up rule: a waiter reads the generation *before* its pop attempt
//! and waits for a change from that value, so a push that lands during the
//! attempt is never missed.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// A generation counter with the tasks waiting for it to move: wake-all
/// waiters ([`Signal::changed`]) and, per lane, a FIFO of parked pops of
/// which a fire wakes only the first ([`Signal::parked`]).
#[derive(Debug, Default)]
pub struct Signal {
    /// Bumped by every fire.
    generation: Cell<u64>,
    /// Tasks to wake at the next fire (all of them).
    wakers: RefCell<Vec<Waker>>,
    /// Parked pops by lane, oldest first. A lane is the set of pops that
    /// would claim the same messages (tenant, scope, partition, group), so
    /// one woken pop finding nothing means none of its lane would find
    /// anything: waking the rest is the herd this avoids (issue 18).
    lanes: RefCell<HashMap<Rc<str>, VecDeque<Rc<Seat>>>>,
    /// When it last fired (a woken waiter measures its wake-up from it).
    fired_at: Cell<Option<Instant>>,
}

/// One parked pop in a lane.
#[derive(Debug, Default)]
struct Seat {
    /// Chosen by a fire or a hand-over; its task owes the lane an attempt.
    picked: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Moves the generation, wakes every wake-all task and the oldest
    /// parked pop of each lane.
    pub fn fire(&self) {
        self.generation.set(self.generation.get() + 1);
        self.fired_at.set(Some(Instant::now()));
        for w in self.wakers.take() {
            w.wake();
        }
        let mut lanes = self.lanes.borrow_mut();
        lanes.retain(|_, seats| {
            pick(seats);
            !seats.is_empty()
        });
    }

    /// Hands a wake on to the next parked pop of `lane` (the woken one took
    /// a full load, so more may be waiting, or it left without trying).
    fn pass(&self, lane: &Rc<str>) {
        let mut lanes = self.lanes.borrow_mut();
        if let Some(seats) = lanes.get_mut(lane) {
            pick(seats);
            if seats.is_empty() {
                lanes.remove(lane);
            }
        }
    }

    /// When the signal last fired (`None`: never).
    pub fn fired_at(&self) -> Option<Instant> {
        self.fired_at.get()
    }

    /// Completes once the generation differs from `since` (wakes on every fire).
    pub fn changed(self: &Rc<Self>, since: u64) -> Changed {
        Changed {
            signal: self.clone(),
            since,
        }
    }

    /// Parks a pop of `lane` that saw generation `since` before its attempt:
    /// completes at once if the generation has moved since (a push landed
    /// during the attempt), else when a fire or a hand-over picks it, in
    /// arrival order within the lane. The [`Baton`] it yields is the picked
    /// pop's duty to pass the wake on unless it settles it.
    pub fn parked(self: &Rc<Self>, since: u64, lane: Rc<str>) -> Parked {
        Parked {
            signal: self.clone(),
            since,
            lane,
            seat: None,
            done: false,
        }
    }
}

/// Picks the oldest seat of a lane and wakes its task.
fn pick(seats: &mut VecDeque<Rc<Seat>>) {
    if let Some(seat) = seats.pop_front() {
        seat.picked.set(true);
        if let Some(w) = seat.waker.take() {
            w.wake();
        }
    }
}

/// Future of [`Signal::changed`].
#[derive(Debug)]
pub struct Changed {
    signal: Rc<Signal>,
    since: u64,
}

impl Future for Changed {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.generation.get() != self.since {
            return Poll::Ready(());
        }
        let mut wakers = self.signal.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Future of [`Signal::parked`]: `None` when the generation had already
/// moved (no seat taken), `Some(baton)` when picked.
#[derive(Debug)]
pub struct Parked {
    signal: Rc<Signal>,
    since: u64,
    lane: Rc<str>,
    seat: Option<Rc<Seat>>,
    done: bool,
}

impl Future for Parked {
    type Output = Option<Baton>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Baton>> {
        let this = &mut *self;
        match &this.seat {
            None => {
                if this.signal.generation.get() != this.since {
                    this.done = true;
                    return Poll::Ready(None);
                }
                let seat = Rc::new(Seat::default());
                *seat.waker.borrow_mut() = Some(cx.waker().clone());
                (this.signal.lanes.borrow_mut())
                    .entry(this.lane.clone())
                    .or_default()
                    .push_back(seat.clone());
                this.seat = Some(seat);
                Poll::Pending
            }
            Some(seat) if seat.picked.get() => {
                this.done = true;
                Poll::Ready(Some(Baton {
                    signal: this.signal.clone(),
                    lane: this.lane.clone(),
                    armed: true,
                }))
            }
            Some(seat) => {
                *seat.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for Parked {
    /// Leaving the line (timer, deadline, client gone): an unpicked seat is
    /// removed; a picked one that never ran passes its wake on, so the
    /// message it was woken for does not wait for a recheck timer.
    fn drop(&mut self) {
        let Some(seat) = self.seat.take() else { return };
        if self.done {
            return;
        }
        if seat.picked.get() {
            self.signal.pass(&self.lane);
            return;
        }
        let mut lanes = self.signal.lanes.borrow_mut();
        if let Some(seats) = lanes.get_mut(&self.lane) {
            seats.retain(|s| !Rc::ptr_eq(s, &seat));
            if seats.is_empty() {
                lanes.remove(&self.lane);
            }
        }
    }
}

/// A picked pop's wake: dropped armed (error, full load), it wakes the
/// next pop of the lane; [`Baton::settle`] keeps it.
#[derive(Debug)]
pub struct Baton {
    signal: Rc<Signal>,
    lane: Rc<str>,
    armed: bool,
}

impl Baton {
    /// The attempt showed the lane drained (it took less than it could):
    /// nobody else of the lane would find anything, wake nobody.
    pub fn settle(mut self) {
        self.armed = false;
    }
}

impl Drop for Baton {
    fn drop(&mut self) {
        if self.armed {
            self.signal.pass(&self.lane);
        }
    }
}

/// The shard's waiters, by queue.
#[derive(Debug, Default)]
pub struct WaiterSet {
    /// Signals of queues someone waits on; entries nobody holds are pruned on fire.
    by_queue: RefCell<HashMap<String, Rc<Signal>>>,
    /// Fired by every notice: for pops that span queues.
    any: Rc<Signal>,
}

impl WaiterSet {
    /// The signal for `queue` (or for any queue with `None`).
    pub fn signal(&self, queue: Option<&str>) -> Rc<Signal> {
        match queue {
            None => self.any.clone(),
            Some(q) => self
                .by_queue
                .borrow_mut()
                .entry(q.to_string())
                .or_default()
                .clone(),
        }
    }

    /// A message arrived on `queue`: wake its waiters and the any-queue waiters.
    pub fn wake(&self, queue: &str) {
        let mut map = self.by_queue.borrow_mut();
        if let Some(s) = map.get(queue) {
            if Rc::strong_count(s) == 1 {
                map.remove(queue);
            } else {
                s.fire();
            }
        }
        drop(map);
        self.any.fire();
    }
}
