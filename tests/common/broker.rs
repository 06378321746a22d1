//! A `queen` broker process on a test database: spawned with the harness defaults,
//! ready once `GET /health` answers 200, stopped on drop.
//!
//! A [`Broker`] is stopped on drop (SIGTERM, then SIGKILL after 5 s). It is spawned with
//! `PR_SET_PDEATHSIG = SIGKILL`, so it also dies with the test thread that started it.
//! Its stdout and stderr go to a log file whose tail is printed when the test is
//! panicking.

use super::http::{raw_exchange, Conn, Resp};
use super::pg::{pg, Db};
use super::{free_port, mkdir_private, tail, try_check_for, unique_suffix, BROKER_READY_DEADLINE};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Builder for a broker process on a test database.
#[derive(Debug)]
pub struct BrokerBuilder {
    db: String,
    envs: Vec<(String, String)>,
    port: Option<u16>,
}

impl BrokerBuilder {
    /// Sets (or overrides) one environment variable of the broker.
    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.envs.retain(|(key, _)| key != k);
        self.envs.push((k.to_string(), v.to_string()));
        self
    }

    /// Uses this HTTP port instead of a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Spawns the broker without waiting for readiness.
    pub fn spawn(self) -> Broker {
        let port = self.port.unwrap_or_else(free_port);
        let dir = std::env::temp_dir().join(format!("queen-broker-{}", unique_suffix()));
        mkdir_private(&dir);
        let spool = dir.join("spool");
        mkdir_private(&spool);
        let log = dir.join("broker.log");
        let out = fs::File::create(&log).expect("create broker log");
        let err = out.try_clone().unwrap();
        // QUEEN_TEST_BIN runs the suite against another build (or another broker).
        let exe = std::env::var_os("QUEEN_TEST_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(queen_exe);
        let mut cmd = Command::new(exe);
        cmd.env_remove("RUST_LOG")
            .env("PG_HOST", "127.0.0.1")
            .env("PG_PORT", pg().port.to_string())
            .env("PG_USER", "postgres")
            .env("PG_PASSWORD", "postgres")
            .env("PG_DB", &self.db)
            .env("PORT", port.to_string())
            .env("QUEEN_BIND_ADDR", "127.0.0.1")
            .env("QUEEN_MESH_PORT", free_port().to_string())
            .env("NUM_WORKERS", "2")
            .env("DB_POOL_SIZE", "8")
            .env("FILE_BUFFER_DIR", &spool)
            .env("LOG_LEVEL", "info");
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd.current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        // SAFETY: prctl is async-signal-safe; the broker dies with the spawning thread.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn queen broker");
        Broker {
            child: Some(child),
            port,
            dir,
            log,
            exit: None,
        }
    }

    /// Spawns the broker and waits until `GET /health` answers 200.
    pub fn start(self) -> Broker {
        let mut b = self.spawn();
        b.wait_ready();
        b
    }
}

/// Cargo's `queen` in the root package's tests; from another workspace package
/// (queenctl), the one in this test executable's profile directory (`target/ci/queen`).
fn queen_exe() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_queen") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()
            .expect("path of the test executable")
            .with_file_name("../queen"),
    }
}

/// A running `queen` process; stopped on drop.
#[derive(Debug)]
pub struct Broker {
    child: Option<Child>,
    /// HTTP port on 127.0.0.1.
    pub port: u16,
    /// Private temp directory (log, spool).
    dir: PathBuf,
    /// stdout+stderr of the process.
    log: PathBuf,
    /// Exit status once reaped.
    exit: Option<ExitStatus>,
}

impl Broker {
    /// A builder with the harness defaults for `db`.
    pub fn builder(db: &Db) -> BrokerBuilder {
        BrokerBuilder {
            db: db.name.clone(),
            envs: Vec::new(),
            port: None,
        }
    }

    /// Starts a broker with the defaults and waits for readiness.
    pub fn start(db: &Db) -> Broker {
        Broker::builder(db).start()
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(-1)
    }

    /// Waits up to [`BROKER_READY_DEADLINE`] for `/health` 200; panics with the log tail.
    pub fn wait_ready(&mut self) {
        let end = Instant::now() + BROKER_READY_DEADLINE;
        loop {
            if let Some(st) = self.try_wait() {
                panic!(
                    "broker exited during startup with {st}:\n{}",
                    self.log_tail(60)
                );
            }
            if let Ok(mut c) = Conn::connect(self.port) {
                c.set_timeout(Duration::from_secs(2));
                if let Ok(r) = c.request("GET", "/health", &[], None) {
                    if r.status == 200 {
                        return;
                    }
                }
            }
            if Instant::now() > end {
                panic!(
                    "broker not ready (GET /health != 200) within {BROKER_READY_DEADLINE:?}:\n{}",
                    self.log_tail(60)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status if the process has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.exit = Some(st);
                }
            }
        }
        self.exit
    }

    /// Waits up to `deadline` for the process to exit.
    pub fn wait_exit(&mut self, deadline: Duration) -> Option<ExitStatus> {
        try_check_for(deadline, || self.try_wait())
    }

    /// Sends a signal to the process.
    pub fn signal(&self, sig: i32) {
        if self.exit.is_none() && self.pid() > 0 {
            unsafe { libc::kill(self.pid(), sig) };
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; returns the exit status.
    pub fn stop(&mut self, grace: Duration) -> ExitStatus {
        self.signal(libc::SIGTERM);
        if let Some(st) = self.wait_exit(grace) {
            return st;
        }
        self.signal(libc::SIGKILL);
        self.wait_exit(Duration::from_secs(10))
            .expect("broker did not die after SIGKILL")
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log(), n)
    }

    /// A new keep-alive connection to this broker.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port).unwrap_or_else(|e| panic!("connect to broker: {e}"))
    }

    /// One request on a fresh connection.
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>) -> Resp {
        let mut c = self.conn();
        let headers: &[(&str, &str)] = if body.is_some() {
            &[("Content-Type", "application/json")]
        } else {
            &[]
        };
        c.request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Resp {
        self.request("GET", path, None)
    }

    /// `POST path` with a JSON body.
    pub fn post_json(&self, path: &str, body: &Value) -> Resp {
        self.request("POST", path, Some(body.to_string().as_bytes()))
    }

    /// `POST path` with these exact body bytes (sent as application/json).
    pub fn post_bytes(&self, path: &str, body: &[u8]) -> Resp {
        self.request("POST", path, Some(body))
    }

    /// `POST path` with no body at all (no Content-Length, no Content-Type).
    pub fn post_empty(&self, path: &str) -> Resp {
        self.request("POST", path, None)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> Resp {
        self.request("DELETE", path, None)
    }

    /// Writes `bytes` on a fresh socket and returns everything read until the server
    /// closes or 5 s of silence pass.
    pub fn raw(&self, bytes: &[u8]) -> Vec<u8> {
        raw_exchange(self.port, bytes, Duration::from_secs(5))
    }

    // ---- API shorthands used by most tests ----

    /// `POST /api/v1/push` with `{"items": items}`; asserts 201 and returns the array.
    pub fn push(&self, items: Value) -> Vec<Value> {
        let r = self.post_json("/api/v1/push", &json!({ "items": items }));
        assert_eq!(r.status, 201, "push answered {}: {}", r.status, r.text());
        r.json_array()
    }

    /// Pushes `n` messages `{"n": i}` with transaction ids `{prefix}{i}` to one partition.
    pub fn push_n(&self, queue: &str, partition: &str, prefix: &str, n: usize) -> Vec<Value> {
        let items: Vec<Value> = (0..n)
            .map(|i| {
                json!({"queue": queue, "partition": partition,
                       "transactionId": format!("{prefix}{i}"), "payload": {"n": i}})
            })
            .collect();
        self.push(Value::Array(items))
    }

    /// `POST /api/v1/configure` for `queue` with `options`; asserts 200.
    pub fn configure(&self, queue: &str, options: Value) -> Value {
        let r = self.post_json(
            "/api/v1/configure",
            &json!({"queue": queue, "options": options}),
        );
        assert_eq!(
            r.status,
            200,
            "configure answered {}: {}",
            r.status,
            r.text()
        );
        r.json()
    }

    /// `GET path`; returns the body on 200, `None` on 204, panics otherwise.
    pub fn pop(&self, path: &str) -> Option<Value> {
        let r = self.get(path);
        match r.status {
            200 => Some(r.json()),
            204 => None,
            s => panic!("pop {path} answered {s}: {}", r.text()),
        }
    }

    /// `POST /api/v1/ack` for one message; returns element 0 of the answer array.
    pub fn ack(&self, body: Value) -> Value {
        let r = self.post_json("/api/v1/ack", &body);
        assert_eq!(r.status, 200, "ack answered {}: {}", r.status, r.text());
        let arr = r.json_array();
        assert_eq!(
            arr.len(),
            1,
            "ack answer must be a one-element array: {arr:?}"
        );
        arr[0].clone()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.child.is_some() && self.try_wait().is_none() {
            self.stop(Duration::from_secs(5));
        }
        if std::thread::panicking() {
            eprintln!(
                "----- broker :{} log tail ({}) -----\n{}\n----- end of broker log -----",
                self.port,
                self.log.display(),
                self.log_tail(80)
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
