//! The shard pool: one glommio executor thread per shard, optionally pinned
//! to a core, each running the broker's per-shard future.
//!
//! Runs on the calling (main) thread: [`PoolBuilder::spawn`] starts the
//! shard threads and [`Pool::join`] waits for them. Nothing here runs on a
//! shard after start-up.

use std::fmt;
use std::future::Future;

use glommio::{ExecutorJoinHandle, GlommioError, LocalExecutorBuilder, Placement};

use crate::ShardId;

/// Default I/O memory per executor, in bytes (256 KiB).
///
/// glommio reserves about 10 MiB of registered I/O buffers per executor by
/// default; with one executor per core that alone breaks the broker's RSS
/// target (< 40 MiB). Our sockets do not use registered buffers, so a small
/// reservation costs nothing measurable.
pub const DEFAULT_IO_MEMORY: usize = 256 * 1024;

/// Default thread-name prefix; shard `i` is named `"{prefix}-{i}"`.
pub const DEFAULT_NAME: &str = "shard";

/// Errors of starting or joining the pool.
#[derive(Debug)]
pub enum PoolError {
    /// `per_shard` did not hold exactly one state value per shard.
    StateCountMismatch {
        /// Number of shards the builder was asked for.
        nr_shards: usize,
        /// Number of state values given.
        nr_states: usize,
    },
    /// A pool of zero shards was requested.
    NoShards,
    /// glommio could not build or start the executor of `shard`. Shards
    /// started before it keep running; their futures should watch shutdown.
    Spawn {
        /// The shard whose executor failed.
        shard: ShardId,
        /// glommio's reason.
        source: GlommioError<()>,
    },
    /// The thread of `shard` ended abnormally (panic or executor error).
    ShardFailed {
        /// The shard whose thread failed.
        shard: ShardId,
        /// glommio's reason (a panic shows as `ThreadPanic`).
        source: GlommioError<()>,
    },
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolError::StateCountMismatch {
                nr_shards,
                nr_states,
            } => write!(f, "{nr_shards} shards but {nr_states} per-shard states"),
            PoolError::NoShards => write!(f, "a pool needs at least one shard"),
            PoolError::Spawn { shard, source } => {
                write!(f, "cannot start shard {shard}: {source}")
            }
            PoolError::ShardFailed { shard, source } => {
                write!(f, "shard {shard} failed: {source}")
            }
        }
    }
}

impl std::error::Error for PoolError {}

/// Builds a [`Pool`]. Four knobs, so a builder (see `style.md`).
#[derive(Debug, Clone)]
pub struct PoolBuilder {
    /// How many shard threads to start.
    nr_shards: usize,
    /// Thread-name prefix.
    name: String,
    /// Bytes of glommio I/O memory per executor.
    io_memory: usize,
    /// Whether to pin shard `i` to the `i % usable_cores()`-th allowed CPU.
    pin: bool,
}

impl PoolBuilder {
    /// A builder for `nr_shards` shards, named `shard-i`, 256 KiB of I/O
    /// memory each, pinned.
    pub fn new(nr_shards: usize) -> Self {
        PoolBuilder {
            nr_shards,
            name: DEFAULT_NAME.to_string(),
            io_memory: DEFAULT_IO_MEMORY,
            pin: true,
        }
    }

    /// Sets the thread-name prefix (threads are `"{name}-{i}"`).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Sets glommio's I/O memory per executor, in bytes.
    pub fn io_memory(mut self, bytes: usize) -> Self {
        self.io_memory = bytes;
        self
    }

    /// Pins shard `i` to one CPU when true; leaves placement to the kernel
    /// when false.
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Starts one executor thread per shard; shard `i` runs
    /// `f(ShardId(i), per_shard[i])` to completion, then its thread ends.
    ///
    /// `per_shard` carries what each shard owns from birth (its inbox
    /// receiver, its channel ends): build every channel before calling this.
    pub fn spawn<S, F, Fut>(self, per_shard: Vec<S>, f: F) -> Result<Pool, PoolError>
    where
        S: Send + 'static,
        F: Fn(ShardId, S) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        if self.nr_shards == 0 {
            return Err(PoolError::NoShards);
        }
        if per_shard.len() != self.nr_shards {
            return Err(PoolError::StateCountMismatch {
                nr_shards: self.nr_shards,
                nr_states: per_shard.len(),
            });
        }
        let cpus = allowed_cpus();
        let mut handles = Vec::with_capacity(self.nr_shards);
        for (i, state) in per_shard.into_iter().enumerate() {
            let shard = ShardId(i);
            let placement = if self.pin && !cpus.is_empty() {
                Placement::Fixed(cpus[i % cpus.len()])
            } else {
                Placement::Unbound
            };
            let f = f.clone();
            let handle = LocalExecutorBuilder::new(placement)
                .name(&format!("{}-{}", self.name, i))
                .io_memory(self.io_memory)
                .spawn(move || f(shard, state))
                .map_err(|source| PoolError::Spawn { shard, source })?;
            handles.push(handle);
        }
        Ok(Pool { handles })
    }
}

/// Running shard threads. Dropping it detaches them; call [`Pool::join`].
pub struct Pool {
    /// One handle per shard, index = shard id.
    handles: Vec<ExecutorJoinHandle<()>>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("nr_shards", &self.handles.len())
            .finish()
    }
}

impl Pool {
    /// Number of shards in the pool.
    pub fn nr_shards(&self) -> usize {
        self.handles.len()
    }

    /// Waits for every shard thread to end. Joins all of them even when one
    /// failed, then reports the first failure.
    pub fn join(self) -> Result<(), PoolError> {
        let mut first = None;
        for (i, handle) in self.handles.into_iter().enumerate() {
            if let Err(source) = handle.join() {
                log::error!("shard {i} ended abnormally: {source}");
                first.get_or_insert(PoolError::ShardFailed {
                    shard: ShardId(i),
                    source,
                });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// The CPUs this process may run on (`sched_getaffinity`), ascending.
/// Empty only if the call fails, which it does not on Linux for pid 0.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty value, and
    // sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect()
    }
}

/// How many CPUs this process may run on (the default shard count).
/// At least 1.
pub fn usable_cores() -> usize {
    allowed_cpus().len().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn usable_cores_is_at_least_one_and_matches_allowed_cpus() {
        assert!(usable_cores() >= 1);
        assert_eq!(usable_cores(), allowed_cpus().len());
    }

    #[test]
    fn spawn_runs_each_shard_with_its_state_then_join_returns() {
        let sum = Arc::new(AtomicUsize::new(0));
        let states: Vec<usize> = vec![10, 20, 30];
        let pool = PoolBuilder::new(3)
            .name("test-pool")
            .pin(true)
            .spawn(states, {
                let sum = sum.clone();
                move |shard: ShardId, state: usize| {
                    let sum = sum.clone();
                    async move {
                        sum.fetch_add(shard.0 * 1000 + state, Ordering::SeqCst);
                    }
                }
            })
            .expect("pool starts");
        assert_eq!(pool.nr_shards(), 3);
        pool.join().expect("shards end cleanly");
        assert_eq!(sum.load(Ordering::SeqCst), 3000 + 60);
    }

    /// glommio 0.9.0 parked an executor whose preemption timer had fired
    /// before it ran anything, with its task still runnable, and nothing woke
    /// it (`vendor/glommio/PATCHED.md`). A preemption timer of a few
    /// microseconds makes that happen on the first or second `run` here;
    /// on a shard, a descheduled thread and the 1 ms latency queue did the same.
    #[test]
    fn an_executor_preempted_before_it_ran_anything_does_not_park() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let ex = LocalExecutorBuilder::default()
                .preempt_timer(std::time::Duration::from_micros(20))
                .make()
                .expect("executor");
            for i in 0..1000 {
                ex.run(async {});
                let _ = tx.send(i);
            }
        });
        let mut done = 0;
        while done < 999 {
            done = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("executor parked with work left after {done} runs"));
        }
    }

    #[test]
    fn spawn_rejects_wrong_state_count() {
        let err = PoolBuilder::new(2)
            .spawn(vec![()], |_: ShardId, _: ()| async {})
            .unwrap_err();
        assert!(matches!(
            err,
            PoolError::StateCountMismatch {
                nr_shards: 2,
                nr_states: 1
            }
        ));
    }

    #[test]
    fn join_reports_a_panicking_shard() {
        let pool = PoolBuilder::new(2)
            .pin(false)
            .spawn(vec![0, 1], |_: ShardId, n: i32| async move {
                if n == 1 {
                    panic!("shard 1 fails on purpose");
                }
            })
            .expect("pool starts");
        let err = pool.join().unwrap_err();
        assert!(matches!(
            err,
            PoolError::ShardFailed {
                shard: ShardId(1),
                ..
            }
        ));
    }
}
