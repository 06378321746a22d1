//! What a PostgreSQL error means for the caller: a lost server (503, the
//! spool's business) or an error raised by a statement, and which of its text
//! may reach a client. Its own module because every store path maps errors
//! through it, the request group (`db_group`) and the KV pool alike.

use super::jobs::StoreError;
use super::schema;

/// Tells a lost connection (spool-worthy) from an error PostgreSQL raised.
///
/// An unreachable server's reason (a connection error or SQLSTATE class 08 /
/// 57P0x: no detail of the data) goes into the lost/back log line and the
/// 503. Only our own `RAISE EXCEPTION` texts (SQLSTATE P0001, written in `sql/`
/// for callers to read) travel on to the client. Any other PostgreSQL error
/// text can name tables, constraints, values or the server's internals, so it
/// is logged here with an incident number and the client is told only that
/// number (issue 17: NUL bytes in names used to come back as PostgreSQL's
/// encoding error).
pub fn classify(e: postgres::Error) -> StoreError {
    if e.is_closed() {
        return StoreError::Unavailable(e.to_string());
    }
    match e.code() {
        Some(code) => classify_code(code.code(), &schema::describe(&e)),
        None => StoreError::Unavailable(e.to_string()),
    }
}

/// [`classify`] of an error known by its SQLSTATE and text only (a KV
/// group's call caught inside its savepoint, `super::kv_group`).
pub fn classify_code(c: &str, text: &str) -> StoreError {
    if c.starts_with("08") || c == "57P01" || c == "57P02" || c == "57P03" {
        StoreError::Unavailable(text.to_string())
    } else if c == "P0001" {
        StoreError::Db(text.to_string())
    } else {
        let incident: u32 = rand::random();
        log::error!("database error, incident {incident:08x} ({c}): {text}");
        StoreError::Db(format!(
            "internal database error (incident {incident:08x} in the broker log)"
        ))
    }
}
