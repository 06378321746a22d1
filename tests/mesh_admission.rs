//! The mesh port under connections that never prove the secret (issue 17, point 1 and
//! the HELLO_ACK part of point 6): a flood of handshakes trickling a byte at a time
//! from one address must neither keep its slots past the handshake deadline nor lock
//! a real peer out, refusals are logged once per burst, and the acceptor names
//! neither its server id nor its address before the dialer has proved the secret.
mod common;
mod mesh_client;

use common::*;
use mesh_client::*;
use std::io::Write;
use std::net::TcpStream;
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

const SECRET_HEX: &str = "6d65736874657374736563726574303132333435363738396162636465663031";
/// Connections of the flood: as many as every inbound slot the broker had before.
const FLOOD: usize = 64;
/// The broker's whole-handshake deadline (src/mesh/auth.rs), plus slack for a loaded box.
const DEADLINE_WITH_SLACK: Duration = Duration::from_secs(3 + 3);

fn member(db: &Db, mesh_port: u16, peers: &[u16]) -> BrokerBuilder {
    let list: Vec<String> = peers.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    Broker::builder(db)
        .env("QUEEN_MESH_PORT", &mesh_port.to_string())
        .env("QUEEN_MESH_PEERS", &list.join(","))
        .env("QUEEN_MESH_ADVERTISE_HOST", "127.0.0.1")
        .env("QUEEN_SYNC_SECRET", SECRET_HEX)
        .env("QUEEN_SYNC_HEARTBEAT_MS", "200")
        .env("QUEEN_SYNC_DEAD_THRESHOLD_MS", "1500")
        .env("DB_POOL_SIZE", "4")
}

/// A TCP connection to 127.0.0.1:`port` from source address `src` (any 127/8
/// address is local on Linux), so the flood comes from another address than the
/// honest peer's dialer.
fn connect_from(src: [u8; 4], port: u16) -> std::io::Result<TcpStream> {
    fn sockaddr(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
        libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes(ip).to_be(),
            },
            sin_zero: [0; 8],
        }
    }
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: plain socket calls on a descriptor this function owns; on success it
    // is handed to TcpStream, which closes it, and on failure closed here.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let from = sockaddr(src, 0);
        let to = sockaddr([127, 0, 0, 1], port);
        if libc::bind(fd, &from as *const _ as *const libc::sockaddr, len) != 0
            || libc::connect(fd, &to as *const _ as *const libc::sockaddr, len) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpStream::from_raw_fd(fd))
    }
}

/// Opens one slow handshake from `src` in a thread: it sends the first bytes of a
/// HELLO one every 300 ms for at most `budget`; yields how long the broker let it
/// live (`None` if it was still open when the budget ran out).
fn slow_handshake(
    src: [u8; 4],
    port: u16,
    budget: Duration,
) -> std::thread::JoinHandle<Option<Duration>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let Ok(mut s) = connect_from(src, port) else {
            return Some(Duration::ZERO);
        };
        // A length prefix announcing a HELLO, then its body a byte at a time.
        let mut bytes = 200u32.to_be_bytes().to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 200));
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        for b in bytes {
            if s.write_all(&[b]).is_err() || closed_by_peer(&mut s, Duration::from_millis(300)) {
                return Some(start.elapsed());
            }
            if start.elapsed() > budget {
                return None;
            }
        }
        None
    })
}

fn peer_alive(b: &Broker, mesh_port: u16) -> bool {
    let s = b.get("/api/v1/system/shared-state").json();
    let addr = format!("127.0.0.1:{mesh_port}");
    s["mesh"]["peers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["address"] == addr.as_str() && p["state"] == "alive")
}

#[test]
fn slow_handshakes_from_one_address_cannot_lock_a_real_peer_out() {
    let db = Db::fresh();
    let (a_port, b_port) = (free_port(), free_port());
    let a = member(&db, a_port, &[b_port]).start();
    let flood: Vec<_> = (0..FLOOD)
        .map(|_| slow_handshake([127, 0, 0, 2], a_port, Duration::from_secs(15)))
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    // An honest broker that lists A dials it from 127.0.0.1 while the flood runs.
    let b = member(&db, b_port, &[a_port]).start();
    let t = Instant::now();
    check_for(Duration::from_secs(10), || {
        peer_alive(&b, a_port).then_some(())
    });
    eprintln!("honest peer alive after {:?} under the flood", t.elapsed());

    let lives: Vec<Option<Duration>> = flood.into_iter().map(|h| h.join().unwrap()).collect();
    let held: Vec<_> = lives
        .iter()
        .filter(|l| l.is_none_or(|d| d > DEADLINE_WITH_SLACK))
        .collect();
    assert!(
        held.is_empty(),
        "{} of {FLOOD} trickling handshakes were held past the deadline: {lives:?}",
        held.len()
    );
    let s = a.get("/api/v1/system/shared-state").json();
    let refused = s["mesh"]["counters"]["refusedConnections"]
        .as_u64()
        .unwrap();
    assert!(
        refused >= (FLOOD - 4) as u64,
        "one address gets a few handshake slots, the rest are refused: {s}"
    );
    let lines = a.log().matches("mesh: refusing").count();
    assert!(
        (1..=2).contains(&lines),
        "refusals are logged once per burst, not once each ({lines} lines):\n{}",
        a.log_tail(30)
    );
}

#[test]
fn hello_ack_names_no_server_id_or_address_before_the_dialer_proves_the_secret() {
    let db = Db::fresh();
    let port = free_port();
    // A peer (never started) turns the mesh's TCP side on.
    let _a = member(&db, port, &[free_port()])
        .env("QUEEN_SERVER_ID", "hidden-broker-name")
        .env("QUEEN_MESH_ADVERTISE_HOST", "hidden.example")
        .start();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let hello = serde_json::json!({"v": 1, "serverId": "probe", "advertise": "127.0.0.1:1",
                                   "boot": 7, "nonce": "00".repeat(32)});
    let mut wire = signed(HELLO, 0, hello.to_string().as_bytes());
    wire.extend_from_slice(&[0u8; 32]);
    s.write_all(&wire).unwrap();
    let ack = read_frame(&mut s).expect("HELLO_ACK");
    assert_eq!(ack.kind, HELLO_ACK);
    let text = String::from_utf8_lossy(&ack.signed[13..]).into_owned();
    let info: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert_eq!(info["serverId"], "", "HELLO_ACK: {text}");
    assert_eq!(info["advertise"], "", "HELLO_ACK: {text}");
    assert!(!text.contains("hidden"), "HELLO_ACK: {text}");
}
