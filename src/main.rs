//! # Queen
//! A partitioned message broker on PostgreSQL, thread-per-core, speaking the
//! Queen MQ HTTP API.
//!
//! # Layout
//! - `config`: the boot configuration from the environment (main thread).
//! - `api`: one file per HTTP endpoint; `api/mod.rs` lists the routes (shards).
//! - `shard`: a shard's state: DB hand-off, push lanes, long-poll waiters (shards).
//! - `store`: the DB thread group, typed jobs, schema apply (DB threads).
//! - `mesh`: the notice fan-out thread (mesh thread).
//! - `spool`: the per-shard disk spool, its replay and the maintenance flags (shards).
//! - `ids`, `error`, `logging`: UUIDv7 minting, errors → HTTP, the log sink.
//!
//! # Threads and ownership
//! - main: parses the config, creates every channel, starts the DB group,
//!   the mesh thread and the shards (in that order), waits for SIGTERM/SIGINT,
//!   then stops them in reverse order.
//! - shard i (glommio executor pinned to core i): owns its listener,
//!   connections, push lanes and waiters (`Rc`/`RefCell`, never shared).
//! - db-n: blocking PostgreSQL work; reached only through the bounded job
//!   queue, answering on the asking shard's inbox.
//! - mesh: forwards notices between shards.
//!
//! No lock is shared between a shard and another thread; everything that
//! crosses threads is a message on a bounded channel created before the
//! executors start.

#![warn(missing_docs, missing_debug_implementations)]

mod alloc;
mod api;
mod auth;
mod config;
mod crypto;
mod dashboard;
mod error;
mod ids;
mod jobs;
mod logging;
mod mesh;
mod metrics;
mod serve;
mod shard;
mod spool;
mod store;
mod tls;

use config::Config;
use shards::inbox::inbox;
use shards::ShardId;
use std::sync::Arc;

/// Bound of each shard's DB reply inbox. A DB thread that finds it full
/// waits for the shard to drain it (shards never wait on DB threads, so this
/// cannot deadlock); its slots are allocated up front, so it is kept to what
/// the DB job queue can hold in flight for one shard at a time, not more.
const REPLY_INBOX_DEPTH: usize = 2048;

fn main() {
    alloc::init();
    let cfg = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("queen: {e}");
            std::process::exit(1);
        }
    };
    logging::init(cfg.log_level);
    if let Err(e) = shards::listen::probe_port_free(cfg.http_addr) {
        eprintln!(
            "queen: cannot listen on {}: {e} (port in use?)",
            cfg.http_addr
        );
        std::process::exit(1);
    }
    // The mesh listener is bound here, before any thread starts (issue 5).
    let mesh_listener = match mesh::bind(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "queen: cannot listen on mesh port {}: {e} (port in use?)",
                cfg.mesh.addr
            );
            std::process::exit(1);
        }
    };
    if let Err(e) = shards::shutdown::block_signals() {
        eprintln!("queen: cannot block signals: {e}");
        std::process::exit(1);
    }
    log::info!(
        "Queen {} starting: {}",
        env!("CARGO_PKG_VERSION"),
        cfg.describe()
    );
    cfg.pg.tls.log_boot();
    log::info!("{}", cfg.auth.boot_line());
    auth::jwks::start(&cfg.auth);
    crypto::install(&cfg.encryption);
    match &cfg.encryption {
        crypto::KeyState::Valid(_) => log::info!("Encryption service initialized (AES-256-GCM)"),
        crypto::KeyState::Invalid(why) => log::warn!("{why}"),
        crypto::KeyState::Unset => log::info!(
            "encryption at rest: off (QUEEN_ENCRYPTION_KEY unset; queues with encryptionEnabled store plaintext)"
        ),
    }
    let cfg = Arc::new(cfg);

    let (reply_tx, reply_rx): (Vec<_>, Vec<_>) =
        (0..cfg.nr_shards).map(|_| inbox(REPLY_INBOX_DEPTH)).unzip();
    let (notice_tx, notice_rx): (Vec<_>, Vec<_>) = (0..cfg.nr_shards)
        .map(|_| inbox(mesh::SHARD_INBOX_DEPTH))
        .unzip();
    let (mesh_tx, mesh_rx) = mesh::channel();
    let (trigger, shutdown) = shards::shutdown::shutdown();

    let (db, jobs) = store::db_group::DbGroup::start(&cfg, reply_tx);
    let stats = metrics::Board::new(cfg.nr_shards);
    let mesh = mesh::start(&cfg, mesh_listener, mesh_rx, notice_tx);
    let inits: Vec<serve::ShardInit> = reply_rx
        .into_iter()
        .zip(notice_rx)
        .map(|(replies, notices)| serve::ShardInit {
            cfg: cfg.clone(),
            replies,
            notices,
            jobs: jobs.clone(),
            mesh: mesh_tx.clone(),
            mesh_state: mesh.state(),
            shutdown: shutdown.clone(),
            stats: stats.clone(),
        })
        .collect();
    drop((jobs, mesh_tx));
    let pool = match shards::pool::PoolBuilder::new(cfg.nr_shards)
        .name("shard")
        .spawn(inits, |id: ShardId, init: serve::ShardInit| {
            serve::run(id, init)
        }) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("queen: cannot start shards: {e}");
            std::process::exit(1);
        }
    };
    log::info!(
        "listening on {}://{} with {} shards",
        if cfg.tls.is_some() { "https" } else { "http" },
        cfg.http_addr,
        cfg.nr_shards
    );
    shards::shutdown::wait_for_signals(trigger);
    log::info!("shutdown requested: finishing in-flight requests");
    if let Err(e) = pool.join() {
        log::error!("a shard ended badly: {e}");
    }
    // Reverse start order: the shards are done, so nothing submits work any more.
    mesh.stop();
    db.stop();
    log::info!("stopped");
}
