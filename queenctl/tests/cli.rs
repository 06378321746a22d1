//! Every `queenctl` command against a real broker on a real PostgreSQL (the root
//! package's harness, tests/common). One broker is shared by the tests that touch
//! only their own queues; maintenance, which is broker-wide, gets its own.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// The port of the broker shared by this binary's tests. It is spawned from a thread
/// that never ends: the harness ties a broker's life to the thread that started it.
fn shared() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let db = Db::fresh();
            let b = Broker::builder(&db).env("NUM_WORKERS", "1").start();
            tx.send(b.port).unwrap();
            loop {
                std::thread::park();
            }
        });
        rx.recv().expect("shared broker failed to start")
    })
}

fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

fn queenctl() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_queenctl"));
    c.env_remove("QUEEN_URL").env_remove("QUEEN_TOKEN");
    c
}

/// Runs `queenctl --url <broker> args...` with no stdin.
fn ctl(port: u16, args: &[&str]) -> Output {
    queenctl()
        .arg("--url")
        .arg(url(port))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run queenctl")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and asserts exit 0; returns stdout.
fn ok(port: u16, args: &[&str]) -> String {
    let o = ctl(port, args);
    assert!(
        o.status.success(),
        "queenctl {args:?} exited {}: {}{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs with `--json` and parses stdout as one document.
fn ok_json(port: u16, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = ok(port, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// Asserts a failure: the exit code, one line on stderr, no panic.
fn fails(o: &Output, code: i32) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn pending(port: u16, queue: &str) -> i64 {
    let q = ok_json(port, &["queue", queue]);
    q["totals"]["pending"].as_i64().unwrap()
}

/// Pushes `payloads` through `push --stdin`, returns stdout.
fn push_stdin(port: u16, queue: &str, input: &str) -> Output {
    let mut child = queenctl()
        .args(["--url", &url(port), "push", queue, "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn push_pop_and_tail_move_messages_and_leave_no_lease() {
    let port = shared();
    let out = ok(port, &["push", "flow", r#"{"n": 0}"#, "--txid", "t0"]);
    assert!(out.starts_with("queued t0"), "{out}");
    let again = ok_json(port, &["push", "flow", r#"{"n": 0}"#, "--txid", "t0"]);
    assert_eq!(again[0]["status"], "duplicate");

    let lines: String = (1..=49).map(|i| format!("{{\"n\": {i}}}\n\n")).collect();
    let o = push_stdin(port, "flow", &lines);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "pushed 49");
    assert_eq!(pending(port, "flow"), 50);

    let popped = ok_json(port, &["pop", "flow", "--batch", "2", "--ack"]);
    assert_eq!(popped["messages"].as_array().unwrap().len(), 2);
    assert_eq!(popped["messages"][0]["data"], json!({"n": 0}));
    let human = ok(port, &["pop", "flow", "--partition", "Default", "--ack"]);
    assert!(human.contains("{\"n\":2}"), "{human}");

    let out = ok(port, &["--json", "tail", "flow", "--count", "47"]);
    let got: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), 47);
    assert_eq!(got[46]["data"], json!({"n": 49}));
    assert_eq!(pending(port, "flow"), 0);
    let q = ok_json(port, &["queue", "flow"]);
    assert_eq!(q["totals"]["processing"], 0, "a lease is held: {q}");
    assert_eq!(
        ok(port, &["pop", "flow", "--wait", "0.2"]).trim(),
        "no messages"
    );
}

#[test]
fn bad_input_and_broker_errors_are_one_line_and_exit_non_zero() {
    let port = shared();
    let err = fails(&ctl(port, &["push", "errs", "{x"]), 1);
    assert!(
        err.starts_with("queenctl: payload is not JSON: key must be a string at line 1 column 2"),
        "{err}"
    );
    let o = push_stdin(port, "errs", "1\n2\nnope\n3\n");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("pushed 2 before the error"), "{err}");
    assert!(err.contains("stdin line 3: payload is not JSON"), "{err}");

    let err = fails(&ctl(port, &["queue", "no-such-queue"]), 1);
    assert_eq!(
        err.trim(),
        r#"queenctl: HTTP 404: {"code":"not_found","error":"Queue not found"}"#
    );

    let o = queenctl()
        .args(["--url", "http://127.0.0.1:1", "queues"])
        .output()
        .unwrap();
    let err = fails(&o, 1);
    assert_eq!(
        err.trim(),
        "queenctl: cannot reach http://127.0.0.1:1: connection refused"
    );
}

#[test]
fn queues_configure_and_delete() {
    let port = shared();
    let out = ok(
        port,
        &[
            "configure",
            "cfg",
            "--lease-time",
            "60",
            "--retry-limit",
            "5",
        ],
    );
    assert!(out.starts_with("configured cfg"), "{out}");
    ok(port, &["push", "cfg", "1", "--partition", "p1"]);
    ok(port, &["push", "cfg", "2", "--partition", "p2"]);

    let q = ok_json(port, &["queue", "cfg"]);
    assert_eq!(q["config"]["leaseTime"], 60);
    assert_eq!(q["config"]["retryLimit"], 5);
    let human = ok(port, &["queue", "cfg"]);
    assert!(human.contains("leaseTime"), "{human}");
    let p1 = human.lines().find(|l| l.starts_with("p1")).expect(&human);
    assert_eq!(p1.split_whitespace().nth(1), Some("1"), "{human}");

    let list = ok(port, &["queues"]);
    assert!(list.lines().next().unwrap().starts_with("NAME"), "{list}");
    let row = list.lines().find(|l| l.starts_with("cfg ")).expect(&list);
    let cols: Vec<&str> = row.split_whitespace().collect();
    // Default (made by configure), p1 and p2.
    assert_eq!(cols, ["cfg", "3", "2", "0", "0", "0"], "{list}");

    let err = fails(&ctl(port, &["delete", "cfg"]), 2);
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(ok(port, &["delete", "cfg", "--yes"]).trim(), "deleted cfg");
    assert!(fails(&ctl(port, &["queue", "cfg"]), 1).contains("404"));
}

#[test]
fn groups_group_and_seek() {
    let port = shared();
    for i in 0..3 {
        ok(port, &["push", "grp", &i.to_string()]);
    }
    let popped = ok_json(
        port,
        &["pop", "grp", "--group", "g1", "--batch", "2", "--ack"],
    );
    assert_eq!(popped["messages"].as_array().unwrap().len(), 2);

    let groups = ok(port, &["groups"]);
    assert!(
        groups
            .lines()
            .any(|l| l.starts_with("g1 ") && l.contains("grp")),
        "{groups}"
    );
    let g = ok_json(port, &["group", "g1"]);
    assert_eq!(g["grp"]["partitions"][0]["offsetLag"], 1, "{g}");
    assert!(ok(port, &["group", "g1"]).contains("Default"));

    let out = ok(port, &["seek", "g1", "grp", "--to-end"]);
    assert!(out.contains("1 partition(s) updated"), "{out}");
    assert_eq!(
        ok_json(port, &["group", "g1"])["grp"]["partitions"][0]["offsetLag"],
        0
    );
    ok(
        port,
        &["seek", "g1", "grp", "--timestamp", "2000-01-01T00:00:00Z"],
    );
    assert_eq!(
        ok_json(port, &["group", "g1"])["grp"]["partitions"][0]["offsetLag"],
        3
    );
    let err = fails(&ctl(port, &["seek", "g1", "grp"]), 2);
    assert!(err.contains("--to-end"), "{err}");
}

#[test]
fn dlq_retry_messages_and_message() {
    let port = shared();
    let pushed = ok_json(
        port,
        &["push", "dead", r#"{"poison": true}"#, "--txid", "bad-1"],
    );
    let pid = pushed[0]["partition_id"].as_str().unwrap().to_string();
    // The harness moves the message to the DLQ by hand (the spec's manual DLQ route).
    let mut c = Conn::connect(port).unwrap();
    let r = c
        .request(
            "POST",
            &format!("/api/v1/messages/{pid}/bad-1/dlq"),
            &[],
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    let dlq = ok_json(port, &["dlq", "dead"]);
    assert_eq!(dlq["total"], 1, "{dlq}");
    let id = dlq["messages"][0]["id"].as_str().unwrap().to_string();
    let human = ok(port, &["dlq", "dead"]);
    assert!(human.contains(&id) && human.contains("bad-1"), "{human}");

    let listed = ok(port, &["messages", "dead", "--status", "dead_letter"]);
    assert!(listed.contains("bad-1"), "{listed}");
    let m = ok_json(port, &["message", &pid, "bad-1"]);
    assert_eq!(m["payload"], json!({"poison": true}));
    assert!(ok(port, &["message", &pid, "bad-1"]).contains("\"poison\": true"));

    let out = ok(port, &["dlq", "retry", &id]);
    assert!(out.starts_with("replayed bad-1 into dead/Default"), "{out}");
    assert_eq!(ok_json(port, &["dlq", "dead"])["total"], 0);
    let replayed = ok_json(port, &["pop", "dead", "--ack"]);
    assert_eq!(replayed["messages"][0]["data"], json!({"poison": true}));
    assert!(fails(&ctl(port, &["dlq", "retry", &id]), 1).contains("HTTP 404"));
}

#[test]
fn timers_schedule_list_show_count_cancel_and_fire() {
    let port = shared();
    let out = ok(
        port,
        &[
            "timers",
            "schedule",
            "ctl-tm",
            "a/1",
            r#"{"n":1}"#,
            "--delay-ms",
            "60000",
            "--txn",
            "tx-a",
        ],
    );
    assert!(out.starts_with("scheduled a/1 (txn tx-a, due "), "{out}");
    ok(
        port,
        &[
            "timers",
            "schedule",
            "ctl-tm",
            "b",
            "2",
            "--delay-ms",
            "-1",
            "--txn",
            "tx-b",
        ],
    );
    let list = ok_json(port, &["timers", "list", "ctl-tm", "--limit", "1"]);
    assert_eq!(list["rows"][0]["timerKey"], "a/1");
    assert_eq!(list["truncated"], true);
    let show = ok(port, &["timers", "show", "ctl-tm", "a/1"]);
    assert!(show.contains("tx-a"), "{show}");
    assert_eq!(
        ok(port, &["timers", "count", "ctl-tm", "--prefix", "a/"]).trim(),
        "1"
    );
    let gone = ok(port, &["timers", "cancel", "ctl-tm", "a/1"]);
    assert!(gone.starts_with("cancelled a/1 (txn tx-a"), "{gone}");
    let again = ok(
        port,
        &["timers", "cancel", "ctl-tm", "a/1", "--txn", "tx-a"],
    );
    assert!(again.starts_with("absent a/1 (txn tx-a"), "{again}");
    assert!(ok(port, &["timers", "show", "ctl-tm", "a/1"]).contains("not found"));
    // the past-due one fires: its message carries the txn
    let popped = check_for(Duration::from_secs(10), || {
        let v = ok_json(port, &["pop", "ctl-tm", "--ack"]);
        (!v["messages"].as_array().is_none_or(|m| m.is_empty())).then_some(v)
    });
    assert_eq!(popped["messages"][0]["transactionId"], "tx-b");
    let bad = ctl(
        port,
        &[
            "timers",
            "schedule",
            "ctl-tm",
            "x",
            "not json",
            "--delay-ms",
            "1",
        ],
    );
    assert!(fails(&bad, 2).contains("payload is not JSON"));
}

#[test]
fn maintenance_switches_flip_and_report() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("NUM_WORKERS", "1").start();
    let port = b.port;
    let st = ok_json(port, &["maintenance", "status"]);
    assert_eq!(st["maintenanceMode"], false);
    assert!(ok(port, &["maintenance", "on"]).contains("push maintenance  on"));
    let out = ok(port, &["push", "mq", "1"]);
    assert!(out.starts_with("buffered"), "{out}");
    assert!(ok(port, &["maintenance", "status"]).contains("push maintenance  on"));
    assert!(ok(port, &["maintenance", "off"]).contains("push maintenance  off"));

    assert!(ok(port, &["maintenance", "pop", "on"]).contains("pop maintenance  on"));
    assert!(ok(port, &["pop", "mq"]).contains("pop maintenance is on"));
    assert_eq!(
        ok_json(port, &["maintenance", "pop"])["popMaintenanceMode"],
        true
    );
    assert!(ok(port, &["maintenance", "pop", "off"]).contains("pop maintenance  off"));
}

fn sigint(child: &std::process::Child) {
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

#[test]
fn ctrl_c_stops_tail_after_acking_what_it_printed() {
    let port = shared();
    ok(port, &["push", "tailq", r#"{"first": 1}"#]);
    let mut child = queenctl()
        .args(["--url", &url(port), "tail", "tailq"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The message is printed and then acked: wait for the ack to show in the queue.
    check_for(Duration::from_secs(10), || {
        let q = ok_json(port, &["queue", "tailq"]);
        (q["totals"]["completed"] == 1).then_some(())
    });
    sigint(&child);
    let status = common::try_check_for(Duration::from_secs(5), || child.try_wait().unwrap())
        .expect("tail did not stop on Ctrl-C");
    let o = child.wait_with_output().unwrap();
    assert!(status.success(), "{status}: {}", stderr(&o));
    assert!(stdout(&o).contains(r#"{"first":1}"#), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("stopped after 1 message(s)"),
        "{}",
        stderr(&o)
    );
    let q = ok_json(port, &["queue", "tailq"]);
    assert_eq!(q["totals"]["processing"], 0, "a lease is held: {q}");
    assert_eq!(q["totals"]["pending"], 0, "{q}");
}

#[test]
fn ctrl_c_stops_push_stdin_and_pushes_what_was_read() {
    let port = shared();
    let mut child = queenctl()
        .args(["--url", &url(port), "push", "intr", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let lines: String = (0..150).map(|i| format!("{i}\n")).collect();
    input.write_all(lines.as_bytes()).unwrap();
    input.flush().unwrap();
    // The first full batch of 100 goes out at once; the other 50 wait for more input.
    check_for(Duration::from_secs(10), || {
        let o = ctl(port, &["--json", "queue", "intr"]);
        let q: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        (q["totals"]["pending"] == 100).then_some(())
    });
    sigint(&child);
    let o = child.wait_with_output().unwrap();
    drop(input);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "pushed 150 (stopped by Ctrl-C)");
    assert_eq!(pending(port, "intr"), 150);
}

#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = queenctl().args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        assert!(
            script.contains("queenctl") && script.contains("maintenance"),
            "{shell}"
        );
    }
}

/// Accepts one connection on a free port, answers `200 {"queues": []}` and hands the
/// request head back.
fn capture_one_request() -> (u16, std::thread::JoinHandle<String>) {
    use std::io::Read;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"queues":[]}"#;
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(resp.as_bytes()).unwrap();
        String::from_utf8_lossy(&head).into_owned()
    });
    (port, h)
}

#[test]
fn url_and_token_come_from_the_environment() {
    let (port, h) = capture_one_request();
    let o = queenctl()
        .env("QUEEN_URL", url(port))
        .env("QUEEN_TOKEN", "t0ken")
        .arg("queues")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "no queues");
    let head = h.join().unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /api/v1/status/queues"), "{head}");
    assert!(head.contains("authorization: bearer t0ken\r\n"), "{head}");
}

#[test]
fn bench_scenarios_run_short_and_report() {
    let port = shared();
    let runs: [&[&str]; 3] = [
        &[
            "push",
            "--conns",
            "2",
            "--batch",
            "10",
            "--duration",
            "0.5",
            "--warmup",
            "0.1",
        ],
        &[
            "drain",
            "--prefill",
            "200",
            "--partitions",
            "2",
            "--prefill-conns",
            "2",
            "--batch",
            "50",
            "--conns",
            "2",
            "--wait-ms",
            "200",
            "--idle-secs",
            "0.5",
            "--max-secs",
            "5",
            "--warmup-msgs",
            "0",
        ],
        &[
            "latency",
            "--rate",
            "200",
            "--producers",
            "2",
            "--partitions",
            "2",
            "--duration",
            "0.5",
            "--warmup",
            "0.1",
            "--wait-ms",
            "200",
            "--grace-secs",
            "0.5",
        ],
    ];
    for args in runs {
        let mut all = vec!["--json", "bench"];
        all.extend_from_slice(args);
        let o = ctl(port, &all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let report: Value = serde_json::from_str(stdout(&o).trim()).unwrap();
        assert_eq!(report["scenario"], args[0]);
        assert!(report["messages"].as_u64().unwrap() > 0, "{report}");
        assert_eq!(report["errors"]["transport"], 0, "{report}");
        // The human summary (the same as queen-bench's) goes to stderr.
        assert!(stderr(&o).contains("msg/s"), "{}", stderr(&o));
    }
    let err = fails(&ctl(port, &["--token", "x", "bench", "push"]), 2);
    assert!(err.contains("no token"), "{err}");
}

#[test]
fn kv_put_get_incr_list_and_delete() {
    let port = shared();
    let out = ok(
        port,
        &["kv", "put", "ctl", "a/1", r#"{"x": 1}"#, "--forever"],
    );
    assert!(out.starts_with("applied, version"), "{out}");
    let v = ok_json(port, &["kv", "get", "ctl", "a/1"]);
    assert_eq!(v["value"], json!({"x": 1}));
    let version = v["version"].as_i64().unwrap().to_string();
    let stale = ok(
        port,
        &[
            "kv", "put", "ctl", "a/1", "2", "--ttl", "60", "--expect", "999999",
        ],
    );
    assert!(stale.starts_with("not applied: version"), "{stale}");
    assert!(ok(port, &["kv", "get", "ctl", "a/1"]).contains(&version));
    ok(
        port,
        &["kv", "incr", "ctl", "n", "--delta", "-3", "--forever"],
    );
    assert_eq!(ok_json(port, &["kv", "get", "ctl", "n"])["value"], -3);
    let list = ok(port, &["kv", "list", "ctl", "--prefix", "a/"]);
    assert!(list.contains("a/1") && !list.contains("\nn "), "{list}");
    assert!(ok(port, &["kv", "namespaces"]).contains("ctl"));
    // an expiry is required: clap refuses a put without one
    assert_eq!(
        ctl(port, &["kv", "put", "ctl", "k", "1"]).status.code(),
        Some(2)
    );
    assert!(ok(port, &["kv", "delete", "ctl", "a/1"]).starts_with("applied"));
    assert_eq!(
        ok(port, &["kv", "get", "ctl", "a/1"]).trim_end(),
        "not found"
    );
}
