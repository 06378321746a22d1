//! A small stderr logger for the `log` facade: one line per event with an RFC 3339 UTC
//! timestamp with milliseconds (`2026-12-01T20:08:14.551Z`), the level and the thread
//! name (which says the shard or DB thread). `LOG_LEVEL` sets the level.
//!
//! `LOG_FORMAT` picks the line shape: `text` (the default, for terminals) or `json`,
//! one object per line with `time`, `level`, `thread` and `message`, for log shippers.
//! The broker has no per-request id in its log records yet, so no `requestId` key is
//! written. `LOG_FORMAT` is read here, once, when [`init`] installs the logger in
//! `main` before any thread starts; an unknown value fails boot with one line.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable naming the line shape.
const FORMAT_VAR: &str = "LOG_FORMAT";

/// The logger; `json` is set once by [`init`] and read on every line.
struct StderrLogger {
    /// True for `LOG_FORMAT=json`.
    json: AtomicBool,
}

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
        let time = rfc3339_millis(t.as_secs(), t.subsec_millis());
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("?");
        let line = if self.json.load(Ordering::Relaxed) {
            let mut s = serde_json::json!({
                "time": time,
                "level": r.level().as_str(),
                "thread": name,
                "message": r.args().to_string(),
            })
            .to_string();
            s.push('\n');
            s
        } else {
            format!("{time} {:5} [{name}] {}\n", r.level(), r.args())
        };
        // One write per line so lines of different threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger {
    json: AtomicBool::new(false),
};

/// Installs the logger at `level`, in the shape `LOG_FORMAT` names. Safe to call once;
/// later calls only change the level and shape. Exits the process with one line on
/// stderr when `LOG_FORMAT` is neither `text` nor `json`.
pub fn init(level: log::LevelFilter) {
    let json = match std::env::var(FORMAT_VAR).ok().as_deref().map(str::trim) {
        None | Some("") | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            eprintln!("queen: {FORMAT_VAR} must be text or json, not {other:?}");
            std::process::exit(1);
        }
    };
    LOGGER.json.store(json, Ordering::Relaxed);
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`. Civil date from the day
/// count by the days-from-civil inverse (proleptic Gregorian), so no date crate is
/// needed for one format.
fn rfc3339_millis(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// (year, month 1..=12, day 1..=31) of day `z` counted from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, from March 1
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::rfc3339_millis;

    #[test]
    fn stamps_are_rfc3339_utc_with_millis() {
        assert_eq!(rfc3339_millis(0, 0), "1970-01-01T00:00:00.000Z");
        // The example: epoch 1796155694.551.
        assert_eq!(
            rfc3339_millis(1_796_155_694, 551),
            "2026-12-01T20:08:14.551Z"
        );
        assert_eq!(rfc3339_millis(951_782_400, 7), "2000-02-29T00:00:00.007Z");
        assert_eq!(
            rfc3339_millis(4_102_444_799, 999),
            "2099-12-31T23:59:59.999Z"
        );
    }
}
