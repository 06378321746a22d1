//! Boot configuration: every environment variable the broker reads, parsed once
//! in `main` and validated before any thread starts. Shards get an immutable
//! copy (`Rc<Config>` built from a clone); nothing reads the environment later.
//!
//! Parsing rules (config.md): booleans accept `true/false, 1/0, yes/no, on/off`
//! and anything else is fatal; integers that do not parse are fatal too (the
//! spec prefers refusing over silently defaulting, "(inferred)"); an empty
//! string is "unset" for numbers and booleans. Every setting here needs a
//! restart to change.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// HTTP port when `PORT` is unset (the Queen default).
pub const DEFAULT_PORT: u16 = 6632;
/// Largest request body accepted, in bytes (64 MiB, as the later broker).
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;
/// PostgreSQL connections of the request DB thread group when `DB_POOL_SIZE`
/// is unset. One connection per DB thread; 16 keeps enough commits in flight
/// for PostgreSQL's group commit on a small box while leaving room under the
/// 25-connection budget for the service jobs added later.
pub const DEFAULT_DB_POOL_SIZE: usize = 16;
/// Jobs that may wait for a DB thread before shards answer 503. Sized so a
/// burst from every connection of a busy broker fits (jobs are fused batches).
pub const DEFAULT_DB_QUEUE_DEPTH: usize = 4096;
/// Long-poll budget in ms when a pop says `wait=true` without `timeout`.
pub const DEFAULT_POP_TIMEOUT_MS: u64 = 30_000;
/// Pop batch when the request has none (1.x brokers use 200; the 1.3.0 client omits it).
pub const DEFAULT_POP_BATCH: u32 = 200;
/// Spool replay cadence in ms (config.md §7, the Queen default): how soon
/// replay notices PostgreSQL is back.
pub const DEFAULT_FILE_BUFFER_FLUSH_MS: u64 = 100;
/// Records per spool replay batch (config.md §7): one push transaction each.
pub const DEFAULT_FILE_BUFFER_MAX_BATCH: usize = 100;
/// Records per spool segment before rotating (config.md §7): bounds what a
/// replay reads into memory at once and what a corrupt segment can strand.
pub const DEFAULT_FILE_BUFFER_EVENTS_PER_FILE: u64 = 10_000;
/// Life in ms of queue settings a shard caches (config.md: the Queen
/// default); a configure on the same shard drops its entry at once.
pub const DEFAULT_CACHE_REFRESH_MS: u64 = 60_000;
/// Mesh TCP port when neither `QUEEN_MESH_PORT` nor `QUEEN_UDP_NOTIFY_PORT`
/// is set (the Queen default: the HTTP default plus one).
pub const DEFAULT_MESH_PORT: u16 = 6633;
/// Mesh heartbeat period in ms (the Queen default): a few per dead threshold.
pub const DEFAULT_SYNC_HEARTBEAT_MS: u64 = 1000;
/// Silence in ms after which a peer counts as dead (the Queen default: five
/// missed heartbeats, so one slow heartbeat does not flap the state).
pub const DEFAULT_SYNC_DEAD_THRESHOLD_MS: u64 = 5000;

/// Retention cycle in ms when `RETENTION_INTERVAL` is unset (the later broker's 5 s:
/// short rounds keep up with inflow without long deletes).
pub const DEFAULT_RETENTION_INTERVAL_MS: u64 = 5_000;
/// Eviction (and expired-lease reclaim) cycle in ms when `EVICTION_INTERVAL` is unset (spec).
pub const DEFAULT_EVICTION_INTERVAL_MS: u64 = 60_000;
/// Rows per retention/eviction delete round (spec default; bounds lock time).
pub const DEFAULT_JOB_BATCH_SIZE: u32 = 1_000;
/// Stats roll-up cycle, ms (spec `STATS_INTERVAL_MS` default).
pub const DEFAULT_STATS_INTERVAL_MS: u64 = 10_000;
/// Longest time a partition's roll-up row may go unrescanned, ms (spec
/// `STATS_RECONCILE_INTERVAL_MS`; catches deletes that stamp nothing).
pub const DEFAULT_STATS_RECONCILE_INTERVAL_MS: u64 = 120_000;
/// Partitions rescanned per roll-up round: ~0.1–0.3 s of DB time at 100
/// messages per partition, so a round never holds a DB thread for long.
pub const DEFAULT_STATS_BATCH_SIZE: u32 = 1_000;
/// Cleanup cycle (inactive partitions, old metrics rows), ms, when
/// `CLEANUP_INTERVAL` is unset: idleness is measured in days, so a minute loses
/// nothing, and each cycle reads the partition catalogue once.
pub const DEFAULT_CLEANUP_INTERVAL_MS: u64 = 60_000;
/// Days an empty partition stays idle before cleanup deletes it (spec default).
pub const DEFAULT_PARTITION_CLEANUP_DAYS: u32 = 30;
/// Days metrics and history rows are kept (spec `METRICS_RETENTION_DAYS`).
pub const DEFAULT_METRICS_RETENTION_DAYS: u32 = 90;

/// Background job settings (`RETENTION_*`, `EVICTION_*`); an interval of 0 disables the job.
#[derive(Debug, Clone)]
pub struct JobsConfig {
    /// `RETENTION_INTERVAL` ms (retention and completed retention).
    pub retention_interval_ms: u64,
    /// `RETENTION_BATCH_SIZE`.
    pub retention_batch: u32,
    /// `EVICTION_INTERVAL` ms (max-wait eviction and expired-lease reclaim).
    pub eviction_interval_ms: u64,
    /// `EVICTION_BATCH_SIZE`.
    pub eviction_batch: u32,
    /// `STATS_INTERVAL_MS`: stats roll-up cycle (0 disables it).
    pub stats_interval_ms: u64,
    /// `STATS_RECONCILE_INTERVAL_MS`: a partition is rescanned at least this often.
    pub stats_reconcile_ms: u64,
    /// `STATS_BATCH_SIZE`: partitions rescanned per roll-up round.
    pub stats_batch: u32,
    /// `CLEANUP_INTERVAL` ms: inactive-partition and metrics cleanup (0 disables it).
    pub cleanup_interval_ms: u64,
    /// `PARTITION_CLEANUP_DAYS` (at least 1).
    pub partition_cleanup_days: u32,
    /// `QUEEN_PARTITION_CLEANUP_ENABLED`: whether cleanup deletes idle partitions.
    pub partition_cleanup: bool,
    /// `METRICS_RETENTION_DAYS` (0 keeps metrics rows forever).
    pub metrics_retention_days: u32,
}

/// Where a new named consumer group starts when its first pop names no mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionDefault {
    /// From the oldest retained message (the default; see semantics.md §4).
    All,
    /// Only messages created after the group registers.
    New,
}

/// The whole boot configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// HTTP listener address (`QUEEN_BIND_ADDR` or `HOST`, and `PORT`).
    pub http_addr: SocketAddr,
    /// Number of shards (`NUM_WORKERS`; default: usable cores).
    pub nr_shards: usize,
    /// Name reported by `/health` (`WORKER_ID`).
    pub worker_id: String,
    /// Broker identity for the mesh and logs (`QUEEN_SERVER_ID`, default `hostname:PORT`).
    pub server_id: String,
    /// Largest accepted request body (`QUEEN_MAX_BODY_BYTES`).
    pub max_body_bytes: usize,
    /// Log level (`LOG_LEVEL`).
    pub log_level: log::LevelFilter,
    /// PostgreSQL connection settings.
    pub pg: PgConfig,
    /// DB thread count = PostgreSQL connections of the request group (`DB_POOL_SIZE`).
    pub db_pool_size: usize,
    /// Bound of the shard → DB job queue.
    pub db_queue_depth: usize,
    /// Apply `sql/` at boot (`QUEEN_APPLY_SCHEMA`).
    pub apply_schema: bool,
    /// Long-poll settings.
    pub pop: PopConfig,
    /// Background jobs (retention, eviction, lease reclaim).
    pub jobs: JobsConfig,
    /// Spool directory (`FILE_BUFFER_DIR`); shard i spools under `shard-<i>/`.
    pub file_buffer_dir: String,
    /// `FILE_BUFFER_FLUSH_MS`: spool replay cadence.
    pub file_buffer_flush_ms: u64,
    /// `FILE_BUFFER_MAX_BATCH`: records per replay batch.
    pub file_buffer_max_batch: usize,
    /// `FILE_BUFFER_EVENTS_PER_FILE`: records per spool segment before rotating.
    pub file_buffer_events_per_file: u64,
    /// `WEBAPP_ROOT`: serve the dashboard from this directory instead of the
    /// copy embedded in the binary (for working on the dashboard).
    pub webapp_root: Option<String>,
    /// JWT settings (`JWT_*`, config.md §5).
    pub auth: crate::auth::AuthConfig,
    /// `QUEEN_TENANCY_HEADER`: honour `x-queen-tenant` (config.md §10).
    pub tenancy_header: bool,
    /// `QUEEN_KV_TRUSTED_PROXY` (config.md §10).
    pub kv_trusted_proxy: bool,
    /// `QUEEN_ENCRYPTION_KEY` (config.md §6).
    pub encryption: crate::crypto::KeyState,
    /// `QUEEN_CACHE_REFRESH_INTERVAL_MS`: life of shard-cached queue settings.
    pub cache_refresh_ms: u64,
    /// Inter-broker mesh (`QUEEN_MESH_*`, `QUEEN_SYNC_*`).
    pub mesh: MeshConfig,
    /// `QUEEN_TLS_CERT` + `QUEEN_TLS_KEY`: serve HTTPS (see `src/tls.rs`).
    pub tls: Option<shards::tls::TlsSetup>,
    /// `QUEEN_CORS_ALLOW_ORIGIN`: opt-in CORS headers (SEC-04, `api/cors.rs`).
    pub cors_allow_origin: Option<String>,
}

/// The mesh's TCP side (config.md §9). Local fan-out between shards always runs.
#[derive(Clone)]
pub struct MeshConfig {
    /// `QUEEN_SYNC_ENABLED`: the TCP side on/off (inert without peers).
    pub enabled: bool,
    /// Listener address: `QUEEN_MESH_BIND_ADDR` (default: the HTTP bind host)
    /// and `QUEEN_MESH_PORT` (fallback `QUEEN_UDP_NOTIFY_PORT`).
    pub addr: SocketAddr,
    /// `QUEEN_MESH_PEERS` (fallback `QUEEN_UDP_PEERS`) as `host:port`.
    pub peers: Vec<String>,
    /// `QUEEN_MESH_ADVERTISE_HOST` (default: the OS hostname).
    pub advertise_host: String,
    /// `QUEEN_SYNC_SECRET` decoded from 64 hex chars; empty = unauthenticated.
    pub secret: Vec<u8>,
    /// `QUEEN_SYNC_HEARTBEAT_MS`.
    pub heartbeat: Duration,
    /// `QUEEN_SYNC_DEAD_THRESHOLD_MS`.
    pub dead_threshold: Duration,
}

impl MeshConfig {
    /// Whether the TCP side runs: enabled and at least one peer (SEC-30).
    pub fn tcp_active(&self) -> bool {
        self.enabled && !self.peers.is_empty()
    }
}

impl fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshConfig")
            .field("enabled", &self.enabled)
            .field("addr", &self.addr)
            .field("peers", &self.peers)
            .field("advertise_host", &self.advertise_host)
            .field(
                "secret",
                &if self.secret.is_empty() {
                    "<unset>"
                } else {
                    "<set>"
                },
            )
            .field("heartbeat", &self.heartbeat)
            .field("dead_threshold", &self.dead_threshold)
            .finish()
    }
}

/// PostgreSQL connection settings (`PG_*`, `DB_*`).
#[derive(Clone)]
pub struct PgConfig {
    /// `PG_HOST`.
    pub host: String,
    /// `PG_PORT`.
    pub port: u16,
    /// `PG_USER`.
    pub user: String,
    /// `PG_PASSWORD` (secret: never logged, see the `Debug` impl).
    pub password: String,
    /// `PG_DATABASE`, else `PG_DB`.
    pub dbname: String,
    /// `DB_CONNECTION_TIMEOUT` (connect and pool checkout).
    pub connect_timeout: Duration,
    /// `DB_STATEMENT_TIMEOUT`.
    pub statement_timeout_ms: u64,
    /// `DB_LOCK_TIMEOUT`.
    pub lock_timeout_ms: u64,
    /// `PG_USE_SSL`, `PG_SSL_ROOT_CERT`, `PG_SSL_REJECT_UNAUTHORIZED` (SEC-24..28).
    pub tls: crate::store::pg_tls::TrustMode,
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &secret_label(&self.password))
            .field("dbname", &self.dbname)
            .finish()
    }
}

/// Long-poll and pop defaults (`DEFAULT_*`, `POP_WAIT_*`).
#[derive(Debug, Clone)]
pub struct PopConfig {
    /// `DEFAULT_TIMEOUT` ms.
    pub default_timeout_ms: u64,
    /// Batch when absent.
    pub default_batch: u32,
    /// `DEFAULT_SUBSCRIPTION_MODE`.
    pub default_subscription: SubscriptionDefault,
    /// `POP_WAIT_INITIAL_INTERVAL_MS`.
    pub wait_initial_ms: u64,
    /// `POP_WAIT_BACKOFF_THRESHOLD`.
    pub wait_backoff_threshold: u32,
    /// `POP_WAIT_BACKOFF_MULTIPLIER`.
    pub wait_backoff_multiplier: f64,
    /// `POP_WAIT_MAX_INTERVAL_MS`.
    pub wait_max_ms: u64,
    /// `QUEEN_POP_AUTOPILOT*` (see `crate::api::pop_autopilot`).
    pub autopilot: crate::api::pop_autopilot::AutopilotConfig,
}

/// A configuration that cannot boot: one line naming the variable.
#[derive(Debug)]
pub struct ConfigError {
    /// The variable at fault.
    pub var: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {}: {}", self.var, self.reason)
    }
}

/// Shows a secret as `<unset>` or `<set:N chars>`.
pub fn secret_label(s: &str) -> String {
    if s.is_empty() {
        "<unset>".into()
    } else {
        format!("<set:{} chars>", s.chars().count())
    }
}

/// Reads variables through a lookup function so tests need not touch the
/// process environment.
struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    fn string(&self, var: &str) -> Option<String> {
        (self.0)(var)
    }
    fn non_empty(&self, var: &str) -> Option<String> {
        self.string(var).filter(|s| !s.trim().is_empty())
    }
    fn parse<T: std::str::FromStr>(&self, var: &'static str, default: T) -> Result<T, ConfigError> {
        match self.non_empty(var) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| ConfigError {
                var,
                reason: format!("{v:?} is not a valid number"),
            }),
        }
    }
    fn bool(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.non_empty(var) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(ConfigError {
                    var,
                    reason: format!("{v:?} is not a boolean (use true/false, 1/0, yes/no, on/off)"),
                }),
            },
        }
    }
}

impl Config {
    /// Builds the configuration from the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(&|k| std::env::var(k).ok())
    }

    /// Builds the configuration from any variable lookup.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let env = Env(lookup);
        let port: u16 = env.parse("PORT", DEFAULT_PORT)?;
        let (bind_var, bind) = match env.string("QUEEN_BIND_ADDR") {
            Some(v) => ("QUEEN_BIND_ADDR", v),
            None => (
                "HOST",
                env.string("HOST").unwrap_or_else(|| "0.0.0.0".into()),
            ),
        };
        let http_addr = SocketAddr::new(parse_bind_host(bind_var, &bind)?, port);
        let nr_shards = env.parse("NUM_WORKERS", shards::pool::usable_cores())?;
        if nr_shards == 0 || nr_shards > 256 {
            return Err(ConfigError {
                var: "NUM_WORKERS",
                reason: format!("{nr_shards} is outside 1..=256"),
            });
        }
        let db_pool_size = env.parse("DB_POOL_SIZE", DEFAULT_DB_POOL_SIZE)?;
        if db_pool_size == 0 || db_pool_size > 1000 {
            return Err(ConfigError {
                var: "DB_POOL_SIZE",
                reason: format!("{db_pool_size} is outside 1..=1000"),
            });
        }
        let max_body_bytes = env.parse("QUEEN_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)?;
        if max_body_bytes < 1024 {
            return Err(ConfigError {
                var: "QUEEN_MAX_BODY_BYTES",
                reason: "must be at least 1024".into(),
            });
        }
        let log_level =
            parse_log_level(&env.non_empty("LOG_LEVEL").unwrap_or_else(|| "info".into()))?;
        let hostname = hostname();
        let pg = PgConfig {
            host: env
                .non_empty("PG_HOST")
                .unwrap_or_else(|| "localhost".into()),
            port: env.parse("PG_PORT", 5432)?,
            user: env
                .non_empty("PG_USER")
                .unwrap_or_else(|| "postgres".into()),
            password: env
                .string("PG_PASSWORD")
                .unwrap_or_else(|| "postgres".into()),
            dbname: env
                .non_empty("PG_DATABASE")
                .or_else(|| env.non_empty("PG_DB"))
                .unwrap_or_else(|| "postgres".into()),
            connect_timeout: Duration::from_millis(env.parse("DB_CONNECTION_TIMEOUT", 2000)?),
            statement_timeout_ms: env.parse("DB_STATEMENT_TIMEOUT", 30_000)?,
            lock_timeout_ms: env.parse("DB_LOCK_TIMEOUT", 10_000)?,
            tls: crate::store::pg_tls::TrustMode::from_env(&|k| env.string(k), &|k, d| {
                env.bool(k, d)
            })?,
        };
        let pop = PopConfig {
            default_timeout_ms: env.parse(
                "DEFAULT_TIMEOUT",
                env.parse("POP_DEFAULT_TIMEOUT_MS", DEFAULT_POP_TIMEOUT_MS)?,
            )?,
            default_batch: DEFAULT_POP_BATCH,
            default_subscription: match env
                .string("DEFAULT_SUBSCRIPTION_MODE")
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
                .as_str()
            {
                "new" | "new-only" | "new_only" | "newonly" => SubscriptionDefault::New,
                _ => SubscriptionDefault::All,
            },
            wait_initial_ms: env.parse("POP_WAIT_INITIAL_INTERVAL_MS", 100)?.max(1),
            wait_backoff_threshold: env.parse("POP_WAIT_BACKOFF_THRESHOLD", 3)?,
            wait_backoff_multiplier: env.parse("POP_WAIT_BACKOFF_MULTIPLIER", 2.0)?,
            wait_max_ms: env.parse("POP_WAIT_MAX_INTERVAL_MS", 1000)?.max(1),
            autopilot: crate::api::pop_autopilot::AutopilotConfig::from_env(&|k| env.string(k))?,
        };
        let mesh = parse_mesh(&env, http_addr, &hostname)?;
        let auth =
            crate::auth::AuthConfig::from_env(&|k| env.non_empty(k), &|k, d| env.bool(k, d))?;
        let tenancy_header = env.bool("QUEEN_TENANCY_HEADER", false)?;
        let kv_trusted_proxy = env.bool("QUEEN_KV_TRUSTED_PROXY", false)?;
        if tenancy_header && !kv_trusted_proxy {
            return Err(ConfigError {
                var: "QUEEN_TENANCY_HEADER",
                reason: "QUEEN_TENANCY_HEADER=1 requires QUEEN_KV_TRUSTED_PROXY=1: the \
                         x-queen-tenant header is not validated and KV state is addressable \
                         purely by name, so only a proxy that sets the header and strips the \
                         client's may turn it on"
                    .into(),
            });
        }
        let jobs = JobsConfig {
            retention_interval_ms: env
                .parse("RETENTION_INTERVAL", DEFAULT_RETENTION_INTERVAL_MS)?,
            retention_batch: env
                .parse("RETENTION_BATCH_SIZE", DEFAULT_JOB_BATCH_SIZE)?
                .max(1),
            eviction_interval_ms: env.parse("EVICTION_INTERVAL", DEFAULT_EVICTION_INTERVAL_MS)?,
            eviction_batch: env
                .parse("EVICTION_BATCH_SIZE", DEFAULT_JOB_BATCH_SIZE)?
                .max(1),
            stats_interval_ms: env.parse("STATS_INTERVAL_MS", DEFAULT_STATS_INTERVAL_MS)?,
            stats_reconcile_ms: env.parse(
                "STATS_RECONCILE_INTERVAL_MS",
                DEFAULT_STATS_RECONCILE_INTERVAL_MS,
            )?,
            stats_batch: env
                .parse("STATS_BATCH_SIZE", DEFAULT_STATS_BATCH_SIZE)?
                .max(1),
            cleanup_interval_ms: env.parse("CLEANUP_INTERVAL", DEFAULT_CLEANUP_INTERVAL_MS)?,
            partition_cleanup_days: env
                .parse("PARTITION_CLEANUP_DAYS", DEFAULT_PARTITION_CLEANUP_DAYS)?
                .max(1),
            partition_cleanup: env.bool("QUEEN_PARTITION_CLEANUP_ENABLED", true)?,
            metrics_retention_days: env
                .parse("METRICS_RETENTION_DAYS", DEFAULT_METRICS_RETENTION_DAYS)?,
        };
        Ok(Config {
            jobs,
            http_addr,
            nr_shards,
            worker_id: env
                .non_empty("WORKER_ID")
                .unwrap_or_else(|| "queen-rs".into()),
            server_id: env
                .non_empty("QUEEN_SERVER_ID")
                .unwrap_or_else(|| format!("{hostname}:{port}")),
            max_body_bytes,
            log_level,
            pg,
            db_pool_size,
            db_queue_depth: DEFAULT_DB_QUEUE_DEPTH,
            apply_schema: env.bool("QUEEN_APPLY_SCHEMA", true)?,
            pop,
            file_buffer_dir: env
                .non_empty("FILE_BUFFER_DIR")
                .unwrap_or_else(|| "/var/lib/queen/buffers".into()),
            file_buffer_flush_ms: env
                .parse("FILE_BUFFER_FLUSH_MS", DEFAULT_FILE_BUFFER_FLUSH_MS)?
                .max(1),
            file_buffer_max_batch: env
                .parse("FILE_BUFFER_MAX_BATCH", DEFAULT_FILE_BUFFER_MAX_BATCH)?
                .clamp(1, 10_000),
            file_buffer_events_per_file: env
                .parse(
                    "FILE_BUFFER_EVENTS_PER_FILE",
                    DEFAULT_FILE_BUFFER_EVENTS_PER_FILE,
                )?
                .max(1),
            webapp_root: env.non_empty("WEBAPP_ROOT"),
            mesh,
            auth,
            tenancy_header,
            kv_trusted_proxy,
            encryption: crate::crypto::KeyState::parse(
                env.string("QUEEN_ENCRYPTION_KEY").as_deref(),
            ),
            cache_refresh_ms: env
                .parse("QUEEN_CACHE_REFRESH_INTERVAL_MS", DEFAULT_CACHE_REFRESH_MS)?,
            tls: crate::tls::listener_from_env(&|k| env.non_empty(k))?,
            cors_allow_origin: env
                .non_empty("QUEEN_CORS_ALLOW_ORIGIN")
                .map(|v| v.trim().to_string()),
        })
    }

    /// The boot block: the effective configuration, secrets masked.
    pub fn describe(&self) -> String {
        format!(
            "listen={}://{} shards={} cores={} worker_id={} server_id={} max_body={}B \
             pg={}@{}:{}/{} password={} db_threads={} apply_schema={} pop_timeout={}ms spool_dir={} \
             mesh_listen={} mesh_peers={} mesh_enabled={} jwt_enabled={} jwt_secret={} \
             tenancy_header={} kv_trusted_proxy={} encryption_key={} sync_secret={}",
            if self.tls.is_some() { "https" } else { "http" },
            self.http_addr,
            self.nr_shards,
            shards::pool::usable_cores(),
            self.worker_id,
            self.server_id,
            self.max_body_bytes,
            self.pg.user,
            self.pg.host,
            self.pg.port,
            self.pg.dbname,
            secret_label(&self.pg.password),
            self.db_pool_size,
            self.apply_schema,
            self.pop.default_timeout_ms,
            self.file_buffer_dir,
            self.mesh.addr,
            self.mesh.peers.join(","),
            self.mesh.enabled,
            self.auth.enabled,
            self.auth.secret_label(),
            self.tenancy_header,
            self.kv_trusted_proxy,
            self.encryption.label(),
            secret_label(&"x".repeat(self.mesh.secret.len() * 2)),
        )
    }
}

/// The mesh variables (config.md §9; SEC-03: the bind host follows
/// `QUEEN_BIND_ADDR` unless `QUEEN_MESH_BIND_ADDR` is set, and neither moves
/// the advertised host). A peer without a port uses this broker's mesh port,
/// as brokers of one cluster run one configuration.
fn parse_mesh(env: &Env, http_addr: SocketAddr, hostname: &str) -> Result<MeshConfig, ConfigError> {
    let port: u16 = match env.non_empty("QUEEN_MESH_PORT") {
        Some(_) => env.parse("QUEEN_MESH_PORT", DEFAULT_MESH_PORT)?,
        None => env.parse("QUEEN_UDP_NOTIFY_PORT", DEFAULT_MESH_PORT)?,
    };
    let host = match env.string("QUEEN_MESH_BIND_ADDR") {
        Some(v) => parse_bind_host("QUEEN_MESH_BIND_ADDR", &v)?,
        None => http_addr.ip(),
    };
    let list = env
        .non_empty("QUEEN_MESH_PEERS")
        .or_else(|| env.non_empty("QUEEN_UDP_PEERS"))
        .unwrap_or_default();
    let peers = list
        .split(',')
        .map(|p| {
            let p = p.trim();
            let p = p.strip_prefix("http://").unwrap_or(p).trim_end_matches('/');
            // `[v6]:port` or `host:port`; a bare IPv6 literal has several colons.
            let has_port = (p.starts_with('[') && p.contains("]:"))
                || (!p.starts_with('[') && p.matches(':').count() == 1);
            if has_port {
                p.to_string()
            } else if p.contains(':') && !p.starts_with('[') {
                format!("[{p}]:{port}")
            } else {
                format!("{p}:{port}")
            }
        })
        .filter(|p| !p.starts_with(':') && !p.starts_with("[]"))
        .collect();
    let secret_hex = env.string("QUEEN_SYNC_SECRET").unwrap_or_default();
    let secret_hex = secret_hex.trim();
    let secret = if secret_hex.is_empty() {
        Vec::new()
    } else {
        decode_hex(secret_hex)
            .filter(|k| k.len() == 32)
            .ok_or_else(|| ConfigError {
                var: "QUEEN_SYNC_SECRET",
                reason: "must be 64 hex characters (32 bytes)".into(),
            })?
    };
    let heartbeat = env.parse("QUEEN_SYNC_HEARTBEAT_MS", DEFAULT_SYNC_HEARTBEAT_MS)?;
    let dead = env.parse(
        "QUEEN_SYNC_DEAD_THRESHOLD_MS",
        DEFAULT_SYNC_DEAD_THRESHOLD_MS,
    )?;
    if heartbeat == 0 || dead <= heartbeat {
        return Err(ConfigError {
            var: "QUEEN_SYNC_DEAD_THRESHOLD_MS",
            reason: format!("{dead} must exceed QUEEN_SYNC_HEARTBEAT_MS ({heartbeat}, at least 1)"),
        });
    }
    Ok(MeshConfig {
        enabled: env.bool("QUEEN_SYNC_ENABLED", true)?,
        addr: SocketAddr::new(host, port),
        peers,
        advertise_host: env
            .non_empty("QUEEN_MESH_ADVERTISE_HOST")
            .unwrap_or_else(|| hostname.to_string()),
        secret,
        heartbeat: Duration::from_millis(heartbeat),
        dead_threshold: Duration::from_millis(dead),
    })
}

/// Decodes an even-length hex string.
pub fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// `QUEEN_BIND_ADDR` rules (SEC-02): not empty, no port, IPv6 literal allowed.
fn parse_bind_host(var: &'static str, v: &str) -> Result<IpAddr, ConfigError> {
    let v = v.trim();
    if v.is_empty() {
        return Err(ConfigError {
            var,
            reason: "must not be empty".into(),
        });
    }
    let bare = v.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ip);
    }
    if v.parse::<SocketAddr>().is_ok()
        || v.rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        return Err(ConfigError {
            var,
            reason: format!("{v:?} carries a port; the port comes from PORT"),
        });
    }
    if v == "localhost" {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    Err(ConfigError {
        var,
        reason: format!("{v:?} is not an IP address"),
    })
}

fn parse_log_level(v: &str) -> Result<log::LevelFilter, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "trace" => Ok(log::LevelFilter::Trace),
        "debug" => Ok(log::LevelFilter::Debug),
        "info" => Ok(log::LevelFilter::Info),
        "warn" | "warning" => Ok(log::LevelFilter::Warn),
        "error" => Ok(log::LevelFilter::Error),
        other => Err(ConfigError {
            var: "LOG_LEVEL",
            reason: format!("{other:?} is not trace/debug/info/warn/error"),
        }),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| m.get(k).cloned())
    }

    #[test]
    fn defaults_boot() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.http_addr.port(), 6632);
        assert_eq!(c.db_pool_size, DEFAULT_DB_POOL_SIZE);
        assert_eq!(c.pop.default_subscription, SubscriptionDefault::All);
    }

    #[test]
    fn bind_addr_with_port_or_empty_is_fatal() {
        assert_eq!(
            cfg(&[("QUEEN_BIND_ADDR", "0.0.0.0:7000")]).unwrap_err().var,
            "QUEEN_BIND_ADDR"
        );
        assert_eq!(
            cfg(&[("QUEEN_BIND_ADDR", "")]).unwrap_err().var,
            "QUEEN_BIND_ADDR"
        );
        assert!(cfg(&[("QUEEN_BIND_ADDR", "::1")])
            .unwrap()
            .http_addr
            .is_ipv6());
        assert!(cfg(&[("QUEEN_BIND_ADDR", "[::1]")])
            .unwrap()
            .http_addr
            .is_ipv6());
    }

    #[test]
    fn bad_numbers_and_booleans_are_fatal() {
        assert_eq!(cfg(&[("PORT", "abc")]).unwrap_err().var, "PORT");
        assert_eq!(
            cfg(&[("QUEEN_APPLY_SCHEMA", "maybe")]).unwrap_err().var,
            "QUEEN_APPLY_SCHEMA"
        );
        assert_eq!(cfg(&[("NUM_WORKERS", "0")]).unwrap_err().var, "NUM_WORKERS");
    }

    #[test]
    fn password_never_in_debug_or_describe() {
        let c = cfg(&[("PG_PASSWORD", "hunter2secret")]).unwrap();
        assert!(!format!("{c:?}").contains("hunter2secret"));
        assert!(!c.describe().contains("hunter2secret"));
        assert!(c.describe().contains("<set:13 chars>"));
    }

    #[test]
    fn mesh_defaults_fallbacks_and_peers() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.mesh.addr.port(), DEFAULT_MESH_PORT);
        assert!(!c.mesh.tcp_active());
        let c = cfg(&[
            ("QUEEN_BIND_ADDR", "127.0.0.1"),
            ("QUEEN_UDP_NOTIFY_PORT", "7001"),
            ("QUEEN_UDP_PEERS", "http://a:7002, b ,::1"),
        ])
        .unwrap();
        assert_eq!(c.mesh.addr.to_string(), "127.0.0.1:7001");
        assert_eq!(c.mesh.peers, vec!["a:7002", "b:7001", "[::1]:7001"]);
        assert!(c.mesh.tcp_active());
        let c = cfg(&[
            ("QUEEN_MESH_PORT", "7005"),
            ("QUEEN_UDP_NOTIFY_PORT", "7001"),
        ])
        .unwrap();
        assert_eq!(c.mesh.addr.port(), 7005);
        assert_eq!(
            cfg(&[("QUEEN_MESH_BIND_ADDR", "1.2.3.4:5")])
                .unwrap_err()
                .var,
            "QUEEN_MESH_BIND_ADDR"
        );
        assert_eq!(
            cfg(&[("QUEEN_SYNC_SECRET", "abc")]).unwrap_err().var,
            "QUEEN_SYNC_SECRET"
        );
        let c = cfg(&[("QUEEN_SYNC_SECRET", &"ab".repeat(32))]).unwrap();
        assert_eq!(c.mesh.secret.len(), 32);
        assert!(!format!("{c:?}").contains("abab"));
    }
}
