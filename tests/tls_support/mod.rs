//! Certificates made by the security tests (rcgen): a private CA and a
//! server certificate it signs, written as PEM files; and an HTTPS client
//! (ureq over rustls) that trusts a given CA. Shared by the TLS listener,
//! PostgreSQL TLS and JWKS tests.
#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A private CA and one server certificate it signed, all as PEM.
pub struct Pki {
    /// The CA certificate.
    pub ca_pem: String,
    /// The server certificate (leaf only).
    pub cert_pem: String,
    /// The server's private key (PKCS#8).
    pub key_pem: String,
}

/// Makes a CA named `ca_name` and a server certificate for `names`
/// (DNS names or IP literals).
pub fn make_pki(ca_name: &str, names: &[&str]) -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    let ca_cert = ca.self_signed(&ca_key).expect("self-sign CA");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("server key");
    let mut params =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .expect("server params");
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("server"),
    );
    let cert = params.signed_by(&key, &issuer).expect("sign server cert");
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// A fresh private directory for a test's PEM files.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "queen-tls-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// Writes `content` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).expect("write pem");
    p.to_str().expect("utf8 path").to_string()
}

/// An HTTPS client trusting only `ca_pem` (or the Mozilla roots when
/// `None`); HTTP error statuses are answers, not errors.
pub fn https_agent(ca_pem: Option<&str>) -> ureq::Agent {
    use ureq::tls::{Certificate, RootCerts, TlsConfig};
    let roots = match ca_pem {
        Some(pem) => {
            RootCerts::new_with_certs(&[Certificate::from_pem(pem.as_bytes()).expect("CA pem")])
        }
        None => RootCerts::WebPki,
    };
    ureq::Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(15)))
        .build()
        .into()
}
