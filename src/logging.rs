//! A small stderr logger for the `log` facade: one line per event with a UTC
//! timestamp, the level and the thread name (which says the shard or DB
//! thread). `LOG_LEVEL` sets the level; `QUEEN_LOG_JSON` is not supported yet.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let thread = std::thread::current();
        let line = format!(
            "{}.{:03} {:5} [{}] {}\n",
            t.as_secs(),
            t.subsec_millis(),
            r.level(),
            thread.name().unwrap_or("?"),
            r.args()
        );
        // One write per line so lines of different threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

/// Installs the logger at `level`. Safe to call once; later calls only change the level.
pub fn init(level: log::LevelFilter) {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}
