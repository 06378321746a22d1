//! Boot configuration: every environment variable the broker reads, parsed
//! once in `main` and validated before any thread starts. Shards get an
//! immutable copy (`Rc<Config>` built from a clone); nothing reads the
//! environment later. Every setting here needs a restart to change.
//!
//! # Layers
//! Settings imports run one way, from the top of this list down:
//! 1. `main` and the shard side, which read the whole `Config` (a shard's
//!    own copy): `api`, `dashboard`, `metrics`, `jobs`, `shard`, `spool`;
//! 2. `config` (this module): the aggregate, the cross-setting checks and the
//!    boot line; it owns the settings nobody below needs (`http`, `pop`,
//!    `jobs`, `spool`, `timers`, `kv`);
//! 3. the owners of their own settings, each parsing its variables itself:
//!    `auth` (`AuthConfig`), `store` (`DbConfig`), `mesh` (`MeshConfig`),
//!    `tls` (the HTTPS pair), `crypto` (`KeyState`). They never import
//!    `config`, so a DB thread or the mesh thread cannot reach the whole
//!    configuration, only its part;
//! 4. `env`: the reader with the boolean and number rules and the one
//!    `ConfigError`; it imports nothing of the crate.
//!
//! Parsing rules are `crate::env`'s. A single bad variable stops the boot
//! with one line naming it (`ConfigError`'s `Display`).

pub mod ephemeral;
pub mod http;
pub mod jobs;
pub mod kv;
pub mod pop;
pub mod spool;
pub mod timers;

use crate::auth::AuthConfig;
use crate::crypto::KeyState;
use crate::env::{secret_label, ConfigError, Env};
use crate::mesh::MeshConfig;
use crate::store::DbConfig;
use std::net::SocketAddr;

pub use jobs::JobsConfig;
pub use kv::KvConfig;
pub use pop::{PopConfig, SubscriptionDefault};
pub use timers::TimersConfig;

/// Life in ms of queue settings a shard caches (config.md: the Queen
/// default); a configure on the same shard drops its entry at once.
pub const DEFAULT_CACHE_REFRESH_MS: u64 = 60_000;

/// `QUEEN_KV_TRUSTED_PROXY` when unset (config.md §10): no proxy is assumed,
/// so the tenant header stays refused until an operator asserts one.
pub const DEFAULT_KV_TRUSTED_PROXY: bool = false;

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
    /// The DB thread group: PostgreSQL connection, pool size, job queue bound,
    /// schema apply (`PG_*`, `DB_*`, `QUEEN_APPLY_SCHEMA`).
    pub db: DbConfig,
    /// Long-poll settings.
    pub pop: PopConfig,
    /// Background jobs (retention, eviction, lease reclaim).
    pub jobs: JobsConfig,
    /// Timer limits and the firing job (`QUEEN_TIMERS_*`, `QUEEN_SWEEPER*`).
    pub timers: TimersConfig,
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
    /// JWT and tenancy settings (`JWT_*`, config.md §5; `QUEEN_TENANCY_HEADER`).
    pub auth: AuthConfig,
    /// `QUEEN_KV_TRUSTED_PROXY` (config.md §10).
    pub kv_trusted_proxy: bool,
    /// KV limits (`QUEEN_KV_*`, config.md §11).
    pub kv: KvConfig,
    /// `QUEEN_ENCRYPTION_KEY` (config.md §6).
    pub encryption: KeyState,
    /// `QUEEN_CACHE_REFRESH_INTERVAL_MS`: life of shard-cached queue settings.
    pub cache_refresh_ms: u64,
    /// Inter-broker mesh (`QUEEN_MESH_*`, `QUEEN_SYNC_*`).
    pub mesh: MeshConfig,
    /// `QUEEN_TLS_CERT` + `QUEEN_TLS_KEY`: serve HTTPS (see `src/tls.rs`).
    pub tls: Option<shards::tls::TlsSetup>,
    /// `QUEEN_CORS_ALLOW_ORIGIN`: opt-in CORS headers (SEC-04, `api/cors.rs`).
    pub cors_allow_origin: Option<String>,
    /// `QUEEN_ALLOWED_HOSTS`: the `Host` names served, lower case, without
    /// ports; empty serves any (`api/edge.rs`).
    pub allowed_hosts: Vec<String>,
    /// Ephemeral (RAM-only) queues (`QUEEN_EPHEMERAL_*`, config.md §13).
    pub ephemeral: ephemeral::EphemeralConfig,
}

impl Config {
    /// Builds the configuration from the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(&|k| std::env::var(k).ok())
    }

    /// Builds the configuration from any variable lookup.
    pub fn from_lookup(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let env = Env::new(lookup);
        let http_addr = http::http_addr(&env)?;
        let nr_shards = http::nr_shards(&env)?;
        let db = DbConfig::from_env(&env)?;
        let max_body_bytes = http::max_body_bytes(&env)?;
        let log_level = http::log_level(&env)?;
        let hostname = http::hostname();
        let pop = PopConfig::from_env(&env)?;
        let mesh = MeshConfig::from_env(&env, http_addr.ip(), &hostname)?;
        let auth = AuthConfig::from_env(&env)?;
        let kv_trusted_proxy = env.bool("QUEEN_KV_TRUSTED_PROXY", DEFAULT_KV_TRUSTED_PROXY)?;
        check_tenancy(&auth, kv_trusted_proxy)?;
        let jobs = JobsConfig::from_env(&env)?;
        let timers = TimersConfig::from_env(&env)?;
        Ok(Config {
            jobs,
            timers,
            http_addr,
            nr_shards,
            worker_id: env
                .non_empty("WORKER_ID")
                .unwrap_or_else(|| http::DEFAULT_WORKER_ID.into()),
            server_id: env
                .non_empty("QUEEN_SERVER_ID")
                .unwrap_or_else(|| format!("{hostname}:{}", http_addr.port())),
            max_body_bytes,
            log_level,
            db,
            pop,
            file_buffer_dir: env
                .non_empty("FILE_BUFFER_DIR")
                .unwrap_or_else(|| spool::DEFAULT_FILE_BUFFER_DIR.into()),
            file_buffer_flush_ms: env
                .parse("FILE_BUFFER_FLUSH_MS", spool::DEFAULT_FILE_BUFFER_FLUSH_MS)?
                .max(1),
            file_buffer_max_batch: env
                .parse(
                    "FILE_BUFFER_MAX_BATCH",
                    spool::DEFAULT_FILE_BUFFER_MAX_BATCH,
                )?
                .clamp(1, spool::MAX_FILE_BUFFER_MAX_BATCH),
            file_buffer_events_per_file: env
                .parse(
                    "FILE_BUFFER_EVENTS_PER_FILE",
                    spool::DEFAULT_FILE_BUFFER_EVENTS_PER_FILE,
                )?
                .max(1),
            webapp_root: env.non_empty("WEBAPP_ROOT"),
            mesh,
            auth,
            kv_trusted_proxy,
            kv: KvConfig::from_env(&env)?,
            encryption: KeyState::from_env(&env),
            cache_refresh_ms: env
                .parse("QUEEN_CACHE_REFRESH_INTERVAL_MS", DEFAULT_CACHE_REFRESH_MS)?,
            tls: crate::tls::listener_from_env(&env)?,
            cors_allow_origin: env
                .non_empty("QUEEN_CORS_ALLOW_ORIGIN")
                .map(|v| v.trim().to_string()),
            allowed_hosts: http::allowed_hosts(&env)?,
            ephemeral: ephemeral::EphemeralConfig::from_env(&env)?,
        })
    }

    /// The boot block: the effective configuration, secrets masked.
    pub fn describe(&self) -> String {
        let pg = &self.db.pg;
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
            pg.user,
            pg.host,
            pg.port,
            pg.dbname,
            secret_label(&pg.password),
            self.db.pool_size,
            self.db.apply_schema,
            self.pop.default_timeout_ms,
            self.file_buffer_dir,
            self.mesh.addr,
            self.mesh.peers.join(","),
            self.mesh.enabled,
            self.auth.enabled,
            self.auth.secret_label(),
            self.auth.tenancy_header,
            self.kv_trusted_proxy,
            self.encryption.label(),
            secret_label(&"x".repeat(self.mesh.secret.len() * 2)),
        )
    }
}

/// SEC-19: the tenant header (an `auth` setting) is honoured only behind a
/// proxy that owns it (a KV setting), since nothing validates the header.
fn check_tenancy(auth: &AuthConfig, kv_trusted_proxy: bool) -> Result<(), ConfigError> {
    if auth.tenancy_header && !kv_trusted_proxy {
        return Err(ConfigError::new(
            "QUEEN_TENANCY_HEADER",
            "QUEEN_TENANCY_HEADER=1 requires QUEEN_KV_TRUSTED_PROXY=1: the \
             x-queen-tenant header is not validated and KV state is addressable \
             purely by name, so only a proxy that sets the header and strips the \
             client's may turn it on",
        ));
    }
    Ok(())
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
        assert_eq!(c.db.pool_size, crate::store::config::DEFAULT_DB_POOL_SIZE);
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
        assert_eq!(c.mesh.addr.port(), crate::mesh::config::DEFAULT_MESH_PORT);
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

    #[test]
    fn sec37_secrets_never_in_the_boot_block_or_debug() {
        let secrets = [
            ("JWT_SECRET", "jwt-secret-value-123"),
            ("QUEEN_ENCRYPTION_KEY", &"ab".repeat(32)[..]),
            ("QUEEN_SYNC_SECRET", &"cd".repeat(32)[..]),
            ("PG_PASSWORD", "pg-password-secret"),
        ];
        let mut vars = vec![("JWT_ENABLED", "true")];
        vars.extend_from_slice(&secrets);
        let c = cfg(&vars).expect("boots");
        let (d, dbg) = (c.describe(), format!("{c:?}"));
        for (k, v) in secrets {
            assert!(!d.contains(v), "{k} in describe: {d}");
            assert!(!dbg.contains(v), "{k} in Debug");
        }
        assert!(d.contains("jwt_secret=<set:20 chars>"), "{d}");
        assert!(d.contains("encryption_key=<set:64 chars>"), "{d}");
        assert!(d.contains("sync_secret=<set:64 chars>"), "{d}");
        assert!(!c.auth.boot_line().contains("jwt-secret-value-123"));
    }

    #[test]
    fn sec19_tenancy_needs_the_trusted_proxy_flag() {
        let e = cfg(&[("QUEEN_TENANCY_HEADER", "1")]).unwrap_err();
        let line = e.to_string();
        assert!(line.contains("QUEEN_TENANCY_HEADER") && line.contains("QUEEN_KV_TRUSTED_PROXY"));
        let ok = cfg(&[
            ("QUEEN_TENANCY_HEADER", "1"),
            ("QUEEN_KV_TRUSTED_PROXY", "1"),
        ]);
        assert!(ok.expect("boots").auth.tenancy_header);
    }

    #[test]
    fn sec08_jwt_on_needs_key_material() {
        assert_eq!(
            cfg(&[("JWT_ENABLED", "true")]).unwrap_err().var,
            "JWT_SECRET"
        );
        assert!(cfg(&[("JWT_ENABLED", "true"), ("JWT_SECRET", "s")]).is_ok());
        assert_eq!(
            cfg(&[
                ("JWT_ENABLED", "true"),
                ("JWT_ALGORITHM", "none"),
                ("JWT_SECRET", "s")
            ])
            .unwrap_err()
            .var,
            "JWT_ALGORITHM"
        );
    }
}
