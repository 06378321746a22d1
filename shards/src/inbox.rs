//! Inbox: a bounded, multi-producer queue into one shard, with coalesced
//! wake-ups.
//!
//! The [`InboxReceiver`] lives on one shard and is awaited by one glommio
//! task at a time. [`InboxSender`]s are used from plain OS threads (DB
//! threads, the mesh thread, via [`InboxSender::send_blocking`] or
//! [`InboxSender::try_send`]) and from other shards (`try_send` only).
//!
//! # Wake-ups
//!
//! The receiving task parks by storing its glommio `Waker` and clearing the
//! `notified` flag. The first sender to find `notified` clear sets it and
//! wakes the task; every later sender sees it set and only enqueues. So a
//! burst of 1000 sends into a parked receiver costs one wake, and a receiver
//! that is busy draining costs senders no wake at all. (Dekker pattern: each
//! side writes its flag/item, a SeqCst fence, then reads the other's.)
//!
//! glommio 0.9 wakes a task from a foreign thread by pushing the `Waker`
//! onto the owning executor's channel and writing its eventfd when the
//! executor is asleep (with a `membarrier` against the lost-wake race), so
//! the `Waker` alone is enough: no eventfd of our own is needed. Tests here
//! check it for an idle (sleeping) and a busy executor.
//!
//! Measured wake latency, plain thread `try_send` → receiving task running
//! (2-core VM shared with other builds, test profile with deps at
//! `opt-level 2`; `cargo test -p shards -- --ignored --nocapture
//! wake_latency`, 2000 samples unless noted):
//!
//! | executor state                     | drain task queue      | median  | p99     |
//! |------------------------------------|-----------------------|---------|---------|
//! | idle (asleep in io_uring)          | default               | 20 µs   | 70 µs   |
//! | idle                               | [`latency_queue`]     | 23 µs   | 64 µs   |
//! | busy (a task spinning, yielding)   | [`latency_queue`]     | 1.1 ms  | 19 ms   |
//! | busy, 50 samples                   | default               | 198 ms  | 220 ms  |
//!
//! So: an idle shard wakes in tens of µs. A CPU-busy shard only looks at
//! foreign wakes when preempted, which for a default task queue means
//! glommio's 100 ms preemption timer: **spawn the task that drains an inbox
//! into [`latency_queue`]** (1 ms budget). A shard busy with ordinary I/O
//! tasks returns to its reactor far more often than a spinning one.
//!
//! # Cost
//!
//! A lock-free bounded ring (`crossbeam_queue::ArrayQueue`); `capacity` slots
//! are allocated up front. The waker slot is an `AtomicWaker`.

use std::fmt;
use std::future::poll_fn;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use futures_util::task::AtomicWaker;

/// Longest pause of [`InboxSender::send_blocking`] between retries while
/// the inbox is full. Short enough that a drained inbox refills quickly.
const MAX_BACKOFF: Duration = Duration::from_millis(1);

/// State shared by the receiver and every sender.
struct Shared<T> {
    /// The items.
    queue: ArrayQueue<T>,
    /// The parked receiving task's waker.
    waker: AtomicWaker,
    /// True while the receiver is known to be awake or a wake is in flight;
    /// cleared by the receiver just before it parks.
    notified: AtomicBool,
    /// Live senders; 0 means the inbox is closed once drained.
    nr_senders: AtomicUsize,
    /// False once the receiver was dropped.
    receiver_alive: AtomicBool,
    /// Wakes actually issued (for tests and per-shard counters).
    nr_wakes: AtomicU64,
}

impl<T> Shared<T> {
    /// Wakes the receiver unless it is awake or already being woken.
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if !self.notified.swap(true, Ordering::SeqCst) {
            self.nr_wakes.fetch_add(1, Ordering::Relaxed);
            self.waker.wake();
        }
    }
}

/// Creates an inbox holding at most `capacity` items (at least 1).
pub fn inbox<T: Send>(capacity: usize) -> (InboxSender<T>, InboxReceiver<T>) {
    let shared = Arc::new(Shared {
        queue: ArrayQueue::new(capacity.max(1)),
        waker: AtomicWaker::new(),
        notified: AtomicBool::new(true),
        nr_senders: AtomicUsize::new(1),
        receiver_alive: AtomicBool::new(true),
        nr_wakes: AtomicU64::new(0),
    });
    (
        InboxSender {
            shared: shared.clone(),
        },
        InboxReceiver { shared },
    )
}

/// Sending end. `Clone + Send + Sync`.
pub struct InboxSender<T> {
    /// Shared with the receiver.
    shared: Arc<Shared<T>>,
}

impl<T> fmt::Debug for InboxSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxSender")
            .field("len", &self.shared.queue.len())
            .field("capacity", &self.shared.queue.capacity())
            .finish()
    }
}

impl<T> Clone for InboxSender<T> {
    fn clone(&self) -> Self {
        self.shared.nr_senders.fetch_add(1, Ordering::Relaxed);
        InboxSender {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for InboxSender<T> {
    fn drop(&mut self) {
        if self.shared.nr_senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Last sender: the receiver must learn the inbox is closed.
            self.shared.notify();
        }
    }
}

impl<T> InboxSender<T> {
    /// Enqueues `v` without waiting. Gives `v` back when the inbox is full
    /// or the receiver is gone. Safe on shards and plain threads alike.
    pub fn try_send(&self, v: T) -> Result<(), T> {
        if !self.shared.receiver_alive.load(Ordering::Acquire) {
            return Err(v);
        }
        self.shared.queue.push(v)?;
        self.shared.notify();
        Ok(())
    }

    /// Enqueues `v`, waiting (spin, then sleep with backoff up to 1 ms)
    /// while the inbox is full. Gives `v` back only if the receiver is gone.
    /// Blocks the thread: never call it on a shard.
    pub fn send_blocking(&self, mut v: T) -> Result<(), T> {
        let mut pause = Duration::from_micros(10);
        let mut spins = 0u32;
        loop {
            match self.try_send(v) {
                Ok(()) => return Ok(()),
                Err(back) => v = back,
            }
            if !self.shared.receiver_alive.load(Ordering::Acquire) {
                return Err(v);
            }
            if spins < 16 {
                spins += 1;
                std::thread::yield_now();
            } else {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// Items currently queued (a snapshot).
    pub fn len(&self) -> usize {
        self.shared.queue.len()
    }

    /// True when nothing is queued (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.shared.queue.is_empty()
    }

    /// True once the receiver was dropped.
    pub fn is_closed(&self) -> bool {
        !self.shared.receiver_alive.load(Ordering::Acquire)
    }
}

/// Receiving end; lives on one shard and is awaited by one task at a time.
/// `Send` so it can be handed to its shard at start-up.
pub struct InboxReceiver<T> {
    /// Shared with the senders.
    shared: Arc<Shared<T>>,
}

impl<T> fmt::Debug for InboxReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InboxReceiver")
            .field("len", &self.shared.queue.len())
            .field(
                "nr_senders",
                &self.shared.nr_senders.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl<T> Drop for InboxReceiver<T> {
    fn drop(&mut self) {
        self.shared.receiver_alive.store(false, Ordering::Release);
    }
}

impl<T> InboxReceiver<T> {
    /// Waits until at least one item is queued, then moves up to `max`
    /// (treated as at least 1) into `out` and returns how many. Returns 0
    /// only when every sender is dropped and the inbox is empty.
    pub async fn recv_batch(&self, out: &mut Vec<T>, max: usize) -> usize {
        let max = max.max(1);
        poll_fn(|cx| {
            let n = self.drain(out, max);
            if n > 0 {
                return Poll::Ready(n);
            }
            self.shared.waker.register(cx.waker());
            // Park: from now on the next sender must wake us.
            self.shared.notified.store(false, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let n = self.drain(out, max);
            if n > 0 {
                self.shared.notified.store(true, Ordering::SeqCst);
                return Poll::Ready(n);
            }
            if self.shared.nr_senders.load(Ordering::SeqCst) == 0 {
                // Items sent before the last sender dropped are in the
                // queue already (push happens-before the decrement).
                let n = self.drain(out, max);
                return Poll::Ready(n);
            }
            Poll::Pending
        })
        .await
    }

    /// Moves up to `max` items into `out` without waiting.
    pub fn try_recv_batch(&self, out: &mut Vec<T>, max: usize) -> usize {
        self.drain(out, max)
    }

    fn drain(&self, out: &mut Vec<T>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            match self.shared.queue.pop() {
                Some(v) => {
                    out.push(v);
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Wakes issued to this receiver so far (each empty→non-empty
    /// transition observed while parked costs one).
    pub fn nr_wakes(&self) -> u64 {
        self.shared.nr_wakes.load(Ordering::Relaxed)
    }

    /// Items currently queued (a snapshot).
    pub fn len(&self) -> usize {
        self.shared.queue.len()
    }

    /// True when nothing is queued (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.shared.queue.is_empty()
    }
}

/// Creates, on the current shard, a glommio task queue whose latency
/// matters (1 ms), for the task that drains an inbox.
///
/// Why: glommio forwards a foreign wake to a *busy* executor only when it
/// next polls for events, which a CPU-bound task queue delays up to the
/// preemption timer (100 ms by default). A task in a latency-matters queue
/// makes the foreign wake write the executor's eventfd, preempting the busy
/// queue at once. Call on a shard thread only (panics elsewhere).
pub fn latency_queue(name: &str) -> glommio::TaskQueueHandle {
    glommio::executor().create_task_queue(
        glommio::Shares::default(),
        glommio::Latency::Matters(LATENCY_QUEUE_BUDGET),
        name,
    )
}

/// Latency budget of [`latency_queue`]: glommio preempts other task queues
/// at least this often while a task of the queue is runnable.
pub const LATENCY_QUEUE_BUDGET: Duration = Duration::from_millis(1);

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
