//! The proxy side of the harness: a `queen-proxy` process on the test
//! database (which is also its control database, as a one-machine
//! deployment has it), its admin command line, and requests with a Host.
//! PostgreSQL, brokers and the wire client are the broker's own harness
//! (`tests/common`, included by path), so nothing of it is copied here.
#![allow(dead_code)]

use crate::common::{free_port, pg, Broker, Conn, Db, Resp};
use serde_json::Value;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The broker's JWT secret in these tests (the cell token is signed with it).
pub const BROKER_SECRET: &str = "broker-secret-for-proxy-tests-0123456789";
/// The proxy's session-token secret in these tests.
pub const SESSION_SECRET: &str = "proxy-session-secret-0123456789abcdef";

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_queen-proxy")
}

/// The control database variables of `db`.
fn pxdb_env(cmd: &mut Command, db: &Db) {
    cmd.env("PXDB_HOST", "127.0.0.1")
        .env("PXDB_PORT", pg().port.to_string())
        .env("PXDB_USER", "postgres")
        .env("PXDB_PASSWORD", "postgres")
        .env("PXDB_DB", &db.name);
}

/// A broker with JWT and native tenancy on, as the proxy fronts it.
pub fn secured_broker(db: &Db) -> Broker {
    // The harness runs the broker of this profile's directory (target/<profile>/queen).
    let queen = std::env::current_exe().unwrap().with_file_name("../queen");
    assert!(
        std::env::var_os("QUEEN_TEST_BIN").is_some() || queen.exists(),
        "{} is missing: build the broker of this profile first (cargo build --profile <p> --workspace --bins)",
        queen.display()
    );
    Broker::builder(db)
        .env("JWT_ENABLED", "true")
        .env("JWT_SECRET", BROKER_SECRET)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start()
}

/// A broker JWT with role admin: the cell token the proxy presents.
pub fn cell_token() -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let claims = serde_json::json!({"sub": "queen-proxy", "role": "admin", "exp": exp});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(BROKER_SECRET.as_bytes()),
    )
    .expect("sign the cell token")
}

/// One `queen-proxy admin …` call: (exit code, the JSON object printed).
pub fn admin(db: &Db, args: &[&str]) -> (i32, Value) {
    admin_env(db, &[], args)
}

/// [`admin`] with extra environment variables (an empty value unsets).
pub fn admin_env(db: &Db, envs: &[(&str, &str)], args: &[&str]) -> (i32, Value) {
    let mut cmd = Command::new(exe());
    pxdb_env(&mut cmd, db);
    cmd.env("QUEEN_PROXY_JWT_SECRET", SESSION_SECRET);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.arg("admin").args(args);
    let out = cmd.output().expect("run queen-proxy admin");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "admin {args:?} must print one line: {stdout:?} / {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value =
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("admin {args:?}: {e}: {stdout}"));
    (out.status.code().unwrap_or(-1), v)
}

/// Like [`admin`], asserting success.
pub fn admin_ok(db: &Db, args: &[&str]) -> Value {
    let (code, v) = admin(db, args);
    assert_eq!(code, 0, "admin {args:?}: {v}");
    v
}

/// Builder of a proxy process.
#[derive(Debug)]
pub struct ProxyBuilder {
    db: String,
    envs: Vec<(String, String)>,
}

impl ProxyBuilder {
    /// Sets one environment variable.
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.retain(|(key, _)| key != k);
        self.envs.push((k.into(), v.into()));
        self
    }

    /// Spawns without waiting.
    pub fn spawn(self) -> Proxy {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("queen-proxy-{}-{port}", std::process::id()));
        fs::create_dir_all(&dir).expect("proxy dir");
        let log = dir.join("proxy.log");
        let out = fs::File::create(&log).expect("proxy log");
        let err = out.try_clone().unwrap();
        let mut cmd = Command::new(exe());
        cmd.env_remove("RUST_LOG")
            .env("PXDB_HOST", "127.0.0.1")
            .env("PXDB_PORT", pg().port.to_string())
            .env("PXDB_USER", "postgres")
            .env("PXDB_PASSWORD", "postgres")
            .env("PXDB_DB", &self.db)
            .env("QUEEN_PROXY_BIND_ADDR", "127.0.0.1")
            .env("QUEEN_PROXY_PORT", port.to_string())
            .env("QUEEN_PROXY_NUM_WORKERS", "2")
            .env("QUEEN_PROXY_JWT_SECRET", SESSION_SECRET)
            .env("LOG_LEVEL", "info");
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd.current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: prctl is async-signal-safe; the proxy dies with the test thread.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        Proxy {
            child: cmd.spawn().expect("spawn queen-proxy"),
            port,
            log,
            exit: None,
        }
    }

    /// Spawns and waits until the proxy answers from a loaded snapshot.
    pub fn start(self) -> Proxy {
        let mut p = self.spawn();
        p.wait_ready();
        p
    }
}

/// A running proxy; killed on drop.
#[derive(Debug)]
pub struct Proxy {
    child: Child,
    /// Port on 127.0.0.1.
    pub port: u16,
    log: PathBuf,
    exit: Option<ExitStatus>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- proxy log tail ---\n{}", self.log());
        }
    }
}

impl Proxy {
    /// A builder on `db` (also the control database).
    pub fn builder(db: &Db) -> ProxyBuilder {
        ProxyBuilder {
            db: db.name.clone(),
            envs: Vec::new(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc/<pid>/status` field in KiB (`VmHWM`, `VmRSS`).
    pub fn status_kib(&self, field: &str) -> u64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc status"))
    }

    /// The log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the exit status (None if still running after `deadline`).
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + deadline;
        while Instant::now() < end {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.exit = Some(st);
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Ready: an unknown Host is answered 421 (the snapshot is loaded).
    pub fn wait_ready(&mut self) {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("proxy exited at boot with {st}:\n{}", self.log());
            }
            if let Ok(mut c) = Conn::connect(self.port) {
                c.set_timeout(Duration::from_secs(2));
                if let Ok(r) = c.request("GET", "/", &[("Host", "no-such-cluster.test")], None) {
                    if r.status == 421 {
                        return;
                    }
                }
            }
            assert!(Instant::now() < end, "proxy not ready:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// One request for cluster `slug` with `bearer` (when given).
    pub fn call(
        &self,
        slug: &str,
        bearer: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Resp {
        let auth = bearer.map(|b| format!("Bearer {b}"));
        let mut headers = vec![("Host", format!("{slug}.proxy.test"))];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.clone()));
        }
        if body.is_some() {
            headers.push(("Content-Type", "application/json".into()));
        }
        self.call_with(
            &headers
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
            method,
            path,
            body,
        )
    }

    /// One request with exactly these headers.
    pub fn call_with(
        &self,
        headers: &[(&str, &str)],
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Resp {
        let mut c = Conn::connect(self.port).expect("connect to proxy");
        c.request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }
}

/// The proxy's machine code of an answer ("" when the body has none).
pub fn code(r: &Resp) -> String {
    r.json
        .as_ref()
        .and_then(|j| j.get("code"))
        .and_then(|c| c.as_str())
        .unwrap_or("")
        .to_string()
}

/// A push body of one item.
pub fn push_body(queue: &str, txid: &str) -> Vec<u8> {
    serde_json::json!({"items": [{"queue": queue, "transactionId": txid, "payload": {"t": txid}}]})
        .to_string()
        .into_bytes()
}

/// Sets up a cluster `slug` on `broker` with the cell token and the given
/// broker tenant; returns the bootstrap answer.
pub fn bootstrap(db: &Db, broker: &Broker, tenant: &str, slug: &str, broker_tenant: &str) -> Value {
    admin_ok(
        db,
        &[
            "bootstrap",
            "--tenant",
            tenant,
            "--cluster",
            slug,
            "--broker-url",
            &format!("http://127.0.0.1:{}", broker.port),
            "--broker-token",
            &cell_token(),
            "--broker-tenant",
            broker_tenant,
        ],
    )
}

/// Issues a key with `scopes` on `slug`; returns (id, key).
pub fn issue_key(db: &Db, slug: &str, scopes: &str) -> (String, String) {
    let v = admin_ok(db, &["issue-key", "--cluster", slug, "--scopes", scopes]);
    (
        v["id"].as_str().unwrap().to_string(),
        v["key"].as_str().unwrap().to_string(),
    )
}

/// Polls until `f` holds (control changes reach the proxy by NOTIFY).
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The tenant of cluster `acme` in these tests.
pub const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
/// The tenant of cluster `beta` in these tests.
pub const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

/// A broker, a proxy with operator routes on, and cluster `acme`.
pub fn setup(db: &Db, extra: &[(&str, &str)]) -> (Broker, Proxy) {
    let broker = secured_broker(db);
    bootstrap(db, &broker, "acme-inc", "acme", TENANT_A);
    let mut b = Proxy::builder(db).env("QUEEN_PROXY_OPERATOR_ENABLED", "true");
    for (k, v) in extra {
        b = b.env(k, v);
    }
    (broker, b.start())
}

/// A user of tenant acme-inc with `role` on acme (or an operator); returns
/// (user id, session token).
pub fn user(db: &Db, email: &str, role: Option<&str>, operator: bool) -> (String, String) {
    let mut args = vec!["create-user", "--tenant", "acme-inc", "--email", email];
    if operator {
        args.push("--operator");
    }
    let id = admin_ok(db, &args)["id"].as_str().unwrap().to_string();
    if let Some(role) = role {
        admin_ok(
            db,
            &[
                "grant-role",
                "--user",
                &id,
                "--cluster",
                "acme",
                "--role",
                role,
            ],
        );
    }
    let token = admin_ok(db, &["mint-session", "--user", &id])["token"]
        .as_str()
        .unwrap()
        .to_string();
    (id, token)
}

/// A key with every scope on `slug`.
pub fn key_for(db: &Db, slug: &str) -> String {
    issue_key(db, slug, "produce,consume,admin,read").1
}
