//! A small HTTP/1.1 client that speaks the wire: keep-alive, chunked bodies, and raw
//! bytes for malformed input.

use super::CLIENT_READ_TIMEOUT;
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// One HTTP response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Header (lower-cased name, value) pairs in arrival order.
    pub headers: Vec<(String, String)>,
    /// Decoded body (chunked framing removed).
    pub body: Vec<u8>,
    /// The body parsed as JSON, when it parses.
    pub json: Option<Value>,
}

impl Resp {
    /// The first header with this (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON body; panics with the raw body when it is not JSON.
    pub fn json(&self) -> Value {
        self.json
            .clone()
            .unwrap_or_else(|| panic!("status {} body is not JSON: {:?}", self.status, self.text()))
    }

    /// The JSON body as an array; panics otherwise.
    pub fn json_array(&self) -> Vec<Value> {
        match self.json() {
            Value::Array(a) => a,
            other => panic!("expected a JSON array, got {other}"),
        }
    }

    /// The `error` string of a JSON error body, lower-cased ("" when absent).
    pub fn error_lc(&self) -> String {
        self.json
            .as_ref()
            .and_then(|j| j.get("error"))
            .and_then(|e| e.as_str())
            .unwrap_or("")
            .to_ascii_lowercase()
    }
}

/// A keep-alive client connection.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    /// Bytes read past the previous response.
    buf: Vec<u8>,
    port: u16,
}

impl Conn {
    /// Connects to 127.0.0.1:`port`.
    pub fn connect(port: u16) -> io::Result<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(CLIENT_READ_TIMEOUT))?;
        stream.set_write_timeout(Some(Duration::from_secs(30)))?;
        Ok(Conn {
            stream,
            buf: Vec::new(),
            port,
        })
    }

    /// Sets the read timeout for the following responses.
    pub fn set_timeout(&mut self, t: Duration) {
        let _ = self.stream.set_read_timeout(Some(t));
    }

    /// The local socket address (identifies the TCP connection).
    pub fn local_port(&self) -> u16 {
        self.stream.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Shuts the socket down both ways (a client going away).
    pub fn close(self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a request; `body: None` sends no body and no Content-Length.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<()> {
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        // A test that names its own Host (rebinding probes) sends only that one.
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: 127.0.0.1:{}\r\n", self.port));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        self.stream.write_all(&bytes)
    }

    /// Sends a request and reads its response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> io::Result<Resp> {
        self.send(method, path, headers, body)?;
        self.read_response()
    }

    /// `GET path` on this connection.
    pub fn get(&mut self, path: &str) -> io::Result<Resp> {
        self.request("GET", path, &[], None)
    }

    /// `POST path` with a JSON body on this connection.
    pub fn post_json(&mut self, path: &str, body: &Value) -> io::Result<Resp> {
        self.request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            Some(body.to_string().as_bytes()),
        )
    }

    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 16384];
        let n = self.stream.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    /// Reads one response (Content-Length, chunked, or until close).
    pub fn read_response(&mut self) -> io::Result<Resp> {
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a response head ({} bytes)",
                        self.buf.len()
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad status line {status_line:?}"),
                )
            })?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_ascii_lowercase(), v.trim().to_string()))
            })
            .collect();
        let hv = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        let body = if status == 204 || status == 304 || (100..200).contains(&status) {
            Vec::new()
        } else if hv("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"))
        {
            self.read_chunked()?
        } else if let Some(len) = hv("content-length") {
            let len: usize = len
                .parse()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?;
            while self.buf.len() < len {
                if self.fill()? == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short body"));
                }
            }
            self.buf.drain(..len).collect()
        } else {
            while self.fill()? > 0 {}
            std::mem::take(&mut self.buf)
        };
        let json = serde_json::from_slice(&body).ok();
        Ok(Resp {
            status,
            headers,
            body,
            json,
        })
    }

    fn read_chunked(&mut self) -> io::Result<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                if self.fill()? == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "chunk size"));
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            self.buf.drain(..line_end + 2);
            let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "chunk size"))?;
            if size == 0 {
                // Trailers (none expected) end with an empty line.
                loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        let empty = i == 0;
                        self.buf.drain(..i + 2);
                        if empty {
                            return Ok(body);
                        }
                    } else if self.fill()? == 0 {
                        return Ok(body);
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if self.fill()? == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "chunk data"));
                }
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Writes `bytes` (from a writer thread, so a server that answers early and closes
/// cannot block us) and returns all bytes read until close or `silence` passes.
pub fn raw_exchange(port: u16, bytes: &[u8], silence: Duration) -> Vec<u8> {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(silence)).unwrap();
    let mut w = stream.try_clone().unwrap();
    let data = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&data);
    });
    let mut out = Vec::new();
    let mut r = stream;
    let mut tmp = [0u8; 8192];
    loop {
        match r.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&tmp[..n]),
            Err(_) => break,
        }
    }
    let _ = r.shutdown(Shutdown::Both);
    let _ = writer.join();
    out
}

/// The status code of the first response in raw bytes, if any.
pub fn raw_status(bytes: &[u8]) -> Option<u16> {
    let s = String::from_utf8_lossy(bytes);
    let line = s.lines().next()?;
    if !line.starts_with("HTTP/1.") {
        return None;
    }
    line.split_whitespace().nth(1)?.parse().ok()
}
