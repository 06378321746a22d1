//! The broker's HTTP API over a blocking ureq agent: one keep-alive connection
//! reused for every request of a command, the bearer token on each, JSON bodies in
//! and out. Transport failures become [`Error::Unreachable`] and non-2xx answers
//! [`Error::Http`] carrying the broker's JSON error, so commands only see the
//! successful body.

use std::io::ErrorKind;
use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};

/// How long an ordinary request may take, connect to last body byte. Long polls add
/// their own wait on top (see [`Client::get_waiting`]).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a TCP (and TLS) connect may take before the broker counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer body read (a `dlq` or `messages` page is far below it).
const MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;

/// A connection to one broker.
#[derive(Debug)]
pub struct Client {
    /// ureq's agent: pooled keep-alive connections, status codes returned, not raised.
    agent: ureq::Agent,
    /// Base URL without a trailing `/`, e.g. `http://localhost:6632`.
    base: String,
    /// `Authorization: Bearer <token>` when set.
    token: Option<String>,
}

/// A 2xx answer (`Value::Null` for 204 or an empty body).
#[derive(Debug)]
pub struct Answer {
    /// The JSON body, `Null` when there was none.
    pub body: Value,
}

impl Client {
    /// A client for `url` (scheme and host, optional port and path prefix).
    pub fn new(url: &str, token: Option<String>) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        Client {
            agent,
            base: url.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
        }
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Answer> {
        self.send("GET", path, None, REQUEST_TIMEOUT)
    }

    /// `GET path` that the broker may hold for up to `wait` (a long-polling pop).
    pub fn get_waiting(&self, path: &str, wait: Duration) -> Result<Answer> {
        self.send("GET", path, None, REQUEST_TIMEOUT + wait)
    }

    /// `POST path` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Answer> {
        self.send("POST", path, Some(body), REQUEST_TIMEOUT)
    }

    /// `POST path` with no body (the spec's bodiless POSTs: replay, stats refresh).
    pub fn post_empty(&self, path: &str) -> Result<Answer> {
        self.send("POST", path, None, REQUEST_TIMEOUT)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Result<Answer> {
        self.send("DELETE", path, None, REQUEST_TIMEOUT)
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Answer> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let sent = match method {
            "GET" | "DELETE" => {
                let mut rb = if method == "GET" {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                if let Some(a) = &auth {
                    rb = rb.header("Authorization", a);
                }
                rb.config().timeout_global(Some(timeout)).build().call()
            }
            _ => {
                let mut rb = self.agent.post(&url);
                if let Some(a) = &auth {
                    rb = rb.header("Authorization", a);
                }
                let rb = rb.config().timeout_global(Some(timeout)).build();
                match body {
                    Some(b) => rb
                        .content_type("application/json")
                        .send(b.to_string().as_bytes()),
                    None => rb.send_empty(),
                }
            }
        };
        let mut resp = sent.map_err(|e| self.unreachable(&e))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_BODY_BYTES)
            .read_to_string()
            .map_err(|e| self.unreachable(&e))?;
        if !(200..300).contains(&status) {
            return Err(Error::Http {
                status,
                body: one_line(&text),
            });
        }
        let body = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).map_err(|e| Error::BadAnswer {
                what: format!("{method} {path}"),
                detail: format!("not JSON ({e})"),
            })?
        };
        Ok(Answer { body })
    }

    fn unreachable(&self, e: &ureq::Error) -> Error {
        Error::Unreachable {
            url: self.base.clone(),
            reason: describe(e),
        }
    }
}

/// A transport error in a few lower-case words.
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => "connection refused".into(),
            ErrorKind::ConnectionReset => "connection reset".into(),
            ErrorKind::TimedOut => "timed out".into(),
            ErrorKind::UnexpectedEof => "connection closed before the answer".into(),
            _ => io.to_string(),
        },
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::BadUri(u) => format!("bad URL {u}"),
        other => other.to_string(),
    }
}

/// The body on one line: JSON re-serialised compactly, other text with newlines folded.
fn one_line(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => v.to_string(),
        Err(_) => text.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// Percent-encodes one path segment or query value: everything but unreserved
/// characters (RFC 3986), so names with `/`, spaces or `?` reach the broker intact.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `?k=v&...` of the pairs whose value is present, values encoded.
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", enc(v))))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::{enc, query};

    #[test]
    fn segments_and_queries_are_encoded() {
        assert_eq!(enc("orders-eu_1.x"), "orders-eu_1.x");
        assert_eq!(enc("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(
            query(&[
                ("a", Some("1".into())),
                ("b", None),
                ("c", Some("x y".into()))
            ]),
            "?a=1&c=x%20y"
        );
        assert_eq!(query(&[("b", None)]), "");
    }
}
