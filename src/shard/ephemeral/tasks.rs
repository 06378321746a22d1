//! A shard's ephemeral background tasks, started by `crate::serve`:
//! - the sweep ([`SWEEP_EVERY`]): TTL drops, lease expiry (waking parked
//!   pops), rings whose ownership moved, idle implicit queues, published
//!   depths (`EphStore::sweep`);
//! - the declaration reload: at start and every
//!   `QUEEN_CACHE_REFRESH_INTERVAL_MS`, the declarations from PostgreSQL
//!   (the only PostgreSQL read of ephemeral queues; configure notices keep
//!   them current in between, this covers a lost notice and a boot);
//! - on shard 0 with the TCP mesh on, the member beacon once a heartbeat.
//!
//! Each holds the shard weakly and ends when it stops.

use super::options::Options;
use super::QKey;
use crate::mesh::{EphNotice, Notice};
use crate::shard::Shard;
use crate::store::Proc;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

/// Sweep period: how late, at most, an expired lease wakes a parked pop of
/// its partition (a pop that asks meets expired leases at once), at the
/// cost of a walk over the shard's partitions four times a second.
pub const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Retry of a declaration load that failed (PostgreSQL away).
pub const RELOAD_RETRY: Duration = Duration::from_secs(1);

/// Starts the shard's ephemeral tasks.
pub fn spawn(shard: &Rc<Shard>) {
    every(shard, SWEEP_EVERY, |s| {
        s.eph.sweep(s.id.0, s.cfg.nr_shards, Instant::now());
    });
    let weak = Rc::downgrade(shard);
    let period = Duration::from_millis(shard.cfg.cache_refresh_ms.max(1000));
    glommio::spawn_local(async move {
        loop {
            let Some(s) = live(&weak) else { return };
            let loaded = reload(&s).await;
            drop(s);
            // Until the first load succeeds (PostgreSQL still connecting at
            // boot), retry soon: declared queues would obey the defaults.
            glommio::timer::sleep(if loaded { period } else { RELOAD_RETRY }).await;
        }
    })
    .detach();
    if shard.id.0 == 0 && shard.cfg.mesh.tcp_active() {
        every(shard, shard.cfg.mesh.heartbeat, |s| {
            let me = s.eph.members.borrow().me.clone();
            s.notify(Notice::Ephemeral(EphNotice::Member {
                id: me.id,
                http: me.http,
                boot: me.boot,
            }));
        });
    }
}

fn live(weak: &Weak<Shard>) -> Option<Rc<Shard>> {
    weak.upgrade().filter(|s| !s.stopping.is_fired())
}

fn every(shard: &Rc<Shard>, period: Duration, f: impl Fn(&Rc<Shard>) + 'static) {
    let weak = Rc::downgrade(shard);
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(period).await;
            let Some(s) = live(&weak) else { return };
            f(&s);
        }
    })
    .detach();
}

/// Reads every declaration; on failure (PostgreSQL away) keeps what it has
/// and answers false.
async fn reload(shard: &Rc<Shard>) -> bool {
    let v = match shard.db.call(Proc::EphList, serde_json::json!({})).await {
        Ok(v) => v,
        Err(e) => {
            log::debug!(
                "shard {}: ephemeral declarations not reloaded: {e}",
                shard.id
            );
            return false;
        }
    };
    let mut all: HashMap<QKey, Options> = HashMap::new();
    for row in v["queues"].as_array().into_iter().flatten() {
        let (Some(t), Some(q)) = (row["tenant"].as_str(), row["queue"].as_str()) else {
            continue;
        };
        let o = shard.eph.parse_stored(&row["options"].to_string());
        all.insert((t.to_string(), q.to_string()), o);
    }
    shard.eph.replace_decls(all);
    true
}
