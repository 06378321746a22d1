//! TLS from the broker to PostgreSQL (security.md B2, SEC-24..28):
//! `PG_USE_SSL`, `PG_SSL_ROOT_CERT` (PEM content of the one CA to trust),
//! `PG_SSL_REJECT_UNAUTHORIZED`. Builds the rustls connector every DB thread
//! connects with, and the boot line naming the trust mode.
//!
//! Parsed on the main thread at boot; the connector is cloned into the DB
//! thread group (`db_group.rs`), the only threads that connect.
//!
//! Trust modes, in order of precedence:
//! - `plaintext`: `PG_USE_SSL` false (the default). No TLS is attempted
//!   (`sslmode=disable`), whatever the server offers.
//! - `supplied-ca`: `PG_SSL_ROOT_CERT` set: the chain must end in exactly
//!   the certificate(s) given there; this outranks
//!   `PG_SSL_REJECT_UNAUTHORIZED=false`.
//! - `webpki-roots`: the Mozilla root set compiled into the binary (never
//!   the OS store), so a private CA fails to connect.
//! - `accept-any`: `PG_SSL_REJECT_UNAUTHORIZED=false` without a root cert:
//!   encrypted, the handshake signature still checked, but the server's
//!   certificate is not verified; the boot log warns.
//!
//! Decisions: a malformed `PG_SSL_ROOT_CERT` is fatal even with TLS off
//! (config.md); literal `\n` sequences in it are unescaped (config.md), so
//! one-line environments work; the host name checked is `PG_HOST` (an IP
//! literal is matched against IP SANs).

use crate::env::{ConfigError, Env};
use postgres::config::SslMode;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// `PG_USE_SSL` when unset (config.md): plaintext, as the Queen broker.
pub const DEFAULT_PG_USE_SSL: bool = false;
/// `PG_SSL_REJECT_UNAUTHORIZED` when unset (config.md): verify the chain;
/// `false` encrypts without authenticating, a last resort.
pub const DEFAULT_PG_SSL_REJECT_UNAUTHORIZED: bool = true;

/// The connector type the DB thread group uses (plaintext included: with
/// `sslmode=disable` it is never asked to do TLS).
pub type Connector = MakeRustlsConnect;

/// How the PostgreSQL link is (not) authenticated.
#[derive(Debug, Clone)]
pub enum TrustMode {
    /// No TLS.
    Plaintext,
    /// TLS, chain verified against the compiled-in Mozilla roots.
    WebpkiRoots,
    /// TLS, chain verified against these certificates only.
    SuppliedCa(Vec<CertificateDer<'static>>),
    /// TLS without verifying the server's certificate.
    AcceptAny,
}

impl TrustMode {
    /// The name the boot log uses (SEC-28).
    pub fn name(&self) -> &'static str {
        match self {
            TrustMode::Plaintext => "plaintext",
            TrustMode::WebpkiRoots => "webpki-roots",
            TrustMode::SuppliedCa(_) => "supplied-ca",
            TrustMode::AcceptAny => "accept-any",
        }
    }

    /// Parses the `PG_*` TLS variables.
    pub fn from_env(env: &Env) -> Result<TrustMode, ConfigError> {
        let root = match env.non_empty("PG_SSL_ROOT_CERT") {
            Some(v) => Some(parse_root_cert(&v)?),
            None => None,
        };
        let use_ssl = env.bool("PG_USE_SSL", DEFAULT_PG_USE_SSL)?;
        let reject_unauthorized = env.bool(
            "PG_SSL_REJECT_UNAUTHORIZED",
            DEFAULT_PG_SSL_REJECT_UNAUTHORIZED,
        )?;
        Ok(match (use_ssl, root, reject_unauthorized) {
            (false, _, _) => TrustMode::Plaintext,
            (true, Some(ca), _) => TrustMode::SuppliedCa(ca),
            (true, None, true) => TrustMode::WebpkiRoots,
            (true, None, false) => TrustMode::AcceptAny,
        })
    }

    /// The `sslmode` for the connection settings.
    pub fn ssl_mode(&self) -> SslMode {
        match self {
            TrustMode::Plaintext => SslMode::Disable,
            _ => SslMode::Require,
        }
    }

    /// The rustls connector for this mode.
    pub fn connector(&self) -> Connector {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            // ring's default provider supports the default versions: the
            // builder refuses only a provider without any of them.
            .expect("ring supports TLS 1.2 and 1.3");
        let config = match self {
            TrustMode::Plaintext | TrustMode::WebpkiRoots => {
                let roots = RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                };
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            TrustMode::SuppliedCa(certs) => {
                let mut roots = RootCertStore::empty();
                // Each certificate was already added once by `parse_root_cert`.
                let (_added, _ignored) = roots.add_parsable_certificates(certs.iter().cloned());
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            TrustMode::AcceptAny => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
                .with_no_client_auth(),
        };
        MakeRustlsConnect::new(config)
    }

    /// Logs the one boot line stating the link's trust mode and whether it
    /// is authenticated (a warning for `accept-any`).
    pub fn log_boot(&self) {
        let mode = self.name();
        match self {
            TrustMode::Plaintext => log::info!(
                "PostgreSQL link: plaintext (trust mode {mode}: not encrypted, not authenticated)"
            ),
            TrustMode::WebpkiRoots => log::info!(
                "PostgreSQL link: TLS (trust mode {mode}: server authenticated against the compiled-in Mozilla roots)"
            ),
            TrustMode::SuppliedCa(c) => log::info!(
                "PostgreSQL link: TLS (trust mode {mode}: server authenticated against the {} certificate(s) of PG_SSL_ROOT_CERT only)",
                c.len()
            ),
            TrustMode::AcceptAny => log::warn!(
                "PostgreSQL link: TLS (trust mode {mode}: encrypted but NOT authenticated; PG_SSL_REJECT_UNAUTHORIZED=false accepts any server certificate, set PG_SSL_ROOT_CERT instead)"
            ),
        }
    }
}

/// A connect error with its cause chain (`postgres::Error` shows only
/// "error performing TLS handshake"; the operator needs rustls' reason,
/// e.g. `invalid peer certificate: UnknownIssuer`).
pub fn describe(e: &postgres::Error) -> String {
    let mut out = super::schema::describe(e);
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Parses `PG_SSL_ROOT_CERT` (PEM content, literal `\n` unescaped) into
/// certificates rustls accepts as trust anchors.
fn parse_root_cert(raw: &str) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bad = |reason: String| ConfigError {
        var: "PG_SSL_ROOT_CERT",
        reason,
    };
    let pem = raw.replace("\\n", "\n");
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad(
            "no -----BEGIN CERTIFICATE----- block found (the variable holds PEM content, not a path)"
                .into(),
        ));
    }
    let mut store = RootCertStore::empty();
    for c in &certs {
        store
            .add(c.clone())
            .map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
    }
    Ok(certs)
}

/// The `accept-any` verifier: every certificate passes, but the handshake
/// signatures are still checked so the session keys are the server's.
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(vars: &[(&str, &str)]) -> Result<TrustMode, ConfigError> {
        let get = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        TrustMode::from_env(&Env::new(&get))
    }

    #[test]
    fn modes_follow_the_precedence() {
        assert_eq!(mode(&[]).unwrap().name(), "plaintext");
        assert_eq!(
            mode(&[("PG_USE_SSL", "true")]).unwrap().name(),
            "webpki-roots"
        );
        assert_eq!(
            mode(&[
                ("PG_USE_SSL", "true"),
                ("PG_SSL_REJECT_UNAUTHORIZED", "false")
            ])
            .unwrap()
            .name(),
            "accept-any"
        );
        assert_eq!(
            mode(&[("PG_USE_SSL", "true"), ("PG_SSL_ROOT_CERT", "  \n ")])
                .unwrap()
                .name(),
            "webpki-roots"
        );
    }

    #[test]
    fn malformed_root_cert_is_fatal_even_with_ssl_off() {
        for bad in [
            "not pem",
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----",
        ] {
            let e = mode(&[("PG_SSL_ROOT_CERT", bad)]).unwrap_err();
            assert_eq!(e.var, "PG_SSL_ROOT_CERT", "{bad}");
        }
    }
}
