//! The mesh's settings (config.md §9: `QUEEN_MESH_*`, `QUEEN_SYNC_*`, and
//! the older `QUEEN_UDP_*` spellings as fallbacks), parsed once at boot on
//! the main thread from the leaf `crate::env`. They govern only the TCP side:
//! the local fan-out between shards always runs. Every setting needs a restart.

use crate::env::{decode_hex, parse_bind_host, ConfigError, Env};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Mesh TCP port when neither `QUEEN_MESH_PORT` nor `QUEEN_UDP_NOTIFY_PORT`
/// is set (the Queen default: the HTTP default plus one).
pub const DEFAULT_MESH_PORT: u16 = 6633;
/// Mesh heartbeat period in ms (the Queen default): a few per dead threshold.
pub const DEFAULT_SYNC_HEARTBEAT_MS: u64 = 1000;
/// Silence in ms after which a peer counts as dead (the Queen default: five
/// missed heartbeats, so one slow heartbeat does not flap the state).
pub const DEFAULT_SYNC_DEAD_THRESHOLD_MS: u64 = 5000;
/// `QUEEN_SYNC_ENABLED` when unset (config.md §9): on, since the TCP side
/// stays inert until `QUEEN_MESH_PEERS` names a peer.
pub const DEFAULT_SYNC_ENABLED: bool = true;
/// `QUEEN_SYNC_SECRET` length in bytes (64 hex characters): the HMAC-SHA256
/// key of the handshake, as long as the hash, so no key is weaker than it.
pub const SYNC_SECRET_LEN: usize = 32;

/// The mesh's TCP side (config.md §9). Local fan-out between shards always runs.
#[derive(Clone)]
pub struct MeshConfig {
    /// `QUEEN_SYNC_ENABLED`: the TCP side on/off (inert without peers).
    pub enabled: bool,
    /// Listener address: `QUEEN_MESH_BIND_ADDR` (default: the HTTP bind host)
    /// and `QUEEN_MESH_PORT` (fallback `QUEEN_UDP_NOTIFY_PORT`).
    pub addr: SocketAddr,
    /// `QUEEN_MESH_PEERS` (fallback `QUEEN_UDP_PEERS`) as `host:port`.
    pub peers: Vec<String>,
    /// `QUEEN_MESH_ADVERTISE_HOST` (default: the OS hostname).
    pub advertise_host: String,
    /// `QUEEN_SYNC_SECRET` decoded from 64 hex chars; empty = unauthenticated.
    pub secret: Vec<u8>,
    /// `QUEEN_SYNC_HEARTBEAT_MS`.
    pub heartbeat: Duration,
    /// `QUEEN_SYNC_DEAD_THRESHOLD_MS`.
    pub dead_threshold: Duration,
}

impl MeshConfig {
    /// Whether the TCP side runs: enabled and at least one peer (SEC-30).
    pub fn tcp_active(&self) -> bool {
        self.enabled && !self.peers.is_empty()
    }

    /// Reads the mesh variables (SEC-03: the bind host follows the HTTP
    /// bind host `http_host` unless `QUEEN_MESH_BIND_ADDR` is set, and
    /// neither moves the advertised host, which defaults to `hostname`). A
    /// peer without a port uses this broker's mesh port, as brokers of one
    /// cluster run one configuration.
    pub fn from_env(
        env: &Env,
        http_host: IpAddr,
        hostname: &str,
    ) -> Result<MeshConfig, ConfigError> {
        let port: u16 = match env.non_empty("QUEEN_MESH_PORT") {
            Some(_) => env.parse("QUEEN_MESH_PORT", DEFAULT_MESH_PORT)?,
            None => env.parse("QUEEN_UDP_NOTIFY_PORT", DEFAULT_MESH_PORT)?,
        };
        let host = match env.string("QUEEN_MESH_BIND_ADDR") {
            Some(v) => parse_bind_host("QUEEN_MESH_BIND_ADDR", &v)?,
            None => http_host,
        };
        let list = env
            .non_empty("QUEEN_MESH_PEERS")
            .or_else(|| env.non_empty("QUEEN_UDP_PEERS"))
            .unwrap_or_default();
        let peers = list
            .split(',')
            .map(|p| peer_address(p, port))
            .filter(|p| !p.starts_with(':') && !p.starts_with("[]"))
            .collect();
        let secret_hex = env.string("QUEEN_SYNC_SECRET").unwrap_or_default();
        let secret_hex = secret_hex.trim();
        let secret = if secret_hex.is_empty() {
            Vec::new()
        } else {
            decode_hex(secret_hex)
                .filter(|k| k.len() == SYNC_SECRET_LEN)
                .ok_or_else(|| {
                    ConfigError::new("QUEEN_SYNC_SECRET", "must be 64 hex characters (32 bytes)")
                })?
        };
        let heartbeat = env.parse("QUEEN_SYNC_HEARTBEAT_MS", DEFAULT_SYNC_HEARTBEAT_MS)?;
        let dead = env.parse(
            "QUEEN_SYNC_DEAD_THRESHOLD_MS",
            DEFAULT_SYNC_DEAD_THRESHOLD_MS,
        )?;
        if heartbeat == 0 || dead <= heartbeat {
            return Err(ConfigError::new(
                "QUEEN_SYNC_DEAD_THRESHOLD_MS",
                format!("{dead} must exceed QUEEN_SYNC_HEARTBEAT_MS ({heartbeat}, at least 1)"),
            ));
        }
        Ok(MeshConfig {
            enabled: env.bool("QUEEN_SYNC_ENABLED", DEFAULT_SYNC_ENABLED)?,
            addr: SocketAddr::new(host, port),
            peers,
            advertise_host: env
                .non_empty("QUEEN_MESH_ADVERTISE_HOST")
                .unwrap_or_else(|| hostname.to_string()),
            secret,
            heartbeat: Duration::from_millis(heartbeat),
            dead_threshold: Duration::from_millis(dead),
        })
    }
}

/// One `QUEEN_MESH_PEERS` entry as `host:port`: an `http://` prefix and a
/// trailing `/` are dropped (the Queen spelling is a URL), and `port` is
/// added when the entry has none.
fn peer_address(p: &str, port: u16) -> String {
    let p = p.trim();
    let p = p.strip_prefix("http://").unwrap_or(p).trim_end_matches('/');
    // `[v6]:port` or `host:port`; a bare IPv6 literal has several colons.
    let has_port = (p.starts_with('[') && p.contains("]:"))
        || (!p.starts_with('[') && p.matches(':').count() == 1);
    if has_port {
        p.to_string()
    } else if p.contains(':') && !p.starts_with('[') {
        format!("[{p}]:{port}")
    } else {
        format!("{p}:{port}")
    }
}

impl fmt::Debug for MeshConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshConfig")
            .field("enabled", &self.enabled)
            .field("addr", &self.addr)
            .field("peers", &self.peers)
            .field("advertise_host", &self.advertise_host)
            .field(
                "secret",
                &if self.secret.is_empty() {
                    "<unset>"
                } else {
                    "<set>"
                },
            )
            .field("heartbeat", &self.heartbeat)
            .field("dead_threshold", &self.dead_threshold)
            .finish()
    }
}
