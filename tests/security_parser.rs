//! The JSON request decoding under hostile input (issue 6, item 7): a
//! bounded run of random and mutated bodies against the write endpoints of a
//! real broker. Every answer must be a clean 2xx/4xx JSON (never a 5xx,
//! never a dropped connection), nothing invalid may be stored, and the
//! broker must stay healthy. `PARSER_FUZZ_CASES` runs longer by hand.
mod common;

use common::*;

/// Bodies per endpoint in CI.
const DEFAULT_CASES: usize = 150;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[(&str, &str)] = &[
    (
        "/api/v1/push",
        r#"{"items":[{"queue":"fz","partition":"p","transactionId":"t","payload":{"a":[1,2,{"b":null}]}}]}"#,
    ),
    (
        "/api/v1/configure",
        r#"{"queue":"fz","options":{"leaseTime":30,"retryLimit":3,"encryptionEnabled":false}}"#,
    ),
    (
        "/api/v1/transaction",
        r#"{"operations":[{"type":"push","items":[{"queue":"fz","payload":1}]},{"type":"ack","transactionId":"x","partitionId":"00000000-0000-0000-0000-000000000000"}]}"#,
    ),
    (
        "/api/v1/ack",
        r#"{"transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000000","status":"completed"}"#,
    ),
    (
        "/api/v1/ack/batch",
        r#"{"acknowledgments":[{"transactionId":"t","partitionId":"x","status":"failed"}]}"#,
    ),
    (
        "/api/v1/timers",
        r#"{"operations":[{"op":"schedule","queue":"fz","timerKey":"k/1","payload":"eyJhIjpbMSxudWxsXX0=","delayMs":10,"txn":"t","partition":"p"},{"op":"cancel","queue":"fz","timerKey":"j","txn":"u"}]}"#,
    ),
    (
        "/api/v1/kv",
        r#"{"operations":[{"op":"put","ns":"fz","key":"k/1","value":{"a":[1,"x"]},"ttlSeconds":60,"expect":0},{"op":"incr","ns":"fz","key":"n","delta":1,"max":9,"forever":true},{"op":"getPrefix","ns":"fz","prefix":"k/","limit":5}]}"#,
    ),
    (
        "/api/v1/locks",
        r#"{"operations":[{"op":"acquire","name":"l","ttlSeconds":5,"owner":"w"},{"op":"renew","name":"l","token":1,"ttlSeconds":5}]}"#,
    ),
    (
        "/streams/v1/queries",
        r#"{"name":"fz","source_queue":"fz","sink_queue":"fz-out","config_hash":"h","reset":false}"#,
    ),
    (
        "/streams/v1/cycle",
        r#"{"query_id":"00000000-0000-0000-0000-000000000000","partition_id":"p","consumer_group":"g","state_ops":[{"type":"upsert","key":"k","value":{"acc":1}},{"type":"delete","key":"j"}],"push_items":[{"queue":"fz","payload":{"v":1}}],"ack":{"transactionId":"t","leaseId":"00000000-0000-0000-0000-000000000000","status":"completed","count":2},"release_lease":true}"#,
    ),
    (
        "/streams/v1/state/get",
        r#"{"query_id":"00000000-0000-0000-0000-000000000000","partition_id":"p","keys":["k"],"key_prefix":"k","ripe_at_or_before":1000}"#,
    ),
    (
        "/api/v1/ephemeral/push",
        r#"{"queue":"fz","partition":"p","messages":[{"payload":{"a":[1,"\u00e9"]}},{"payload":null}]}"#,
    ),
    (
        "/api/v1/ephemeral/configure",
        r#"{"queue":"fz","options":{"maxLength":5,"policy":"dropOldest","windowBuffer":{"ms":1,"count":2}}}"#,
    ),
    (
        "/api/v1/ephemeral/ack",
        r#"{"queue":"fz","group":"g","acks":[{"id":"0000000000000001000000000000000100000001.cA","status":"retry"}]}"#,
    ),
    ("/api/v1/ephemeral/reset", r#"{"queue":"fz"}"#),
];

const TOKENS: &[&str] = &[
    "\\u0000",
    "\u{0}",
    "null",
    "[",
    "]",
    "{",
    "}",
    "\"",
    ",",
    ":",
    "1e999",
    "-0",
    "true",
    "\\ud800",
    "\u{fffd}",
    "[[[[[[[[[[",
    "99999999999999999999999",
    "\"queue\":",
    "\\",
];

fn mutate(rng: &mut Rng, seed: &str) -> Vec<u8> {
    let mut v = seed.as_bytes().to_vec();
    for _ in 0..1 + rng.below(5) {
        let at = rng.below(v.len() + 1);
        match rng.below(4) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next() as u8;
            }
            1 if at < v.len() => {
                let n = rng.below(v.len() - at + 1).min(12);
                v.drain(at..at + n);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                v.splice(at..at, t.iter().copied());
            }
            _ => {
                let t = TOKENS[rng.below(TOKENS.len())].repeat(1 + rng.below(200));
                v.splice(at..at, t.bytes());
            }
        }
    }
    v
}

/// Bodies per endpoint: `PARSER_FUZZ_CASES`, else [`DEFAULT_CASES`].
fn fuzz_cases() -> usize {
    std::env::var("PARSER_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

#[test]
fn mutated_json_bodies_get_clean_answers_and_never_a_5xx() {
    let cases = fuzz_cases();
    let db = Db::fresh();
    let b = Broker::start(&db);
    let mut rng = Rng(0xB0D1_E5F0_0D5E_ED01);
    let mut statuses = std::collections::BTreeMap::new();
    for case in 0..cases {
        for (path, seed) in SEEDS {
            let body = mutate(&mut rng, seed);
            let r = b.post_bytes(path, &body);
            assert!(
                r.status < 500,
                "case {case} {path}: {} {} on {:?}",
                r.status,
                r.text(),
                String::from_utf8_lossy(&body)
            );
            assert!(
                r.json.is_some() || r.status == 204,
                "{path}: non-JSON {}",
                r.text()
            );
            *statuses.entry(r.status).or_insert(0) += 1;
        }
    }
    assert!(statuses.contains_key(&400), "no refusal: {statuses:?}");
    assert_eq!(b.get("/health").status, 200);
    // jsonb refuses \u0000: nothing holding one may have been stored.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.messages WHERE payload::text LIKE '%\\u0000%'",
            &[]
        ),
        0
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.kv WHERE value::text LIKE '%\\u0000%'",
            &[]
        ),
        0
    );
}

#[test]
fn deeply_nested_json_is_refused_without_crashing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let deep = format!(
        "{{\"items\":[{{\"queue\":\"d\",\"payload\":{}1{}}}]}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let r = b.post_bytes("/api/v1/push", deep.as_bytes());
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(b.get("/health").status, 200);
}

/// Field names the write endpoints read, so random documents reach past the
/// first type check.
const KEYS: &[&str] = &[
    "items",
    "queue",
    "partition",
    "transactionId",
    "payload",
    "traceId",
    "options",
    "leaseTime",
    "retryLimit",
    "encryptionEnabled",
    "operations",
    "type",
    "partitionId",
    "leaseId",
    "consumerGroup",
    "status",
    "acknowledgments",
    "error",
    "namespace",
    "task",
    "name",
    "source_queue",
    "config_hash",
    "reset",
    "query_id",
    "partition_id",
    "state_ops",
    "push_items",
    "ack",
    "key",
    "value",
    "keys",
    "key_prefix",
    "ripe_at_or_before",
    "release_lease",
    "messages",
    "acks",
    "id",
    "group",
    "maxLength",
    "maxBytes",
    "policy",
    "windowBuffer",
    "ms",
    "count",
];

/// A random JSON value, at most `depth` deep, drawn to hit type confusion:
/// strings where numbers go, arrays where objects go, huge and negative
/// numbers, NULs and lone surrogates in strings, empty containers.
fn random_json(rng: &mut Rng, depth: usize) -> String {
    let leaf = depth == 0 || rng.below(3) == 0;
    if leaf {
        return match rng.below(12) {
            0 => "null".into(),
            1 => "true".into(),
            2 => "false".into(),
            3 => (rng.next() as i64).to_string(),
            4 => "-1".into(),
            5 => "1e308".into(),
            6 => "0.5".into(),
            7 => "\"\"".into(),
            8 => "\"\\u0000x\"".into(),
            9 => "\"\\ud800\"".into(),
            10 => format!("\"{}\"", "q".repeat(rng.below(300))),
            _ => "\"00000000-0000-0000-0000-000000000000\"".into(),
        };
    }
    if rng.below(2) == 0 {
        let n = rng.below(4);
        let parts: Vec<String> = (0..n).map(|_| random_json(rng, depth - 1)).collect();
        format!("[{}]", parts.join(","))
    } else {
        let n = rng.below(5);
        let parts: Vec<String> = (0..n)
            .map(|_| {
                let k = KEYS[rng.below(KEYS.len())];
                format!("\"{k}\":{}", random_json(rng, depth - 1))
            })
            .collect();
        format!("{{{}}}", parts.join(","))
    }
}

/// Issue 17: random well-formed documents of any shape, against every JSON
/// write endpoint: each answer is a 2xx, or a 4xx whose JSON body says what is
/// wrong, and the broker answers `/health` after every case.
#[test]
fn random_json_documents_get_a_2xx_or_a_4xx_json_error() {
    let cases = fuzz_cases();
    let db = Db::fresh();
    let b = Broker::start(&db);
    let mut rng = Rng(0x05EE_D0F0_DD5B_A9E5);
    let mut statuses = std::collections::BTreeMap::new();
    for case in 0..cases {
        for (path, _) in SEEDS {
            let body = random_json(&mut rng, 4);
            let r = b.post_bytes(path, body.as_bytes());
            let ok = (200..300).contains(&r.status)
                || ((400..500).contains(&r.status)
                    && r.json
                        .as_ref()
                        .and_then(|j| j.get("error"))
                        .and_then(|e| e.as_str())
                        .is_some_and(|e| !e.is_empty()));
            assert!(
                ok,
                "case {case} {path}: {} {} on {body}",
                r.status,
                r.text()
            );
            *statuses.entry(r.status).or_insert(0) += 1;
            let h = b.get("/health");
            assert_eq!(h.status, 200, "case {case} {path}: /health after {body}");
        }
    }
    assert!(statuses.contains_key(&400), "no refusal: {statuses:?}");
}
