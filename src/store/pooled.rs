//! The pooled connection of the DB threads and the KV threads: a PostgreSQL
//! client that is closed instead of returned to the pool once it has carried
//! one big result.
//!
//! Why: tokio-postgres reads every message into one buffer per connection
//! and keeps that buffer's allocation for the connection's life, sized by the
//! biggest message it ever read. A pop of 10,000 ~1 KiB messages is one
//! 13 MB `DataRow`, and the ~16 MiB buffer it grew stayed resident until the
//! broker stopped (issue 18: a huge request may cost its size once, and only
//! while it is served). Nothing in the client's API shrinks the buffer, so
//! the connection goes: the next job opens a new one (a few milliseconds and
//! a backend fork, against the tens of milliseconds a result this big takes
//! to read and answer). The write side keeps its size the same way: pushes
//! go in statements of about 1 MiB (`push_typed`), but one item bigger than
//! that goes whole, and such a push retires its connection too, as does a
//! call whose argument is that big (a transaction carrying big pushes).
//!
//! It also keeps the connection's prepared statements: the broker's
//! statements are a handful of fixed texts, so each is parsed, analysed and
//! planned by PostgreSQL once per connection and then only bound and run
//! (an unnamed statement sent with every call cost PostgreSQL about 6% of
//! its time at 10,000 msg/s, issue 18).

use super::jobs::StoreError;
use super::pg_tls::Connector;
use super::sql_error::classify;
use postgres::error::SqlState;
use postgres::types::{FromSql, ToSql, Type};
use postgres::{Row, Statement};
use r2d2_postgres::PostgresConnectionManager;
use serde_json::Value;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};

/// A result at least this big (bytes on the wire) retires its connection.
/// Above any answer of a usual batch (pop b1,000 of 1 KiB payloads is ~1 MB),
/// so steady traffic keeps its connections and their prepared plans.
pub const RETIRE_AT_BYTES: usize = 4 << 20;

/// A statement's parameters, each with the type it is prepared with.
pub type Params<'a> = [(&'a (dyn ToSql + Sync), Type)];

/// A pooled client, its prepared statements and whether it is to be closed
/// when given back.
pub struct Conn {
    client: postgres::Client,
    retire: bool,
    /// Prepared statements by their text (the texts are the broker's own
    /// constants, so the map stays a handful of entries).
    prepared: HashMap<&'static str, Statement>,
}

impl Conn {
    /// `sql` prepared on this connection with `types` (the first use
    /// prepares it: one extra round trip per connection and statement).
    pub fn prepared(
        &mut self,
        sql: &'static str,
        types: &[Type],
    ) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare_typed(sql, types)?;
        self.prepared.insert(sql, s.clone());
        Ok(s)
    }

    /// Runs `sql` with `params` as its own statement (not inside a
    /// transaction) through the prepared statements. A statement PostgreSQL
    /// can no longer run as prepared (its functions were replaced with
    /// another shape meanwhile, by this broker's boot or a peer's) is
    /// prepared again and run once more: it failed before it ran.
    pub fn query_prepared(
        &mut self,
        sql: &'static str,
        params: &Params<'_>,
    ) -> Result<Vec<Row>, postgres::Error> {
        let types: Vec<Type> = params.iter().map(|(_, t)| t.clone()).collect();
        let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|(v, _)| *v).collect();
        let cached = self.prepared.contains_key(sql);
        let stmt = self.prepared(sql, &types)?;
        match self.client.query(&stmt, &values) {
            Err(e) if cached && stale_plan(&e) => {
                log::debug!(
                    "prepared statement no longer fits the schema ({e}); preparing it again"
                );
                self.prepared.remove(sql);
                let stmt = self.prepared(sql, &types)?;
                self.client.query(&stmt, &values)
            }
            r => r,
        }
    }

    /// Marks the connection for closing when it goes back to the pool if
    /// `bytes` (a result read, or a parameter sent) reached [`RETIRE_AT_BYTES`].
    pub fn retire_if_big(&mut self, bytes: usize) {
        if bytes >= RETIRE_AT_BYTES {
            self.retire = true;
        }
    }

    /// The jsonb in `rows`' first row, first column; a result big enough
    /// marks the connection for retiring.
    pub fn first_json(&mut self, rows: &[postgres::Row]) -> Result<Value, StoreError> {
        let SizedJson(v, bytes) = rows
            .first()
            .ok_or_else(|| StoreError::Db("no result row".into()))?
            .try_get(0)
            .map_err(classify)?;
        self.retire_if_big(bytes);
        Ok(v)
    }
}

impl Deref for Conn {
    type Target = postgres::Client;
    fn deref(&self) -> &postgres::Client {
        &self.client
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut postgres::Client {
        &mut self.client
    }
}

/// r2d2's manager for [`Conn`]: the postgres manager's connect and checks,
/// plus "broken" for a retired connection (r2d2 then drops it on return).
pub struct Manager(pub PostgresConnectionManager<Connector>);

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("pooled::Manager")
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        Ok(Conn {
            client: self.0.connect()?,
            retire: false,
            prepared: HashMap::new(),
        })
    }

    fn is_valid(&self, c: &mut Conn) -> Result<(), postgres::Error> {
        self.0.is_valid(&mut c.client)
    }

    fn has_broken(&self, c: &mut Conn) -> bool {
        c.retire || self.0.has_broken(&mut c.client)
    }
}

/// Whether `e` says a prepared statement no longer fits the schema it was
/// prepared against ("cached plan must not change result type", or a column
/// or function it names is gone): errors raised before the statement ran.
fn stale_plan(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        [
            SqlState::FEATURE_NOT_SUPPORTED,
            SqlState::UNDEFINED_COLUMN,
            SqlState::UNDEFINED_FUNCTION,
        ]
        .contains(c)
    })
}

/// A jsonb result decoded as `Value`, with its size on the wire.
pub struct SizedJson(pub Value, pub usize);

impl<'a> FromSql<'a> for SizedJson {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> Result<SizedJson, Box<dyn std::error::Error + Sync + Send>> {
        Ok(SizedJson(Value::from_sql(ty, raw)?, raw.len()))
    }

    fn accepts(ty: &Type) -> bool {
        <Value as FromSql>::accepts(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_json_reads_jsonb_and_counts_its_bytes() {
        let raw = b"\x01{\"a\": [1, 2]}";
        let SizedJson(v, n) = SizedJson::from_sql(&Type::JSONB, raw).unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2]}));
        assert_eq!(n, raw.len());
        assert!(SizedJson::accepts(&Type::JSONB));
        assert!(!SizedJson::accepts(&Type::INT4));
    }
}
