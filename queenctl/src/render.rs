//! Output: aligned tables (comfy-table, no borders, so columns survive `grep` and
//! `cut`), human units for counts, durations and timestamps, and `--json` output
//! (one document, or one compact object per line for message streams).

use std::io::Write;

use comfy_table::{presets, CellAlignment, Table};
use serde_json::Value;

use crate::error::Result;

/// A borderless table with `header`; columns whose name is in `numeric` are
/// right-aligned.
pub fn table(header: &[&str], numeric: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_uppercase()));
    for r in rows {
        t.add_row(r);
    }
    for (i, h) in header.iter().enumerate() {
        if let Some(c) = t.column_mut(i) {
            c.set_padding((0, 2));
            if numeric.contains(h) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    lines(&mut t)
}

/// The table's lines without trailing blanks (the last column's padding).
fn lines(t: &mut Table) -> String {
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two columns: key and value.
pub fn pairs(rows: Vec<(String, String)>) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    for (k, v) in rows {
        t.add_row(vec![k, v]);
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    lines(&mut t)
}

/// Prints `text` and a newline to stdout.
pub fn out(text: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{text}")?;
    o.flush()?;
    Ok(())
}

/// Prints `v` pretty-printed (one JSON document).
pub fn json(v: &Value) -> Result<()> {
    out(&serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()))
}

/// Prints `v` compactly on one line (one element of a stream).
pub fn json_line(v: &Value) -> Result<()> {
    out(&v.to_string())
}

/// A count with thousands separators: `1,234,567`; `-` when absent.
pub fn count(v: &Value) -> String {
    match v.as_i64() {
        Some(n) => group(n),
        None => match v.as_f64() {
            Some(f) => group(f.round() as i64),
            None => "-".into(),
        },
    }
}

fn group(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut s = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    if n < 0 {
        format!("-{s}")
    } else {
        s
    }
}

/// Seconds as `45s`, `3m 20s`, `2h 5m`, `3d 4h`; `-` when absent.
pub fn secs(v: &Value) -> String {
    let Some(s) = v.as_f64() else {
        return "-".into();
    };
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s / 60 % 60),
        _ => format!("{}d {}h", s / 86_400, s / 3600 % 24),
    }
}

/// An ISO timestamp shortened to the second (`2026-12-01 21:30:33Z`); `-` when absent.
pub fn when(v: &Value) -> String {
    match v.as_str() {
        Some(t) if t.len() >= 19 => format!("{} {}Z", &t[..10], &t[11..19]),
        Some(t) => t.to_string(),
        None => "-".into(),
    }
}

/// A string field, `-` when absent or null.
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A boolean as `yes`/`no`, `-` when absent.
pub fn yes_no(v: &Value) -> String {
    match v.as_bool() {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "-".into(),
    }
}

/// A payload on one line, cut to `max` characters with `…`.
pub fn payload(v: &Value, max: usize) -> String {
    let s = v.to_string();
    if s.chars().count() <= max {
        s
    } else {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn units_read_like_a_person_wrote_them() {
        assert_eq!(count(&json!(1234567)), "1,234,567");
        assert_eq!(count(&json!(12)), "12");
        assert_eq!(count(&json!(null)), "-");
        assert_eq!(secs(&json!(200)), "3m 20s");
        assert_eq!(secs(&json!(7500)), "2h 5m");
        assert_eq!(secs(&json!(90000)), "1d 1h");
        assert_eq!(
            when(&json!("2026-12-01T21:30:33.152857Z")),
            "2026-12-01 21:30:33Z"
        );
        assert_eq!(payload(&json!({"a": "bcdef"}), 8), "{\"a\":\"b…");
    }

    #[test]
    fn tables_align_numbers_right() {
        let t = table(
            &["name", "pending"],
            &["pending"],
            vec![
                vec!["a".into(), "5".into()],
                vec!["bb".into(), "1,000".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("NAME") && lines[0].contains("PENDING"));
        assert!(lines[1].ends_with("    5"), "{t}");
        assert!(lines[2].ends_with("1,000"), "{t}");
    }
}
