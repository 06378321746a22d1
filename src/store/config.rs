//! The DB thread group's settings (`PG_*`, `DB_*`, `QUEEN_APPLY_SCHEMA`):
//! where PostgreSQL is, how many connections (= DB threads) to keep, and
//! how long a statement may run. Parsed once at boot on the main thread
//! from the leaf `crate::env`; `db_group.rs` takes them, so `store` never
//! reads the whole `crate::config::Config`. Every setting needs a restart.

use super::pg_tls::TrustMode;
use crate::env::{secret_label, ConfigError, Env};
use std::fmt;
use std::time::Duration;

/// PostgreSQL host when `PG_HOST` is unset: the local server (`tools/`
/// starts a private cluster and sets `PG_HOST` itself; decisions.md).
pub const DEFAULT_PG_HOST: &str = "localhost";
/// PostgreSQL port when `PG_PORT` is unset: the server's own default.
pub const DEFAULT_PG_PORT: u16 = 5432;
/// Role when `PG_USER` is unset: the superuser every fresh cluster has.
pub const DEFAULT_PG_USER: &str = "postgres";
/// Password when `PG_PASSWORD` is unset (config.md, the Queen default). A
/// value set to empty stays empty: a trust-authenticated server needs none.
pub const DEFAULT_PG_PASSWORD: &str = "postgres";
/// Database when neither `PG_DATABASE` nor `PG_DB` is set: the one every
/// cluster has (schema `queen` lives inside it).
pub const DEFAULT_PG_DATABASE: &str = "postgres";
/// `DB_CONNECTION_TIMEOUT` default, ms (config.md): bounds a connect and a
/// pool checkout, so a dead server answers 503 in seconds, not minutes.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// `DB_STATEMENT_TIMEOUT` default, ms (config.md): no broker statement
/// should come near it; it stops a runaway query holding a DB thread.
pub const DEFAULT_STATEMENT_TIMEOUT_MS: u64 = 30_000;
/// `DB_LOCK_TIMEOUT` default, ms (config.md): a statement waiting on a lock
/// this long fails rather than pinning its DB thread.
pub const DEFAULT_LOCK_TIMEOUT_MS: u64 = 10_000;
/// `QUEEN_APPLY_SCHEMA` when unset (config.md): apply `sql/` at boot, under
/// the advisory lock, so a fresh database works with no separate step.
pub const DEFAULT_APPLY_SCHEMA: bool = true;
/// PostgreSQL connections of the request DB thread group when `DB_POOL_SIZE`
/// is unset. One connection per DB thread; 16 keeps enough commits in flight
/// for PostgreSQL's group commit on a small box while leaving room under the
/// 25-connection budget for the service jobs added later.
pub const DEFAULT_DB_POOL_SIZE: usize = 16;
/// Largest `DB_POOL_SIZE` accepted: one thread per connection, so beyond a
/// thousand it is a typo, and PostgreSQL's own limit would refuse it anyway.
pub const MAX_DB_POOL_SIZE: usize = 1000;
/// Lower bound of the KV pool's default size (config.md: clamp(DB_POOL_SIZE/10, 4, 32)):
/// a KV call holds its connection for one short round trip, four keep a
/// 5,000 ops/s target served while a queue backlog holds every request thread.
pub const KV_POOL_DEFAULT_MIN: usize = 4;
/// Upper bound of the KV pool's default size (config.md).
pub const KV_POOL_DEFAULT_MAX: usize = 32;
/// Largest `QUEEN_KV_POOL_SIZE` accepted (one thread per connection, as the request group).
pub const MAX_KV_POOL_SIZE: usize = 256;
/// The KV pool's size when `QUEEN_KV_POOL_SIZE` is unset (config.md). With
/// the default `DB_POOL_SIZE` of 16 that is 4: 16 request + 4 KV connections,
/// plus the boot thread's one (closed once the schema is applied), stay
/// under the 25-connection budget of decisions.md with 4 to spare.
pub fn default_kv_pool_size(db_pool_size: usize) -> usize {
    (db_pool_size / 10).clamp(KV_POOL_DEFAULT_MIN, KV_POOL_DEFAULT_MAX)
}
/// `QUEEN_KV_GROUP_MAX` default: KV/lock calls one KV thread commits
/// together (`store::kv_group`). At 5,000 ops/s on 4 connections a group is
/// a handful of calls; the cap bounds the wait of the last behind the first.
/// 24, not more: each writing call of a group is a subtransaction (two with
/// `required` ops), and past 64 subtransaction ids in one transaction
/// PostgreSQL's per-backend cache overflows and every snapshot in the
/// database gets slower while the group is open.
pub const DEFAULT_KV_GROUP_MAX: usize = 24;
/// Largest `QUEEN_KV_GROUP_MAX` accepted (a group is one statement).
pub const MAX_KV_GROUP_MAX: usize = 1024;
/// Jobs that may wait for a DB thread before shards answer 503. Sized so a
/// burst from every connection of a busy broker fits (jobs are fused batches).
pub const DEFAULT_DB_QUEUE_DEPTH: usize = 4096;

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
    pub tls: TrustMode,
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

/// What the DB thread group is started with.
#[derive(Debug, Clone)]
pub struct DbConfig {
    /// Where and how to connect.
    pub pg: PgConfig,
    /// DB thread count = PostgreSQL connections of the request group (`DB_POOL_SIZE`).
    pub pool_size: usize,
    /// Bound of the shard → DB job queue.
    pub queue_depth: usize,
    /// Apply `sql/` at boot (`QUEEN_APPLY_SCHEMA`).
    pub apply_schema: bool,
    /// Connections (= threads) of the KV pool (`QUEEN_KV_POOL_SIZE`), apart
    /// from the request group's, so a queue backlog cannot starve the KV and
    /// timers, nor they the queues (`store::kv_pool`).
    pub kv_pool_size: usize,
    /// Most KV/lock calls sharing one commit (`QUEEN_KV_GROUP_MAX`; 1: each
    /// call commits alone).
    pub kv_group_max: usize,
}

impl DbConfig {
    /// Reads the `PG_*`, `DB_*` and `QUEEN_APPLY_SCHEMA` variables.
    pub fn from_env(env: &Env) -> Result<DbConfig, ConfigError> {
        let pool_size = env.parse("DB_POOL_SIZE", DEFAULT_DB_POOL_SIZE)?;
        if pool_size == 0 || pool_size > MAX_DB_POOL_SIZE {
            return Err(ConfigError::new(
                "DB_POOL_SIZE",
                format!("{pool_size} is outside 1..={MAX_DB_POOL_SIZE}"),
            ));
        }
        let kv_pool_size = env.parse("QUEEN_KV_POOL_SIZE", default_kv_pool_size(pool_size))?;
        if kv_pool_size == 0 || kv_pool_size > MAX_KV_POOL_SIZE {
            return Err(ConfigError::new(
                "QUEEN_KV_POOL_SIZE",
                format!("{kv_pool_size} is outside 1..={MAX_KV_POOL_SIZE}"),
            ));
        }
        let kv_group_max = env.parse("QUEEN_KV_GROUP_MAX", DEFAULT_KV_GROUP_MAX)?;
        if kv_group_max == 0 || kv_group_max > MAX_KV_GROUP_MAX {
            return Err(ConfigError::new(
                "QUEEN_KV_GROUP_MAX",
                format!("{kv_group_max} is outside 1..={MAX_KV_GROUP_MAX}"),
            ));
        }
        let text =
            |var: &str, default: &str| env.non_empty(var).unwrap_or_else(|| default.to_string());
        let pg = PgConfig {
            host: text("PG_HOST", DEFAULT_PG_HOST),
            port: env.parse("PG_PORT", DEFAULT_PG_PORT)?,
            user: text("PG_USER", DEFAULT_PG_USER),
            password: env
                .string("PG_PASSWORD")
                .unwrap_or_else(|| DEFAULT_PG_PASSWORD.into()),
            dbname: env
                .non_empty("PG_DATABASE")
                .or_else(|| env.non_empty("PG_DB"))
                .unwrap_or_else(|| DEFAULT_PG_DATABASE.into()),
            connect_timeout: Duration::from_millis(
                env.parse("DB_CONNECTION_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_MS)?,
            ),
            statement_timeout_ms: env
                .parse("DB_STATEMENT_TIMEOUT", DEFAULT_STATEMENT_TIMEOUT_MS)?,
            lock_timeout_ms: env.parse("DB_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT_MS)?,
            tls: TrustMode::from_env(env)?,
        };
        Ok(DbConfig {
            pg,
            pool_size,
            queue_depth: DEFAULT_DB_QUEUE_DEPTH,
            apply_schema: env.bool("QUEEN_APPLY_SCHEMA", DEFAULT_APPLY_SCHEMA)?,
            kv_pool_size,
            kv_group_max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(vars: &[(&str, &str)]) -> Result<DbConfig, ConfigError> {
        let lookup = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        DbConfig::from_env(&Env::new(&lookup))
    }

    #[test]
    fn defaults_and_fallbacks() {
        let c = db(&[]).unwrap();
        assert_eq!(c.pool_size, DEFAULT_DB_POOL_SIZE);
        assert_eq!((c.pg.host.as_str(), c.pg.port), ("localhost", 5432));
        assert_eq!(c.pg.dbname, "postgres");
        assert!(c.apply_schema);
        assert_eq!(c.kv_pool_size, 4);
        assert_eq!(db(&[("DB_POOL_SIZE", "100")]).unwrap().kv_pool_size, 10);
        assert_eq!(db(&[("DB_POOL_SIZE", "900")]).unwrap().kv_pool_size, 32);
        assert_eq!(db(&[("QUEEN_KV_POOL_SIZE", "2")]).unwrap().kv_pool_size, 2);
        assert_eq!(c.kv_group_max, DEFAULT_KV_GROUP_MAX);
        assert_eq!(db(&[("QUEEN_KV_GROUP_MAX", "1")]).unwrap().kv_group_max, 1);
        assert_eq!(
            db(&[("QUEEN_KV_GROUP_MAX", "0")]).unwrap_err().var,
            "QUEEN_KV_GROUP_MAX"
        );
        assert_eq!(
            db(&[("QUEEN_KV_POOL_SIZE", "0")]).unwrap_err().var,
            "QUEEN_KV_POOL_SIZE"
        );
        let c = db(&[("PG_DB", "a"), ("PG_PASSWORD", "")]).unwrap();
        assert_eq!(c.pg.dbname, "a");
        assert_eq!(c.pg.password, "");
        let c = db(&[("PG_DB", "a"), ("PG_DATABASE", "b")]).unwrap();
        assert_eq!(c.pg.dbname, "b");
        assert_eq!(
            db(&[("DB_POOL_SIZE", "0")]).unwrap_err().var,
            "DB_POOL_SIZE"
        );
        assert_eq!(
            db(&[("DB_POOL_SIZE", "1001")]).unwrap_err().var,
            "DB_POOL_SIZE"
        );
    }
}
