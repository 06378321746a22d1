//! # Queen
//! A partitioned message broker on PostgreSQL, thread-per-core, speaking the
//! Queen MQ HTTP API.
//!
//! # Layout
//! `docs/architecture.md` is the guided tour; this section is the per-module detail.
//! The modules in the order their layers stand, top first: each imports
//! only modules on its own line's level or below (modules on one line do not
//! import each other), and `shards/`, the runtime crate, sits under them all.
//! After the dash, the thread that runs it.
//! - `main` (this file): boot, the channels, shutdown order. — main
//! - `serve`: a shard's start-up and life: builds its `Shard`, spawns its
//!   drains, metrics sampler, jobs (shard 0) and spool replay, serves HTTP. — shards
//! - `api`: one file per HTTP endpoint; `api/mod.rs` lists the routes
//!   (timers: `api/timers.rs`, their op validation `api/timers_ops.rs`);
//!   `api/streams/` the stream queries, cycles and state reads (their SQL in
//!   `sql/functions/streams.sql`); `api/ephemeral/` the ephemeral routes
//!   and their forwarding to the owning broker; `api/kv/` the KV's routes
//!   and its op validation (`locks`, `kv_switch` beside them). — shards
//! - `dashboard`, `jobs`: the embedded dashboard and its routes; the
//!   background job schedule (retention, eviction, lease reclaim, stats
//!   roll-up, cleanup, the timer firing job `jobs/timers.rs`, the KV expiry
//!   sweep and the KV/timers switch recheck). — shards; jobs on shard 0,
//!   their SQL on the DB threads (the KV and timer ones on the KV pool)
//! - `shard`: a shard's state and its methods: the `Shard`, push and ack
//!   lanes, long-poll waiters, its caches; `shard::ephemeral`, the
//!   ephemeral (RAM-only) queues' rings of the partitions the shard owns,
//!   their hand-over between shards and their sweep; the broker's KV/timers
//!   kill switches (`shard::kv_switch`). — shards
//! - `metrics`, `auth`: per-shard counters (stream cycles and their latency
//!   histogram among them), the board that sums them, the
//!   rate sampler's ring, the cached DB snapshot and the JSON / Prometheus
//!   rendering; JWT checks with the per-shard token cache, and tenancy
//!   (`DEFAULT_TENANT`). — shards; the JWKS refetch on the `jwks` thread
//! - `spool`, `error`: the per-shard disk spool, its replay task and the
//!   maintenance flags; `ApiError` and its one mapping to HTTP. — shards
//! - `store`, `mesh`: the DB thread group, typed jobs, schema apply, the KV
//!   pool (`store::kv_pool`: its own connections, closures via
//!   `DbClient::kv_run`, KV/lock calls group-committed via
//!   `DbClient::kv_group_call` and `store::kv_group`), and the shards' `DbClient`; the notice fan-out and
//!   the peer links. — DB and KV threads (`DbClient` on the shards); mesh threads
//! - `config`: the boot configuration, aggregated from the settings each
//!   module below parses itself; its module doc gives the order. — main
//! - `env`: the environment reader (`Env`, `ConfigError`, hex decoding),
//!   below every settings parser; imports nothing of the crate. — main
//! - `crypto`, `tls`, `ids`, `logging`, `heap`: payload encryption, the
//!   HTTPS listener's certificate, UUIDs, the log sink, the heap's arena cap
//!   and trim. — any
//!
//! The allocator is the system's (glibc malloc, no `#[global_allocator]`).
//! mimalloc was chosen when every push item was a JSON tree and glibc with
//! two arenas spent ~45% of the CPU in malloc; once items became typed
//! (`store::PushItem`), glibc with its default arenas peaked 2-11 MiB lower
//! than mimalloc in every `bench/rss.sh` scenario at the same or better
//! throughput and broker CPU (bench/RESULTS.md, session 17). Since session
//! 21 the heap has two arenas (`heap::ARENAS`): 1.4-3 MiB less peak RSS,
//! for up to 10% of drain throughput on 2 cores (`heap`'s note).
//!
//! # Threads and ownership
//! - main: parses the config, creates every channel, starts the DB group,
//!   the mesh thread and the shards (in that order), waits for SIGTERM/SIGINT,
//!   then stops them in reverse order.
//! - shard i (glommio executor pinned to core i) owns one `Shard`: all of
//!   that shard's state, `Rc`/`RefCell`/`Cell`, never shared. Its fields:
//!   - `id`, `cfg`: which shard it is, its copy of the configuration;
//!   - `db`: its `DbClient` (the requests awaiting a DB reply), shared with
//!     its lanes, spool replay and snapshot refresh;
//!   - `waiters`: parked pops by queue;
//!   - `lanes`, `ack_lanes`: push and ack fusion lanes by tenant;
//!   - `queues`: cached queue settings of the push path (`encryptionEnabled`);
//!   - `tokens`: validated JWTs;
//!   - `autopilot`: the pop width controller's lanes;
//!   - `conflation`: groups' cached conflation policies;
//!   - `db_snapshot`: the cached DB part of a Prometheus scrape;
//!   - `spool`: its spool segments, partition order map and maintenance
//!     flags, shared with its replay task;
//!   - `counters`: its writing handle on its metrics slot, and its per-queue
//!     counters;
//!   - `mesh`, `siblings`, `mesh_state`, `stopping`: its end of the queue to
//!     the mesh thread (for peers), every shard's notice inbox (a notice goes
//!     straight to the other shards), the mesh's atomics (read only), its
//!     shutdown signal;
//!   - `eph`: its ephemeral rings (only the partitions `owner::shard_of`
//!     gives it; a request on another shard is handed over on this shard's
//!     ephemeral inbox), its copy of the declarations, its mesh member table
//!     (beacons), the queue-wide long-poll signals, every shard's ephemeral
//!     inbox sender.
//!   - `kv_switch`: the broker's KV/timers kill switches (shared, below).
//!
//!   Its tasks (`serve`) hold the `Shard` by `Rc`; the sampler and the push
//!   lanes hold it weakly.
//! - db-boot and db-n (`store::db_group`): the r2d2 pool and the ready and
//!   stop flags; reached only through the bounded job queue, answering on
//!   the asking shard's inbox.
//! - kv-n (`store::kv_pool`, started by the DB group): the KV pool's own
//!   connections and bounded queue, running closures for the timers and
//!   the KV jobs (`DbClient::kv_run`) and groups of KV/lock calls, one
//!   commit each (`DbClient::kv_group_call`), answering on the same inboxes.
//! - mesh (not pinned: it carries only peer notices, shards notify each
//!   other directly), and with the TCP mesh its dialer, reader and listener
//!   threads: the peer links and each batch's dedup; `MeshState` (atomics
//!   they write and shards read); the listener's `mesh::admission` slots
//!   (handshaking and authenticated inbound connections, behind a mutex the
//!   listener and inbound threads share, never a shard).
//! - jwks (`auth::jwks`, only with `JWT_JWKS_URL`): fetches the key set.
//!
//! Process-wide state, and why it is not a shard's:
//! - `metrics::ephemeral::EphGauges` (an `Arc` main makes): the bytes of
//!   every shard's ephemeral rings in one atomic (the broker-wide RAM ceiling
//!   is checked against it, so one queue on one shard may use all of it) and
//!   each shard's published depths;
//! - `metrics::Board` (an `Arc` main makes, not a static): a slot per shard,
//!   written by its owner only, read by a scrape on any shard, so no scrape
//!   has to message the other shards;
//! - `shard::kv_switch::KvSwitch` (an `Arc` main makes): the KV/timers kill
//!   switches are one fact per broker, so a switch stored by the shard that
//!   took the POST is seen by every shard at once;
//! - `spool::stats` (static): every shard's spool gauges, read whole by
//!   `/api/v1/status/buffers`, the metrics and the maintenance answers on
//!   whichever shard serves them;
//! - `crypto` (static cipher): one key installed at boot, read by every shard
//!   and never written again, so it needs no lock and no per-shard copy;
//! - `auth::jwks` (static key set): fetched by the one `jwks` thread and
//!   swapped whole, read by every shard: one fetch serves them all;
//! - `ids` (static last id): ids strictly increase across all shards (a
//!   partition's messages are ordered by id), so the counter is one;
//! - `store::db_group` (static link flag): one "lost"/"back" log line for
//!   the whole group, not one per DB thread;
//! - `heap` (static last-trim time): the heap is the process's, so its
//!   once-a-second trim is too;
//! - `logging`: the `log` crate takes one logger per process; `dashboard`'s
//!   asset tag is a constant computed once.
//!
//! No lock is shared between a shard and another thread (the per-queue
//! metrics slot is the one mutex, held only to copy a pointer); everything
//! that crosses threads is a message on a bounded channel created before the
//! executors start: the DB job queue and reply inboxes, the mesh queue and
//! notice inboxes, and each shard's ephemeral hand-over inbox (any shard →
//! the partition's owner, answered on a oneshot).

#![warn(missing_docs, missing_debug_implementations)]

mod api;
mod auth;
mod config;
mod crypto;
mod dashboard;
mod env;
mod error;
mod heap;
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
    heap::limit_arenas();
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
    let mesh_listener = match mesh::bind(&cfg.mesh) {
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
    cfg.db.pg.tls.log_boot();
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
    let (eph_tx, eph_rx): (Vec<_>, Vec<_>) = (0..cfg.nr_shards)
        .map(|_| inbox(shard::ephemeral::handover::EPH_INBOX_DEPTH))
        .unzip();
    let eph_gauges = metrics::ephemeral::EphGauges::new(cfg.nr_shards);
    let (mesh_tx, mesh_rx) = mesh::channel();
    let (trigger, shutdown) = shards::shutdown::shutdown();

    let (db, jobs, kv_jobs) = store::db_group::DbGroup::start(&cfg.db, reply_tx);
    let kv_switch = Arc::new(shard::kv_switch::KvSwitch::default());
    let stats = metrics::Board::new(cfg.nr_shards);
    let mesh = mesh::start(
        &cfg.mesh,
        &cfg.server_id,
        mesh_listener,
        mesh_rx,
        notice_tx.clone(),
    );
    let eph_me = shard::ephemeral::owner::Member {
        id: cfg.server_id.clone(),
        http: eph_http_addr(&cfg),
        boot: mesh.state().boot,
    };
    let inits: Vec<serve::ShardInit> = reply_rx
        .into_iter()
        .zip(notice_rx)
        .zip(eph_rx)
        .map(|((replies, notices), eph_inbox)| serve::ShardInit {
            cfg: cfg.clone(),
            replies,
            notices,
            jobs: jobs.clone(),
            kv_jobs: kv_jobs.clone(),
            kv_switch: kv_switch.clone(),
            mesh: mesh_tx.clone(),
            siblings: notice_tx.clone(),
            mesh_state: mesh.state(),
            shutdown: shutdown.clone(),
            stats: stats.clone(),
            eph_inbox,
            eph: shard::EphLinks {
                inboxes: eph_tx.clone(),
                gauges: eph_gauges.clone(),
                me: eph_me.clone(),
            },
        })
        .collect();
    drop((jobs, kv_jobs, mesh_tx, eph_tx, notice_tx));
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

/// This broker's HTTP address as peers forward ephemeral requests to it:
/// the mesh's advertised host, resolved here on the main thread (a shard
/// must not block on DNS), with the HTTP port.
fn eph_http_addr(cfg: &Config) -> String {
    use std::net::ToSocketAddrs;
    let host = &cfg.mesh.advertise_host;
    let port = cfg.http_addr.port();
    match (host.as_str(), port)
        .to_socket_addrs()
        .map(|mut a| a.next())
    {
        Ok(Some(a)) => a.to_string(),
        _ => {
            log::warn!(
                "ephemeral: cannot resolve {host}; peers forward to {}",
                cfg.http_addr
            );
            cfg.http_addr.to_string()
        }
    }
}
