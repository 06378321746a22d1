//! The mesh handshake: both sides prove knowledge of `QUEEN_SYNC_SECRET`
//! over fresh nonces from both sides, then derive per-connection direction
//! keys for the per-frame MACs (`frame`). Runs on the mesh peer threads.
//!
//! # Exchange (all frames `seq` 0)
//! ```text
//! dialer   -> HELLO      payload {v, serverId, advertise, boot, nonce: Nc}  mac: zeros
//! acceptor -> HELLO_ACK  payload {v, serverId: "", advertise: "", boot, nonce: Ns}
//!                        mac = HMAC(S, "queen-mesh/1 accept" | HELLO | HELLO_ACK)
//! dialer   -> AUTH       payload empty
//!                        mac = HMAC(S, "queen-mesh/1 auth" | HELLO | HELLO_ACK | ack mac | AUTH)
//! keys: dialer→acceptor K = HMAC(S, "queen-mesh/1 c2s" | Nc | Ns), the other way "s2c"
//! ```
//! (`HELLO` etc. mean the frame bytes before the MAC.) A captured HELLO/AUTH
//! replayed on a new connection meets a new `Ns`, so its AUTH fails; a
//! captured HELLO_ACK meets a new `Nc`. Decision (replacing SEC-31's
//! timestamp MAC and closing SEC-32): no clock is involved, and every later
//! frame is authenticated. With no secret the same exchange runs with an
//! empty HMAC key: frames are checked for corruption and order but anyone can
//! connect (the boot log says so).
//!
//! The acceptor names neither its server id nor its address in HELLO_ACK:
//! the dialer has not proved the secret yet, and the fields stay (empty) so
//! that brokers of the previous version still parse it. The dialer knows
//! whom it dialed. The whole exchange has one deadline,
//! [`HANDSHAKE_DEADLINE`]: a per-read timeout alone let a connection that
//! sends a byte a second hold its slot for ever.

use super::frame::{mac, mac_eq, signed_bytes, write_frame, FrameError, FrameReader, Kind};
use super::frame::{Opener, Sealer, MAC_LEN};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::net::TcpStream;
use std::time::Instant;

/// The bound of a whole handshake, either side: three round trips on any
/// network a mesh spans take milliseconds, and a slot held by a silent or
/// trickling connection is free again after this.
pub const HANDSHAKE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// Protocol version in HELLO.
pub const PROTOCOL_VERSION: u32 = 1;
/// Nonce length in bytes.
const NONCE_LEN: usize = 32;

/// What a HELLO announces.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerInfo {
    /// Protocol version.
    pub v: u32,
    /// `QUEEN_SERVER_ID` of the sender.
    pub server_id: String,
    /// `QUEEN_MESH_ADVERTISE_HOST:QUEEN_MESH_PORT` of the sender.
    pub advertise: String,
    /// Per-boot nonce: a restarted peer is a new peer.
    pub boot: u64,
    /// Fresh connection nonce, hex.
    pub nonce: String,
}

/// This broker's side of the handshake.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `QUEEN_SERVER_ID`.
    pub server_id: String,
    /// Advertised `host:port`.
    pub advertise: String,
    /// Per-boot nonce.
    pub boot: u64,
    /// The shared secret (empty: unauthenticated).
    pub secret: Vec<u8>,
}

/// An established, authenticated connection's MAC state.
#[derive(Debug)]
pub struct Session {
    /// Sending direction.
    pub sealer: Sealer,
    /// Receiving direction.
    pub opener: Opener,
    /// What the peer announced.
    pub remote: PeerInfo,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A HELLO (`named`: with this broker's id and address) or a HELLO_ACK payload.
fn info(me: &Identity, nonce: &[u8; NONCE_LEN], named: bool) -> Vec<u8> {
    let name = |v: &String| if named { v.clone() } else { String::new() };
    let i = PeerInfo {
        v: PROTOCOL_VERSION,
        server_id: name(&me.server_id),
        advertise: name(&me.advertise),
        boot: me.boot,
        nonce: hex(nonce),
    };
    // Serialising a struct of strings and integers cannot fail.
    serde_json::to_vec(&i).expect("PeerInfo serialises")
}

fn parse_info(payload: &[u8]) -> Result<(PeerInfo, Vec<u8>), FrameError> {
    let i: PeerInfo =
        serde_json::from_slice(payload).map_err(|_| FrameError::Malformed("HELLO payload"))?;
    if i.v != PROTOCOL_VERSION {
        return Err(FrameError::Malformed("unsupported protocol version"));
    }
    let n = crate::env::decode_hex(&i.nonce)
        .filter(|n| n.len() == NONCE_LEN)
        .ok_or(FrameError::Malformed("HELLO nonce"))?;
    Ok((i, n))
}

fn keys(secret: &[u8], nc: &[u8], ns: &[u8]) -> ([u8; MAC_LEN], [u8; MAC_LEN]) {
    (
        mac(secret, &[b"queen-mesh/1 c2s", nc, ns]),
        mac(secret, &[b"queen-mesh/1 s2c", nc, ns]),
    )
}

/// A reader that gives each read only the time left before `until`, so a
/// frame trickled in byte by byte still ends at the deadline.
struct Deadline<'a> {
    s: &'a mut TcpStream,
    until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.s.set_read_timeout(Some(left))?;
        self.s.read(buf)
    }
}

fn expect(
    s: &mut TcpStream,
    r: &mut FrameReader,
    kind: Kind,
    until: Instant,
) -> Result<super::frame::RawFrame, FrameError> {
    let f = r
        .next(&mut Deadline { s, until })?
        .ok_or(FrameError::Malformed("handshake timed out"))?;
    if f.kind != kind || f.seq != 0 {
        return Err(FrameError::Malformed("unexpected frame in the handshake"));
    }
    Ok(f)
}

/// Runs the dialer's side on a fresh connection, within [`HANDSHAKE_DEADLINE`].
pub fn dial(s: &mut TcpStream, r: &mut FrameReader, me: &Identity) -> Result<Session, FrameError> {
    let until = Instant::now() + HANDSHAKE_DEADLINE;
    let nc: [u8; NONCE_LEN] = rand::random();
    let hello = signed_bytes(Kind::Hello, 0, &info(me, &nc, true));
    write_frame(s, hello.clone(), &[0; MAC_LEN]).map_err(FrameError::Io)?;
    let ack = expect(s, r, Kind::HelloAck, until)?;
    let (remote, ns) = parse_info(ack.payload())?;
    let proof = mac(&me.secret, &[b"queen-mesh/1 accept", &hello, &ack.signed]);
    if !mac_eq(&proof, &ack.mac) {
        return Err(FrameError::BadHandshake(
            "acceptor's proof does not verify (wrong secret?)",
        ));
    }
    let auth = signed_bytes(Kind::Auth, 0, b"");
    let proof = mac(
        &me.secret,
        &[b"queen-mesh/1 auth", &hello, &ack.signed, &ack.mac, &auth],
    );
    write_frame(s, auth, &proof).map_err(FrameError::Io)?;
    let (c2s, s2c) = keys(&me.secret, &nc, &ns);
    Ok(Session {
        sealer: Sealer::new(c2s),
        opener: Opener::new(s2c),
        remote,
    })
}

/// Runs the acceptor's side on a fresh connection, within [`HANDSHAKE_DEADLINE`].
pub fn accept(
    s: &mut TcpStream,
    r: &mut FrameReader,
    me: &Identity,
) -> Result<Session, FrameError> {
    let until = Instant::now() + HANDSHAKE_DEADLINE;
    let hello = expect(s, r, Kind::Hello, until)?;
    let (remote, nc) = parse_info(hello.payload())?;
    let ns: [u8; NONCE_LEN] = rand::random();
    let ack = signed_bytes(Kind::HelloAck, 0, &info(me, &ns, false));
    let ack_mac = mac(&me.secret, &[b"queen-mesh/1 accept", &hello.signed, &ack]);
    write_frame(s, ack.clone(), &ack_mac).map_err(FrameError::Io)?;
    let auth = expect(s, r, Kind::Auth, until)?;
    let proof = mac(
        &me.secret,
        &[
            b"queen-mesh/1 auth",
            &hello.signed,
            &ack,
            &ack_mac,
            &auth.signed,
        ],
    );
    if !mac_eq(&proof, &auth.mac) {
        return Err(FrameError::BadHandshake(
            "dialer's proof does not verify (wrong secret or replayed handshake)",
        ));
    }
    let (c2s, s2c) = keys(&me.secret, &nc, &ns);
    Ok(Session {
        sealer: Sealer::new(s2c),
        opener: Opener::new(c2s),
        remote,
    })
}
