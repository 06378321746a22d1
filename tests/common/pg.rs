//! The test cluster: one private PostgreSQL per test binary, a fresh database per test.
//!
//! The cluster lives in a temp directory (mode 0700, owned by `postgres`) and is started
//! lazily by [`pg`]. It is stopped by an `atexit` hook when the test binary exits
//! normally, and by a guard shell process (own process group, ignores INT/TERM/HUP) that
//! polls the test process and kills the postmaster and removes the directory once the
//! test process is gone, so a killed test run leaves nothing behind.

use super::{free_port, mkdir_private, tail, try_check_for, unique_suffix};
use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

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
