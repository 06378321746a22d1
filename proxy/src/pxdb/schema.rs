//! Applies `proxy/sql/` (embedded in the binary) in one transaction under the
//! proxy's advisory lock: the schema files not yet recorded in
//! `queen_proxy.schema_migrations` (each once, with its sha256), then every
//! function file (`CREATE OR REPLACE`, every time). The same two kinds of file
//! as the broker's `sql/` (see the broker's `src/store/schema.rs`); the order
//! is `proxy/sql/ORDER`, which a test below keeps equal to [`FILES`].
//!
//! Runs on the control thread at boot and at the start of every admin
//! command (so `admin bootstrap` works before any proxy has run).

use postgres::Client;
use sha2::{Digest, Sha256};

use super::describe;

/// Advisory lock key held while the schema is applied, so proxies and admin
/// commands starting at once apply it once (an arbitrary constant, distinct
/// from the broker's 737_000 since both may share one database).
const SCHEMA_LOCK_KEY: i64 = 737_100;

/// Paths under this prefix run once (ledger); the rest run every time.
const SCHEMA_DIR: &str = "schema/";

/// One entry of [`FILES`]: a path under `proxy/sql/` and its text.
macro_rules! sql {
    ($path:literal) => {
        ($path, include_str!(concat!("../../sql/", $path)))
    };
}

/// The files of `proxy/sql/` in apply order (the list of `proxy/sql/ORDER`).
const FILES: &[(&str, &str)] = &[
    sql!("ledger.sql"),
    sql!("functions/triggers.sql"),
    sql!("schema/001_control.sql"),
    sql!("functions/control.sql"),
];

/// Why the schema could not be applied.
#[derive(Debug)]
pub enum SchemaError {
    /// An applied schema file changed: retrying cannot fix it.
    Changed(String),
    /// Anything else (the caller may retry).
    Failed(String),
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::Changed(s) | SchemaError::Failed(s) => f.write_str(s),
        }
    }
}

/// Applies the pending schema files and every function file, all or nothing.
pub fn apply(client: &mut Client) -> Result<(), SchemaError> {
    let fail =
        |what: &str, e: postgres::Error| SchemaError::Failed(format!("{what}: {}", describe(&e)));
    let mut tx = client
        .transaction()
        .map_err(|e| fail("schema transaction", e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY])
        .map_err(|e| fail("schema lock", e))?;
    // NOTICEs of IF NOT EXISTS would repeat at every boot; warnings still show.
    tx.batch_execute("SET LOCAL client_min_messages = warning")
        .map_err(|e| fail("schema transaction", e))?;
    for (path, sql) in FILES {
        let Some(name) = path.strip_prefix(SCHEMA_DIR) else {
            tx.batch_execute(sql).map_err(|e| fail(path, e))?;
            continue;
        };
        let sum = checksum(sql);
        let applied = tx
            .query_opt(
                "SELECT checksum FROM queen_proxy.schema_migrations WHERE name = $1",
                &[&name],
            )
            .map_err(|e| fail("schema ledger", e))?;
        match applied {
            Some(row) => {
                let recorded: String = row.get(0);
                if recorded != sum {
                    return Err(SchemaError::Changed(format!(
                        "proxy/sql/{path} was applied with checksum {recorded} but the embedded file has {sum}: \
                         schema files are append-only once applied; put the change in a new proxy/sql/schema file"
                    )));
                }
            }
            None => {
                tx.batch_execute(sql).map_err(|e| fail(path, e))?;
                tx.execute(
                    "INSERT INTO queen_proxy.schema_migrations (name, checksum) VALUES ($1, $2)",
                    &[&name, &sum],
                )
                .map_err(|e| fail("schema ledger", e))?;
            }
        }
    }
    tx.commit().map_err(|e| fail("schema commit", e))
}

/// sha256 of a file's text, lower-case hex (the ledger's `checksum`).
fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sql_dir() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
    }

    #[test]
    fn files_match_sql_order_and_every_file_is_listed() {
        let order = std::fs::read_to_string(sql_dir().join("ORDER")).unwrap();
        let listed: Vec<&str> = order
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let ours: Vec<&str> = FILES.iter().map(|(p, _)| *p).collect();
        assert_eq!(ours, listed);
        for dir in ["schema", "functions"] {
            for entry in std::fs::read_dir(sql_dir().join(dir)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let path = format!("{dir}/{name}");
                assert!(
                    ours.contains(&path.as_str()),
                    "{path} is not in proxy/sql/ORDER"
                );
            }
        }
    }
}
