//! kv-bench: the KV targets of issue 14.
//!
//! - `kv-bench rate URL --op get|put --rate N --conns C --secs S --keys K`:
//!   open loop, N ops/s offered in total over C connections on a fixed
//!   schedule (a connection that falls behind sends at once to catch up), one
//!   op per `POST /api/v1/kv`, keys drawn over K; latency = request sent →
//!   answer read, recorded for every op of the measured window (target: get
//!   and put p99 under 5 ms at 5,000 ops/s). `get` runs against keys a
//!   put pass wrote first.
//! - `kv-bench incr URL --conns C --secs S --keys K`: closed loop, C
//!   connections each sending `incr` as fast as answers come, K keys (1 = one
//!   hot key). Prints ops/s.
//! - `kv-bench pg-incr PGURL --conns C --secs S --keys K`: the same C
//!   connections straight to PostgreSQL, each a loop of one-row
//!   `INSERT ... ON CONFLICT DO UPDATE SET v = v + 1` (autocommit), the
//!   ceiling `incr` is compared with (target: at least 50% of it).
//!
//! Each prints one JSON line: `{mode, op, offered, ops_per_s, p50_ms, p99_ms,
//! max_ms, errors}`. `--warm S` seconds run before the measured window.

use queen_loadgen::http::{Client, Target};
use queen_loadgen::report::Lat;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

struct Opts {
    mode: String,
    url: String,
    op: String,
    rate: f64,
    conns: usize,
    secs: f64,
    warm: f64,
    keys: u64,
}

fn parse() -> Opts {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!("usage: kv-bench rate|incr|pg-incr URL [--op get|put] [--rate N] [--conns C] [--secs S] [--warm S] [--keys K]");
        std::process::exit(2);
    }
    let mut o = Opts {
        mode: a[0].clone(),
        url: a[1].clone(),
        op: "get".into(),
        rate: 5000.0,
        conns: 50,
        secs: 10.0,
        warm: 2.0,
        keys: 10_000,
    };
    let mut i = 2;
    while i + 1 < a.len() {
        let v = &a[i + 1];
        let num = || {
            v.parse::<f64>()
                .unwrap_or_else(|_| panic!("{}: not a number: {v}", a[i]))
        };
        match a[i].as_str() {
            "--op" => o.op = v.clone(),
            "--rate" => o.rate = num(),
            "--conns" => o.conns = num() as usize,
            "--secs" => o.secs = num(),
            "--warm" => o.warm = num(),
            "--keys" => o.keys = num() as u64,
            other => panic!("unknown flag {other}"),
        }
        i += 2;
    }
    o
}

fn body(op: &str, key: u64) -> Vec<u8> {
    match op {
        "put" => format!(
            r#"{{"operations":[{{"op":"put","ns":"bench","key":"k{key}","value":{{"n":{key},"pad":"0123456789abcdef0123456789abcdef"}},"ttlSeconds":3600}}]}}"#
        ),
        "incr" => format!(
            r#"{{"operations":[{{"op":"incr","ns":"bench","key":"c{key}","delta":1,"forever":true}}]}}"#
        ),
        _ => format!(r#"{{"operations":[{{"op":"get","ns":"bench","key":"k{key}"}}]}}"#),
    }
    .into_bytes()
}

/// xorshift: a cheap per-thread key sequence.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn line(o: &Opts, op: &str, ops: u64, window: f64, lat: Option<&Lat>, errors: u64) {
    let (p50, p99, max) = lat.map_or((0.0, 0.0, 0.0), |l| {
        let s = l.summary();
        (s.p50_ms, s.p99_ms, s.max_ms)
    });
    println!(
        "{{\"mode\":\"{}\",\"op\":\"{op}\",\"conns\":{},\"offered\":{},\"ops_per_s\":{:.0},\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3},\"max_ms\":{max:.3},\"errors\":{errors}}}",
        o.mode,
        o.conns,
        if o.mode == "rate" { o.rate } else { 0.0 },
        ops as f64 / window
    );
}

/// Open loop at `o.rate` over `o.conns` connections.
fn rate(o: &Opts) {
    let target = Target::parse(&o.url).expect("URL");
    if o.op == "get" {
        // the keys the gets read: one put each, 50 connections
        let per = o.keys.div_ceil(50);
        thread::scope(|s| {
            for t in 0..50u64 {
                let target = target.clone();
                s.spawn(move || {
                    let mut c = Client::new(target, Duration::from_secs(10));
                    for k in (t * per)..((t + 1) * per).min(o.keys) {
                        let _ = c.post("/api/v1/kv", &body("put", k));
                    }
                });
            }
        });
    }
    let per_conn = Duration::from_secs_f64(o.conns as f64 / o.rate);
    let start = Instant::now() + Duration::from_millis(100);
    let measure_from = start + Duration::from_secs_f64(o.warm);
    let end = measure_from + Duration::from_secs_f64(o.secs);
    let results: Vec<(Lat, u64, u64)> = thread::scope(|s| {
        let hs: Vec<_> = (0..o.conns)
            .map(|t| {
                let target = target.clone();
                s.spawn(move || {
                    let mut c = Client::new(target, Duration::from_secs(10));
                    let mut lat = Lat::default();
                    let (mut ops, mut errors) = (0u64, 0u64);
                    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                    // spread the connections' schedules over one period
                    let mut due = start + per_conn.mul_f64(t as f64 / o.conns as f64);
                    while due < end {
                        let now = Instant::now();
                        if due > now {
                            thread::sleep(due - now);
                        }
                        let b = body(&o.op, next(&mut seed) % o.keys);
                        let sent = Instant::now();
                        let st = c.post("/api/v1/kv", &b);
                        let took = sent.elapsed();
                        if sent >= measure_from {
                            ops += 1;
                            lat.record_us(took.as_micros() as u64);
                            if st.map_or(true, |s| s != 200) {
                                errors += 1;
                            }
                        }
                        due += per_conn;
                    }
                    (lat, ops, errors)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut lat = Lat::default();
    let (mut ops, mut errors) = (0, 0);
    for (l, n, e) in &results {
        lat.merge(l);
        ops += n;
        errors += e;
    }
    line(o, &o.op, ops, o.secs, Some(&lat), errors);
}

/// Closed loop of `work` on `o.conns` threads; returns (ops, errors) of the window.
fn closed<F>(o: &Opts, work: F) -> (u64, u64)
where
    F: Fn(usize, &AtomicBool, &AtomicBool, &AtomicU64, &AtomicU64) + Sync,
{
    let (measuring, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let (ops, errors) = (AtomicU64::new(0), AtomicU64::new(0));
    thread::scope(|s| {
        for t in 0..o.conns {
            let (w, m, st, n, e) = (&work, &measuring, &stop, &ops, &errors);
            s.spawn(move || w(t, m, st, n, e));
        }
        thread::sleep(Duration::from_secs_f64(o.warm));
        measuring.store(true, Ordering::SeqCst);
        thread::sleep(Duration::from_secs_f64(o.secs));
        stop.store(true, Ordering::SeqCst);
    });
    (ops.load(Ordering::SeqCst), errors.load(Ordering::SeqCst))
}

fn incr(o: &Opts) {
    let target = Arc::new(Target::parse(&o.url).expect("URL"));
    let (ops, errors) = closed(o, |t, measuring, stop, ops, errors| {
        let mut c = Client::new((*target).clone(), Duration::from_secs(10));
        let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ (t as u64 + 1);
        while !stop.load(Ordering::Relaxed) {
            let ok = matches!(
                c.post("/api/v1/kv", &body("incr", next(&mut seed) % o.keys)),
                Ok(200)
            );
            if measuring.load(Ordering::Relaxed) {
                ops.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    line(o, "incr", ops, o.secs, None, errors);
}

fn pg_incr(o: &Opts) {
    let mut setup = postgres::Client::connect(&o.url, postgres::NoTls).expect("PostgreSQL");
    setup
        .batch_execute(
            "DROP TABLE IF EXISTS kv_bench_ceiling;
             CREATE TABLE kv_bench_ceiling (k text PRIMARY KEY, v bigint NOT NULL) WITH (fillfactor = 80)",
        )
        .expect("setup");
    let (ops, errors) = closed(o, |t, measuring, stop, ops, errors| {
        let mut c = postgres::Client::connect(&o.url, postgres::NoTls).expect("PostgreSQL");
        let st = c
            .prepare(
                "INSERT INTO kv_bench_ceiling (k, v) VALUES ($1, 1)
                 ON CONFLICT (k) DO UPDATE SET v = kv_bench_ceiling.v + 1",
            )
            .expect("prepare");
        let mut seed = 0x2545_F491_4F6C_DD1Du64 ^ (t as u64 + 1);
        while !stop.load(Ordering::Relaxed) {
            let key = format!("c{}", next(&mut seed) % o.keys);
            let ok = c.execute(&st, &[&key]).is_ok();
            if measuring.load(Ordering::Relaxed) {
                ops.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    let _ = setup.batch_execute("DROP TABLE IF EXISTS kv_bench_ceiling");
    line(o, "pg-incr", ops, o.secs, None, errors);
}

fn main() {
    let o = parse();
    match o.mode.as_str() {
        "rate" => rate(&o),
        "incr" => incr(&o),
        "pg-incr" => pg_incr(&o),
        m => {
            eprintln!("unknown mode {m}");
            std::process::exit(2);
        }
    }
}
