//! Applies the numbered files of `sql/` (embedded in the binary) at boot,
//! under a session advisory lock so that several brokers booting at once
//! apply them one after the other. Every file is idempotent, so a reused
//! data directory upgrades by running them all again.

use postgres::Client;

/// Advisory lock key held while the schema is applied (an arbitrary constant
/// of ours, distinct from the background-job keys).
const SCHEMA_LOCK_KEY: i64 = 737_000;

/// The files of `sql/`, in order.
const FILES: &[(&str, &str)] = &[
    ("001_schema.sql", include_str!("../../sql/001_schema.sql")),
    ("002_push.sql", include_str!("../../sql/002_push.sql")),
    ("003_pop.sql", include_str!("../../sql/003_pop.sql")),
    ("004_ack.sql", include_str!("../../sql/004_ack.sql")),
    (
        "005_transaction.sql",
        include_str!("../../sql/005_transaction.sql"),
    ),
    ("006_dlq.sql", include_str!("../../sql/006_dlq.sql")),
    (
        "007_push_fast.sql",
        include_str!("../../sql/007_push_fast.sql"),
    ),
    (
        "009_ack_fast.sql",
        include_str!("../../sql/009_ack_fast.sql"),
    ),
    ("010_groups.sql", include_str!("../../sql/010_groups.sql")),
    (
        "011_resources.sql",
        include_str!("../../sql/011_resources.sql"),
    ),
    (
        "012_messages.sql",
        include_str!("../../sql/012_messages.sql"),
    ),
    ("013_traces.sql", include_str!("../../sql/013_traces.sql")),
    ("014_jobs.sql", include_str!("../../sql/014_jobs.sql")),
    ("015_stats.sql", include_str!("../../sql/015_stats.sql")),
    (
        "016_stats_readers.sql",
        include_str!("../../sql/016_stats_readers.sql"),
    ),
    ("017_status.sql", include_str!("../../sql/017_status.sql")),
    (
        "018_msg_list.sql",
        include_str!("../../sql/018_msg_list.sql"),
    ),
    (
        "019_groups_scale.sql",
        include_str!("../../sql/019_groups_scale.sql"),
    ),
    (
        "020_system_state.sql",
        include_str!("../../sql/020_system_state.sql"),
    ),
    ("040_metrics.sql", include_str!("../../sql/040_metrics.sql")),
    (
        "050_security.sql",
        include_str!("../../sql/050_security.sql"),
    ),
    (
        "075_detail_pages.sql",
        include_str!("../../sql/075_detail_pages.sql"),
    ),
    ("076_cleanup.sql", include_str!("../../sql/076_cleanup.sql")),
    (
        "077_msg_page.sql",
        include_str!("../../sql/077_msg_page.sql"),
    ),
    (
        "078_group_detail.sql",
        include_str!("../../sql/078_group_detail.sql"),
    ),
    (
        "070_conflation.sql",
        include_str!("../../sql/070_conflation.sql"),
    ),
    (
        "060_push_typed.sql",
        include_str!("../../sql/060_push_typed.sql"),
    ),
    (
        "064_push_lean.sql",
        include_str!("../../sql/064_push_lean.sql"),
    ),
    (
        "061_pop_compact.sql",
        include_str!("../../sql/061_pop_compact.sql"),
    ),
    (
        "079_retention_fast.sql",
        include_str!("../../sql/079_retention_fast.sql"),
    ),
    (
        "080_message_refs.sql",
        include_str!("../../sql/080_message_refs.sql"),
    ),
    (
        "081_stats_incremental.sql",
        include_str!("../../sql/081_stats_incremental.sql"),
    ),
];

/// Applies every file; returns the name of the file that failed with the error.
pub fn apply(client: &mut Client) -> Result<(), String> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&SCHEMA_LOCK_KEY])
        .map_err(|e| format!("schema lock: {e}"))?;
    let mut result = Ok(());
    for (name, sql) in FILES {
        if let Err(e) = client.batch_execute(sql) {
            result = Err(format!("{name}: {}", describe(&e)));
            break;
        }
    }
    let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&SCHEMA_LOCK_KEY]);
    result
}

/// PostgreSQL's own message for an error (the `Display` of `postgres::Error`
/// only says "db error").
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_string(),
        None => e.to_string(),
    }
}
