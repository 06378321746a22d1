//! The broker's log lines (src/logging.rs): RFC 3339 UTC stamps with milliseconds, and
//! `LOG_FORMAT=json` for one JSON object per line.
mod common;

use common::*;

/// True for `2026-12-01T20:08:14.551Z`.
fn is_stamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 24
        && s.ends_with('Z')
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && b[19] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19, 23].contains(&i) || c.is_ascii_digit())
}

#[test]
fn text_lines_start_with_an_rfc3339_stamp() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let log = b.log();
    let line = log
        .lines()
        .find(|l| l.contains("listening on"))
        .unwrap_or_else(|| panic!("no listening line:\n{log}"));
    let (stamp, rest) = line.split_once(' ').unwrap();
    assert!(is_stamp(stamp), "{line}");
    assert!(rest.starts_with("INFO  [main] listening on"), "{line}");
}

#[test]
fn json_lines_are_objects_with_time_level_thread_message() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("LOG_FORMAT", "json").start();
    let log = b.log();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let listening = lines
        .iter()
        .find(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("listening on"))
        })
        .unwrap_or_else(|| panic!("no listening line:\n{log}"));
    assert!(is_stamp(listening["time"].as_str().unwrap()), "{listening}");
    assert_eq!(listening["level"], "INFO");
    assert_eq!(listening["thread"], "main");
}

#[test]
fn an_unknown_log_format_fails_boot_with_one_line() {
    let db = Db::fresh();
    let mut b = Broker::builder(&db).env("LOG_FORMAT", "xml").spawn();
    let st = b
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("broker kept running with LOG_FORMAT=xml");
    assert_eq!(st.code(), Some(1));
    assert_eq!(
        b.log().trim(),
        r#"queen: LOG_FORMAT must be text or json, not "xml""#
    );
}
