//! Shutdown: a process-wide, one-shot signal that any thread may fire and
//! any shard may await, plus the main thread's wait for SIGTERM/SIGINT.
//!
//! [`ShutdownTrigger`] is fired from any thread (main, a signal wait, a
//! shard). [`ShutdownListener::wait`] is awaited by glommio tasks on any
//! shard; it is woken with the task's own `Waker` from the firing thread,
//! which glommio 0.9 forwards to the owning executor (the mechanism the
//! inbox uses; see `inbox.rs` for its measured latency). [`LocalSignal`] is
//! the shard-local fan-out of one such wait to many tasks (no locks, no
//! atomics), as used by `listen.rs` for its connection tasks.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// How often [`wait_for_signals`] looks whether the trigger fired by other
/// means (a shard asked for shutdown). Only the main thread pays this.
const SIGNAL_RECHECK: Duration = Duration::from_millis(100);

/// Registered wakers of pending [`Wait`] futures, keyed so a dropped future
/// removes exactly its own entry.
#[derive(Debug, Default)]
struct Waiters {
    /// Next key to hand out.
    next: u64,
    /// Pending waiters.
    map: HashMap<u64, Waker>,
}

/// State shared by every trigger and listener clone.
#[derive(Debug, Default)]
struct Shared {
    /// Set once, never cleared.
    fired: AtomicBool,
    /// Wakers to call when fired. Locked briefly by registering tasks (on
    /// shards) and once by the firing thread; never held across an await.
    waiters: Mutex<Waiters>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Waiters> {
        // A panic while holding this lock leaves the map consistent (every
        // operation on it is a single insert/remove/drain), so poison is
        // harmless and we take the guard anyway.
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Creates a connected trigger/listener pair.
pub fn shutdown() -> (ShutdownTrigger, ShutdownListener) {
    let shared = Arc::new(Shared::default());
    (
        ShutdownTrigger {
            shared: shared.clone(),
        },
        ShutdownListener { shared },
    )
}

/// Fires shutdown. `Send + Sync + Clone`; usable from any thread.
#[derive(Debug, Clone)]
pub struct ShutdownTrigger {
    /// Shared with every listener.
    shared: Arc<Shared>,
}

impl ShutdownTrigger {
    /// Fires shutdown and wakes every waiting task. Idempotent.
    pub fn trigger(&self) {
        if self.shared.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        let wakers: Vec<Waker> = self.shared.lock().map.drain().map(|(_, w)| w).collect();
        for waker in wakers {
            waker.wake();
        }
    }

    /// True once shutdown was fired.
    pub fn is_triggered(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// A listener of this trigger.
    pub fn listener(&self) -> ShutdownListener {
        ShutdownListener {
            shared: self.shared.clone(),
        }
    }
}

/// Observes shutdown. `Send + Sync + Clone`; hand one to each shard.
#[derive(Debug, Clone)]
pub struct ShutdownListener {
    /// Shared with the trigger.
    shared: Arc<Shared>,
}

impl ShutdownListener {
    /// True once shutdown was fired.
    pub fn is_triggered(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Completes once shutdown was fired (at once if it already was).
    /// Cost: one short lock of a process-wide mutex per poll, so prefer one
    /// waiting task per shard fanning out through a [`LocalSignal`] over
    /// one wait per request.
    pub fn wait(&self) -> Wait<'_> {
        Wait {
            shared: &self.shared,
            key: None,
        }
    }
}

/// Future of [`ShutdownListener::wait`].
#[derive(Debug)]
pub struct Wait<'a> {
    /// The listener's state.
    shared: &'a Shared,
    /// Our entry in `waiters`, once registered.
    key: Option<u64>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.fired.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        {
            let mut waiters = self.shared.lock();
            let key = match self.key {
                Some(key) => key,
                None => {
                    waiters.next += 1;
                    waiters.next
                }
            };
            waiters.map.insert(key, cx.waker().clone());
            self.key = Some(key);
        }
        // Re-check after registering: `trigger` sets the flag before taking
        // the lock to drain, so either it sees our waker or we see the flag.
        if self.shared.fired.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shared.lock().map.remove(&key);
        }
    }
}

/// Blocks SIGTERM and SIGINT on the calling thread. Call it first thing in
/// `main`, before any thread starts: threads inherit the mask, so the
/// signals then stay pending until [`wait_for_signals`] takes them, rather
/// than killing the process on whatever thread the kernel picks.
pub fn block_signals() -> Result<(), std::io::Error> {
    let set = signal_set();
    // SAFETY: `set` is an initialised sigset_t; a null old-set is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Blocks the calling (main) thread until SIGTERM or SIGINT arrives, or
/// until `trigger` fired by other means, then fires it. Returns the signal
/// number, or `None` when shutdown came from elsewhere. Requires
/// [`block_signals`] to have been called before any thread started.
pub fn wait_for_signals(trigger: ShutdownTrigger) -> Option<i32> {
    let set = signal_set();
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: SIGNAL_RECHECK.as_nanos() as libc::c_long,
    };
    loop {
        if trigger.is_triggered() {
            return None;
        }
        // SAFETY: `set` is initialised; info may be null; timeout is valid.
        let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
        if sig == libc::SIGTERM || sig == libc::SIGINT {
            log::info!("signal {sig} received, shutting down");
            trigger.trigger();
            return Some(sig);
        }
        // -1 with EAGAIN (timeout) or EINTR: look at the trigger again.
    }
}

/// The set {SIGTERM, SIGINT}.
fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the zeroed set; sigaddset with valid
    // signal numbers cannot fail.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Shard-local state of a [`LocalSignal`].
#[derive(Default)]
struct LocalInner {
    /// Set once by `fire`.
    fired: Cell<bool>,
    /// Next waiter key.
    next: Cell<u64>,
    /// Tasks waiting for `fire`.
    wakers: RefCell<HashMap<u64, Waker>>,
}

/// A one-shot, shard-local broadcast (`!Send`): `fire` once, every
/// [`LocalSignal::wait`] completes. O(1) to register, O(waiters) to fire.
#[derive(Clone, Default)]
pub struct LocalSignal {
    /// Shared by the clones on this shard.
    inner: Rc<LocalInner>,
}

impl fmt::Debug for LocalSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSignal")
            .field("fired", &self.inner.fired.get())
            .field("nr_waiters", &self.inner.wakers.borrow().len())
            .finish()
    }
}

impl LocalSignal {
    /// A signal not yet fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal and wakes all waiters. Idempotent.
    pub fn fire(&self) {
        if self.inner.fired.replace(true) {
            return;
        }
        let wakers: Vec<Waker> = self
            .inner
            .wakers
            .borrow_mut()
            .drain()
            .map(|(_, w)| w)
            .collect();
        for waker in wakers {
            waker.wake();
        }
    }

    /// True once fired.
    pub fn is_fired(&self) -> bool {
        self.inner.fired.get()
    }

    /// Completes once fired.
    pub fn wait(&self) -> LocalWait {
        LocalWait {
            inner: self.inner.clone(),
            key: None,
        }
    }
}

/// Future of [`LocalSignal::wait`].
pub struct LocalWait {
    /// The signal's state.
    inner: Rc<LocalInner>,
    /// Our entry in `wakers`, once registered.
    key: Option<u64>,
}

impl fmt::Debug for LocalWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalWait").field("key", &self.key).finish()
    }
}

impl Future for LocalWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.fired.get() {
            return Poll::Ready(());
        }
        let key = self.key.unwrap_or_else(|| {
            let k = self.inner.next.get() + 1;
            self.inner.next.set(k);
            k
        });
        self.key = Some(key);
        self.inner
            .wakers
            .borrow_mut()
            .insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for LocalWait {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.inner.wakers.borrow_mut().remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glommio::LocalExecutorBuilder;
    use std::time::Instant;

    #[test]
    fn trigger_from_plain_thread_wakes_waiting_task_on_executor() {
        let (trigger, listener) = shutdown();
        let handle = LocalExecutorBuilder::default()
            .spawn(move || async move {
                listener.wait().await;
                assert!(listener.is_triggered());
            })
            .expect("executor starts");
        // Give the task a chance to park; correctness does not depend on it.
        std::thread::yield_now();
        trigger.trigger();
        trigger.trigger(); // idempotent
        handle.join().expect("task saw shutdown");
    }

    #[test]
    fn wait_after_trigger_completes_at_once() {
        let (trigger, listener) = shutdown();
        trigger.trigger();
        let l2 = trigger.listener();
        LocalExecutorBuilder::default()
            .spawn(move || async move {
                listener.wait().await;
                l2.wait().await;
            })
            .expect("executor starts")
            .join()
            .expect("completes");
    }

    #[test]
    fn dropped_wait_unregisters_its_waker() {
        let (trigger, listener) = shutdown();
        LocalExecutorBuilder::default()
            .spawn(move || async move {
                let timed_out = glommio::timer::timeout(Duration::from_millis(5), async {
                    listener.wait().await;
                    Ok(())
                })
                .await;
                assert!(timed_out.is_err());
                assert!(listener.shared.lock().map.is_empty());
            })
            .expect("executor starts")
            .join()
            .expect("completes");
        trigger.trigger();
    }

    #[test]
    fn wait_for_signals_returns_when_triggered_elsewhere() {
        let (trigger, _listener) = shutdown();
        let t2 = trigger.clone();
        let start = Instant::now();
        let waiter = std::thread::spawn(move || wait_for_signals(t2));
        trigger.trigger();
        assert_eq!(waiter.join().expect("no panic"), None);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn local_signal_wakes_all_waiters() {
        LocalExecutorBuilder::default()
            .spawn(|| async {
                let sig = LocalSignal::new();
                let tasks: Vec<_> = (0..3).map(|_| glommio::spawn_local(sig.wait())).collect();
                glommio::yield_if_needed().await;
                sig.fire();
                for t in tasks {
                    t.await;
                }
                assert!(sig.is_fired());
                assert!(sig.inner.wakers.borrow().is_empty());
            })
            .expect("executor starts")
            .join()
            .expect("completes");
    }
}
