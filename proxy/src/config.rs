//! The proxy's settings, read once from the environment in `main` before any
//! thread starts (config.md §14). Shards get an immutable copy; changing any
//! setting needs a restart. A contradiction fails boot with one line.
//!
//! Read here and built: listener and TLS, the control database, session-token
//! keys, identity headers, body cap, upstream and long-poll timeouts, shadow
//! mode, operator routes, the dev default cluster and the stale grace. Not
//! read (their features are not built; README): `PXDB_SSL_*`, pool size,
//! shared hosts, OAuth, metering and spool, dev static upstream.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::session::SessionKeys;

/// Default listener port (6711, the later proxy source's).
pub const DEFAULT_PORT: u16 = 6711;
/// Default listener host: every interface, as a front door listens.
pub const DEFAULT_BIND_ADDR: &str = "0.0.0.0";
/// Default control database port.
pub const DEFAULT_PXDB_PORT: u16 = 5432;
/// Default control database name.
pub const DEFAULT_PXDB_DB: &str = "queen_proxy";
/// Default control database user.
pub const DEFAULT_PXDB_USER: &str = "postgres";
/// Connect timeout to the control database (5 s), in ms.
pub const DEFAULT_PXDB_TIMEOUT_MS: u64 = 5_000;
/// Default session cookie name.
pub const DEFAULT_COOKIE_NAME: &str = "queen_session";
/// Default request body cap (16 MiB, the broker's own default), in bytes.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Upstream connect timeout (5 s): a broker that does not accept in this
/// long is answered as down (502).
pub const DEFAULT_UPSTREAM_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Upstream answer timeout (35 s): above the broker's own 30 s body timeout.
pub const DEFAULT_UPSTREAM_TIMEOUT_MS: u64 = 35_000;
/// Long-poll margin (10 s) added to the client's wait.
pub const DEFAULT_LONGPOLL_MARGIN_MS: u64 = 10_000;
/// Longest long-poll wait honoured (90 s).
pub const DEFAULT_LONGPOLL_MAX_MS: u64 = 90_000;
/// How long cached control data keeps serving while the control database is
/// unreachable (10 min).
pub const DEFAULT_STALE_GRACE_MS: u64 = 600_000;
/// Default log level.
pub const DEFAULT_LOG_LEVEL: &str = "info";

/// The control database link.
#[derive(Debug, Clone)]
pub struct PxDb {
    /// Host.
    pub host: String,
    /// Port.
    pub port: u16,
    /// User.
    pub user: String,
    /// Password (never logged).
    pub password: String,
    /// Database name.
    pub db: String,
    /// Connect timeout.
    pub timeout: Duration,
}

impl PxDb {
    /// A `postgres` connection configuration for this link.
    pub fn pg_config(&self) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host(&self.host)
            .port(self.port)
            .user(&self.user)
            .password(&self.password)
            .dbname(&self.db)
            .application_name("queen-proxy")
            .connect_timeout(self.timeout);
        c
    }
}

/// Everything the proxy is told at boot.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listener address.
    pub addr: SocketAddr,
    /// Certificate and key paths when TLS is on.
    pub tls: Option<(String, String)>,
    /// The control database.
    pub pxdb: PxDb,
    /// Session-token signing and verifying keys (none: API keys only).
    pub sessions: SessionKeys,
    /// Session cookie name.
    pub cookie_name: String,
    /// Inject `x-queen-tenant` upstream (PX-09).
    pub tenant_header: bool,
    /// Request body cap (413).
    pub max_body_bytes: usize,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// Upstream answer timeout of everything but long polls.
    pub upstream_timeout: Duration,
    /// Added to a long poll's wait.
    pub longpoll_margin: Duration,
    /// Longest long-poll wait honoured.
    pub longpoll_max: Duration,
    /// Rate denials are enforced (false: logged only, "shadow mode").
    pub enforce: bool,
    /// Operator-only routes may be served to a live operator.
    pub operator_enabled: bool,
    /// Cluster slug for a Host that names none (dev).
    pub default_cluster: Option<String>,
    /// Cached control data serves this long past the last good read.
    pub stale_grace: Duration,
    /// Executors (shards).
    pub nr_shards: usize,
    /// Pin shard `i` to a core (QUEEN_PROXY_PIN_SHARDS). Off by default: a
    /// proxy beside its broker on the same cores does best when the kernel
    /// may run a shard on the core that just woke it (see `main.rs`).
    pub pin_shards: bool,
    /// Log level.
    pub log_level: log::LevelFilter,
}

/// Reads a variable; unset and empty are both `None`.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Parses a variable with `FromStr`, or its default; a bad value is an error
/// naming it.
fn parse<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("{name}={v:?} is not a valid value")),
    }
}

/// A boolean: true/1/yes/on or false/0/no/off.
fn flag(name: &str, default: bool) -> Result<bool, String> {
    match var(name).map(|v| v.to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if matches!(v.as_str(), "true" | "1" | "yes" | "on") => Ok(true),
        Some(v) if matches!(v.as_str(), "false" | "0" | "no" | "off") => Ok(false),
        Some(v) => Err(format!("{name}={v:?} is not true or false")),
    }
}

/// Milliseconds as a duration.
fn millis(name: &str, default: u64) -> Result<Duration, String> {
    parse(name, default).map(Duration::from_millis)
}

/// The control database settings alone (the admin commands need no more).
pub fn pxdb_from_env() -> Result<PxDb, String> {
    let host = var("PXDB_HOST").ok_or(
        "PXDB_HOST is not set: queen-proxy keeps its clusters and keys in the control database",
    )?;
    Ok(PxDb {
        host,
        port: parse("PXDB_PORT", DEFAULT_PXDB_PORT)?,
        user: var("PXDB_USER").unwrap_or_else(|| DEFAULT_PXDB_USER.into()),
        password: std::env::var("PXDB_PASSWORD").unwrap_or_default(),
        db: var("PXDB_DB").unwrap_or_else(|| DEFAULT_PXDB_DB.into()),
        timeout: millis("PXDB_TIMEOUT_MS", DEFAULT_PXDB_TIMEOUT_MS)?,
    })
}

/// The listener address (PX-01): a bare host, no port, not empty.
fn listen_addr() -> Result<SocketAddr, String> {
    let host = std::env::var("QUEEN_PROXY_BIND_ADDR").unwrap_or_else(|_| DEFAULT_BIND_ADDR.into());
    let host = host.trim();
    if host.is_empty() {
        return Err("QUEEN_PROXY_BIND_ADDR is empty: give a host such as 0.0.0.0".into());
    }
    let ip: IpAddr = match host {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        h => h.parse().map_err(|_| {
            format!("QUEEN_PROXY_BIND_ADDR={h:?} is not an IP address (and must carry no port; the port is QUEEN_PROXY_PORT)")
        })?,
    };
    Ok(SocketAddr::new(
        ip,
        parse("QUEEN_PROXY_PORT", DEFAULT_PORT)?,
    ))
}

/// Both TLS paths or neither (PX-02..04).
fn tls_paths() -> Result<Option<(String, String)>, String> {
    match (var("QUEEN_PROXY_TLS_CERT"), var("QUEEN_PROXY_TLS_KEY")) {
        (Some(c), Some(k)) => Ok(Some((c, k))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(
            "QUEEN_PROXY_TLS_CERT is set but QUEEN_PROXY_TLS_KEY is missing: set both or neither"
                .into(),
        ),
        (None, Some(_)) => Err(
            "QUEEN_PROXY_TLS_KEY is set but QUEEN_PROXY_TLS_CERT is missing: set both or neither"
                .into(),
        ),
    }
}

impl Config {
    /// Reads and validates the whole configuration.
    pub fn from_env() -> Result<Config, String> {
        let addr = listen_addr()?;
        let tls = tls_paths()?;
        let pxdb = pxdb_from_env()?;
        let sessions = SessionKeys::from_env()?;
        let nr_shards = parse("QUEEN_PROXY_NUM_WORKERS", shards::usable_cores())?;
        if nr_shards == 0 {
            return Err("QUEEN_PROXY_NUM_WORKERS must be at least 1".into());
        }
        let max_body_bytes = parse("QUEEN_PROXY_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        if max_body_bytes == 0 {
            return Err("QUEEN_PROXY_MAX_BODY_BYTES must be at least 1".into());
        }
        let log_level = match var("LOG_LEVEL")
            .unwrap_or_else(|| DEFAULT_LOG_LEVEL.into())
            .to_ascii_lowercase()
            .as_str()
        {
            "error" => log::LevelFilter::Error,
            "warn" | "warning" => log::LevelFilter::Warn,
            "info" => log::LevelFilter::Info,
            "debug" => log::LevelFilter::Debug,
            "trace" => log::LevelFilter::Trace,
            other => return Err(format!("LOG_LEVEL={other:?} is not a log level")),
        };
        Ok(Config {
            addr,
            tls,
            pxdb,
            sessions,
            cookie_name: var("QUEEN_PROXY_COOKIE_NAME")
                .unwrap_or_else(|| DEFAULT_COOKIE_NAME.into()),
            tenant_header: flag("QUEEN_PROXY_TENANT_HEADER", true)?,
            max_body_bytes,
            connect_timeout: millis(
                "QUEEN_PROXY_UPSTREAM_CONNECT_TIMEOUT_MS",
                DEFAULT_UPSTREAM_CONNECT_TIMEOUT_MS,
            )?,
            upstream_timeout: millis(
                "QUEEN_PROXY_UPSTREAM_TIMEOUT_MS",
                DEFAULT_UPSTREAM_TIMEOUT_MS,
            )?,
            longpoll_margin: millis("QUEEN_PROXY_LONGPOLL_MARGIN_MS", DEFAULT_LONGPOLL_MARGIN_MS)?,
            longpoll_max: millis("QUEEN_PROXY_LONGPOLL_MAX_MS", DEFAULT_LONGPOLL_MAX_MS)?,
            enforce: flag("QUEEN_PROXY_ENFORCE", false)?,
            operator_enabled: flag("QUEEN_PROXY_OPERATOR_ENABLED", false)?,
            default_cluster: var("QUEEN_PROXY_DEFAULT_CLUSTER").map(|s| s.to_ascii_lowercase()),
            stale_grace: millis("QUEEN_PROXY_STALE_GRACE_MS", DEFAULT_STALE_GRACE_MS)?,
            nr_shards,
            pin_shards: flag("QUEEN_PROXY_PIN_SHARDS", false)?,
            log_level,
        })
    }

    /// The boot log's summary (no secrets).
    pub fn describe(&self) -> String {
        format!(
            "{} on {} ({} shards{}), control database {}:{}/{}, sessions: {}, tenant header {}, body cap {} B, enforce {}, operator routes {}",
            if self.tls.is_some() { "TLS" } else { "plaintext HTTP (no TLS: QUEEN_PROXY_TLS_CERT/QUEEN_PROXY_TLS_KEY unset)" },
            self.addr,
            self.nr_shards,
            if self.pin_shards { ", pinned" } else { "" },
            self.pxdb.host,
            self.pxdb.port,
            self.pxdb.db,
            self.sessions.describe(),
            if self.tenant_header { "on" } else { "off" },
            self.max_body_bytes,
            self.enforce,
            if self.operator_enabled { "on" } else { "off" },
        )
    }
}
