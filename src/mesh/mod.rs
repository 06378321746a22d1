//! The mesh: carries notices (hints, never data) between the shards of this
//! broker and between brokers on one database.
//!
//! # Layout
//! - `mod.rs` (this file): the fan-out thread, boot ([`bind`], [`start`]).
//! - `notice`: [`Notice`], what travels, and its [`Delivered`] form in a shard's inbox.
//! - `config`: the `QUEEN_MESH_*` / `QUEEN_SYNC_*` settings ([`MeshConfig`]).
//! - `admission`: which inbound connections get a thread (handshake and peer slots).
//! - `frame`: wire framing, per-frame MACs and sequence numbers.
//! - `auth`: the HELLO handshake proving `QUEEN_SYNC_SECRET` over fresh
//!   nonces from both sides, and the per-connection key derivation.
//! - `peer`: the dialer, reader, listener and inbound threads.
//! - `state`: peer states and counters, read by `GET /api/v1/system/shared-state`.
//!
//! # Threads and ownership
//! A shard puts its notice straight into every other shard's inbox (no
//! thread between a commit on one shard and a long poll parked on another;
//! issue 18) and, when the TCP side runs, sends it on one
//! bounded crossbeam queue to the `mesh` thread (`try_send`; a full queue
//! drops the hint, which only costs latency because parked pops also recheck
//! on a timer). The mesh thread drains that queue and the queue of notices
//! from peers in batches, drops repeats within a batch, sends each local
//! notice, encoded once per batch, to every peer's dialer queue, and each
//! peer's notice to every local shard, never back out to peers (one hop:
//! every broker dials every peer it lists).
//! The TCP side (`peer`) runs on plain threads with blocking sockets, only
//! when `QUEEN_SYNC_ENABLED` and `QUEEN_MESH_PEERS` is non-empty (SEC-30).
//!
//! # Decisions
//! - [`Notice`] is an externally tagged serde enum, so any variant shape
//!   crosses brokers; a receiver skips variants it does not know.
//! - The mesh is never the only path: a lost notice costs latency, never a
//!   message (parked pops recheck on `POP_WAIT_*`).

pub mod admission;
pub mod auth;
pub mod config;
pub mod frame;
pub mod notice;
pub mod peer;
pub mod state;

pub use config::MeshConfig;
use crossbeam_channel::{Receiver, Sender};
pub use notice::{Delivered, EphNotice, Notice};
use shards::inbox::InboxSender;
use state::MeshState;
use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Bound of the shard → mesh queue. Notices are hints that the mesh thread
/// coalesces per queue, and a full queue only drops hints (long polls fall
/// back to their recheck), so depth buys nothing past a few drain rounds;
/// the ring's slots are allocated and touched up front, so depth is resident
/// memory (65,536 slots cost megabytes of RSS at idle).
pub const NOTICE_QUEUE_DEPTH: usize = 4096;
/// Bound of each shard's notice inbox: one coalesced notice per queue per
/// fan-out round lands here.
pub const SHARD_INBOX_DEPTH: usize = 1024;
/// Bound of the peers → fan-out queue (as the shard → mesh queue: both are hints).
const REMOTE_QUEUE_DEPTH: usize = 4096;
/// Encoded notice batches queued per peer dialer; a slower peer loses hints,
/// never blocks the fan-out.
const PEER_QUEUE_DEPTH: usize = 1024;
/// Notices drained per round before fanning out.
const DRAIN_BATCH: usize = 1024;
/// Largest notice payload per frame, leaving room for the frame header and MAC.
const MAX_PAYLOAD: usize = frame::MAX_FRAME_BYTES - 1024;

/// How often an idle mesh thread looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The running mesh thread.
#[derive(Debug)]
pub struct Mesh {
    /// The fan-out thread.
    thread: JoinHandle<()>,
    /// Set by `stop` once the shards ended (detached shard tasks may still
    /// hold senders, so the channel closing cannot be relied on). The peer
    /// threads see it too and end within a heartbeat; they are not joined.
    stop: Arc<AtomicBool>,
    /// Peer states and counters.
    state: Arc<MeshState>,
}

impl Mesh {
    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }

    /// The shared peer states and counters (for shards to read).
    pub fn state(&self) -> Arc<MeshState> {
        self.state.clone()
    }
}

/// Binds the mesh listener when the TCP side runs: a plain, non-reuse bind,
/// so a second broker on the same mesh port fails boot ("port in use").
pub fn bind(m: &MeshConfig) -> std::io::Result<Option<TcpListener>> {
    if !m.tcp_active() {
        return Ok(None);
    }
    TcpListener::bind(m.addr).map(Some)
}

/// Starts the mesh thread (and, with a listener, the TCP side); `server_id`
/// is this broker's identity in the HELLO.
pub fn start(
    m: &MeshConfig,
    server_id: &str,
    listener: Option<TcpListener>,
    rx: Receiver<Notice>,
    shards: Vec<InboxSender<Delivered>>,
) -> Mesh {
    let tcp = listener.is_some();
    let peers = if tcp { m.peers.clone() } else { Vec::new() };
    let state = Arc::new(MeshState::new(
        tcp,
        if tcp {
            m.addr.to_string()
        } else {
            String::new()
        },
        !m.secret.is_empty(),
        &peers,
        m.dead_threshold,
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let (remote_tx, remote_rx) = crossbeam_channel::bounded(REMOTE_QUEUE_DEPTH);
    let mut peer_txs = Vec::new();
    if let Some(l) = listener {
        let advertise = format!("{}:{}", m.advertise_host, m.addr.port());
        if m.secret.is_empty() {
            log::warn!(
                "mesh: UNAUTHENTICATED (QUEEN_SYNC_SECRET unset): anyone who reaches {} can \
                 inject notices; set the secret or firewall the port to the other brokers",
                m.addr
            );
        } else {
            log::info!("mesh: authenticated (HMAC-SHA256 handshake and per-frame MACs)");
        }
        log::info!(
            "mesh: listening on {} as {advertise}; peers: {}",
            m.addr,
            peers.join(",")
        );
        let ctx = Arc::new(peer::PeerCtx {
            state: state.clone(),
            me: auth::Identity {
                server_id: server_id.to_string(),
                advertise,
                boot: state.boot,
                secret: m.secret.clone(),
            },
            remote: remote_tx,
            heartbeat: m.heartbeat,
            stop: stop.clone(),
            log_budget: std::sync::Mutex::new((0, 0)),
            log_suppressed: Default::default(),
        });
        peer::start_listener(ctx.clone(), l);
        for i in 0..peers.len() {
            let (tx, rx) = crossbeam_channel::bounded(PEER_QUEUE_DEPTH);
            peer_txs.push(tx);
            peer::start_dialer(ctx.clone(), i, rx);
        }
    } else {
        drop(remote_tx);
        log::info!("mesh: local fan-out only (QUEEN_SYNC_ENABLED off or QUEEN_MESH_PEERS empty)");
    }
    let fan = FanOut {
        shards,
        peers: peer_txs,
        state: state.clone(),
    };
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("mesh".into())
        .spawn(move || run(rx, remote_rx, fan, flag))
        .expect("spawning a thread at boot");
    Mesh {
        thread,
        stop,
        state,
    }
}

/// Creates the shard → mesh queue.
pub fn channel() -> (Sender<Notice>, Receiver<Notice>) {
    crossbeam_channel::bounded(NOTICE_QUEUE_DEPTH)
}

/// Where the fan-out thread sends notices.
struct FanOut {
    /// Every shard's notice inbox.
    shards: Vec<InboxSender<Delivered>>,
    /// Every peer dialer's queue of encoded notice payloads.
    peers: Vec<Sender<Arc<Vec<u8>>>>,
    /// Counters.
    state: Arc<MeshState>,
}

/// What one wait of the fan-out thread produced.
enum Event {
    /// A shard's notice (`None`: the shards' queue closed).
    Local(Option<Notice>),
    /// A peer's notice (`None`: the peer queue closed).
    Remote(Option<Notice>),
    /// Nothing within [`STOP_POLL`].
    Idle,
}

fn run(
    mut local: Receiver<Notice>,
    mut remote: Receiver<Notice>,
    fan: FanOut,
    stop: Arc<AtomicBool>,
) {
    let mut mine: Vec<Notice> = Vec::with_capacity(DRAIN_BATCH);
    let mut theirs: Vec<Notice> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let ev = crossbeam_channel::select! {
            recv(local) -> m => Event::Local(m.ok()),
            recv(remote) -> m => Event::Remote(m.ok()),
            default(STOP_POLL) => Event::Idle,
        };
        match ev {
            Event::Local(Some(e)) => mine.push(e),
            Event::Remote(Some(n)) => theirs.push(n),
            Event::Local(None) => local = crossbeam_channel::never(),
            Event::Remote(None) => remote = crossbeam_channel::never(),
            Event::Idle => continue,
        }
        while mine.len() < DRAIN_BATCH {
            match local.try_recv() {
                Ok(e) => mine.push(e),
                Err(_) => break,
            }
        }
        while theirs.len() < DRAIN_BATCH {
            match remote.try_recv() {
                Ok(n) => theirs.push(n),
                Err(_) => break,
            }
        }
        fan.local(&mut mine);
        fan.remote(&mut theirs);
    }
}

impl FanOut {
    /// Sends a batch of this broker's notices to the peers, each once (the
    /// other shards of this broker had it from the sending shard already).
    fn local(&self, batch: &mut Vec<Notice>) {
        let mut for_peers: HashSet<&Notice> = HashSet::new();
        let mut unique: Vec<&Notice> = Vec::new();
        for n in batch.iter() {
            if for_peers.insert(n) {
                unique.push(n);
            }
        }
        if !self.peers.is_empty() {
            for payload in encode(&unique) {
                let payload = Arc::new(payload);
                for p in &self.peers {
                    if p.try_send(payload.clone()).is_err() {
                        self.state
                            .counters
                            .nr_notices_dropped
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        batch.clear();
    }

    /// Fans a batch of peers' notices to every local shard (never back to peers).
    fn remote(&self, batch: &mut Vec<Notice>) {
        let mut seen: HashSet<&Notice> = HashSet::new();
        for n in batch.iter() {
            if seen.insert(n) {
                for inbox in &self.shards {
                    let _ = inbox.try_send((n.clone(), None));
                }
            }
        }
        batch.clear();
    }
}

/// Encodes notices as JSON arrays of at most [`MAX_PAYLOAD`] bytes each.
fn encode(notices: &[&Notice]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cur = b"[".to_vec();
    for n in notices {
        // A notice of strings and integers always serialises.
        let item = serde_json::to_vec(n).expect("Notice serialises");
        if item.len() + 2 > MAX_PAYLOAD {
            log::warn!(
                "mesh: a notice of {} bytes is too large to forward",
                item.len()
            );
            continue;
        }
        if cur.len() + item.len() + 2 > MAX_PAYLOAD {
            cur.push(b']');
            out.push(std::mem::replace(&mut cur, b"[".to_vec()));
        }
        if cur.len() > 1 {
            cur.push(b',');
        }
        cur.extend_from_slice(&item);
    }
    if cur.len() > 1 {
        cur.push(b']');
        out.push(cur);
    }
    out
}
