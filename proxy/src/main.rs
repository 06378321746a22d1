//! `queen-proxy`: the front door of a Queen broker (proxy.md). It terminates
//! TLS, resolves the cluster from the Host, classifies every route against a
//! fail-closed table, authenticates API keys and session tokens, rewrites
//! the identity headers and forwards to the cluster's broker over pooled
//! keep-alive connections. `queen-proxy admin …` is its control plane.
//!
//! # Layout
//!
//! `docs/architecture.md` places the proxy in the whole system.
//!
//! | module      | owns                                                    | runs on          |
//! |-------------|---------------------------------------------------------|------------------|
//! | `config`    | `Config` from the environment, defaults, boot checks    | main             |
//! | `cli`       | the command line (clap)                                 | main             |
//! | `admin`     | one control-plane call per `admin` command              | main             |
//! | `pxdb`      | control database connection and schema (`proxy/sql/`)   | control, admin   |
//! | `snapshot`  | the control plane as one immutable value, and its load  | control          |
//! | `control`   | the control thread: LISTEN, reload, stale grace         | control          |
//! | `session`   | session tokens: keys, mint, verify                      | main, shards     |
//! | `apikey`    | API key text, shape and digest                          | admin, shards    |
//! | `route`     | the classification table                                | shards           |
//! | `auth`      | credential, principal, authorization matrix             | shards           |
//! | `rewrite`   | upstream head (PX-07..10), relayed response headers     | shards           |
//! | `upstream`  | per-shard keep-alive pool and exchanges with brokers    | shards           |
//! | `limits`    | per-key rate buckets                                    | shards           |
//! | `metrics`   | per-shard counters and the Prometheus text              | shards           |
//! | `error`     | every refusal and its status/JSON                       | shards           |
//! | `shard`     | `Shard` state and the request pipeline                  | shards           |
//! | `logging`   | the stderr logger                                       | any              |
//!
//! # Threads and ownership
//!
//! - `main` reads the configuration, loads TLS and session keys, starts the
//!   control thread and the shards, then waits for SIGTERM/SIGINT.
//! - The control thread alone talks to the control database; it publishes
//!   snapshots through `control::Control` (an `ArcSwap` and an atomic).
//! - Shard `i` (a glommio executor, from the broker's `shards` runtime)
//!   owns its listener (`SO_REUSEPORT`), its connections, its upstream pool,
//!   its rate buckets and writes metrics slot `i`: `Shard` fields, `Rc` and
//!   `RefCell` only. Nothing else crosses threads.
//! - The proxy depends on `shards` only, never on the broker crate.
#![warn(missing_docs, missing_debug_implementations)]

mod admin;
mod apikey;
mod auth;
mod cli;
mod config;
mod control;
mod error;
mod limits;
mod logging;
mod metrics;
mod pxdb;
mod rewrite;
mod route;
mod session;
mod shard;
mod snapshot;
mod upstream;

use std::rc::Rc;
use std::sync::Arc;

use clap::Parser;
use shards::{ServerConfig, ShardId};

/// Per-executor I/O memory (glommio reserves ~10 MiB by default as root).
const IO_MEMORY: usize = 512 * 1024;

fn main() {
    let cli = cli::Cli::parse();
    if let Some(cli::Command::Admin(cmd)) = cli.command {
        admin::run(cmd);
    }
    serve();
}

/// Boots and serves until a signal.
fn serve() {
    let cfg = match config::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("queen-proxy: {e}");
            std::process::exit(1);
        }
    };
    logging::init(cfg.log_level);
    let tls = match &cfg.tls {
        None => None,
        Some((cert, key)) => match shards::tls::TlsSetup::from_pem_files(cert, key) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("queen-proxy: {e}");
                std::process::exit(1);
            }
        },
    };
    if let Err(e) = shards::probe_port_free(cfg.addr) {
        eprintln!(
            "queen-proxy: cannot listen on {}: {e} (port in use?)",
            cfg.addr
        );
        std::process::exit(1);
    }
    if let Err(e) = shards::block_signals() {
        eprintln!("queen-proxy: cannot block signals: {e}");
        std::process::exit(1);
    }
    log::info!(
        "queen-proxy {} starting: {}",
        env!("CARGO_PKG_VERSION"),
        cfg.describe()
    );
    if !cfg.sessions.enabled() {
        log::warn!("no session-token key (QUEEN_PROXY_JWT_SECRET / QUEEN_PROXY_JWT_ED25519_PEM): API keys only");
    }
    let mut server = ServerConfig::new(cfg.addr);
    server.max_body_bytes = cfg.max_body_bytes;
    server.tls = tls;
    let cfg = Arc::new(cfg);
    let control = control::start(cfg.pxdb.clone(), cfg.stale_grace);
    let board = Arc::new(metrics::Board::new(cfg.nr_shards));
    let (trigger, shutdown) = shards::shutdown();
    let inits: Vec<_> = (0..cfg.nr_shards)
        .map(|_| {
            (
                cfg.clone(),
                control.clone(),
                board.clone(),
                server.clone(),
                shutdown.clone(),
            )
        })
        .collect();
    let pool = shards::PoolBuilder::new(cfg.nr_shards)
        .name("proxy")
        .io_memory(IO_MEMORY)
        // Unpinned by default. A proxy request is two hops on loopback:
        // caller -> shard -> broker and back. The broker's shards are pinned;
        // a pinned proxy shard on another core makes every hop a cross-core
        // wake-up of a core that has gone idle, which on a VM is a halted
        // vCPU woken by an IPI (the +0.8 ms of a b1 push, issue 16). Left to
        // the kernel, a woken shard runs where its waker ran and the chain
        // stays on one core. The proxy has no per-core data to keep warm.
        .pin(cfg.pin_shards)
        .spawn(
            inits,
            |id: ShardId, (cfg, control, board, server, shutdown)| async move {
                let shard = Rc::new(shard::Shard::new(id, cfg, control, board));
                shard::run(shard, Rc::new(server), shutdown).await
            },
        );
    let pool = match pool {
        Ok(p) => p,
        Err(e) => {
            eprintln!("queen-proxy: cannot start shards: {e}");
            std::process::exit(1);
        }
    };
    log::info!(
        "listening on {}://{} with {} shards",
        if cfg.tls.is_some() { "https" } else { "http" },
        cfg.addr,
        cfg.nr_shards
    );
    shards::wait_for_signals(trigger);
    log::info!("shutdown requested: finishing in-flight requests");
    if let Err(e) = pool.join() {
        log::error!("a shard ended badly: {e}");
    }
    log::info!("stopped");
}
