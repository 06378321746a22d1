//! Applies `sql/` (embedded in the binary) at boot, in one transaction under
//! the boot advisory lock: the schema files not yet in the ledger
//! `queen.schema_migrations`, then every function file.
//!
//! Two kinds of file (sql/README.md): `sql/schema/NNN_*.sql` are append-only,
//! run once each and recorded with their sha256; `sql/functions/*.sql` hold the
//! one live definition of each function and are re-applied (`CREATE OR
//! REPLACE`) at every boot. The order is `sql/ORDER`, which `sql/test/run.sh`
//! reads too; a test below keeps [`FILES`] equal to it.
//!
//! A data directory made before the ledger existed (every file then ran at
//! every boot) has no ledger rows: its first boot runs every schema file, which
//! is safe because those files are the statements that ran at each of its
//! boots (all idempotent), and records them. Running them rather than only
//! recording them keeps that upgrade path the same code path as a fresh
//! database, and lets `schema/007` drop the functions that are gone.

use postgres::Client;
use sha2::{Digest, Sha256};

/// Advisory lock key held (transaction-level) while the schema is applied, so
/// that several brokers booting at once apply it once (an arbitrary constant
/// of ours, distinct from the background-job keys; the same key as before the
/// ledger, so an older broker booting at the same time waits too).
const SCHEMA_LOCK_KEY: i64 = 737_000;

/// Where a path of [`FILES`] lives: schema files are run once (ledger),
/// every other file at every boot.
const SCHEMA_DIR: &str = "schema/";

/// One entry of [`FILES`]: a path under `sql/` and the file's text.
macro_rules! sql {
    ($path:literal) => {
        ($path, include_str!(concat!("../../sql/", $path)))
    };
}

/// The files of `sql/` in apply order (the same list as `sql/ORDER`): the
/// ledger, the trigger functions (CREATE TRIGGER in the schema files needs
/// them), the schema files in numeric order, then the function files in an
/// order where a `LANGUAGE sql` body (checked when created) comes after the
/// functions it calls.
const FILES: &[(&str, &str)] = &[
    sql!("ledger.sql"),
    sql!("functions/triggers.sql"),
    sql!("schema/001_queues_messages.sql"),
    sql!("schema/002_dlq_traces.sql"),
    sql!("schema/003_ops_tables.sql"),
    sql!("schema/004_jobs_stats.sql"),
    sql!("schema/005_message_refs.sql"),
    sql!("schema/006_stats_deletes.sql"),
    sql!("schema/007_drop_dead_functions.sql"),
    sql!("schema/008_kv.sql"),
    sql!("schema/009_timers.sql"),
    sql!("schema/010_ephemeral.sql"),
    sql!("schema/011_streams.sql"),
    sql!("schema/012_hot_leases.sql"),
    sql!("schema/013_lookup_slot.sql"),
    sql!("schema/014_stats_ref_position.sql"),
    sql!("schema/015_pop_candidates_depth.sql"),
    sql!("schema/016_pop_sweep_seq.sql"),
    sql!("functions/core.sql"),
    sql!("functions/stats.sql"),
    sql!("functions/push.sql"),
    sql!("functions/pop.sql"),
    sql!("functions/conflation.sql"),
    sql!("functions/ack.sql"),
    sql!("functions/txn.sql"),
    sql!("functions/streams.sql"),
    sql!("functions/dlq.sql"),
    sql!("functions/messages.sql"),
    sql!("functions/groups.sql"),
    sql!("functions/resources.sql"),
    sql!("functions/traces.sql"),
    sql!("functions/jobs.sql"),
    sql!("functions/cleanup.sql"),
    sql!("functions/status.sql"),
    sql!("functions/metrics.sql"),
    sql!("functions/system.sql"),
    sql!("functions/kv.sql"),
    sql!("functions/timers.sql"),
    sql!("functions/ephemeral.sql"),
];

/// Applies the pending schema files and every function file, all or nothing.
/// A schema file already applied with another checksum stops the process with
/// one line naming the file (retrying cannot fix it); any other failure is
/// returned (the caller retries) as the name of the file with the error.
pub fn apply(client: &mut Client) -> Result<(), String> {
    let mut tx = client
        .transaction()
        .map_err(|e| format!("schema transaction: {}", describe(&e)))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK_KEY])
        .map_err(|e| format!("schema lock: {}", describe(&e)))?;
    // `IF NOT EXISTS` and `DROP … IF EXISTS` say so in NOTICEs at every boot,
    // which the boot log would repeat as noise; warnings and errors still show.
    tx.batch_execute("SET LOCAL client_min_messages = warning")
        .map_err(|e| format!("schema transaction: {}", describe(&e)))?;
    for (path, sql) in FILES {
        let Some(name) = path.strip_prefix(SCHEMA_DIR) else {
            tx.batch_execute(sql)
                .map_err(|e| format!("{path}: {}", describe(&e)))?;
            continue;
        };
        let sum = checksum(sql);
        let applied = tx
            .query_opt(
                "SELECT checksum FROM queen.schema_migrations WHERE name = $1",
                &[&name],
            )
            .map_err(|e| format!("schema ledger: {}", describe(&e)))?;
        match applied {
            Some(row) => {
                let recorded: String = row.get(0);
                if recorded != sum {
                    eprintln!("queen: {}", mismatch(path, &recorded, &sum));
                    std::process::exit(1);
                }
            }
            None => {
                tx.batch_execute(sql)
                    .map_err(|e| format!("{path}: {}", describe(&e)))?;
                tx.execute(
                    "INSERT INTO queen.schema_migrations (name, checksum) VALUES ($1, $2)",
                    &[&name, &sum],
                )
                .map_err(|e| format!("schema ledger: {}", describe(&e)))?;
            }
        }
    }
    tx.commit()
        .map_err(|e| format!("schema commit: {}", describe(&e)))
}

/// The one line a changed schema file stops the boot with.
fn mismatch(path: &str, recorded: &str, now: &str) -> String {
    format!(
        "sql/{path} was applied with checksum {recorded} but the embedded file has {now}: \
         schema files are append-only once applied; put the change in a new sql/schema file"
    )
}

/// sha256 of a file's text, lower-case hex (the ledger's `checksum`).
fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// PostgreSQL's own message for an error (the `Display` of `postgres::Error`
/// only says "db error").
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn sql_dir() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
    }

    /// The broker applies exactly the list `sql/test/run.sh` reads.
    #[test]
    fn files_match_sql_order() {
        let order = std::fs::read_to_string(sql_dir().join("ORDER")).unwrap();
        let listed: Vec<&str> = order
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let ours: Vec<&str> = FILES.iter().map(|(p, _)| *p).collect();
        assert_eq!(ours, listed);
    }

    /// Every file of sql/schema and sql/functions is applied, and the schema
    /// files run in numeric order.
    #[test]
    fn every_file_is_listed() {
        for dir in ["schema", "functions"] {
            for entry in std::fs::read_dir(sql_dir().join(dir)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let path = format!("{dir}/{name}");
                assert!(
                    FILES.iter().any(|(p, _)| *p == path),
                    "{path} is missing from FILES and sql/ORDER"
                );
            }
        }
        let schema: Vec<&str> = FILES
            .iter()
            .filter_map(|(p, _)| p.strip_prefix(SCHEMA_DIR))
            .collect();
        let mut sorted = schema.clone();
        sorted.sort();
        assert_eq!(schema, sorted);
    }

    #[test]
    fn checksum_is_sha256_hex() {
        assert_eq!(
            checksum("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
