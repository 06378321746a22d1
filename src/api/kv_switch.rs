//! `GET/POST /api/v1/system/kv-timers` (http-api.md §13, SEC-23): the
//! runtime kill switches of the KV and the timers.
//!
//! A POST (`{kvEnabled?, timersScheduleEnabled?, timersFireEnabled?}`, each a
//! boolean) writes the switches it names to `queen.system_state` first (so a
//! restart and every other broker's recheck see them), then stores them in
//! the broker's one `KvSwitch` (every shard of this broker sees them from
//! that instant) and publishes a `Notice::KvSwitch` for the peer brokers.
//! Peers apply the notice on arrival, and each broker re-reads the switches
//! every `jobs::kv_switch::RECHECK_EVERY`, so every broker on the database
//! has them within a second even when a notice is lost. Both answer the
//! three current values. The write goes through the request DB group, not
//! the KV pool: switching the KV off must work while the KV pool is full.
//! The GET is ours (the spec names only the POST): the same answer, no change.

use super::params;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::mesh::Notice;
use crate::shard::kv_switch::Switches;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{Map, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// The body fields a POST may carry.
const FIELDS: [&str; 3] = ["kvEnabled", "timersScheduleEnabled", "timersFireEnabled"];

/// `GET /api/v1/system/kv-timers`.
pub async fn get(shard: &Rc<Shard>) -> Result<Response, ApiError> {
    Ok(ok_json(&shard.kv_switch.to_json()))
}

/// `POST /api/v1/system/kv-timers`.
pub async fn set(shard: &Rc<Shard>, req: &Request) -> Result<Response, ApiError> {
    let body = params::optional_body(req)?.unwrap_or_default();
    let wanted = parse(&body)?;
    if wanted == Switches::default() {
        return get(shard).await;
    }
    let stored = shard
        .db
        .call(Proc::KvSwitchSet, Value::Object(body))
        .await?;
    shard.kv_switch.apply(Switches::from_json(&stored));
    shard.notify(Notice::KvSwitch {
        kv: wanted.kv,
        schedule: wanted.schedule,
        fire: wanted.fire,
    });
    log::info!("KV/timers switches set to {stored} (shard {})", shard.id);
    Ok(ok_json(&shard.kv_switch.to_json()))
}

/// The switches a body sets; any other field, or a value that is not a
/// boolean, is a 400 naming it.
fn parse(body: &Map<String, Value>) -> Result<Switches, ApiError> {
    if let Some(k) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ApiError::BadRequest(format!(
            "unknown field {k}: the body takes kvEnabled, timersScheduleEnabled and timersFireEnabled"
        )));
    }
    if let Some((k, _)) = body.iter().find(|(_, v)| !v.is_boolean()) {
        return Err(ApiError::BadRequest(format!("{k} must be a boolean")));
    }
    Ok(Switches::from_json(&Value::Object(body.clone())))
}
