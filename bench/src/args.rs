//! Command-line flags: `--name value` and bare `--switch`, nothing more.
//!
//! Hand-written rather than clap so the bench builds in seconds next to the
//! broker on a 2-core box; every flag is named at the call site that reads it.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// What went wrong reading the command line.
#[derive(Debug)]
pub enum ArgError {
    /// A positional word where only flags are allowed.
    Positional(String),
    /// A flag value that does not parse as the expected type.
    BadValue {
        /// Flag name without dashes.
        flag: String,
        /// The text given.
        value: String,
    },
    /// A flag no scenario reads (usually a typo).
    Unknown(Vec<String>),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Positional(w) => write!(f, "unexpected argument {w:?}"),
            ArgError::BadValue { flag, value } => write!(f, "--{flag}: cannot parse {value:?}"),
            ArgError::Unknown(v) => write!(f, "unknown flag(s): --{}", v.join(", --")),
        }
    }
}

impl std::error::Error for ArgError {}

/// Parsed flags; each read marks the flag as used so leftovers can be refused.
#[derive(Debug, Default)]
pub struct Args {
    /// Flag name (without dashes) to value; switches hold "true".
    values: HashMap<String, String>,
    /// Names read so far, for [`Args::finish`].
    used: std::cell::RefCell<Vec<String>>,
}

impl Args {
    /// Parses `--a 1 --b --c=x`. A flag followed by another flag (or the end)
    /// is a switch.
    pub fn parse(words: &[String]) -> Result<Args, ArgError> {
        let mut values = HashMap::new();
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            let Some(name) = w.strip_prefix("--") else {
                return Err(ArgError::Positional(w.clone()));
            };
            if let Some((k, v)) = name.split_once('=') {
                values.insert(k.to_string(), v.to_string());
                i += 1;
            } else if i + 1 < words.len() && !words[i + 1].starts_with("--") {
                values.insert(name.to_string(), words[i + 1].clone());
                i += 2;
            } else {
                values.insert(name.to_string(), "true".to_string());
                i += 1;
            }
        }
        Ok(Args {
            values,
            used: Default::default(),
        })
    }

    /// The raw text of a flag, if given.
    pub fn get_str(&self, name: &str) -> Option<String> {
        self.used.borrow_mut().push(name.to_string());
        self.values.get(name).cloned()
    }

    /// A typed flag with a default.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, ArgError> {
        match self.get_str(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| ArgError::BadValue {
                flag: name.to_string(),
                value: v,
            }),
        }
    }

    /// A typed flag that may be absent.
    pub fn get_opt<T: FromStr>(&self, name: &str) -> Result<Option<T>, ArgError> {
        match self.get_str(name) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| ArgError::BadValue {
                flag: name.to_string(),
                value: v,
            }),
        }
    }

    /// A switch: present (or `=true`/`=1`) means on.
    pub fn switch(&self, name: &str) -> bool {
        matches!(self.get_str(name).as_deref(), Some("true") | Some("1"))
    }

    /// Refuses any flag that nothing read.
    pub fn finish(&self) -> Result<(), ArgError> {
        let used = self.used.borrow();
        let mut unknown: Vec<String> = self
            .values
            .keys()
            .filter(|k| !used.contains(k))
            .cloned()
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            unknown.sort();
            Err(ArgError::Unknown(unknown))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_values_switches_and_equals() {
        let a = Args::parse(&words("--batch 10 --json --url=http://x --conns 5")).unwrap();
        assert_eq!(a.get("batch", 1u32).unwrap(), 10);
        assert!(a.switch("json"));
        assert_eq!(a.get_str("url").unwrap(), "http://x");
        assert_eq!(a.get("conns", 1usize).unwrap(), 5);
        assert_eq!(a.get("missing", 7u8).unwrap(), 7);
        a.finish().unwrap();
    }

    #[test]
    fn unread_flag_is_refused() {
        let a = Args::parse(&words("--batchh 10")).unwrap();
        assert_eq!(a.get("batch", 1u32).unwrap(), 1);
        assert!(a.finish().is_err());
    }
}
