//! Long-poll waiters: one [`Signal`] per queue a parked pop waits on, plus
//! one for pops over many queues (namespace/task). A `pushed` notice for a
//! queue fires its signal once, however many pops are parked on it and
//! however many pushes the notice stands for (wake-ups coalesce upstream in
//! the mesh thread and here: a fire only bumps a generation and wakes the
//! wakers registered since the last fire).
//!
//! Lost-wake-up rule: a waiter reads the generation *before* its pop attempt
//! and waits for a change from that value, so a push that lands during the
//! attempt is never missed.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// A generation counter with the wakers of the tasks waiting for it to move.
#[derive(Debug, Default)]
pub struct Signal {
    /// Bumped by every fire.
    generation: Cell<u64>,
    /// Tasks to wake at the next fire.
    wakers: RefCell<Vec<Waker>>,
    /// When it last fired (a woken waiter measures its wake-up from it).
    fired_at: Cell<Option<Instant>>,
}

impl Signal {
    /// The current generation.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Moves the generation and wakes every waiting task.
    pub fn fire(&self) {
        self.generation.set(self.generation.get() + 1);
        self.fired_at.set(Some(Instant::now()));
        for w in self.wakers.take() {
            w.wake();
        }
    }

    /// When the signal last fired (`None`: never).
    pub fn fired_at(&self) -> Option<Instant> {
        self.fired_at.get()
    }

    /// Completes once the generation differs from `since`.
    pub fn changed(self: &Rc<Self>, since: u64) -> Changed {
        Changed {
            signal: self.clone(),
            since,
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
