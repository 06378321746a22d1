//! The HTTPS listener's configuration (issue 6, beyond the original broker):
//! `QUEEN_TLS_CERT` and `QUEEN_TLS_KEY` name PEM files; with both set every
//! shard serves HTTPS on `PORT` (the runtime's `shards::tls` does the
//! handshakes), with neither it serves plaintext HTTP as the spec describes.
//!
//! Runs on the main thread at boot (reads the two files once). Decisions:
//! one variable without the other, an unreadable file, a file without a
//! PEM item, or a key that does not match the certificate each stop the
//! boot with exit 1 and one line naming the variable; there is no
//! plaintext fallback, since a broker an operator meant to encrypt must not
//! quietly listen in the clear. A certificate change needs a restart.

use crate::env::{ConfigError, Env};
use shards::tls::{TlsError, TlsSetup};

/// Reads `QUEEN_TLS_CERT`/`QUEEN_TLS_KEY` (empty counts as unset) and
/// loads the pair. `Ok(None)`: plaintext HTTP.
pub fn listener_from_env(env: &Env) -> Result<Option<TlsSetup>, ConfigError> {
    let (cert, key) = match (
        env.non_empty("QUEEN_TLS_CERT"),
        env.non_empty("QUEEN_TLS_KEY"),
    ) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (Some(_), None) => return Err(one_without_other("QUEEN_TLS_CERT", "QUEEN_TLS_KEY")),
        (None, Some(_)) => return Err(one_without_other("QUEEN_TLS_KEY", "QUEEN_TLS_CERT")),
    };
    TlsSetup::from_pem_files(cert.trim(), key.trim())
        .map(Some)
        .map_err(|e| ConfigError {
            var: match &e {
                TlsError::Read { what: "key", .. } | TlsError::Pem { what: "key", .. } => {
                    "QUEEN_TLS_KEY"
                }
                _ => "QUEEN_TLS_CERT",
            },
            reason: e.to_string(),
        })
}

/// The error for one TLS variable set without its partner.
fn one_without_other(set: &'static str, missing: &'static str) -> ConfigError {
    ConfigError {
        var: set,
        reason: format!(
            "{set} is set but {missing} is not: the HTTPS listener needs both (or neither, for plaintext HTTP)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener(vars: &[(&str, &str)]) -> Result<Option<TlsSetup>, ConfigError> {
        let lookup = |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        listener_from_env(&Env::new(&lookup))
    }

    #[test]
    fn neither_is_plaintext_and_one_alone_is_fatal() {
        assert!(listener(&[]).expect("ok").is_none());
        let e = listener(&[("QUEEN_TLS_CERT", "/x.pem")]).unwrap_err();
        assert_eq!(e.var, "QUEEN_TLS_CERT");
        assert!(e.reason.contains("QUEEN_TLS_KEY"), "{}", e.reason);
        let e = listener(&[("QUEEN_TLS_KEY", "/x.pem")]).unwrap_err();
        assert_eq!(e.var, "QUEEN_TLS_KEY");
    }

    #[test]
    fn unreadable_files_name_their_variable() {
        let e = listener(&[
            ("QUEEN_TLS_CERT", "/nonexistent/cert.pem"),
            ("QUEEN_TLS_KEY", "/nonexistent/key.pem"),
        ])
        .unwrap_err();
        assert_eq!(e.var, "QUEEN_TLS_CERT");
        assert!(e.reason.contains("/nonexistent/cert.pem"), "{}", e.reason);
    }
}
