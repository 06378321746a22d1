//! The one timer loop every background job runs on (shard 0), and the bound
//! on the rounds one cycle may chain. Below the jobs that use it, so each
//! job file and `jobs::spawn` build on it rather than on each other.

use crate::shard::Shard;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

/// Rounds one cycle may chain when every round was full (bounds a cycle's DB
/// time so a huge backlog cannot starve request jobs; the next cycle resumes).
pub const MAX_ROUNDS: u32 = 100;

/// Runs `cycle` on this shard every `interval_ms` until shutdown; an interval
/// of 0 disables the job (one log line). The one timer loop every job uses.
pub fn schedule<F, Fut>(shard: &Rc<Shard>, job: &'static str, interval_ms: u64, cycle: F)
where
    F: Fn(Rc<Shard>) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    if interval_ms == 0 {
        log::info!("background job {job}: disabled (interval 0)");
        return;
    }
    let s = shard.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_millis(interval_ms)).await;
            if s.stopping.is_fired() {
                return;
            }
            cycle(s.clone()).await;
        }
    })
    .detach();
}
