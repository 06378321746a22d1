//! What the mesh knows about its peers and how its frames fared: atomics
//! written by the mesh threads and read (never locked) by shards answering
//! `GET /api/v1/system/shared-state`.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// One configured peer, as its dialer thread sees it.
#[derive(Debug)]
pub struct PeerState {
    /// `host:port` from `QUEEN_MESH_PEERS`.
    pub addr: String,
    /// An authenticated connection is up.
    pub connected: AtomicBool,
    /// Last valid frame from it, in ms since the mesh epoch plus one (0: never).
    last_heard: AtomicU64,
    /// The boot nonce it announced last (0: none yet).
    pub remote_boot: AtomicU64,
    /// Handshakes that succeeded.
    pub nr_connects: AtomicU64,
    /// Notice frames sent to it.
    pub nr_frames_out: AtomicU64,
    /// The entry points at this broker itself (detected by the boot nonce).
    pub is_self: AtomicBool,
}

/// Rejection and traffic counters (all brokers' connections summed).
#[derive(Debug, Default)]
pub struct Counters {
    /// Handshake proofs that failed (wrong secret, replayed HELLO).
    pub nr_bad_handshake: AtomicU64,
    /// Frames whose MAC failed (altered or forged).
    pub nr_bad_mac: AtomicU64,
    /// Frames with a sequence number out of order (replayed, dropped, reordered).
    pub nr_bad_sequence: AtomicU64,
    /// Frames announcing a length above the bound.
    pub nr_oversized: AtomicU64,
    /// Frames of unknown kind, out of place or unparseable.
    pub nr_malformed: AtomicU64,
    /// Inbound connections refused for want of a handshake or peer slot (`admission`).
    pub nr_refused: AtomicU64,
    /// Valid frames received after the handshake.
    pub nr_frames_in: AtomicU64,
    /// Notices received from peers.
    pub nr_notices_in: AtomicU64,
    /// Notices not forwarded to a peer because its queue was full.
    pub nr_notices_dropped: AtomicU64,
}

/// The mesh's shared, lock-free state.
#[derive(Debug)]
pub struct MeshState {
    /// Whether the TCP side runs.
    pub tcp: bool,
    /// Listener address (when `tcp`).
    pub listen: String,
    /// Whether a secret authenticates the mesh.
    pub authenticated: bool,
    /// This broker's boot nonce.
    pub boot: u64,
    /// Configured peers, in `QUEEN_MESH_PEERS` order.
    pub peers: Vec<PeerState>,
    /// Counters.
    pub counters: Counters,
    /// Authenticated inbound connections open now.
    pub nr_inbound: AtomicUsize,
    /// Silence after which a peer is dead.
    pub dead_threshold: Duration,
    /// Time base of `last_heard`.
    epoch: Instant,
}

impl MeshState {
    /// State for the configured peers.
    pub fn new(
        tcp: bool,
        listen: String,
        authenticated: bool,
        peers: &[String],
        dead_threshold: Duration,
    ) -> MeshState {
        MeshState {
            tcp,
            listen,
            authenticated,
            boot: rand::random::<u64>().max(1),
            peers: peers
                .iter()
                .map(|a| PeerState {
                    addr: a.clone(),
                    connected: AtomicBool::new(false),
                    last_heard: AtomicU64::new(0),
                    remote_boot: AtomicU64::new(0),
                    nr_connects: AtomicU64::new(0),
                    nr_frames_out: AtomicU64::new(0),
                    is_self: AtomicBool::new(false),
                })
                .collect(),
            counters: Counters::default(),
            nr_inbound: AtomicUsize::new(0),
            dead_threshold,
            epoch: Instant::now(),
        }
    }

    /// Records that peer `i` spoke now.
    pub fn heard(&self, i: usize) {
        let ms = self.epoch.elapsed().as_millis() as u64 + 1;
        self.peers[i].last_heard.store(ms, Relaxed);
    }

    /// How long peer `i` has been silent (`None`: never heard).
    pub fn silence(&self, i: usize) -> Option<Duration> {
        match self.peers[i].last_heard.load(Relaxed) {
            0 => None,
            ms => Some(
                self.epoch
                    .elapsed()
                    .saturating_sub(Duration::from_millis(ms - 1)),
            ),
        }
    }

    /// Whether peer `i` spoke within the dead threshold.
    pub fn alive(&self, i: usize) -> bool {
        self.silence(i).is_some_and(|s| s < self.dead_threshold)
    }

    /// The JSON snapshot for `/api/v1/system/shared-state`.
    pub fn snapshot(&self) -> Value {
        let c = &self.counters;
        let peers: Vec<Value> = self
            .peers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let state = if p.is_self.load(Relaxed) {
                    "self"
                } else if self.alive(i) {
                    "alive"
                } else {
                    "dead"
                };
                json!({
                    "address": p.addr,
                    "state": state,
                    "connected": p.connected.load(Relaxed),
                    "silentMs": self.silence(i).map(|d| d.as_millis() as u64),
                    "boot": p.remote_boot.load(Relaxed),
                    "connects": p.nr_connects.load(Relaxed),
                    "framesOut": p.nr_frames_out.load(Relaxed),
                })
            })
            .collect();
        json!({
            "mesh": {
                "tcp": self.tcp,
                "listen": self.listen,
                "authenticated": self.authenticated,
                "boot": self.boot,
                "deadThresholdMs": self.dead_threshold.as_millis() as u64,
                "inboundConnections": self.nr_inbound.load(Relaxed),
                "peers": peers,
                "counters": {
                    "badHandshake": c.nr_bad_handshake.load(Relaxed),
                    "badMac": c.nr_bad_mac.load(Relaxed),
                    "badSequence": c.nr_bad_sequence.load(Relaxed),
                    "oversized": c.nr_oversized.load(Relaxed),
                    "malformed": c.nr_malformed.load(Relaxed),
                    "refusedConnections": c.nr_refused.load(Relaxed),
                    "framesIn": c.nr_frames_in.load(Relaxed),
                    "noticesIn": c.nr_notices_in.load(Relaxed),
                    "noticesDropped": c.nr_notices_dropped.load(Relaxed),
                },
            }
        })
    }
}
