//! The recheck of the KV/timers kill switches (`crate::shard::kv_switch`):
//! every [`RECHECK_EVERY`] shard 0 reads them from `queen.system_state` on
//! the KV pool and stores them for the whole broker. A switch flipped on
//! another broker reaches this one by a mesh notice at once; this recheck is
//! the backstop for a lost notice, a mesh that is off, a switch written in
//! SQL by hand, and a broker booting with the KV already switched off.

use crate::shard::kv_switch::Switches;
use crate::shard::Shard;
use crate::store::sql_error::classify;
use crate::store::StoreError;
use serde_json::Value;
use std::rc::Rc;
use std::time::Duration;

/// How often the switches are re-read: the "within a second".
pub const RECHECK_EVERY: Duration = Duration::from_millis(500);

/// Starts the recheck loop on this shard (shard 0).
pub fn spawn(shard: &Rc<Shard>) {
    let s = shard.clone();
    glommio::spawn_local(async move {
        while !s.stopping.is_fired() {
            let gen = s.kv_switch.generation();
            match read(&s).await {
                Ok(v) => s.kv_switch.apply_read(gen, Switches::from_json(&v)),
                Err(e) => log::debug!("KV switch recheck: {e}"),
            }
            glommio::timer::sleep(RECHECK_EVERY).await;
        }
    })
    .detach();
}

/// `queen.kv_switch_get()` on a KV connection.
async fn read(shard: &Shard) -> Result<Value, StoreError> {
    shard
        .db
        .kv_run(|c| {
            let row = c
                .query_one("SELECT queen.kv_switch_get()", &[])
                .map_err(classify)?;
            Ok(row.get::<_, Value>(0))
        })
        .await
}
