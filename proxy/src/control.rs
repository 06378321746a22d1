//! The control thread: the only code that talks to the control database
//! while the proxy serves. It connects, applies the schema, `LISTEN`s on
//! `queen_proxy_inval`, loads a [`Snapshot`] and publishes it; every
//! notice (a control-plane call committed) reloads it, so a new key, a
//! revoked key or a status change reaches every shard within one round trip.
//!
//! # Threads and ownership
//! One plain thread (`control`) owns the PostgreSQL connection. It publishes
//! through [`Control`], shared by `Arc` with every shard: an `ArcSwap` of the
//! current snapshot (shards load it lock-free per request) and the time of
//! the last good answer from the database (an atomic). Shards never write.
//!
//! While the database does not answer, the last snapshot keeps serving for
//! `QUEEN_PROXY_STALE_GRACE_MS` after the last good answer; past that (and
//! before the first load) [`Control::current`] gives `None` and requests are
//! answered 503. A lost notice costs at most [`REFRESH`] of staleness.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use postgres::fallible_iterator::FallibleIterator;

use crate::config::PxDb;
use crate::pxdb::{self, schema};
use crate::snapshot::{self, Snapshot};

/// The notice channel every control-plane function notifies.
pub const CHANNEL: &str = "queen_proxy_inval";
/// Wait for notices this long, then check the connection is alive.
const PING_EVERY: Duration = Duration::from_millis(500);
/// Reload even without a notice this often (a notice lost on a reconnect).
const REFRESH: Duration = Duration::from_secs(30);
/// Pause between connection attempts while the database is down.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// The published control state; see the module doc.
#[derive(Debug)]
pub struct Control {
    /// The current snapshot (None until the first load).
    snapshot: ArcSwapOption<Snapshot>,
    /// Milliseconds since `epoch` of the last good database answer.
    last_ok_ms: AtomicU64,
    /// The zero of `last_ok_ms`.
    epoch: Instant,
    /// How long a snapshot serves past the last good answer.
    grace: Duration,
}

impl Control {
    /// The snapshot to serve from, unless it is staler than the grace.
    pub fn current(&self) -> Option<Arc<Snapshot>> {
        let snap = self.snapshot.load_full()?;
        let last = Duration::from_millis(self.last_ok_ms.load(Ordering::Acquire));
        let age = self.epoch.elapsed().saturating_sub(last);
        (age <= self.grace).then_some(snap)
    }

    fn mark_ok(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_ok_ms.store(now, Ordering::Release);
    }
}

/// Starts the control thread.
pub fn start(cfg: PxDb, grace: Duration) -> Arc<Control> {
    let control = Arc::new(Control {
        snapshot: ArcSwapOption::empty(),
        last_ok_ms: AtomicU64::new(0),
        epoch: Instant::now(),
        grace,
    });
    let shared = control.clone();
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || run(&cfg, &shared))
        .expect("spawn the control thread (the OS refused a thread at boot)");
    control
}

/// Connects, serves notices until the connection fails, reconnects; forever.
fn run(cfg: &PxDb, control: &Control) {
    let mut down_logged = false;
    loop {
        match session(cfg, control) {
            Ok(()) => {}
            Err(e) if !down_logged => {
                log::warn!("control database: {e}; serving the cached snapshot meanwhile");
                down_logged = true;
            }
            Err(e) => log::debug!("control database: {e}"),
        }
        std::thread::sleep(RECONNECT_PAUSE);
        if control.snapshot.load().is_some() && control.current().is_none() {
            log::error!("control database down past QUEEN_PROXY_STALE_GRACE_MS: answering 503");
        }
    }
}

/// One connection's life; returns when it fails.
fn session(cfg: &PxDb, control: &Control) -> Result<(), String> {
    let mut client = pxdb::connect(cfg)?;
    if let Err(e) = schema::apply(&mut client) {
        if let schema::SchemaError::Changed(line) = &e {
            eprintln!("queen-proxy: {line}");
            std::process::exit(1);
        }
        return Err(e.to_string());
    }
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .map_err(|e| pxdb::describe(&e))?;
    reload(&mut client, control)?;
    log::info!("control database connected; listening on {CHANNEL}");
    let mut loaded = Instant::now();
    loop {
        let first = client.notifications().timeout_iter(PING_EVERY).next();
        let got = match first {
            Ok(Some(_)) => {
                // Coalesce: one reload for every notice already queued.
                while let Ok(Some(_)) = client.notifications().iter().next() {}
                true
            }
            Err(e) => return Err(pxdb::describe(&e)),
            Ok(None) => false,
        };
        if got || loaded.elapsed() >= REFRESH {
            reload(&mut client, control)?;
            loaded = Instant::now();
        } else {
            client
                .simple_query("SELECT 1")
                .map_err(|e| pxdb::describe(&e))?;
            control.mark_ok();
        }
    }
}

fn reload(client: &mut postgres::Client, control: &Control) -> Result<(), String> {
    let snap = snapshot::load(client)?;
    log::debug!(
        "control snapshot: {} clusters, {} keys, {} users",
        snap.clusters.len(),
        snap.keys.len(),
        snap.users.len()
    );
    control.snapshot.store(Some(Arc::new(snap)));
    control.mark_ok();
    Ok(())
}
