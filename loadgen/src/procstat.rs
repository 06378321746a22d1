//! CPU and memory of the broker, PostgreSQL and the bench itself, read from
//! `/proc` over the measured window.
//!
//! CPU is utime+stime (all threads) from `/proc/<pid>/stat`, as a delta over
//! the window. For PostgreSQL the postmaster's own time, its reaped children
//! (cutime+cstime, so a backend that exits mid-run is not lost) and every
//! live direct child (backends, walwriter, checkpointer...) are summed.
//! Memory: the broker's VmRSS is sampled every [`SAMPLE_EVERY`] and its
//! VmHWM read at the end; PostgreSQL's is the sum of Pss (from
//! `smaps_rollup`) over its processes, because summing RSS would count
//! `shared_buffers` once per backend. Cost: one thread waking every 200 ms;
//! the PostgreSQL tree is walked every fifth wake.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How often resident memory is sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Clock ticks per second for `/proc/<pid>/stat` times.
fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// (ppid, utime+stime, cutime+cstime) in ticks, or None if the process is gone.
fn stat_of(pid: u32) -> Option<(u32, u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): ppid = field 4, utime..cstime = fields 14..17.
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    Some((num(1)? as u32, num(11)? + num(12)?, num(13)? + num(14)?))
}

/// Live direct children of `root`.
fn children_of(root: u32) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat_of(pid), Some((ppid, _, _)) if ppid == root))
        .collect()
}

/// CPU seconds of one process (all threads).
pub fn cpu_secs(pid: u32) -> Option<f64> {
    stat_of(pid).map(|(_, t, _)| t as f64 / clk_tck())
}

/// CPU seconds of `root`, its reaped children, and its live children.
pub fn tree_cpu_secs(root: u32) -> Option<f64> {
    let (_, own, reaped) = stat_of(root)?;
    let kids: u64 = children_of(root)
        .into_iter()
        .filter_map(|p| stat_of(p).map(|(_, t, _)| t))
        .sum();
    Some((own + reaped + kids) as f64 / clk_tck())
}

/// A `kB` field of `/proc/<pid>/status` (VmRSS, VmHWM), in MiB.
pub fn status_mb(pid: u32, field: &str) -> Option<f64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    kb_field(&text, field).map(|kb| kb as f64 / 1024.0)
}

fn kb_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Sum of Pss over `root` and its live children, in MiB.
pub fn tree_pss_mb(root: u32) -> Option<f64> {
    let mut pids = children_of(root);
    pids.push(root);
    let kb: u64 = pids
        .into_iter()
        .filter_map(|p| {
            let t = fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok()?;
            kb_field(&t, "Pss")
        })
        .sum();
    Some(kb as f64 / 1024.0)
}

/// (busy, total) ticks of the whole machine from `/proc/stat`.
fn machine_ticks() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Which processes to watch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Watch {
    /// The broker process (`--pid`).
    pub pid: Option<u32>,
    /// The postmaster (`--pg-pid`).
    pub pg_pid: Option<u32>,
}

/// Figures over one measured window. CPU percentages are of one core
/// (200 % = both cores of this box); `machine_busy_pct` is of all cores.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcReport {
    /// Broker CPU seconds in the window.
    pub broker_cpu_s: Option<f64>,
    /// Broker CPU, % of one core.
    pub broker_cpu_pct: Option<f64>,
    /// Largest sampled broker VmRSS, MiB.
    pub broker_rss_peak_mb: Option<f64>,
    /// Broker VmHWM at the end (peak over its whole life), MiB.
    pub broker_hwm_mb: Option<f64>,
    /// PostgreSQL CPU seconds in the window (postmaster and children).
    pub pg_cpu_s: Option<f64>,
    /// PostgreSQL CPU, % of one core.
    pub pg_cpu_pct: Option<f64>,
    /// Largest sampled PostgreSQL Pss sum, MiB.
    pub pg_pss_peak_mb: Option<f64>,
    /// Live PostgreSQL child processes at the end (backends plus helpers).
    pub pg_children: Option<usize>,
    /// The bench's own CPU, % of one core.
    pub bench_cpu_pct: f64,
    /// Whole machine busy, % of all cores.
    pub machine_busy_pct: Option<f64>,
}

/// A window being measured; [`Running::finish`] ends it.
#[derive(Debug)]
pub struct Running {
    watch: Watch,
    started: Instant,
    broker_cpu0: Option<f64>,
    pg_cpu0: Option<f64>,
    self_cpu0: f64,
    machine0: Option<(u64, u64)>,
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<(Option<f64>, Option<f64>)>,
}

impl Watch {
    /// Starts a measured window and the memory sampler.
    pub fn start(self) -> Running {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let sampler = thread::Builder::new()
            .name("procstat".into())
            .spawn(move || sample_until(self, &flag))
            .expect("spawn sampler thread");
        Running {
            watch: self,
            started: Instant::now(),
            broker_cpu0: self.pid.and_then(cpu_secs),
            pg_cpu0: self.pg_pid.and_then(tree_cpu_secs),
            self_cpu0: cpu_secs(std::process::id()).unwrap_or(0.0),
            machine0: machine_ticks(),
            stop,
            sampler,
        }
    }
}

fn sample_until(w: Watch, stop: &AtomicBool) -> (Option<f64>, Option<f64>) {
    let (mut rss, mut pss): (Option<f64>, Option<f64>) = (None, None);
    let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let mut n = 0u64;
    loop {
        rss = max(rss, w.pid.and_then(|p| status_mb(p, "VmRSS")));
        if n.is_multiple_of(5) {
            pss = max(pss, w.pg_pid.and_then(tree_pss_mb));
        }
        n += 1;
        if stop.load(Ordering::Relaxed) {
            return (rss, pss);
        }
        thread::sleep(SAMPLE_EVERY);
    }
}

impl Running {
    /// Ends the window and returns the deltas and peaks.
    pub fn finish(self) -> ProcReport {
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let broker_cpu_s = match (self.broker_cpu0, self.watch.pid.and_then(cpu_secs)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let pg_cpu_s = match (self.pg_cpu0, self.watch.pg_pid.and_then(tree_cpu_secs)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let self_cpu = cpu_secs(std::process::id()).unwrap_or(0.0) - self.self_cpu0;
        let machine_busy_pct = match (self.machine0, machine_ticks()) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                Some(100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        self.stop.store(true, Ordering::Relaxed);
        let (rss, pss) = self.sampler.join().unwrap_or((None, None));
        ProcReport {
            broker_cpu_pct: broker_cpu_s.map(|c| 100.0 * c / secs),
            broker_cpu_s,
            broker_rss_peak_mb: rss,
            broker_hwm_mb: self.watch.pid.and_then(|p| status_mb(p, "VmHWM")),
            pg_cpu_pct: pg_cpu_s.map(|c| 100.0 * c / secs),
            pg_cpu_s,
            pg_pss_peak_mb: pss,
            pg_children: self.watch.pg_pid.map(|p| children_of(p).len()),
            bench_cpu_pct: 100.0 * self_cpu / secs,
            machine_busy_pct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let me = std::process::id();
        assert!(cpu_secs(me).is_some());
        assert!(status_mb(me, "VmRSS").unwrap() > 0.0);
        let r = Watch {
            pid: Some(me),
            pg_pid: None,
        }
        .start()
        .finish();
        assert!(r.broker_rss_peak_mb.is_some());
        assert!(r.broker_hwm_mb.is_some());
    }
}
