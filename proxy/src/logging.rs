//! A small stderr logger for the `log` facade: one line per event with the
//! seconds since the epoch, the level and the thread name (which says the
//! shard or the control thread). `LOG_LEVEL` (read in `config.rs`) sets
//! the level. Installed once in `main` before any thread starts.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// The logger.
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
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

/// Installs the logger at `level`.
pub fn init(level: log::LevelFilter) {
    static LOGGER: StderrLogger = StderrLogger;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
