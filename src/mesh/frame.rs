//! Mesh wire framing and per-frame MACs. Runs on the mesh peer threads
//! (never on a shard).
//!
//! # Frame
//! ```text
//! len   u32 BE   bytes after this field: 1 + 8 + payload + 32, at most MAX_FRAME_BYTES
//! kind  u8       1 HELLO, 2 HELLO_ACK, 3 AUTH, 4 HEARTBEAT, 5 NOTICES
//! seq   u64 BE   0 in the handshake; then 1, 2, 3 ... per direction
//! payload        JSON (HELLO, HELLO_ACK: peer info; NOTICES: array of notices)
//! mac   [u8;32]  HMAC-SHA256 over every byte before it (len .. payload)
//! ```
//! Handshake frames carry the handshake proofs in `mac` (see `auth`);
//! later frames carry the MAC under the connection's direction key. A
//! receiver accepts only `seq == last + 1`, so a frame cannot be replayed,
//! dropped or reordered without the connection closing.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::io::{self, Read, Write};

/// HMAC-SHA256.
pub type HmacSha256 = Hmac<Sha256>;

/// Length of a MAC (SHA-256 output).
pub const MAC_LEN: usize = 32;
/// Bytes of `kind` + `seq`.
const HEADER_LEN: usize = 1 + 8;
/// Largest frame body (after the length field). Notices are small hints;
/// 64 KiB holds hundreds of them and keeps a flood's buffer per connection small.
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// Read chunk size.
const READ_CHUNK: usize = 8192;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Dialer's announcement with its nonce.
    Hello = 1,
    /// Acceptor's announcement with its nonce and proof.
    HelloAck = 2,
    /// Dialer's proof.
    Auth = 3,
    /// Liveness only.
    Heartbeat = 4,
    /// A JSON array of notices.
    Notices = 5,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Hello,
            2 => Kind::HelloAck,
            3 => Kind::Auth,
            4 => Kind::Heartbeat,
            5 => Kind::Notices,
            _ => return None,
        })
    }
}

/// A frame as read: `signed` is every byte the MAC covers.
#[derive(Debug, Clone)]
pub struct RawFrame {
    /// Frame kind.
    pub kind: Kind,
    /// Sequence number.
    pub seq: u64,
    /// Bytes from the length field through the payload.
    pub signed: Vec<u8>,
    /// The trailing MAC.
    pub mac: [u8; MAC_LEN],
}

impl RawFrame {
    /// The payload bytes.
    pub fn payload(&self) -> &[u8] {
        &self.signed[4 + HEADER_LEN..]
    }
}

/// Why a connection is closed.
#[derive(Debug)]
pub enum FrameError {
    /// The peer closed the connection.
    Closed,
    /// Socket error.
    Io(io::Error),
    /// Announced length above [`MAX_FRAME_BYTES`] (or below the minimum).
    BadLength(usize),
    /// Unknown frame kind byte.
    UnknownKind(u8),
    /// MAC does not verify.
    BadMac,
    /// Sequence number not the next one.
    BadSequence {
        /// What was expected.
        expected: u64,
        /// What came.
        got: u64,
    },
    /// A frame the protocol state does not allow, or a payload that does not parse.
    Malformed(&'static str),
    /// Handshake proof wrong (wrong secret or a replayed handshake).
    BadHandshake(&'static str),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => write!(f, "connection closed by peer"),
            FrameError::Io(e) => write!(f, "socket error: {e}"),
            FrameError::BadLength(n) => {
                write!(f, "frame length {n} outside 41..={MAX_FRAME_BYTES}")
            }
            FrameError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            FrameError::BadMac => write!(f, "frame MAC does not verify"),
            FrameError::BadSequence { expected, got } => {
                write!(f, "sequence {got}, expected {expected}")
            }
            FrameError::Malformed(w) => write!(f, "malformed frame: {w}"),
            FrameError::BadHandshake(w) => write!(f, "handshake rejected: {w}"),
        }
    }
}

/// HMAC-SHA256 of the concatenation of `parts` under `key`.
pub fn mac(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// Constant-time comparison of two MACs.
pub fn mac_eq(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Builds the signed part of a frame (length field through payload).
pub fn signed_bytes(kind: Kind, seq: u64, payload: &[u8]) -> Vec<u8> {
    let len = HEADER_LEN + payload.len() + MAC_LEN;
    let mut v = Vec::with_capacity(4 + len);
    v.extend_from_slice(&(len as u32).to_be_bytes());
    v.push(kind as u8);
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// Writes `signed` followed by `mac` in one write.
pub fn write_frame(w: &mut impl Write, mut signed: Vec<u8>, mac: &[u8; MAC_LEN]) -> io::Result<()> {
    signed.extend_from_slice(mac);
    w.write_all(&signed)
}

/// One direction's MAC state after the handshake: the key and the last sequence.
#[derive(Debug)]
pub struct Sealer {
    /// Direction key.
    key: [u8; MAC_LEN],
    /// Last sequence number used (0 before the first frame).
    seq: u64,
}

impl Sealer {
    /// A sealer for a direction key.
    pub fn new(key: [u8; MAC_LEN]) -> Sealer {
        Sealer { key, seq: 0 }
    }

    /// Encodes and MACs the next frame.
    pub fn seal(&mut self, kind: Kind, payload: &[u8]) -> Vec<u8> {
        self.seq += 1;
        let mut signed = signed_bytes(kind, self.seq, payload);
        let m = mac(&self.key, &[&signed]);
        signed.extend_from_slice(&m);
        signed
    }
}

/// The receiving direction: checks MAC and sequence.
#[derive(Debug)]
pub struct Opener {
    /// Direction key.
    key: [u8; MAC_LEN],
    /// Last sequence number accepted.
    seq: u64,
}

impl Opener {
    /// An opener for a direction key.
    pub fn new(key: [u8; MAC_LEN]) -> Opener {
        Opener { key, seq: 0 }
    }

    /// Verifies `f` (MAC first, so a forged sequence number is a MAC failure).
    pub fn open(&mut self, f: &RawFrame) -> Result<(), FrameError> {
        if !mac_eq(&mac(&self.key, &[&f.signed]), &f.mac) {
            return Err(FrameError::BadMac);
        }
        let expected = self.seq + 1;
        if f.seq != expected {
            return Err(FrameError::BadSequence {
                expected,
                got: f.seq,
            });
        }
        if matches!(f.kind, Kind::Hello | Kind::HelloAck | Kind::Auth) {
            return Err(FrameError::Malformed("handshake frame after the handshake"));
        }
        self.seq = expected;
        Ok(())
    }
}

/// Accumulates bytes from a socket with a read timeout into whole frames.
/// "Need more bytes" (and a read timeout) is `Ok(None)`, not an error.
#[derive(Debug, Default)]
pub struct FrameReader {
    /// Bytes read and not yet consumed.
    buf: Vec<u8>,
}

impl FrameReader {
    /// A complete frame from the buffer, if there is one; checks the length
    /// as soon as it is known, so an oversized frame is refused before its body.
    fn parse(&mut self) -> Result<Option<RawFrame>, FrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if !(HEADER_LEN + MAC_LEN..=MAX_FRAME_BYTES).contains(&len) {
            return Err(FrameError::BadLength(len));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let rest = self.buf.split_off(4 + len);
        let mut whole = std::mem::replace(&mut self.buf, rest);
        let kind = Kind::from_u8(whole[4]).ok_or(FrameError::UnknownKind(whole[4]))?;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&whole[5..13]);
        let mut mac = [0u8; MAC_LEN];
        mac.copy_from_slice(&whole[whole.len() - MAC_LEN..]);
        whole.truncate(whole.len() - MAC_LEN);
        Ok(Some(RawFrame {
            kind,
            seq: u64::from_be_bytes(seq),
            signed: whole,
            mac,
        }))
    }

    /// The next frame, or `None` when the read timed out first.
    pub fn next(&mut self, r: &mut impl Read) -> Result<Option<RawFrame>, FrameError> {
        loop {
            if let Some(f) = self.parse()? {
                return Ok(Some(f));
            }
            let mut chunk = [0u8; READ_CHUNK];
            match r.read(&mut chunk) {
                Ok(0) => return Err(FrameError::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FrameError::Io(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Result<Option<RawFrame>, FrameError> {
        FrameReader::default().next(&mut io::Cursor::new(bytes.to_vec()))
    }

    #[test]
    fn sealed_frames_open_in_order_only() {
        let key = [7u8; 32];
        let mut s = Sealer::new(key);
        let f1 = s.seal(Kind::Heartbeat, b"");
        let f2 = s.seal(Kind::Notices, b"[]");
        let mut o = Opener::new(key);
        let r2 = read_all(&f2).unwrap().unwrap();
        assert!(matches!(o.open(&r2), Err(FrameError::BadSequence { .. })));
        let r1 = read_all(&f1).unwrap().unwrap();
        o.open(&r1).unwrap();
        assert!(matches!(o.open(&r1), Err(FrameError::BadSequence { .. })));
        o.open(&r2).unwrap();
    }

    #[test]
    fn flipped_bit_fails_the_mac_and_oversize_is_refused_early() {
        let key = [1u8; 32];
        let mut f = Sealer::new(key).seal(Kind::Notices, b"[1]");
        f[14] ^= 1;
        let r = read_all(&f).unwrap().unwrap();
        assert!(matches!(Opener::new(key).open(&r), Err(FrameError::BadMac)));
        let big = ((MAX_FRAME_BYTES + 1) as u32).to_be_bytes();
        assert!(matches!(read_all(&big), Err(FrameError::BadLength(_))));
    }
}
