//! Tests of `listen.rs` and `conn.rs`: a real server on 127.0.0.1, spoken
//! to with raw bytes from plain threads.

use super::*;
use crate::http::{Request, Response};
use crate::shutdown::{shutdown, ShutdownTrigger};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use glommio::LocalExecutorBuilder;

/// Counts handler futures started and dropped (finished or cancelled).
#[derive(Default)]
struct Probe {
    started: AtomicUsize,
    dropped: AtomicUsize,
}

struct DropGuard(Arc<Probe>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A running test server: its address, trigger and thread.
struct TestServer {
    addr: SocketAddr,
    trigger: ShutdownTrigger,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
    probe: Arc<Probe>,
}

impl TestServer {
    /// Stops the server and waits for `serve` to return.
    fn stop(mut self) {
        self.trigger.trigger();
        if let Some(t) = self.thread.take() {
            t.join().expect("server thread ends cleanly");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.trigger.trigger();
    }
}

/// Starts a server whose handler answers `/sleep?ms=N` after N ms and
/// anything else at once with the path as body.
fn start(tweak: impl FnOnce(&mut ServerConfig) + Send + 'static) -> TestServer {
    let (trigger, listener) = shutdown();
    let probe = Arc::new(Probe::default());
    let (tx, rx) = mpsc::channel();
    let p = probe.clone();
    let thread = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut cfg = ServerConfig::new("127.0.0.1:0".parse().expect("addr"));
            cfg.header_timeout = Duration::from_millis(300);
            tweak(&mut cfg);
            let server = bind(Rc::new(cfg)).expect("bind");
            tx.send(server.local_addr().expect("addr"))
                .expect("test alive");
            let handler = move |req: Request| {
                let p = p.clone();
                async move {
                    p.started.fetch_add(1, Ordering::SeqCst);
                    let _guard = DropGuard(p.clone());
                    if req.path == "/sleep" {
                        let ms = req
                            .query_param("ms")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        glommio::timer::sleep(Duration::from_millis(ms)).await;
                    }
                    Response::text(200, "text/plain", req.path.clone().into_bytes())
                }
            };
            server.serve(Rc::new(handler), listener).await;
        })
        .expect("executor");
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("server bound");
    TestServer {
        addr,
        trigger,
        thread: Some(thread),
        probe,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// Reads one response (head + Content-Length body) off `s`.
fn read_response(s: &mut TcpStream) -> String {
    let mut data = Vec::new();
    let mut byte = [0u8; 1];
    while !data.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).expect("read head"),
            1,
            "EOF in head: {data:?}"
        );
        data.push(byte[0]);
    }
    let head = String::from_utf8(data.clone()).expect("ascii head");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().expect("length"));
    let mut body = vec![0; len];
    s.read_exact(&mut body).expect("body");
    head + &String::from_utf8_lossy(&body)
}

fn assert_eof(s: &mut TcpStream) {
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "unexpected bytes {rest:?}");
}

/// Polls `f` until true or 5 s pass.
fn check_for(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn keep_alive_serves_several_requests_and_pipelined_ones() {
    let server = start(|_| {});
    let mut s = connect(server.addr);
    s.write_all(b"GET /one HTTP/1.1\r\n\r\n").expect("write");
    let r = read_response(&mut s);
    assert!(
        r.starts_with("HTTP/1.1 200 OK") && r.ends_with("/one"),
        "{r}"
    );
    assert!(!r.contains("Connection: close"));
    s.write_all(
        b"GET /sleep?ms=20 HTTP/1.1\r\n\r\nPOST /three HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
    )
    .expect("write");
    assert!(read_response(&mut s).ends_with("/sleep"));
    assert!(read_response(&mut s).ends_with("/three"));
    s.write_all(b"GET /last HTTP/1.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    assert!(read_response(&mut s).contains("Connection: close"));
    assert_eof(&mut s);
    server.stop();
}

#[test]
fn request_after_a_slow_handler_on_the_same_connection_is_served() {
    // Regression: the peer watch read is cancelled when the handler ends;
    // its read space must not stay in the buffer and be parsed as a request.
    let server = start(|_| {});
    let mut s = connect(server.addr);
    s.write_all(b"GET /sleep?ms=30 HTTP/1.1\r\n\r\n")
        .expect("write");
    assert!(read_response(&mut s).ends_with("/sleep"));
    s.write_all(b"GET /next HTTP/1.1\r\n\r\n").expect("write");
    let r = read_response(&mut s);
    assert!(
        r.starts_with("HTTP/1.1 200 OK") && r.ends_with("/next"),
        "{r}"
    );
    server.stop();
}

#[test]
fn big_content_length_is_413_and_closes() {
    let server = start(|c| c.max_body_bytes = 100);
    let mut s = connect(server.addr);
    s.write_all(b"POST /p HTTP/1.1\r\nContent-Length: 101\r\n\r\n")
        .expect("write");
    let r = read_response(&mut s);
    assert!(r.starts_with("HTTP/1.1 413"), "{r}");
    assert!(r.contains("Connection: close") && r.contains("\"code\":\"payload_too_large\""));
    assert_eof(&mut s);
    assert_eq!(server.probe.started.load(Ordering::SeqCst), 0);
    server.stop();
}

#[test]
fn large_headers_are_431() {
    let server = start(|c| c.max_header_bytes = 256);
    let mut s = connect(server.addr);
    let req = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(300));
    s.write_all(req.as_bytes()).expect("write");
    let r = read_response(&mut s);
    assert!(
        r.starts_with("HTTP/1.1 431") && r.contains("headers_too_large"),
        "{r}"
    );
    server.stop();
}

#[test]
fn slow_head_gets_408_and_silent_client_is_closed() {
    let server = start(|c| c.idle_timeout = Duration::from_millis(200));
    let mut slow = connect(server.addr);
    slow.write_all(b"GET / HTTP/1.1\r\nX-A:").expect("write");
    let mut silent = connect(server.addr);
    let r = read_response(&mut slow);
    assert!(
        r.starts_with("HTTP/1.1 408") && r.contains("request_timeout"),
        "{r}"
    );
    assert_eof(&mut silent);
    server.stop();
}

#[test]
fn peer_close_cancels_running_handler() {
    let server = start(|_| {});
    let mut s = connect(server.addr);
    s.write_all(b"GET /sleep?ms=30000 HTTP/1.1\r\n\r\n")
        .expect("write");
    let probe = server.probe.clone();
    check_for("handler start", || {
        probe.started.load(Ordering::SeqCst) == 1
    });
    assert_eq!(probe.dropped.load(Ordering::SeqCst), 0);
    drop(s);
    check_for("handler cancel", || {
        probe.dropped.load(Ordering::SeqCst) == 1
    });
    server.stop();
}

#[test]
fn shutdown_finishes_in_flight_request_closes_idle_and_returns() {
    let server = start(|_| {});
    let mut idle = connect(server.addr);
    idle.write_all(b"GET /warm HTTP/1.1\r\n\r\n")
        .expect("write");
    assert!(read_response(&mut idle).ends_with("/warm"));
    let mut busy = connect(server.addr);
    busy.write_all(b"GET /sleep?ms=300 HTTP/1.1\r\n\r\n")
        .expect("write");
    let probe = server.probe.clone();
    check_for("handler start", || {
        probe.started.load(Ordering::SeqCst) == 2
    });
    let started = Instant::now();
    server.trigger.trigger();
    assert_eof(&mut idle);
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "idle not closed at once"
    );
    let r = read_response(&mut busy);
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("Connection: close"),
        "{r}"
    );
    assert_eof(&mut busy);
    let addr = server.addr;
    server.stop();
    // `serve` returned, so the listener is gone.
    probe_port_free(addr).expect("port released after shutdown");
}

#[test]
fn probe_fails_while_a_reuseport_listener_holds_the_port() {
    // A SO_REUSEPORT listener, as every shard holds.
    let held = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    held.set_reuse_port(true).expect("reuseport");
    held.bind(&"127.0.0.1:0".parse::<SocketAddr>().expect("addr").into())
        .expect("bind");
    held.listen(16).expect("listen");
    let addr = held.local_addr().expect("addr").as_socket().expect("inet");
    let err = probe_port_free(addr).expect_err("port is taken");
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    drop(held);
    probe_port_free(addr).expect("port free again");
}
