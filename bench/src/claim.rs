//! The PostgreSQL limit of a pop: `FOR UPDATE SKIP LOCKED` claims of ready
//! rows, measured by `pg-ceiling --mode claim|claimack` with the broker
//! stopped, so the drain scenarios can be read as a fraction of it (issue 18:
//! pop b100 + ack against `claimack`, autoAck pop against `claim`).
//!
//! The method is the yardstick's (`../shared/yardstick/pglimit/README.md`):
//! a `jobs` table of the message row shape plus a status, pre-loaded
//! server-side with ready rows and a partial index on the ready ones, then
//! each client loops:
//! - `claim`: one statement that claims a batch, stamps a lease and returns
//!   the rows (what an autoAck pop must at least do), one commit;
//! - `claimack`: that claim, then a second commit that marks the batch done
//!   under the lease (what pop + ack must at least do).
//!
//! A claim that finds no row means the pre-load ran out: the run says
//! `exhausted` so its figure is not read as a limit.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Instant;

use postgres::{Client, NoTls};
use uuid::Uuid;

use crate::report::{Errors, Lat};

/// Phase values shared with the client threads (the INSERT loop's too;
/// before MEASURE is the warm-up).
pub const MEASURE: u8 = 1;
/// Clients stop at this phase.
pub const STOP: u8 = 2;

/// Which pop a client loops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Claim {
    /// Claim only (one commit per batch).
    Claim,
    /// Claim, then ack the batch (two commits per batch).
    ClaimAck,
}

impl Claim {
    /// The JSON `scenario` name and the table key's prefix.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            Claim::Claim => ("pg-claim", "CLAIM"),
            Claim::ClaimAck => ("pg-claimack", "CLAIMACK"),
        }
    }
}

/// What one client counted inside the window.
#[derive(Debug, Default)]
pub struct Stats {
    /// Commit latency of each claim (claim + ack for `claimack`).
    pub lat: Lat,
    /// Rows claimed (and acked) inside the window.
    pub rows: u64,
    /// Commits inside the window.
    pub commits: u64,
    /// Failed statements.
    pub errors: Errors,
}

/// Drops and re-creates `schema`.jobs with `rows` ready rows over
/// `partitions` partitions, ~`payload_bytes` of JSON each, indexed and
/// vacuumed so the first claim does not pay for the load.
pub fn setup(
    dsn: &str,
    schema: &str,
    rows: u64,
    partitions: usize,
    payload_bytes: usize,
) -> Result<(), postgres::Error> {
    let mut c = Client::connect(dsn, NoTls)?;
    let s = schema;
    // The fixed keys take ~45 bytes; the pad brings the document to the size asked.
    let pad = payload_bytes.saturating_sub(45).max(1);
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s};
         CREATE TABLE {s}.jobs (
             id uuid PRIMARY KEY,
             transaction_id text NOT NULL,
             partition_id uuid NOT NULL,
             payload jsonb,
             created_at timestamptz NOT NULL,
             status smallint NOT NULL DEFAULT 0,
             claimed_at timestamptz,
             lease_id uuid);
         INSERT INTO {s}.jobs (id, transaction_id, partition_id, payload, created_at)
         SELECT gen_random_uuid(), gen_random_uuid()::text,
                md5((i % {partitions})::text)::uuid,
                jsonb_build_object('message', 'Hello World', 'seq', i, 'pad', repeat('x', {pad})),
                now() + i * interval '1 microsecond'
           FROM generate_series(1, {rows}) AS i;
         CREATE INDEX ON {s}.jobs (created_at, id) WHERE status = 0;"
    ))?;
    c.batch_execute(&format!("VACUUM ANALYZE {s}.jobs"))?;
    c.batch_execute("CHECKPOINT")
}

/// One client: loops `mode` with batches of `batch` until `phase` is STOP,
/// counting only what completes while it is MEASURE. Sets `exhausted` when a
/// claim finds no ready row.
pub fn client_loop(
    dsn: &str,
    schema: &str,
    mode: Claim,
    batch: usize,
    phase: &AtomicU8,
    exhausted: &AtomicBool,
) -> Stats {
    let mut st = Stats::default();
    let mut c = match Client::connect(dsn, NoTls) {
        Ok(c) => c,
        Err(e) => {
            st.errors.transport("connect", &e);
            return st;
        }
    };
    let s = schema;
    let claim_sql = format!(
        "WITH c AS (SELECT id FROM {s}.jobs WHERE status = 0 ORDER BY created_at, id \
                    LIMIT $1 FOR UPDATE SKIP LOCKED) \
         UPDATE {s}.jobs j SET status = 1, claimed_at = now(), lease_id = $2 FROM c \
          WHERE j.id = c.id RETURNING j.id, j.transaction_id, j.payload::text"
    );
    let ack_sql = format!("UPDATE {s}.jobs SET status = 2 WHERE id = ANY($1) AND lease_id = $2");
    let (claim, ack) = match (c.prepare(&claim_sql), c.prepare(&ack_sql)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            st.errors.transport("prepare", &e);
            return st;
        }
    };
    let limit = batch as i64;
    while phase.load(Ordering::Acquire) != STOP {
        let lease = Uuid::new_v4();
        let t = Instant::now();
        let rows = match c.query(&claim, &[&limit, &lease]) {
            Ok(r) => r,
            Err(e) => {
                st.errors.transport("claim", &e);
                continue;
            }
        };
        if rows.is_empty() {
            exhausted.store(true, Ordering::Release);
            break;
        }
        let mut commits = 1;
        if mode == Claim::ClaimAck {
            let ids: Vec<Uuid> = rows.iter().map(|r| r.get(0)).collect();
            if let Err(e) = c.execute(&ack, &[&ids, &lease]) {
                st.errors.transport("ack", &e);
                continue;
            }
            commits = 2;
        }
        let elapsed = t.elapsed();
        if phase.load(Ordering::Acquire) == MEASURE {
            st.rows += rows.len() as u64;
            st.commits += commits;
            st.lat.record_us(elapsed.as_micros() as u64);
        }
    }
    st
}
