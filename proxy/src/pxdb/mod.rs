//! The control database ("pxdb", schema `queen_proxy`): connecting, the
//! schema applied at boot ([`schema`]), and the one-line description of a
//! PostgreSQL error. Used by the control thread (`control.rs`) and the
//! admin command line (`admin.rs`), never on a shard: every call blocks.

pub mod schema;

use crate::config::PxDb;

/// Connects (plaintext; PXDB TLS is not built, see the README).
pub fn connect(cfg: &PxDb) -> Result<postgres::Client, String> {
    cfg.pg_config().connect(postgres::NoTls).map_err(|e| {
        format!(
            "cannot connect to the control database {}:{}/{}: {}",
            cfg.host,
            cfg.port,
            cfg.db,
            describe(&e)
        )
    })
}

/// PostgreSQL's own message for an error (the `Display` of
/// `postgres::Error` only says "db error").
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}
