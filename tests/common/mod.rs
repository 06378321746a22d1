//! Integration-test harness: one private PostgreSQL cluster per test binary, a fresh
//! database per test, a `queen` broker process per test, and a small HTTP/1.1 client
//! that speaks the wire (keep-alive, chunked bodies, raw bytes for malformed input).
//!
//! # Ownership and cleanup
//! - The cluster lives in a temp directory (mode 0700, owned by `postgres`) and is
//!   started lazily by [`pg`]. It is stopped by an `atexit` hook when the test binary
//!   exits normally, and by a guard shell process (own process group, ignores
//!   INT/TERM/HUP) that polls the test process and kills the postmaster and removes the
//!   directory once the test process is gone, so a killed test run leaves nothing behind.
//! - A [`Broker`] is stopped on drop (SIGTERM, then SIGKILL after 5 s). It is spawned
//!   with `PR_SET_PDEATHSIG = SIGKILL`, so it also dies with the test thread that
//!   started it. Its stdout and stderr go to a log file whose tail is printed when the
//!   test is panicking.
//!
//! # Threads
//! Tests of one binary run in parallel threads, each with its own database and broker.
//! The only shared state is the cluster ([`Pg`], behind a mutex for stop/start) and the
//! set of ports handed out by [`free_port`].
#![allow(dead_code)]

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub use serde_json::{json, Value};

/// How long a broker may take to answer `GET /health` with 200 after spawn.
pub const BROKER_READY_DEADLINE: Duration = Duration::from_secs(30);
/// Default read timeout of a client connection; long polls raise it per request.
pub const CLIENT_READ_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Polling and ports
// ---------------------------------------------------------------------------

/// Polls `f` every 20 ms until it returns `Some`, or `None` once `deadline` passed.
pub fn try_check_for<T>(deadline: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Like [`try_check_for`] but panics when the deadline passes.
pub fn check_for<T>(deadline: Duration, f: impl FnMut() -> Option<T>) -> T {
    match try_check_for(deadline, f) {
        Some(v) => v,
        None => panic!("condition not met within {deadline:?}"),
    }
}

/// A loopback port nobody in this process has been handed yet and that is free now.
pub fn free_port() -> u16 {
    static USED: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let used = USED.get_or_init(|| Mutex::new(HashSet::new()));
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = l.local_addr().unwrap().port();
        if used.lock().unwrap().insert(port) {
            return port;
        }
    }
}

fn unique_suffix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        nanos % 100_000
    )
}

fn mkdir_private(path: &Path) {
    fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(path)
        .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
}

// ---------------------------------------------------------------------------
// PostgreSQL
// ---------------------------------------------------------------------------

/// The private cluster of this test binary.
#[derive(Debug)]
pub struct Pg {
    /// Directory holding `initdb`, `pg_ctl`, `postgres`.
    bin: PathBuf,
    /// Temp directory owning everything of the cluster (data, socket, log).
    root: PathBuf,
    /// `root/data`.
    data: PathBuf,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// Serialises stop/start and `CREATE DATABASE`.
    lock: Mutex<()>,
}

static PG: OnceLock<Pg> = OnceLock::new();

/// The cluster of this test binary, started on first use.
pub fn pg() -> &'static Pg {
    PG.get_or_init(Pg::boot)
}

extern "C" fn pg_atexit() {
    if let Some(pg) = PG.get() {
        pg.kill_postmaster();
        let _ = fs::remove_dir_all(&pg.root);
    }
}

fn find_pg_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if ["initdb", "pg_ctl", "postgres"]
                .iter()
                .all(|b| dir.join(b).is_file())
            {
                return dir;
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v: u32 = e.file_name().to_str()?.parse().ok()?;
                    let bin = e.path().join("bin");
                    bin.join("initdb").is_file().then_some((v, bin))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().map(|(_, p)| p).expect(
        "PostgreSQL not found: no initdb/pg_ctl/postgres on PATH nor in /usr/lib/postgresql/*/bin",
    )
}

fn chown_postgres(path: &Path) {
    let name = CString::new("postgres").unwrap();
    // SAFETY: getpwnam returns a pointer to static storage or null; read immediately.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "user postgres does not exist");
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let c = CString::new(path.as_os_str().to_str().unwrap()).unwrap();
    let rc = unsafe { libc::chown(c.as_ptr(), uid, gid) };
    assert_eq!(rc, 0, "chown {}", path.display());
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

impl Pg {
    fn as_postgres(&self, prog: &str) -> Command {
        let exe = self.bin.join(prog);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn boot() -> Pg {
        let bin = find_pg_bin();
        let root = std::env::temp_dir().join(format!("queen-tests-{}", unique_suffix()));
        mkdir_private(&root);
        if is_root() {
            chown_postgres(&root);
        }
        let data = root.join("data");
        let mut pg = Pg {
            bin,
            root: root.clone(),
            data: data.clone(),
            port: 0,
            lock: Mutex::new(()),
        };
        spawn_guard(&root, &data);
        unsafe { libc::atexit(pg_atexit) };

        let out = pg
            .as_postgres("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "--auth=trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .current_dir(&root)
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n\
             max_connections = 300\nshared_buffers = 64MB\nlog_min_messages = warning\n",
            root.display()
        );
        fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .and_then(|mut f| f.write_all(conf.as_bytes()))
            .expect("write postgresql.conf");
        for attempt in 0..5 {
            pg.port = free_port();
            if pg.pg_ctl_start() {
                return pg;
            }
            eprintln!("harness: postgres start attempt {attempt} failed, retrying on another port");
        }
        panic!("could not start PostgreSQL: {}", pg.server_log_tail());
    }

    fn pg_ctl_start(&self) -> bool {
        self.as_postgres("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(self.root.join("server.log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!("-p {}", self.port))
            .arg("start")
            .current_dir(&self.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }

    fn server_log_tail(&self) -> String {
        tail(
            &fs::read_to_string(self.root.join("server.log")).unwrap_or_default(),
            40,
        )
    }

    fn postmaster_pid(&self) -> Option<i32> {
        let s = fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        s.lines().next()?.trim().parse().ok()
    }

    fn kill_postmaster(&self) {
        if let Some(pid) = self.postmaster_pid() {
            unsafe { libc::kill(pid, libc::SIGQUIT) };
            let _ = try_check_for(Duration::from_secs(10), || {
                (unsafe { libc::kill(pid, 0) } != 0).then_some(())
            });
        }
    }

    /// Stops the cluster at once (immediate shutdown, like a crash).
    pub fn stop_immediate(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.kill_postmaster();
    }

    /// Starts the cluster again after [`Pg::stop_immediate`], on the same port.
    pub fn start(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            self.pg_ctl_start(),
            "restart failed: {}",
            self.server_log_tail()
        );
    }

    /// libpq-style connection string for `db`.
    pub fn conn_str(&self, db: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={db} connect_timeout=10",
            self.port
        )
    }

    /// A new client connected to `db`.
    pub fn client(&self, db: &str) -> postgres::Client {
        postgres::Client::connect(&self.conn_str(db), postgres::NoTls)
            .unwrap_or_else(|e| panic!("connect to {db}: {e}"))
    }

    /// Runs `sql` (one or more statements) in `db`.
    pub fn psql_exec(&self, db: &str, sql: &str) {
        self.client(db)
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Runs a query in `db` and returns its rows.
    pub fn query(
        &self,
        db: &str,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Vec<postgres::Row> {
        self.client(db)
            .query(sql, params)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Creates a fresh, empty database and returns it.
    pub fn fresh_db(&'static self) -> Db {
        let name = format!("t_{}", unique_suffix());
        {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.client("postgres")
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        }
        Db { name, pg: self }
    }
}

/// Spawns the guard that removes the cluster once this test process is gone.
fn spawn_guard(root: &Path, data: &Path) {
    let script = format!(
        "trap '' INT TERM HUP; while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
         if [ -f '{data}/postmaster.pid' ]; then kill -QUIT $(head -1 '{data}/postmaster.pid') 2>/dev/null; fi; \
         sleep 2; rm -rf '{root}'",
        pid = std::process::id(),
        data = data.display(),
        root = root.display()
    );
    // The guard outlives this process on purpose (it cleans up after a
    // killed test binary), so it is never waited for.
    #[allow(clippy::zombie_processes)]
    let _guard = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn cleanup guard");
}

/// One test's database in the shared cluster.
#[derive(Debug)]
pub struct Db {
    /// Database name (also `PG_DB` of the brokers of this test).
    pub name: String,
    pg: &'static Pg,
}

impl Db {
    /// A fresh database in this binary's cluster.
    pub fn fresh() -> Db {
        pg().fresh_db()
    }

    /// A new client connected to this database.
    pub fn client(&self) -> postgres::Client {
        self.pg.client(&self.name)
    }

    /// Runs statements in this database.
    pub fn exec(&self, sql: &str) {
        self.pg.psql_exec(&self.name, sql)
    }

    /// Runs a query in this database.
    pub fn query(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Vec<postgres::Row> {
        self.pg.query(&self.name, sql, params)
    }

    /// Runs a query whose single row and column is a count (any integer type cast to bigint).
    pub fn count(&self, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> i64 {
        self.query(sql, params)[0].get::<_, i64>(0)
    }
}

// ---------------------------------------------------------------------------
// Broker process
// ---------------------------------------------------------------------------

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
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_queen")));
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

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ---------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------

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
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n",
            self.port
        );
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

// ---------------------------------------------------------------------------
// Small helpers for message bodies
// ---------------------------------------------------------------------------

/// The `messages` array of a pop answer.
pub fn messages(pop: &Value) -> Vec<Value> {
    pop["messages"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("pop answer without messages array: {pop}"))
}

/// The transaction ids of a pop answer, in order.
pub fn txids(pop: &Value) -> Vec<String> {
    messages(pop)
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `{prefix}{i}` for i in range.
pub fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// A random v4 UUID string (an id nobody issued).
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
