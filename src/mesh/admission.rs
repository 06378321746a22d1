//! Which inbound mesh connections get a thread: connections still in the
//! handshake are counted apart from authenticated peers, with a cap over all
//! sources and a smaller one per source address, so that connections which
//! never prove the secret cannot take the slots of peers that do (issue 17:
//! 64 connections trickling one byte a second used to lock every honest peer
//! out). Refusals are logged once per burst.
//!
//! Held by the mesh listener thread and the inbound threads (plain std
//! threads, never a shard); the mutex guards a few counter updates per
//! connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Authenticated inbound peers served at once. Far above any real cluster,
/// low enough that peers cannot exhaust threads.
pub const MAX_PEERS: usize = 64;
/// Connections in the handshake at once, over all sources. With
/// [`super::auth::HANDSHAKE_DEADLINE`] bounding each, a flood holds a slot
/// for a few seconds at most.
pub const MAX_HANDSHAKING: usize = 32;
/// Connections in the handshake at once from one source (an IPv4 address, or
/// an IPv6 /64, the block one host is usually given): one host alone cannot
/// fill [`MAX_HANDSHAKING`]. A real peer has one dialer per broker.
pub const MAX_HANDSHAKING_PER_SOURCE: usize = 4;
/// Quiet time that ends a burst of refusals: the next refusal is logged.
const BURST_QUIET: Duration = Duration::from_secs(10);

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// [`MAX_HANDSHAKING_PER_SOURCE`] from this address are handshaking.
    SourceBusy,
    /// [`MAX_HANDSHAKING`] are handshaking.
    HandshakesFull,
    /// [`MAX_PEERS`] authenticated peers are connected.
    PeersFull,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::SourceBusy => write!(
                f,
                "{MAX_HANDSHAKING_PER_SOURCE} unauthenticated connections from this address"
            ),
            Refusal::HandshakesFull => {
                write!(f, "{MAX_HANDSHAKING} unauthenticated connections open")
            }
            Refusal::PeersFull => write!(f, "{MAX_PEERS} authenticated peers connected"),
        }
    }
}

#[derive(Debug, Default)]
struct Slots {
    /// Handshaking connections per source address (no zero entries).
    by_source: HashMap<IpAddr, usize>,
    nr_handshaking: usize,
    nr_peers: usize,
    /// When the current burst of refusals last refused; `None` before any.
    last_refusal: Option<Instant>,
    /// Refusals of the current burst not logged.
    nr_unlogged: u64,
}

/// The inbound slots of one broker's mesh listener.
#[derive(Debug, Default)]
pub struct Admission {
    slots: Mutex<Slots>,
}

impl Admission {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        // A panic while holding it leaves only counters; keep using them.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a handshake slot for a connection from `ip`; the [`Slot`] gives
    /// it back when dropped, whatever ends the connection (a failed thread
    /// spawn drops it unused, a panic unwinds through it).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Slot, Refusal> {
        self.take(ip)?;
        Ok(Slot {
            admission: self.clone(),
            ip,
            state: SlotState::Handshaking,
        })
    }

    fn take(&self, ip: IpAddr) -> Result<(), Refusal> {
        let ip = source(ip);
        let mut s = self.slots();
        if s.by_source.get(&ip).copied().unwrap_or(0) >= MAX_HANDSHAKING_PER_SOURCE {
            return Err(Refusal::SourceBusy);
        }
        if s.nr_handshaking >= MAX_HANDSHAKING {
            return Err(Refusal::HandshakesFull);
        }
        *s.by_source.entry(ip).or_insert(0) += 1;
        s.nr_handshaking += 1;
        Ok(())
    }

    /// Gives back `ip`'s handshake slot; when the handshake succeeded, takes
    /// a peer slot instead (refused when every peer slot is taken).
    fn handshake_done(&self, ip: IpAddr, authenticated: bool) -> Result<(), Refusal> {
        let ip = source(ip);
        let mut s = self.slots();
        s.nr_handshaking = s.nr_handshaking.saturating_sub(1);
        if let Some(n) = s.by_source.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                s.by_source.remove(&ip);
            }
        }
        if !authenticated {
            return Ok(());
        }
        if s.nr_peers >= MAX_PEERS {
            return Err(Refusal::PeersFull);
        }
        s.nr_peers += 1;
        Ok(())
    }

    /// Gives back a peer slot.
    fn peer_gone(&self) {
        let mut s = self.slots();
        s.nr_peers = s.nr_peers.saturating_sub(1);
    }

    /// Connections in the handshake now.
    #[cfg(test)]
    fn nr_handshaking(&self) -> usize {
        self.slots().nr_handshaking
    }

    /// Records a refusal; says whether to log it, and how many refusals of
    /// the burst before it went unlogged. The first refusal after
    /// [`BURST_QUIET`] without any starts a new burst and is logged.
    pub fn refused(&self, now: Instant) -> Option<u64> {
        let mut s = self.slots();
        let new_burst = s
            .last_refusal
            .is_none_or(|t| now.duration_since(t) >= BURST_QUIET);
        s.last_refusal = Some(now);
        if new_burst {
            Some(std::mem::take(&mut s.nr_unlogged))
        } else {
            s.nr_unlogged += 1;
            None
        }
    }
}

/// The source a connection is counted under: an IPv4 address as it is, an
/// IPv6 address by its /64 (an IPv4-mapped one as its IPv4 address), since
/// one host can take any address of its /64.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !(u128::from(u64::MAX));
                IpAddr::V6(std::net::Ipv6Addr::from(bits))
            }
        },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// Holds a handshake slot.
    Handshaking,
    /// Holds a peer slot.
    Peer,
    /// Holds nothing (refused when the handshake ended).
    Released,
}

/// One inbound connection's hold on the [`Admission`] slots; dropping it
/// gives back what it holds.
#[derive(Debug)]
pub struct Slot {
    admission: Arc<Admission>,
    ip: IpAddr,
    state: SlotState,
}

impl Slot {
    /// The handshake proved the secret: the handshake slot becomes a peer
    /// slot, or is given back and the connection refused when none is free.
    pub fn authenticated(&mut self) -> Result<(), Refusal> {
        let r = self.admission.handshake_done(self.ip, true);
        self.state = if r.is_ok() {
            SlotState::Peer
        } else {
            SlotState::Released
        };
        r
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        match self.state {
            SlotState::Handshaking => {
                // Giving back an unauthenticated slot cannot be refused.
                let _ = self.admission.handshake_done(self.ip, false);
            }
            SlotState::Peer => self.admission.peer_gone(),
            SlotState::Released => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(r: Result<Slot, Refusal>) -> Option<Refusal> {
        r.err()
    }

    #[test]
    fn one_source_cannot_take_every_handshake_slot() {
        let a = Arc::new(Admission::default());
        let flood: IpAddr = "127.0.0.2".parse().unwrap();
        let mut held: Vec<Slot> = (0..MAX_HANDSHAKING_PER_SOURCE)
            .map(|_| a.admit(flood).unwrap())
            .collect();
        assert_eq!(refusal(a.admit(flood)), Some(Refusal::SourceBusy));
        let peer: IpAddr = "127.0.0.1".parse().unwrap();
        let mut p = a.admit(peer).unwrap();
        p.authenticated().unwrap();
        held.pop(); // a flood connection's handshake ends
        held.push(a.admit(flood).unwrap());
        assert_eq!(a.nr_handshaking(), MAX_HANDSHAKING_PER_SOURCE);
        drop(held);
        assert_eq!(a.nr_handshaking(), 0);
    }

    #[test]
    fn handshakes_and_peers_have_separate_caps() {
        let a = Arc::new(Admission::default());
        let ip = |i: usize| IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
        let mut slots: Vec<Slot> = (0..MAX_HANDSHAKING)
            .map(|i| a.admit(ip(i)).unwrap())
            .collect();
        assert_eq!(
            refusal(a.admit("10.9.9.9".parse().unwrap())),
            Some(Refusal::HandshakesFull)
        );
        for s in slots.iter_mut() {
            s.authenticated().unwrap();
        }
        assert_eq!(a.nr_handshaking(), 0);
        for i in MAX_HANDSHAKING..MAX_PEERS {
            let mut s = a.admit(ip(i)).unwrap();
            s.authenticated().unwrap();
            slots.push(s);
        }
        let mut late = a.admit(IpAddr::from([10, 2, 0, 1])).unwrap();
        assert_eq!(late.authenticated(), Err(Refusal::PeersFull));
        drop(late);
        assert_eq!(
            a.nr_handshaking(),
            0,
            "a refused peer gives its handshake slot back"
        );
        slots.pop(); // a peer disconnects
        let mut s = a.admit(IpAddr::from([10, 2, 0, 1])).unwrap();
        assert_eq!(s.authenticated(), Ok(()));
    }

    #[test]
    fn one_ipv6_slash_64_is_one_source() {
        let a = Arc::new(Admission::default());
        let held: Vec<Slot> = (0..MAX_HANDSHAKING_PER_SOURCE)
            .map(|i| {
                a.admit(format!("2001:db8:1:2::{i:x}").parse().unwrap())
                    .unwrap()
            })
            .collect();
        let same_block: IpAddr = "2001:db8:1:2:ffff::1".parse().unwrap();
        assert_eq!(refusal(a.admit(same_block)), Some(Refusal::SourceBusy));
        let other_block: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(a.admit(other_block).is_ok());
        drop(held);
        assert!(a.admit(same_block).is_ok());
    }

    #[test]
    fn a_slot_dropped_unused_gives_its_place_back() {
        // What a failed thread spawn or a panicking connection thread does.
        let a = Arc::new(Admission::default());
        let ip: IpAddr = "127.0.0.3".parse().unwrap();
        for _ in 0..10 * MAX_HANDSHAKING_PER_SOURCE {
            drop(a.admit(ip).unwrap());
        }
        assert_eq!(a.nr_handshaking(), 0);
    }

    #[test]
    fn a_burst_of_refusals_is_logged_once() {
        let a = Admission::default();
        let t0 = Instant::now();
        assert_eq!(a.refused(t0), Some(0));
        for i in 1..100 {
            assert_eq!(a.refused(t0 + Duration::from_millis(i * 50)), None);
        }
        let later = t0 + Duration::from_millis(99 * 50) + BURST_QUIET;
        assert_eq!(a.refused(later), Some(99));
    }
}
