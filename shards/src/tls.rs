//! Optional TLS for the HTTP listener: loading a PEM certificate chain and
//! private key into a rustls server configuration ([`TlsSetup`]), and the
//! per-connection handshake ([`handshake`]).
//!
//! Loading runs once on the main thread at boot (it reads two files);
//! handshakes run inside each connection's task on the shard that accepted
//! it, bounded by `ServerConfig::handshake_timeout` and by shutdown, so a
//! slow or hostile client holds only its own task. A failed handshake is
//! logged at debug level and ends that connection; nothing else notices.
//!
//! Decisions (inferred): TLS 1.2 and 1.3 with rustls' default suites on the
//! `ring` provider; ALPN advertises `http/1.1` only (the codec speaks
//! nothing else); no client certificates.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use glommio::timer::Timer;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::shutdown::LocalSignal;

/// Default time a client has to complete the TLS handshake (10 s, the
/// same as the head timeout: both bound a client that connects and stalls).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A loaded server certificate and key, shared read-only by every shard.
#[derive(Clone)]
pub struct TlsSetup {
    /// The rustls configuration (certificate chain, key, ALPN).
    config: Arc<rustls::ServerConfig>,
}

impl fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsSetup { .. }")
    }
}

impl PartialEq for TlsSetup {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for TlsSetup {}

/// Why a certificate or key could not be loaded; each names the file.
#[derive(Debug)]
pub enum TlsError {
    /// The file could not be read.
    Read {
        /// Which file (`cert` or `key`).
        what: &'static str,
        /// The path.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// The file holds no usable PEM item of the expected kind.
    Pem {
        /// Which file (`cert` or `key`).
        what: &'static str,
        /// The path.
        path: String,
        /// What the parser said.
        reason: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    Config(rustls::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read { what, path, source } => {
                write!(f, "cannot read TLS {what} file {path}: {source}")
            }
            TlsError::Pem { what, path, reason } => {
                write!(f, "TLS {what} file {path} is not usable PEM: {reason}")
            }
            TlsError::Config(e) => write!(f, "TLS certificate and key rejected: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

impl TlsSetup {
    /// Loads a PEM certificate chain (leaf first) and a PEM private key
    /// (PKCS#8, PKCS#1 or SEC1) from files. Call at boot, not on a shard.
    pub fn from_pem_files(cert_path: &str, key_path: &str) -> Result<TlsSetup, TlsError> {
        let cert_pem = std::fs::read(cert_path).map_err(|source| TlsError::Read {
            what: "cert",
            path: cert_path.into(),
            source,
        })?;
        let key_pem = std::fs::read(key_path).map_err(|source| TlsError::Read {
            what: "key",
            path: key_path.into(),
            source,
        })?;
        let pem_err = |what, path: &str, reason: String| TlsError::Pem {
            what,
            path: path.into(),
            reason,
        };
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem_err("cert", cert_path, e.to_string()))?;
        if chain.is_empty() {
            return Err(pem_err(
                "cert",
                cert_path,
                "no CERTIFICATE block found".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| pem_err("key", key_path, e.to_string()))?;
        Self::from_der(chain, key)
    }

    /// Builds the setup from DER items already parsed.
    pub fn from_der(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<TlsSetup, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(TlsError::Config)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsSetup {
            config: Arc::new(config),
        })
    }
}

/// How a handshake ended without a session.
#[derive(Debug)]
pub(crate) enum HandshakeError {
    /// The peer did not finish within the timeout.
    Timeout,
    /// Shutdown began while the handshake was in progress.
    Stopped,
    /// The peer sent something TLS refuses, or the socket failed.
    Failed(io::Error),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Timeout => f.write_str("TLS handshake timed out"),
            HandshakeError::Stopped => f.write_str("TLS handshake cut by shutdown"),
            HandshakeError::Failed(e) => write!(f, "TLS handshake failed: {e}"),
        }
    }
}

/// Runs the server side of a handshake over `stream`, giving up after
/// `timeout` or when `stop` fires.
pub(crate) async fn handshake<S>(
    setup: &TlsSetup,
    stream: S,
    timeout: Duration,
    stop: &LocalSignal,
) -> Result<TlsStream<S>, HandshakeError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let acceptor = TlsAcceptor::from(setup.config.clone());
    let accept = async {
        acceptor
            .accept(stream)
            .await
            .map_err(HandshakeError::Failed)
    };
    let timer = async {
        Timer::new(timeout).await;
        Err(HandshakeError::Timeout)
    };
    let stopped = async {
        stop.wait().await;
        Err(HandshakeError::Stopped)
    };
    future::or(accept, future::or(timer, stopped)).await
}
