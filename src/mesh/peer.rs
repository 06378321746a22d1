//! Mesh connections to and from peer brokers: plain std threads with
//! blocking sockets (never a shard). Bounded: one dialer plus one reader
//! thread per configured peer, one listener thread, and inbound connection
//! threads within the caps of [`super::admission`].
//!
//! # Roles
//! - The **dialer** of peer `i` connects to it (backoff between attempts),
//!   runs the handshake as dialer and then writes this broker's notices
//!   (handed over by the fan-out thread on a bounded queue) and a heartbeat
//!   whenever it sent nothing for `QUEEN_SYNC_HEARTBEAT_MS`. Its reader
//!   thread reads the peer's heartbeats on the same connection: they are
//!   what "alive" means. A peer silent past `QUEEN_SYNC_DEAD_THRESHOLD_MS` is
//!   dead; the dialer then drops the connection and dials again, and the
//!   peer is alive again as soon as it speaks (decision: dead is derived from
//!   silence, not from a lost connection, so a quick restart never flaps).
//! - An **inbound** thread runs the handshake as acceptor, delivers the
//!   dialer's notices to the fan-out thread (so to local shards only, never
//!   echoed to peers) and sends heartbeats back.
//! - Any frame that fails (MAC, sequence, size, kind, payload) closes its
//!   connection, raises a counter in [`MeshState`] and writes one log line.

use super::admission::{Admission, Refusal, Slot};
use super::auth::{self, Identity, Session};
use super::frame::{FrameError, FrameReader, Kind, Opener, RawFrame, Sealer};
use super::notice::Notice;
use super::state::MeshState;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connect attempt's bound.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Socket timeouts while handshaking; the whole handshake is bounded by
/// [`auth::HANDSHAKE_DEADLINE`], which sets each read's timeout itself.
const HANDSHAKE_TIMEOUT: Duration = auth::HANDSHAKE_DEADLINE;
/// First pause after a failed dial; doubles up to [`RECONNECT_MAX`].
const RECONNECT_INITIAL: Duration = Duration::from_millis(100);
/// Longest pause between dials: a restarted peer is found within this.
const RECONNECT_MAX: Duration = Duration::from_secs(2);
/// How often the listener looks at the stop flag.
const ACCEPT_POLL_MS: i32 = 100;
/// Rejection log lines per second; past it lines are counted and the next
/// logged line says how many were suppressed, so a peer flooding garbage
/// cannot flood the log (its counters still rise one by one).
const REJECT_LOGS_PER_SEC: u64 = 10;

/// What every peer thread shares.
#[derive(Debug)]
pub struct PeerCtx {
    /// Counters and peer states.
    pub state: Arc<MeshState>,
    /// This broker's handshake identity.
    pub me: Identity,
    /// Notices from peers, to the fan-out thread.
    pub remote: Sender<Notice>,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// Set when the broker stops.
    pub stop: Arc<AtomicBool>,
    /// Rejection log budget: (second since the epoch, lines logged in it).
    pub log_budget: std::sync::Mutex<(u64, u64)>,
    /// Rejection lines not logged since the last logged one.
    pub log_suppressed: AtomicU64,
}

impl PeerCtx {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Counts a failed connection and writes its one log line.
    fn reject(&self, who: &str, e: &FrameError) {
        let c = &self.state.counters;
        let counter = match e {
            FrameError::Closed | FrameError::Io(_) => {
                log::debug!("mesh: {who}: {e}");
                return;
            }
            FrameError::BadLength(_) => &c.nr_oversized,
            FrameError::UnknownKind(_) | FrameError::Malformed(_) => &c.nr_malformed,
            FrameError::BadMac => &c.nr_bad_mac,
            FrameError::BadSequence { .. } => &c.nr_bad_sequence,
            FrameError::BadHandshake(_) => &c.nr_bad_handshake,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        // The lock is held by mesh peer threads only, for a few instructions.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut b = self.log_budget.lock().unwrap_or_else(|p| p.into_inner());
        if b.0 != now {
            *b = (now, 0);
        }
        b.1 += 1;
        if b.1 > REJECT_LOGS_PER_SEC {
            self.log_suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        drop(b);
        match self.log_suppressed.swap(0, Ordering::Relaxed) {
            0 => log::warn!("mesh: {who}: {e}; connection closed"),
            n => log::warn!("mesh: {who}: {e}; connection closed ({n} similar lines suppressed)"),
        }
    }

    /// Verifies a frame and hands its notices to the fan-out thread.
    fn receive(&self, opener: &mut Opener, f: &RawFrame) -> Result<(), FrameError> {
        opener.open(f)?;
        self.state
            .counters
            .nr_frames_in
            .fetch_add(1, Ordering::Relaxed);
        if f.kind != Kind::Notices {
            return Ok(());
        }
        // Items are parsed one by one: a notice kind from a newer broker is
        // skipped, not a reason to drop the connection (rolling upgrades).
        let items: Vec<serde_json::Value> =
            serde_json::from_slice(f.payload()).map_err(|_| FrameError::Malformed("notices"))?;
        for n in items
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
        {
            self.state
                .counters
                .nr_notices_in
                .fetch_add(1, Ordering::Relaxed);
            // A full queue drops the hint; parked pops recheck on a timer.
            let _ = self.remote.try_send(n);
        }
        Ok(())
    }
}

/// Sleeps `d` in short steps, returning early on stop.
fn nap(ctx: &PeerCtx, d: Duration) {
    let end = Instant::now() + d;
    while !ctx.stopping() && Instant::now() < end {
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) {
    if let Err(e) = std::thread::Builder::new().name(name).spawn(f) {
        log::error!("mesh: cannot spawn a thread: {e}");
    }
}

/// Starts the dialer of configured peer `i`; `rx` carries encoded notice payloads.
pub fn start_dialer(ctx: Arc<PeerCtx>, i: usize, rx: Receiver<Arc<Vec<u8>>>) {
    spawn(format!("mesh-peer-{i}"), move || dialer(&ctx, i, &rx));
}

fn dialer(ctx: &Arc<PeerCtx>, i: usize, rx: &Receiver<Arc<Vec<u8>>>) {
    let addr = ctx.state.peers[i].addr.clone();
    let mut backoff = RECONNECT_INITIAL;
    let mut failing = false;
    while !ctx.stopping() {
        match connect(ctx, &addr) {
            Ok((s, r, session)) => {
                if session.remote.boot == ctx.state.boot {
                    ctx.state.peers[i].is_self.store(true, Ordering::Relaxed);
                    log::info!("mesh: peer {addr} is this broker; not dialing it");
                    return;
                }
                failing = false;
                backoff = RECONNECT_INITIAL;
                if !run_outbound(ctx, i, s, r, session, rx) {
                    return;
                }
            }
            Err(e) => {
                if matches!(e, FrameError::Io(_) | FrameError::Closed) {
                    if !failing {
                        log::info!("mesh: cannot reach peer {addr}: {e}; retrying with backoff");
                    }
                } else {
                    ctx.reject(&format!("peer {addr}"), &e);
                }
                failing = true;
            }
        }
        // Notices queued while down are stale hints; keep only fresh ones.
        while rx.try_recv().is_ok() {}
        nap(ctx, backoff);
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

fn connect(ctx: &PeerCtx, addr: &str) -> Result<(TcpStream, FrameReader, Session), FrameError> {
    let sa = addr
        .to_socket_addrs()
        .map_err(FrameError::Io)?
        .next()
        .ok_or(FrameError::Malformed("peer address resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&sa, CONNECT_TIMEOUT).map_err(FrameError::Io)?;
    s.set_nodelay(true).map_err(FrameError::Io)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(FrameError::Io)?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(FrameError::Io)?;
    let mut r = FrameReader::default();
    let session = auth::dial(&mut s, &mut r, &ctx.me)?;
    Ok((s, r, session))
}

/// Serves one established outbound connection; false when the broker stops.
fn run_outbound(
    ctx: &Arc<PeerCtx>,
    i: usize,
    s: TcpStream,
    mut r: FrameReader,
    session: Session,
    rx: &Receiver<Arc<Vec<u8>>>,
) -> bool {
    let p = &ctx.state.peers[i];
    // The acceptor does not name itself in the handshake; its address does.
    let who = format!("peer {}", p.addr);
    let old = p.remote_boot.swap(session.remote.boot, Ordering::Relaxed);
    log::info!(
        "mesh: peer up: connected to {who}{}",
        if old != 0 && old != session.remote.boot {
            " (restarted)"
        } else {
            ""
        }
    );
    ctx.state.heard(i);
    p.connected.store(true, Ordering::Relaxed);
    p.nr_connects.fetch_add(1, Ordering::Relaxed);
    let down = Arc::new(AtomicBool::new(false));
    let reader = s.try_clone().ok().map(|mut rs| {
        let (ctx, down, who) = (ctx.clone(), down.clone(), who.clone());
        let mut opener = session.opener;
        let _ = rs.set_read_timeout(Some(ctx.heartbeat));
        std::thread::Builder::new()
            .name(format!("mesh-peer-{i}-rd"))
            .spawn(move || {
                while !ctx.stopping() && !down.load(Ordering::Acquire) {
                    match r.next(&mut rs) {
                        Ok(None) => {}
                        Ok(Some(f)) => match ctx.receive(&mut opener, &f) {
                            Ok(()) => ctx.state.heard(i),
                            Err(e) => {
                                ctx.reject(&who, &e);
                                break;
                            }
                        },
                        Err(e) => {
                            ctx.reject(&who, &e);
                            break;
                        }
                    }
                }
                down.store(true, Ordering::Release);
                let _ = rs.shutdown(Shutdown::Both);
            })
    });
    let mut w = s;
    let _ = w.set_write_timeout(Some(ctx.state.dead_threshold));
    let mut sealer: Sealer = session.sealer;
    let mut last_sent = Instant::now();
    let mut running = true;
    while !ctx.stopping() && !down.load(Ordering::Acquire) {
        let wait = ctx.heartbeat.saturating_sub(last_sent.elapsed());
        let frame = match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
            Ok(payload) => {
                p.nr_frames_out.fetch_add(1, Ordering::Relaxed);
                sealer.seal(Kind::Notices, &payload)
            }
            Err(RecvTimeoutError::Timeout) if last_sent.elapsed() >= ctx.heartbeat => {
                sealer.seal(Kind::Heartbeat, b"")
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                running = false;
                break;
            }
        };
        if let Err(e) = w.write_all(&frame) {
            log::info!("mesh: {who}: write failed: {e}; reconnecting");
            break;
        }
        last_sent = Instant::now();
        if ctx
            .state
            .silence(i)
            .is_some_and(|d| d > ctx.state.dead_threshold)
        {
            log::warn!("mesh: {who}: silent past the dead threshold; reconnecting");
            break;
        }
    }
    down.store(true, Ordering::Release);
    let _ = w.shutdown(Shutdown::Both);
    if let Some(Ok(h)) = reader {
        let _ = h.join();
    }
    p.connected.store(false, Ordering::Relaxed);
    if running && !ctx.stopping() {
        log::warn!("mesh: peer down: {who}; reconnecting with backoff");
    }
    running && !ctx.stopping()
}

/// Starts the listener thread on the bound mesh socket.
pub fn start_listener(ctx: Arc<PeerCtx>, listener: TcpListener) {
    spawn("mesh-listen".into(), move || listen(&ctx, listener));
}

fn listen(ctx: &Arc<PeerCtx>, listener: TcpListener) {
    if let Err(e) = listener.set_nonblocking(true) {
        log::error!("mesh: listener: {e}; not accepting peers");
        return;
    }
    let slots = Arc::new(Admission::default());
    while !ctx.stopping() {
        match listener.accept() {
            Ok((s, from)) => match slots.admit(from.ip()) {
                Err(why) => refuse(ctx, &slots, s, from, why),
                Ok(slot) => {
                    // The thread owns the slot: a spawn that fails drops the
                    // closure, and with it the slot, so nothing leaks.
                    let (ctx, slots) = (ctx.clone(), slots.clone());
                    spawn("mesh-in".into(), move || {
                        inbound(&ctx, &slots, slot, s, from)
                    });
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut pfd = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd on a socket this thread owns.
                unsafe { libc::poll(&mut pfd, 1, ACCEPT_POLL_MS) };
            }
            Err(e) => {
                log::warn!("mesh: accept failed: {e}");
                nap(ctx, Duration::from_millis(100));
            }
        }
    }
}

/// Closes a connection that got no slot: counted always, logged once per burst.
fn refuse(ctx: &PeerCtx, slots: &Admission, s: TcpStream, from: SocketAddr, why: Refusal) {
    let _ = s.shutdown(Shutdown::Both);
    ctx.state
        .counters
        .nr_refused
        .fetch_add(1, Ordering::Relaxed);
    match slots.refused(Instant::now()) {
        Some(0) => log::warn!(
            "mesh: refusing {from}: {why}; further refusals in this burst are counted, not logged"
        ),
        Some(n) => log::warn!(
            "mesh: refusing {from}: {why} ({n} refused unlogged in the burst before); \
             further refusals in this burst are counted, not logged"
        ),
        None => {}
    }
}

fn inbound(ctx: &PeerCtx, slots: &Admission, mut slot: Slot, s: TcpStream, from: SocketAddr) {
    if let Some((s, r, session)) = inbound_handshake(ctx, slots, &mut slot, s, from) {
        serve_inbound(ctx, s, r, session, &from.to_string());
    }
    // `slot` is dropped here (or while unwinding): its place is given back.
}

/// The acceptor's handshake under a handshake slot; on success the slot
/// becomes a peer slot (or the connection is refused when none is free).
fn inbound_handshake(
    ctx: &PeerCtx,
    slots: &Admission,
    slot: &mut Slot,
    mut s: TcpStream,
    from: SocketAddr,
) -> Option<(TcpStream, FrameReader, Session)> {
    let mut r = FrameReader::default();
    let setup = s
        .set_nonblocking(false)
        .and_then(|_| s.set_nodelay(true))
        .and_then(|_| s.set_read_timeout(Some(HANDSHAKE_TIMEOUT)))
        .and_then(|_| s.set_write_timeout(Some(HANDSHAKE_TIMEOUT)));
    let outcome = match setup {
        Err(e) => {
            log::debug!("mesh: {from}: {e}");
            None
        }
        Ok(()) => match auth::accept(&mut s, &mut r, &ctx.me) {
            Ok(x) => Some(x),
            Err(e) => {
                ctx.reject(&format!("inbound {from}"), &e);
                None
            }
        },
    };
    let session = outcome?;
    match slot.authenticated() {
        Ok(()) => Some((s, r, session)),
        Err(why) => {
            refuse(ctx, slots, s, from, why);
            None
        }
    }
}

/// Serves one authenticated inbound connection until it ends.
fn serve_inbound(
    ctx: &PeerCtx,
    mut s: TcpStream,
    mut r: FrameReader,
    session: Session,
    from: &str,
) {
    let who = format!("inbound {from} ({})", session.remote.server_id);
    log::info!("mesh: {who} connected");
    ctx.state.nr_inbound.fetch_add(1, Ordering::Relaxed);
    let (mut sealer, mut opener) = (session.sealer, session.opener);
    // Half the heartbeat: the reply heartbeat is due at most that late.
    let _ = s.set_read_timeout(Some(ctx.heartbeat / 2));
    let _ = s.set_write_timeout(Some(ctx.state.dead_threshold));
    let (mut last_sent, mut last_heard) = (Instant::now(), Instant::now());
    while !ctx.stopping() {
        match r.next(&mut s) {
            Ok(None) => {}
            Ok(Some(f)) => match ctx.receive(&mut opener, &f) {
                Ok(()) => last_heard = Instant::now(),
                Err(e) => {
                    ctx.reject(&who, &e);
                    break;
                }
            },
            Err(e) => {
                ctx.reject(&who, &e);
                break;
            }
        }
        if last_heard.elapsed() > ctx.state.dead_threshold {
            log::warn!("mesh: {who}: silent past the dead threshold; closing");
            break;
        }
        if last_sent.elapsed() >= ctx.heartbeat {
            if let Err(e) = s.write_all(&sealer.seal(Kind::Heartbeat, b"")) {
                log::debug!("mesh: {who}: {e}");
                break;
            }
            last_sent = Instant::now();
        }
    }
    let _ = s.shutdown(Shutdown::Both);
    ctx.state.nr_inbound.fetch_sub(1, Ordering::Relaxed);
}
