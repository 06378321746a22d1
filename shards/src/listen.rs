//! The per-shard HTTP server: binds an `SO_REUSEPORT` listener on the
//! shared address, accepts, and runs one task per connection (see
//! `conn.rs`); on shutdown it stops accepting and waits for its
//! connections through a gate.
//!
//! Runs on each shard that calls [`serve`]: every shard binds its own
//! listener on the same address and the kernel spreads new connections
//! over them. [`probe_port_free`] runs once on the main thread at boot.

use std::cell::Cell;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::rc::Rc;
use std::time::Duration;

use futures_lite::future;
use glommio::net::TcpListener;
use glommio::sync::Gate;
use socket2::{Domain, Protocol, Socket, Type};

use crate::conn::serve_tcp;
pub use crate::server::{
    Handler, ServerConfig, DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
};
use crate::shutdown::{LocalSignal, ShutdownListener};

/// Listen backlog of each shard's socket.
const BACKLOG: i32 = 1024;
/// Pause after a failed accept (e.g. EMFILE) so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Errors of [`serve`]. Per-connection errors are logged, never returned.
#[derive(Debug)]
pub enum ServeError {
    /// The listening socket could not be set up.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Bind { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
        }
    }
}

impl std::error::Error for ServeError {}

/// A bound, not yet serving, listener of one shard.
pub struct Listener {
    /// The glommio listener (SO_REUSEPORT).
    inner: TcpListener,
    /// Settings.
    cfg: Rc<ServerConfig>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listener")
            .field("addr", &self.local_addr().ok())
            .finish()
    }
}

/// Binds `cfg.addr` with `SO_REUSEPORT` (and `SO_REUSEADDR`, so a restart
/// is not refused over `TIME_WAIT` connections) on the current shard.
pub fn bind(cfg: Rc<ServerConfig>) -> Result<Listener, ServeError> {
    let addr = cfg.addr;
    let err = |source| ServeError::Bind { addr, source };
    let socket =
        Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    socket.set_reuse_port(true).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    socket.bind(&addr.into()).map_err(err)?;
    socket.listen(BACKLOG).map_err(err)?;
    // SAFETY: the fd is a bound, listening TCP socket whose ownership
    // `into_raw_fd` hands over; glommio takes it (glommio's own `bind`
    // builds its listener from a socket2 socket the same way).
    let inner = unsafe { TcpListener::from_raw_fd(socket.into_raw_fd()) };
    Ok(Listener { inner, cfg })
}

impl Listener {
    /// The bound address (tells the port when `cfg.addr` had port 0; with
    /// port 0 each shard gets its own port).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(io::Error::from)
    }

    /// Accepts and serves connections until `shutdown` fires, then stops
    /// accepting, lets in-flight requests finish (answered with
    /// `Connection: close`), closes idle connections, and returns once
    /// every connection task has ended.
    pub async fn serve(self, handler: Rc<dyn Handler>, shutdown: ShutdownListener) {
        let stop = LocalSignal::new();
        let stop_on_shutdown = stop.clone();
        glommio::spawn_local(async move {
            shutdown.wait().await;
            stop_on_shutdown.fire();
        })
        .detach();
        let gate = Gate::new();
        let live = Rc::new(Cell::new(0usize));
        loop {
            let accepted = future::or(async { Some(self.inner.accept().await) }, async {
                stop.wait().await;
                None
            })
            .await;
            let stream = match accepted {
                None => break,
                Some(Ok(stream)) => stream,
                Some(Err(e)) => {
                    log::warn!("accept failed: {e}");
                    glommio::timer::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            };
            if live.get() >= self.cfg.max_connections {
                log::warn!("connection limit {} reached", self.cfg.max_connections);
                drop(stream);
                continue;
            }
            let counted = LiveConn::new(&live);
            let (cfg, handler, stop) = (self.cfg.clone(), handler.clone(), stop.clone());
            let task = gate.spawn(async move {
                serve_tcp(stream, cfg, handler, stop).await;
                drop(counted);
            });
            match task {
                Ok(task) => drop(task.detach()),
                // Only a closed gate refuses, and it closes after this loop;
                // the dropped future released its count.
                Err(e) => log::error!("cannot spawn connection task: {e}"),
            }
        }
        drop(self.inner);
        if let Err(e) = gate.close().await {
            log::error!("closing the connection gate failed: {e}");
        }
    }
}

/// One live connection in the shard's count; released on drop (also when
/// the task is dropped unfinished or panics).
struct LiveConn(Rc<Cell<usize>>);

impl LiveConn {
    fn new(live: &Rc<Cell<usize>>) -> LiveConn {
        live.set(live.get() + 1);
        LiveConn(live.clone())
    }
}

impl Drop for LiveConn {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Binds `cfg.addr` on the current shard and serves until shutdown; see
/// [`Listener::serve`]. Errors only if the socket cannot be set up.
pub async fn serve(
    cfg: Rc<ServerConfig>,
    handler: Rc<dyn Handler>,
    shutdown: ShutdownListener,
) -> Result<(), ServeError> {
    bind(cfg)?.serve(handler, shutdown).await;
    Ok(())
}

/// Binds `addr` with a plain socket (no `SO_REUSEPORT`) and releases it.
/// Fails with `AddrInUse` while any process listens on `addr`, even one
/// using `SO_REUSEPORT`, so a second broker exits instead of silently
/// sharing connections. Call once at boot, before the shards bind; the
/// window between probe and bind is the only race left.
pub fn probe_port_free(addr: SocketAddr) -> Result<(), io::Error> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // SO_REUSEADDR only forgives TIME_WAIT leftovers of a previous run; it
    // does not let us bind over a live listener.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    Ok(())
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
