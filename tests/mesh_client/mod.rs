//! A raw mesh peer for tests: speaks the broker's framing and handshake
//! (src/mesh/frame.rs, src/mesh/auth.rs) byte by byte, so tests can send
//! what an honest broker never would (wrong secret, replayed HELLO, flipped
//! bits, skipped sequence numbers, oversized frames).
#![allow(dead_code)]

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Frame kinds.
pub const HELLO: u8 = 1;
/// Acceptor's HELLO.
pub const HELLO_ACK: u8 = 2;
/// Dialer's proof.
pub const AUTH: u8 = 3;
/// Liveness.
pub const HEARTBEAT: u8 = 4;
/// Notices.
pub const NOTICES: u8 = 5;
/// The broker's frame bound (frame.rs `MAX_FRAME_BYTES`).
pub const MAX_FRAME_BYTES: usize = 64 * 1024;

/// HMAC-SHA256 over the concatenation of `parts`.
pub fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The signed part of a frame: length, kind, seq, payload.
pub fn signed(kind: u8, seq: u64, payload: &[u8]) -> Vec<u8> {
    let len = 1 + 8 + payload.len() + 32;
    let mut v = (len as u32).to_be_bytes().to_vec();
    v.push(kind);
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A frame as read.
#[derive(Debug)]
pub struct Frame {
    /// Kind byte.
    pub kind: u8,
    /// Sequence number.
    pub seq: u64,
    /// Bytes covered by the MAC.
    pub signed: Vec<u8>,
    /// Trailing MAC.
    pub mac: [u8; 32],
}

/// Reads one frame (blocking, with the stream's timeout).
pub fn read_frame(s: &mut TcpStream) -> io::Result<Frame> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    let mut body = vec![0u8; n];
    s.read_exact(&mut body)?;
    let mut signed = len.to_vec();
    signed.extend_from_slice(&body[..n - 32]);
    let mut m = [0u8; 32];
    m.copy_from_slice(&body[n - 32..]);
    Ok(Frame {
        kind: body[0],
        seq: u64::from_be_bytes(body[1..9].try_into().unwrap()),
        signed,
        mac: m,
    })
}

/// True once the broker closed the connection (EOF or reset) within `within`.
pub fn closed_by_peer(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // heartbeats
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// A raw dialer's connection and what it recorded of the handshake.
#[derive(Debug)]
pub struct RawPeer {
    /// The socket.
    pub s: TcpStream,
    /// The HELLO frame as sent (signed part + zero MAC).
    pub hello_wire: Vec<u8>,
    /// The AUTH frame as sent.
    pub auth_wire: Vec<u8>,
    /// Whether the acceptor's proof verified under our secret.
    pub acceptor_proof_ok: bool,
    /// Dialer → acceptor key.
    pub key: [u8; 32],
    /// Last sequence number sent.
    pub seq: u64,
}

fn hello_payload(nonce: &[u8]) -> Vec<u8> {
    serde_json::json!({"v": 1, "serverId": "raw-test-peer", "advertise": "127.0.0.1:1",
                       "boot": 4242, "nonce": hex(nonce)})
    .to_string()
    .into_bytes()
}

impl RawPeer {
    /// Connects and runs the dialer's handshake with `secret`. With
    /// `replay = Some((hello, auth))`, sends those recorded frames instead.
    pub fn dial(port: u16, secret: &[u8], replay: Option<(&[u8], &[u8])>) -> RawPeer {
        let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to mesh port");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let nc: [u8; 32] = rand::random();
        let hello = signed(HELLO, 0, &hello_payload(&nc));
        let mut hello_wire = hello.clone();
        hello_wire.extend_from_slice(&[0u8; 32]);
        let hello_wire = replay.map(|(h, _)| h.to_vec()).unwrap_or(hello_wire);
        s.write_all(&hello_wire).unwrap();
        let ack = read_frame(&mut s).expect("HELLO_ACK");
        assert_eq!(ack.kind, HELLO_ACK);
        let hello_signed = &hello_wire[..hello_wire.len() - 32];
        let proof = mac(secret, &[b"queen-mesh/1 accept", hello_signed, &ack.signed]);
        let acceptor_proof_ok = proof == ack.mac;
        let auth = signed(AUTH, 0, b"");
        let proof = mac(
            secret,
            &[
                b"queen-mesh/1 auth",
                hello_signed,
                &ack.signed,
                &ack.mac,
                &auth,
            ],
        );
        let mut auth_wire = auth;
        auth_wire.extend_from_slice(&proof);
        let auth_wire = replay.map(|(_, a)| a.to_vec()).unwrap_or(auth_wire);
        s.write_all(&auth_wire).unwrap();
        let info: serde_json::Value = serde_json::from_slice(&ack.signed[13..]).unwrap();
        let ns = unhex(info["nonce"].as_str().unwrap());
        let key = mac(secret, &[b"queen-mesh/1 c2s", &nc, &ns]);
        RawPeer {
            s,
            hello_wire,
            auth_wire,
            acceptor_proof_ok,
            key,
            seq: 0,
        }
    }

    /// The next frame with a correct MAC and sequence number.
    pub fn seal(&mut self, kind: u8, payload: &[u8]) -> Vec<u8> {
        self.seq += 1;
        self.seal_as(self.seq, kind, payload)
    }

    /// A frame with a correct MAC for an arbitrary sequence number.
    pub fn seal_as(&self, seq: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = signed(kind, seq, payload);
        let m = mac(&self.key, &[&f]);
        f.extend_from_slice(&m);
        f
    }

    /// Writes bytes (errors ignored: the broker may already have closed).
    pub fn send(&mut self, bytes: &[u8]) {
        let _ = self.s.write_all(bytes);
    }
}
