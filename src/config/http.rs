//! The HTTP side and the broker's shape: listener address (`PORT`,
//! `QUEEN_BIND_ADDR` / `HOST`), shard count (`NUM_WORKERS`), body limit
//! (`QUEEN_MAX_BODY_BYTES`), log level, and the names the broker goes by
//! (`WORKER_ID`, `QUEEN_SERVER_ID`). The HTTPS pair is parsed by
//! `crate::tls`, which loads the files.

use crate::env::{parse_bind_host, ConfigError, Env};
use std::net::SocketAddr;

/// HTTP port when `PORT` is unset (the Queen default).
pub const DEFAULT_PORT: u16 = 6632;
/// Bind host when neither `QUEEN_BIND_ADDR` nor `HOST` is set: every
/// interface, as the Queen broker listens (SEC-01 lets an operator narrow it).
pub const DEFAULT_BIND_HOST: &str = "0.0.0.0";
/// Most shards `NUM_WORKERS` may ask for: one per core, and no box this
/// broker targets has more; beyond it the per-shard inboxes cost memory for
/// nothing.
pub const MAX_SHARDS: usize = 256;
/// Largest request body accepted, in bytes (64 MiB, as the later broker).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;
/// Smallest `QUEEN_MAX_BODY_BYTES` accepted: below a KiB not even a small
/// push batch fits, so a lower value is a unit mistake.
pub const MIN_MAX_BODY_BYTES: usize = 1024;
/// `LOG_LEVEL` when unset: boot lines and warnings, no per-request noise.
pub const DEFAULT_LOG_LEVEL: &str = "info";
/// `/health`'s worker name when `WORKER_ID` is unset: names this
/// implementation, so a mixed fleet shows which broker answered.
pub const DEFAULT_WORKER_ID: &str = "queen-rs";
/// Host name when `/proc` gives none (a container without UTS data).
pub const FALLBACK_HOSTNAME: &str = "localhost";

/// The HTTP listener address: `QUEEN_BIND_ADDR` (else `HOST`) and `PORT`.
pub fn http_addr(env: &Env) -> Result<SocketAddr, ConfigError> {
    let port: u16 = env.parse("PORT", DEFAULT_PORT)?;
    let (bind_var, bind) = match env.string("QUEEN_BIND_ADDR") {
        Some(v) => ("QUEEN_BIND_ADDR", v),
        None => (
            "HOST",
            env.string("HOST")
                .unwrap_or_else(|| DEFAULT_BIND_HOST.into()),
        ),
    };
    Ok(SocketAddr::new(parse_bind_host(bind_var, &bind)?, port))
}

/// `NUM_WORKERS`: shards, one per usable core by default (decisions.md).
pub fn nr_shards(env: &Env) -> Result<usize, ConfigError> {
    let n = env.parse("NUM_WORKERS", shards::pool::usable_cores())?;
    if n == 0 || n > MAX_SHARDS {
        return Err(ConfigError::new(
            "NUM_WORKERS",
            format!("{n} is outside 1..={MAX_SHARDS}"),
        ));
    }
    Ok(n)
}

/// `QUEEN_MAX_BODY_BYTES`.
pub fn max_body_bytes(env: &Env) -> Result<usize, ConfigError> {
    let n = env.parse("QUEEN_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
    if n < MIN_MAX_BODY_BYTES {
        return Err(ConfigError::new(
            "QUEEN_MAX_BODY_BYTES",
            format!("must be at least {MIN_MAX_BODY_BYTES}"),
        ));
    }
    Ok(n)
}

/// `QUEEN_ALLOWED_HOSTS`: a comma list of host names (no scheme, no port),
/// lower-cased; unset or empty serves any `Host`. A name with a scheme, a
/// path or a port is a boot error: it could never match and would refuse
/// every request.
pub fn allowed_hosts(env: &Env) -> Result<Vec<String>, ConfigError> {
    let Some(list) = env.non_empty("QUEEN_ALLOWED_HOSTS") else {
        return Ok(Vec::new());
    };
    let mut hosts = Vec::new();
    for h in list.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        if h.contains("://")
            || h.contains('/')
            || (!h.starts_with('[') && h.matches(':').count() == 1)
        {
            return Err(ConfigError::new(
                "QUEEN_ALLOWED_HOSTS",
                format!("{h:?} is not a bare host name (no scheme, path or port)"),
            ));
        }
        hosts.push(bare.to_ascii_lowercase());
    }
    Ok(hosts)
}

/// `LOG_LEVEL`: `trace`, `debug`, `info`, `warn` (or `warning`), `error`.
pub fn log_level(env: &Env) -> Result<log::LevelFilter, ConfigError> {
    let v = env
        .non_empty("LOG_LEVEL")
        .unwrap_or_else(|| DEFAULT_LOG_LEVEL.into());
    match v.trim().to_ascii_lowercase().as_str() {
        "trace" => Ok(log::LevelFilter::Trace),
        "debug" => Ok(log::LevelFilter::Debug),
        "info" => Ok(log::LevelFilter::Info),
        "warn" | "warning" => Ok(log::LevelFilter::Warn),
        "error" => Ok(log::LevelFilter::Error),
        other => Err(ConfigError::new(
            "LOG_LEVEL",
            format!("{other:?} is not trace/debug/info/warn/error"),
        )),
    }
}

/// The OS host name: the default of `QUEEN_SERVER_ID` (with the port) and
/// of the mesh's advertised host.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| FALLBACK_HOSTNAME.into())
}
