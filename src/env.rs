//! The environment reader every settings parser shares: [`Env`] with the
//! boolean and number rules, the one boot error [`ConfigError`], and the
//! small decoders (`decode_hex`, `parse_bind_host`, `secret_label`) more than
//! one module's settings need.
//!
//! It sits at the bottom of the crate and imports nothing of it, so `auth`,
//! `store`, `mesh`, `tls` and `crypto` can each parse their own variables
//! without importing `config`, which aggregates them.
//!
//! Parsing rules (config.md): booleans accept `true/false, 1/0, yes/no, on/off`
//! and anything else is fatal; integers that do not parse are fatal too (the
//! spec prefers refusing over silently defaulting, "(inferred)"); an empty
//! string is "unset" for numbers and booleans.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A configuration that cannot boot: one line naming the variable.
#[derive(Debug)]
pub struct ConfigError {
    /// The variable at fault.
    pub var: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfigError {
    /// The error for `var` with `reason`.
    pub fn new(var: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            var,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {}: {}", self.var, self.reason)
    }
}

/// Reads variables through a lookup function, so tests need not touch the
/// process environment. Built once in `main` (`Config::from_env`) and lent
/// to each settings parser; nothing reads the environment after boot.
pub struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl fmt::Debug for Env<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The values may be secrets; a reader has no business printing them.
        f.write_str("Env(..)")
    }
}

impl<'a> Env<'a> {
    /// A reader over `lookup` (the process environment or a test's map).
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Env<'a> {
        Env(lookup)
    }

    /// The raw value, empty included.
    pub fn string(&self, var: &str) -> Option<String> {
        (self.0)(var)
    }

    /// The value unless it is unset or blank.
    pub fn non_empty(&self, var: &str) -> Option<String> {
        self.string(var).filter(|s| !s.trim().is_empty())
    }

    /// A number (or anything `FromStr`), `default` when unset or blank;
    /// a value that does not parse stops the boot.
    pub fn parse<T: std::str::FromStr>(
        &self,
        var: &'static str,
        default: T,
    ) -> Result<T, ConfigError> {
        match self.non_empty(var) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| ConfigError::new(var, format!("{v:?} is not a valid number"))),
        }
    }

    /// A boolean, `default` when unset or blank; any other spelling than
    /// the four pairs stops the boot.
    pub fn bool(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.non_empty(var) {
            None => Ok(default),
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(true),
                "false" | "0" | "no" | "off" => Ok(false),
                _ => Err(ConfigError::new(
                    var,
                    format!("{v:?} is not a boolean (use true/false, 1/0, yes/no, on/off)"),
                )),
            },
        }
    }
}

/// Shows a secret as `<unset>` or `<set:N chars>`.
pub fn secret_label(s: &str) -> String {
    if s.is_empty() {
        "<unset>".into()
    } else {
        format!("<set:{} chars>", s.chars().count())
    }
}

/// Decodes an even-length hex string.
pub fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// A bind host (`QUEEN_BIND_ADDR`, `QUEEN_MESH_BIND_ADDR`; SEC-02): not
/// empty, no port (the port has its own variable), an IPv6 literal with or
/// without brackets, or `localhost`.
pub fn parse_bind_host(var: &'static str, v: &str) -> Result<IpAddr, ConfigError> {
    let v = v.trim();
    if v.is_empty() {
        return Err(ConfigError::new(var, "must not be empty"));
    }
    let bare = v.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(ip);
    }
    if v.parse::<SocketAddr>().is_ok()
        || v.rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        return Err(ConfigError::new(
            var,
            format!("{v:?} carries a port; the port comes from PORT"),
        ));
    }
    if v == "localhost" {
        return Ok(IpAddr::from([127, 0, 0, 1]));
    }
    Err(ConfigError::new(var, format!("{v:?} is not an IP address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_is_unset_and_bad_values_name_their_variable() {
        let lookup = |k: &str| match k {
            "BLANK" => Some("  ".to_string()),
            "N" => Some(" 42 ".to_string()),
            "B" => Some("On".to_string()),
            "BAD" => Some("maybe".to_string()),
            _ => None,
        };
        let env = Env::new(&lookup);
        assert_eq!(env.parse("BLANK", 7u32).unwrap(), 7);
        assert_eq!(env.parse("N", 0u32).unwrap(), 42);
        assert!(env.bool("B", false).unwrap());
        assert!(!env.bool("BLANK", false).unwrap());
        assert_eq!(env.bool("BAD", true).unwrap_err().var, "BAD");
        assert_eq!(env.parse("BAD", 1u8).unwrap_err().var, "BAD");
        assert_eq!(env.string("BLANK").as_deref(), Some("  "));
        assert_eq!(env.non_empty("BLANK"), None);
    }

    #[test]
    fn hex_and_labels() {
        assert_eq!(decode_hex("0aFF"), Some(vec![10, 255]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(secret_label(""), "<unset>");
        assert_eq!(secret_label("héllo"), "<set:5 chars>");
    }
}
