//! Helpers shared by the operator endpoints (consumer groups, resources,
//! messages, DLQ, traces; http-api.md §8–§11): timestamp validation, paging
//! parameters and the tenant every call runs under. Runs on the shards.

use super::params;
use crate::auth::DEFAULT_TENANT;
use crate::error::ApiError;
use shards::http::Request;

/// The tenant of an operator call: the `x-queen-tenant` header, which the
/// router has already validated (tenancy on: a UUID, not the nil one) or
/// removed (tenancy off, SEC-18), else the default tenant. Without this an
/// operator call of one tenant would read and delete another's queues.
pub fn tenant(req: &Request) -> String {
    req.header("x-queen-tenant")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_ascii_lowercase)
        .unwrap_or_else(|| DEFAULT_TENANT.to_string())
}

/// A non-empty query parameter.
pub fn q(req: &Request, name: &str) -> Option<String> {
    req.query_param(name).filter(|s| !s.is_empty())
}

/// Whether `s` looks like an ISO-8601 date or date-time PostgreSQL accepts:
/// `YYYY-MM-DD`, optionally `T`/space + `HH:MM[:SS[.frac]]` and `Z` or `±HH[:MM]`.
pub fn is_iso(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10))
    {
        return false;
    }
    let month = (b[5] - b'0') * 10 + (b[6] - b'0');
    let day = (b[8] - b'0') * 10 + (b[9] - b'0');
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    if !(matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16))
    {
        return false;
    }
    let hour = (b[11] - b'0') * 10 + (b[12] - b'0');
    let minute = (b[14] - b'0') * 10 + (b[15] - b'0');
    if hour > 23 || minute > 59 {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        if !digits(i + 1..i + 3) || (b[i + 1] - b'0') * 10 + (b[i + 2] - b'0') > 60 {
            return false;
        }
        i += 3;
        if b.get(i) == Some(&b'.') {
            i += 1;
            let start = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start || i - start > 9 {
                return false;
            }
        }
    }
    match &b[i..] {
        [] | [b'Z'] | [b'z'] => true,
        [b'+' | b'-', h1, h2] => h1.is_ascii_digit() && h2.is_ascii_digit(),
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        [b'+' | b'-', h1, h2, m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// An optional ISO-8601 query parameter; present but malformed → 400 naming it.
pub fn iso_param(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    match q(req, name) {
        None => Ok(None),
        Some(v) if is_iso(&v) => Ok(Some(v)),
        Some(_) => Err(ApiError::BadRequest(format!(
            "{name} must be an ISO-8601 timestamp"
        ))),
    }
}

/// Largest `offset` accepted by a paged listing.
pub const MAX_OFFSET: i64 = i32::MAX as i64;

/// `limit` and `offset` of a paged listing: `limit` in 1..=`max` (default
/// `default`), `offset` ≥ 0. Out-of-range values and non-numbers are a 400
/// naming the parameter (an operator typo must not silently page elsewhere).
pub fn paging(req: &Request, default: i64, max: i64) -> Result<(i64, i64), ApiError> {
    for (name, lo, hi) in [("limit", 1, max), ("offset", 0, MAX_OFFSET)] {
        if let Some(raw) = q(req, name) {
            if raw.trim().parse::<i64>().is_err() {
                return Err(ApiError::BadRequest(format!(
                    "{name} must be an integer between {lo} and {hi}"
                )));
            }
        }
    }
    let limit = params::int_in(req, "limit", 1, max)?.unwrap_or(default);
    let offset = params::int_in(req, "offset", 0, MAX_OFFSET)?.unwrap_or(0);
    Ok((limit, offset))
}

#[cfg(test)]
mod tests {
    use super::is_iso;

    #[test]
    fn iso_forms() {
        for ok in [
            "2025-01-31",
            "2025-01-31T12:34",
            "2025-01-31T12:34:56Z",
            "2025-01-31T12:34:56.123456Z",
            "2025-01-31 12:34:56+02:00",
            "2025-01-31T12:34:56-0500",
        ] {
            assert!(is_iso(ok), "{ok}");
        }
        for bad in [
            "",
            "yesterday",
            "2025-13-01",
            "2025-01-31T25:00",
            "2025-01-31T12:34:56Zx",
        ] {
            assert!(!is_iso(bad), "{bad}");
        }
    }
}
