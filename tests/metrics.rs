//! `GET /metrics` (JSON keys of http-api.md §1) and `GET /metrics/prometheus`
//! (text exposition parsed by a strict parser written here) after a known workload.

mod common;

use common::*;
use std::collections::{BTreeMap, HashMap};

/// One parsed sample: its labels and value.
#[derive(Debug, Clone)]
struct Sample {
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: samples by series name, and the declared type of each family.
#[derive(Debug, Default)]
struct Exposition {
    samples: HashMap<String, Vec<Sample>>,
    types: HashMap<String, String>,
}

impl Exposition {
    fn series(&self, name: &str) -> &[Sample] {
        self.samples
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_else(|| panic!("no series {name}"))
    }

    /// The value of the one sample of `name` whose labels include `want`.
    fn value(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        let hits: Vec<&Sample> = self
            .series(name)
            .iter()
            .filter(|s| {
                want.iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert_eq!(hits.len(), 1, "{name}{want:?}: {hits:?}");
        hits[0].value
    }
}

fn is_name(s: &str, colon: bool) -> bool {
    let mut it = s.chars();
    matches!(it.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
        && it.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => s
            .parse::<f64>()
            .map_err(|e| format!("bad value {s:?}: {e}")),
    }
}

/// Parses `{a="x",b="y"}` starting at `s` (after the metric name); returns the labels and the rest.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let Some(mut rest) = s.strip_prefix('{') else {
        return Ok((labels, s));
    };
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest.find('=').ok_or("label without =")?;
        let name = &rest[..eq];
        if !is_name(name, false) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..]
            .strip_prefix('"')
            .ok_or("label value not quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().ok_or("unterminated label value")? {
                (i, '"') => break i,
                (_, '\\') => match chars.next().ok_or("dangling escape")?.1 {
                    'n' => value.push('\n'),
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    c => return Err(format!("bad escape \\{c}")),
                },
                (_, c) => value.push(c),
            }
        };
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("duplicate label {name}"));
        }
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// A strict parser of the text exposition format (0.0.4, with OpenMetrics' `# EOF`).
fn parse(text: &str) -> Result<Exposition, String> {
    let mut out = Exposition::default();
    let mut family: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let err = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if line == "# EOF" {
            break;
        }
        if let Some(c) = line.strip_prefix("# ") {
            let mut parts = c.splitn(3, ' ');
            let kind = parts.next().unwrap_or("");
            let name = parts
                .next()
                .ok_or_else(|| err("comment without name".into()))?;
            match kind {
                "TYPE" => {
                    let t = parts
                        .next()
                        .ok_or_else(|| err("TYPE without type".into()))?;
                    if ![
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "untyped",
                        "unknown",
                        "info",
                        "stateset",
                        "gaugehistogram",
                    ]
                    .contains(&t)
                    {
                        return Err(err(format!("unknown type {t}")));
                    }
                    if !is_name(name, true)
                        || out.types.insert(name.to_string(), t.into()).is_some()
                    {
                        return Err(err("bad or repeated family".into()));
                    }
                    family = Some(name.to_string());
                }
                "HELP" | "UNIT" => {}
                _ => return Err(err(format!("unknown comment {kind}"))),
            }
            continue;
        }
        let name_end = line
            .find(['{', ' '])
            .ok_or_else(|| err("no value".into()))?;
        let name = &line[..name_end];
        if !is_name(name, true) {
            return Err(err("bad metric name".into()));
        }
        let fam = family
            .as_deref()
            .ok_or_else(|| err("sample before any TYPE".into()))?;
        let t = out.types[fam].as_str();
        let ok = name == fam
            || (t == "counter" && name == format!("{fam}_total"))
            || (t == "histogram"
                && ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|sfx| name == format!("{fam}{sfx}")));
        if !ok {
            return Err(err(format!("sample outside its family {fam}")));
        }
        let (labels, rest) = parse_labels(&line[name_end..]).map_err(err)?;
        let mut fields = rest.trim_start().split(' ');
        let value = parse_value(fields.next().unwrap_or("")).map_err(err)?;
        if let Some(ts) = fields.next() {
            ts.parse::<f64>().map_err(|_| err("bad timestamp".into()))?;
        }
        if fields.next().is_some() {
            return Err(err("trailing fields".into()));
        }
        if !seen.insert((name.to_string(), labels.clone())) {
            return Err(err("duplicate series".into()));
        }
        out.samples
            .entry(name.to_string())
            .or_default()
            .push(Sample { labels, value });
    }
    Ok(out)
}

/// Pushes 10 messages to `mq`, pops 6 in two batches, acks 5 completed and
/// sends 1 to the DLQ; one empty pop on `empty`.
fn workload(b: &Broker) {
    b.push_n("mq", "p", "m", 10);
    let mut popped = 0;
    for _ in 0..2 {
        let pop = b.pop("/api/v1/pop/queue/mq?batch=3").expect("messages");
        let lease = pop["leaseId"].as_str().unwrap().to_string();
        for m in messages(&pop) {
            popped += 1;
            let status = if popped == 6 { "dlq" } else { "completed" };
            let r = b.ack(
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                                  "leaseId": lease, "status": status}),
            );
            assert_eq!(r["success"], true, "{r}");
        }
    }
    assert!(b.pop("/api/v1/pop/queue/empty?batch=1").is_none());
}

fn scrape(b: &Broker) -> (Resp, Exposition) {
    let r = b.get("/metrics/prometheus");
    assert_eq!(r.status, 200, "{}", r.text());
    let e =
        parse(&r.text()).unwrap_or_else(|e| panic!("exposition does not parse: {e}\n{}", r.text()));
    (r, e)
}

#[test]
fn prometheus_text_parses_with_the_spec_families_after_a_workload() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    workload(&b);
    // The per-queue figures are a snapshot up to `CACHE_TTL` (5 s) old: wait
    // for one taken after the workload.
    let (r, e) = check_for(std::time::Duration::from_secs(15), || {
        let (r, e) = scrape(&b);
        let fresh = e.samples.get("queen_dlq_depth_by_queue").is_some_and(|v| {
            v.iter()
                .any(|s| s.labels.get("queue").map(String::as_str) == Some("mq") && s.value == 1.0)
        });
        fresh.then_some((r, e))
    });
    assert!(r
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/plain; version=0.0.4"));
    for name in [
        "queen_uptime_seconds",
        "queen_process_resident_memory_bytes",
        "queen_process_virtual_memory_bytes",
        "queen_cpu_user_microseconds_total",
        "queen_cpu_system_microseconds_total",
        "queen_db_pool_size",
        "queen_db_pool_active",
        "queen_db_pool_idle",
        "queen_file_buffer_pending",
        "queen_file_buffer_failed",
        "queen_file_buffer_db_healthy",
        "queen_maintenance_mode_enabled",
        "queen_servers",
    ] {
        assert_eq!(e.series(name).len(), 1, "{name}");
        assert!(e.series(name)[0].labels.is_empty(), "{name} has no labels");
    }
    assert!(e.value("queen_process_resident_memory_bytes", &[]) > 1e6);
    let pool = b.get("/metrics").json()["database"]["poolSize"]
        .as_f64()
        .unwrap();
    assert!(pool >= 1.0);
    assert_eq!(e.value("queen_db_pool_size", &[]), pool);
    assert_eq!(e.value("queen_file_buffer_db_healthy", &[]), 1.0);
    let cluster = [("scope", "cluster")];
    assert_eq!(e.value("queen_cluster_push_messages_total", &cluster), 10.0);
    assert_eq!(e.value("queen_cluster_push_requests_total", &cluster), 1.0);
    assert_eq!(e.value("queen_cluster_pop_messages_total", &cluster), 6.0);
    assert_eq!(e.value("queen_cluster_pop_requests_total", &cluster), 3.0);
    assert_eq!(e.value("queen_cluster_ack_messages_total", &cluster), 6.0);
    assert_eq!(e.value("queen_cluster_ack_requests_total", &cluster), 6.0);
    assert_eq!(e.value("queen_cluster_transactions_total", &cluster), 0.0);
    assert_eq!(e.types["queen_cluster_push_messages"], "counter");
    // Per queue, from the DB snapshot.
    assert_eq!(
        e.value("queen_queue_push_messages_per_minute", &[("queue", "mq")]),
        10.0
    );
    assert_eq!(e.value("queen_dlq_depth_by_queue", &[("queue", "mq")]), 1.0);
    assert_eq!(e.value("queen_dlq_depth", &cluster), 1.0);
    let lag_max = e.value(
        "queen_queue_pop_lag_milliseconds",
        &[("queue", "mq"), ("stat", "max")],
    );
    assert!(lag_max > 0.0, "4 messages are still waiting: lag {lag_max}");
    assert!(e.value("queen_queue_metrics_age_seconds", &[]) >= 0.0);
    // Per shard: every worker family has one series per shard, labelled.
    let shards = e.series("queen_worker_requests_per_minute");
    assert!(!shards.is_empty());
    for s in shards {
        assert!(
            s.labels.contains_key("shard") && s.labels.contains_key("worker"),
            "{s:?}"
        );
    }
    let total: f64 = e
        .series("queen_shard_requests_total")
        .iter()
        .map(|s| s.value)
        .sum();
    assert!(
        total >= 10.0,
        "shard request counters sum the workload: {total}"
    );
    let empty: f64 = e
        .series("queen_shard_pop_empty_total")
        .iter()
        .map(|s| s.value)
        .sum();
    assert_eq!(empty, 1.0);
    for name in [
        "queen_worker_event_loop_lag_milliseconds",
        "queen_worker_job_queue_size",
        "queen_worker_parked_consumers",
    ] {
        assert_eq!(e.series(name).len(), shards.len(), "{name}");
    }
    // No tenant label anywhere.
    for (name, samples) in &e.samples {
        for s in samples {
            assert!(
                !s.labels.contains_key("tenant"),
                "{name} has a tenant label"
            );
        }
    }
}

#[test]
fn prometheus_counters_only_grow_between_scrapes() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("g", "p", "a", 3);
    let (_, first) = scrape(&b);
    b.push_n("g", "p", "b", 4);
    let (_, second) = scrape(&b);
    let c = [("scope", "cluster")];
    assert_eq!(first.value("queen_cluster_push_messages_total", &c), 3.0);
    assert_eq!(second.value("queen_cluster_push_messages_total", &c), 7.0);
    assert!(second.value("queen_uptime_seconds", &[]) >= first.value("queen_uptime_seconds", &[]));
}

#[test]
fn parked_consumers_show_while_a_long_poll_waits() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let port = b.port;
    let waiter = std::thread::spawn(move || {
        let mut c = Conn::connect(port).expect("connect");
        c.set_timeout(std::time::Duration::from_secs(30));
        c.get("/api/v1/pop/queue/lp?wait=true&timeout=5000")
            .expect("pop answers")
            .status
    });
    check_for(std::time::Duration::from_secs(4), || {
        let m = b.get("/metrics").json();
        (m["parkedConsumers"] == 1).then_some(())
    });
    assert_eq!(waiter.join().unwrap(), 204);
    assert_eq!(b.get("/metrics").json()["parkedConsumers"], 0);
}

/// Issue 18: `queen_stage_duration_seconds` counts each stage a message
/// passes on its way from a push to a parked long poll.
#[test]
fn stage_histograms_follow_a_message_from_push_to_a_woken_pop() {
    let db = Db::fresh();
    // Rechecks so slow that only the push notice wakes the parked pop.
    let b = Broker::builder(&db)
        .env("POP_WAIT_INITIAL_INTERVAL_MS", "10000")
        .env("POP_WAIT_MAX_INTERVAL_MS", "10000")
        .start();
    let port = b.port;
    let waiter = std::thread::spawn(move || {
        let mut c = Conn::connect(port).expect("connect");
        c.set_timeout(std::time::Duration::from_secs(30));
        c.get("/api/v1/pop/queue/st?wait=true&timeout=10000")
            .expect("pop answers")
            .status
    });
    check_for(std::time::Duration::from_secs(4), || {
        let m = b.get("/metrics").json();
        (m["parkedConsumers"] == 1).then_some(())
    });
    b.push_n("st", "p", "m", 1);
    assert_eq!(waiter.join().unwrap(), 200);
    let (_, e) = scrape(&b);
    assert_eq!(e.types["queen_stage_duration_seconds"], "histogram");
    let count = |stage: &str| e.value("queen_stage_duration_seconds_count", &[("stage", stage)]);
    assert_eq!(count("push"), 1.0);
    assert_eq!(count("db_push"), 1.0);
    assert_eq!(
        count("pop_woken"),
        1.0,
        "the parked pop was woken once and delivered"
    );
    assert!(count("wake") >= 1.0);
    assert!(
        count("db_pop") >= 2.0,
        "an empty attempt, then the delivering one"
    );
    assert!(count("db_queue") >= 3.0 && count("db_reply") == count("db_queue"));
    for s in e.series("queen_stage_duration_seconds_count") {
        let stage = s.labels["stage"].as_str();
        let inf = e.value(
            "queen_stage_duration_seconds_bucket",
            &[("stage", stage), ("le", "+Inf")],
        );
        assert_eq!(inf, s.value, "{stage}: +Inf bucket is the count");
    }
}

#[test]
fn json_metrics_have_the_spec_keys() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("jm", "p", "m", 5);
    let r = b.get("/metrics");
    assert_eq!(r.status, 200);
    let m = r.json();
    for (obj, keys) in [
        ("requests", &["total", "rate"][..]),
        ("messages", &["total", "rate"]),
        (
            "database",
            &["poolSize", "idleConnections", "waitingRequests"],
        ),
        (
            "memory",
            &["rss", "heapTotal", "heapUsed", "external", "arrayBuffers"],
        ),
        ("cpu", &["user", "system"]),
    ] {
        for k in keys {
            assert!(m[obj][k].is_number(), "{obj}.{k} in {m}");
        }
    }
    assert!(m["uptime"].is_number());
    assert_eq!(m["push"]["messages"], 5);
    assert!(m["requests"]["total"].as_u64().unwrap() >= 1);
    assert!(m["memory"]["rss"].as_u64().unwrap() > 1_000_000);
}
