//! `pg-ceiling`: how many message rows per second PostgreSQL alone commits on
//! this machine, with the broker's row shape, so broker push figures can be
//! read as a fraction of the floor they stand on.
//!
//! `--conns` threads (default 8, the broker's DB pool size), each with one
//! connection, loop one multi-row INSERT of `--batch` rows per statement;
//! autocommit, so one statement = one commit, under the server's
//! `synchronous_commit`. Rows: `id uuid` (UUIDv7, made client-side as the
//! broker does), `transaction_id text` (UUIDv4 string), `partition_id uuid`
//! (one of `--partitions`, rotating per batch), `payload jsonb` (~100 bytes,
//! the same payload the broker scenarios push), `created_at timestamptz
//! default now()`; primary key `(id)`, unique `(partition_id,
//! transaction_id)`, index `(partition_id, created_at, id)`. The table lives
//! in a scratch schema that is dropped and recreated per run (and dropped
//! at the end unless `--keep`); nothing else is touched.
//!
//! `--mode claim|claimack` measures the pop side instead (`queen_bench::claim`):
//! `--claim-rows` ready rows pre-loaded, each client claiming `--batch` per
//! commit (and acking them in a second commit for `claimack`).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};
use queen_bench::args::Args;
use queen_bench::claim::{self, Claim};
use queen_bench::payload::{write_payload, Rng};
use queen_bench::procstat::Watch;
use queen_bench::report::{Errors, Lat};
use uuid::Uuid;

const USAGE: &str = "\
usage: pg-ceiling [--dsn 'host=127.0.0.1 port=5432 user=postgres dbname=postgres']
       [--conns 8] [--batch 100] [--duration 10] [--warmup 1] [--partitions 100]
       [--payload-bytes 100] [--form unnest|values] [--schema queen_bench_ceiling]
       [--pg-pid PID] [--label TEXT] [--json] [--keep]
       [--mode insert|claim|claimack] [--claim-rows 1000000]";

/// Phase values shared with the client threads (MEASURE and STOP are the
/// claim loop's too).
const WARMUP: u8 = 0;
use queen_bench::claim::{MEASURE, STOP};

/// How one INSERT carries its rows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// `INSERT … SELECT … FROM unnest($1::uuid[], …)`: 4 array parameters.
    Unnest,
    /// `INSERT … VALUES ($1,$2,$3,$4), …`: 4 parameters per row.
    Values,
}

#[derive(Debug, Clone)]
struct Opts {
    dsn: String,
    conns: usize,
    batch: usize,
    duration: Duration,
    warmup: Duration,
    partitions: usize,
    payload_bytes: usize,
    form: Form,
    schema: String,
}

/// What one client thread counted inside the window.
#[derive(Debug, Default)]
struct ClientStats {
    lat: Lat,
    rows: u64,
    commits: u64,
    errors: Errors,
}

fn setup(o: &Opts) -> Result<(), postgres::Error> {
    let mut c = Client::connect(&o.dsn, NoTls)?;
    let s = &o.schema;
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {s} CASCADE; CREATE SCHEMA {s};
         CREATE TABLE {s}.messages (
             id uuid PRIMARY KEY,
             transaction_id text NOT NULL,
             partition_id uuid NOT NULL,
             payload jsonb,
             created_at timestamptz NOT NULL DEFAULT now(),
             UNIQUE (partition_id, transaction_id));
         CREATE INDEX ON {s}.messages (partition_id, created_at, id);"
    ))
}

fn insert_sql(o: &Opts) -> String {
    let s = &o.schema;
    match o.form {
        Form::Unnest => format!(
            "INSERT INTO {s}.messages (id, transaction_id, partition_id, payload) \
             SELECT i, t, p, d::jsonb FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[]) AS u(i, t, p, d)"
        ),
        Form::Values => {
            let rows: Vec<String> = (0..o.batch)
                .map(|r| {
                    let b = r * 4;
                    format!("(${}, ${}, ${}, ${}::text::jsonb)", b + 1, b + 2, b + 3, b + 4)
                })
                .collect();
            format!(
                "INSERT INTO {s}.messages (id, transaction_id, partition_id, payload) VALUES {}",
                rows.join(", ")
            )
        }
    }
}

fn client_loop(o: &Opts, id: usize, parts: &[Uuid], phase: &AtomicU8) -> ClientStats {
    let mut st = ClientStats::default();
    let mut c = match Client::connect(&o.dsn, NoTls) {
        Ok(c) => c,
        Err(e) => {
            st.errors.transport("connect", &e);
            return st;
        }
    };
    let stmt = match c.prepare(&insert_sql(o)) {
        Ok(s) => s,
        Err(e) => {
            st.errors.transport("prepare", &e);
            return st;
        }
    };
    let mut rng = Rng::new(id as u64);
    let mut buf = Vec::with_capacity(256);
    let mut seq = (id as u64) << 40;
    let mut k = id;
    while phase.load(Ordering::Acquire) != STOP {
        let part = parts[k % parts.len()];
        k += 1;
        let ids: Vec<Uuid> = (0..o.batch).map(|_| Uuid::now_v7()).collect();
        let pids: Vec<Uuid> = vec![part; o.batch];
        let mut txids = Vec::with_capacity(o.batch);
        let mut payloads = Vec::with_capacity(o.batch);
        for _ in 0..o.batch {
            buf.clear();
            rng.write_txid(&mut buf);
            txids.push(String::from_utf8_lossy(&buf).into_owned());
            buf.clear();
            write_payload(&mut buf, seq, 0, o.payload_bytes);
            payloads.push(String::from_utf8_lossy(&buf).into_owned());
            seq += 1;
        }
        let t = Instant::now();
        let r = match o.form {
            Form::Unnest => c.execute(&stmt, &[&ids, &txids, &pids, &payloads]),
            Form::Values => {
                let mut params: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    Vec::with_capacity(o.batch * 4);
                for i in 0..o.batch {
                    params.extend_from_slice(&[&ids[i], &txids[i], &pids[i], &payloads[i]]);
                }
                c.execute(&stmt, &params)
            }
        };
        let elapsed = t.elapsed();
        match r {
            Ok(n) if phase.load(Ordering::Acquire) == MEASURE => {
                st.rows += n;
                st.commits += 1;
                st.lat.record_us(elapsed.as_micros() as u64);
            }
            Ok(_) => {}
            Err(e) => st.errors.transport("insert", &e),
        }
    }
    st
}

fn setting(c: &mut Client, name: &str) -> String {
    c.query_one(&format!("SHOW {name}"), &[])
        .map(|r| r.get::<_, String>(0))
        .unwrap_or_else(|_| "?".into())
}

fn run(words: &[String]) -> Result<ExitCode, String> {
    let a = Args::parse(words).map_err(|e| e.to_string())?;
    if a.switch("help") {
        println!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    }
    let s = |e: queen_bench::args::ArgError| e.to_string();
    let form = match a.get("form", "unnest".to_string()).map_err(s)?.as_str() {
        "unnest" => Form::Unnest,
        "values" => Form::Values,
        other => return Err(format!("--form {other}: expected unnest or values")),
    };
    let mode = match a.get("mode", "insert".to_string()).map_err(s)?.as_str() {
        "insert" => None,
        "claim" => Some(Claim::Claim),
        "claimack" => Some(Claim::ClaimAck),
        other => {
            return Err(format!(
                "--mode {other}: expected insert, claim or claimack"
            ))
        }
    };
    let claim_rows: u64 = a
        .get("claim-rows", 1_000_000u64)
        .map_err(s)?
        .clamp(1, 10_000_000);
    let o = Opts {
        dsn: a
            .get(
                "dsn",
                "host=127.0.0.1 port=5432 user=postgres dbname=postgres".to_string(),
            )
            .map_err(s)?,
        conns: a.get("conns", 8usize).map_err(s)?.max(1),
        batch: a.get("batch", 100usize).map_err(s)?.clamp(1, 10_000),
        duration: Duration::from_secs_f64(a.get("duration", 10.0f64).map_err(s)?),
        warmup: Duration::from_secs_f64(a.get("warmup", 1.0f64).map_err(s)?),
        partitions: a.get("partitions", 100usize).map_err(s)?.max(1),
        payload_bytes: a.get("payload-bytes", 100usize).map_err(s)?,
        form,
        schema: a
            .get("schema", "queen_bench_ceiling".to_string())
            .map_err(s)?,
    };
    if !o
        .schema
        .chars()
        .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
    {
        return Err(format!("--schema {:?}: use [a-z0-9_]", o.schema));
    }
    let pg_pid: Option<u32> = a.get_opt("pg-pid").map_err(s)?;
    let label = a.get("label", String::new()).map_err(s)?;
    let (json, keep) = (a.switch("json"), a.switch("keep"));
    a.finish().map_err(|e| e.to_string())?;

    match mode {
        None => setup(&o),
        Some(_) => claim::setup(&o.dsn, &o.schema, claim_rows, o.partitions, o.payload_bytes),
    }
    .map_err(|e| format!("setup: {e}"))?;
    let mut admin = Client::connect(&o.dsn, NoTls).map_err(|e| format!("connect: {e}"))?;
    let settings = serde_json::json!({
        "synchronous_commit": setting(&mut admin, "synchronous_commit"),
        "fsync": setting(&mut admin, "fsync"),
        "shared_buffers": setting(&mut admin, "shared_buffers"),
        "server_version": setting(&mut admin, "server_version"),
    });
    let _ = admin.batch_execute("CHECKPOINT");

    let parts: Arc<Vec<Uuid>> = Arc::new((0..o.partitions).map(|_| Uuid::new_v4()).collect());
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let exhausted = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..o.conns)
        .map(|i| {
            let (o, parts, phase, exhausted) =
                (o.clone(), parts.clone(), phase.clone(), exhausted.clone());
            thread::spawn(move || match mode {
                None => client_loop(&o, i, &parts, &phase),
                Some(m) => {
                    let st = claim::client_loop(&o.dsn, &o.schema, m, o.batch, &phase, &exhausted);
                    ClientStats {
                        lat: st.lat,
                        rows: st.rows,
                        commits: st.commits,
                        errors: st.errors,
                    }
                }
            })
        })
        .collect();
    thread::sleep(o.warmup);
    phase.store(MEASURE, Ordering::Release);
    let t0 = Instant::now();
    let window = Watch { pid: None, pg_pid }.start();
    thread::sleep(o.duration);
    phase.store(STOP, Ordering::Release);
    let secs = t0.elapsed().as_secs_f64();
    let proc = window.finish();
    let mut total = ClientStats::default();
    for t in threads {
        if let Ok(st) = t.join() {
            total.lat.merge(&st.lat);
            total.rows += st.rows;
            total.commits += st.commits;
            total.errors.merge(&st.errors);
        }
    }
    if !keep {
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", o.schema));
    }
    let lat = total.lat.summary();
    let form_name = if o.form == Form::Unnest {
        "unnest"
    } else {
        "values"
    };
    let (scenario, what) = mode.map_or(("pg-insert", "INSERT"), Claim::names);
    let exhausted = exhausted.load(Ordering::Acquire);
    let form_label = if mode.is_none() {
        format!(" ({form_name})")
    } else {
        String::new()
    };
    let line = serde_json::json!({
        "scenario": scenario,
        "key": format!("{what} b{} c{}", o.batch, o.conns),
        "exhausted": exhausted,
        "label": label,
        "params": { "batch": o.batch, "conns": o.conns, "partitions": o.partitions,
                    "duration_s": o.duration.as_secs_f64(), "payload_bytes": o.payload_bytes,
                    "form": form_name, "claim_rows": mode.map(|_| claim_rows) },
        "duration_s": secs,
        "rows": total.rows,
        "rows_per_s": total.rows as f64 / secs,
        "commits_per_s": total.commits as f64 / secs,
        "commit_latency": lat,
        "errors": total.errors.total(),
        "error_samples": total.errors.samples,
        "pg_cpu_pct": proc.pg_cpu_pct,
        "client_cpu_pct": proc.bench_cpu_pct,
        "machine_busy_pct": proc.machine_busy_pct,
        "settings": settings,
    });
    eprintln!(
        "{what} b{} c{}{form_label} {:>10.0} rows/s {:>8.0} commits/s  commit p50 {:.2} p99 {:.2} max {:.2} ms  cpu%: pg {} client {:.0}  errors {}",
        o.batch,
        o.conns,
        total.rows as f64 / secs,
        total.commits as f64 / secs,
        lat.p50_ms,
        lat.p99_ms,
        lat.max_ms,
        proc.pg_cpu_pct.map_or("-".into(), |c| format!("{c:.0}")),
        proc.bench_cpu_pct,
        total.errors.total()
    );
    if exhausted {
        eprintln!("  EXHAUSTED: the pre-loaded rows ran out inside the window; raise --claim-rows");
    }
    for s in &total.errors.samples {
        eprintln!("  error: {s}");
    }
    if json {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().skip(1).collect();
    match run(&words) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("pg-ceiling: {msg}");
            ExitCode::from(1)
        }
    }
}
