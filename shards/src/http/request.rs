//! The parsed request a handler receives, and percent-decoding of its path
//! and query. Pure; runs on the connection's shard.

use std::net::SocketAddr;

use super::HttpError;

/// Request method; unknown tokens are kept in `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// PATCH
    Patch,
    /// HEAD (answered without a body)
    Head,
    /// OPTIONS
    Options,
    /// Any other token, as sent.
    Other(String),
}

impl Method {
    /// Parses a method token (case-sensitive, as RFC 9110 says).
    pub fn parse(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_string()),
        }
    }

    /// The method token.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
            Method::Other(s) => s,
        }
    }
}

/// One HTTP request with its whole body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The raw path, without the query (still percent-encoded).
    pub path: String,
    /// The raw query, without the `?` (empty when absent).
    pub query: String,
    /// Headers in arrival order; names lowercased, values as sent
    /// (invalid UTF-8 replaced).
    pub headers: Vec<(String, String)>,
    /// The de-chunked body.
    pub body: Vec<u8>,
    /// The peer address, when known.
    pub peer: Option<SocketAddr>,
}

impl Request {
    /// The first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path split on `/`, the empty leading segment removed, each
    /// segment percent-decoded (so `%2F` stays inside its segment).
    /// `/` gives an empty list; `/a/` gives `["a", ""]`.
    pub fn segments(&self) -> Result<Vec<String>, HttpError> {
        let path = self.path.strip_prefix('/').unwrap_or(&self.path);
        if path.is_empty() {
            return Ok(Vec::new());
        }
        path.split('/')
            .map(|seg| {
                let bytes = percent_decode(seg.as_bytes(), false).ok_or(HttpError::BadPath)?;
                String::from_utf8(bytes).map_err(|_| HttpError::BadPath)
            })
            .collect()
    }

    /// The first query parameter named `name`, percent-decoded with `+` as
    /// space. Invalid escapes are kept literally; invalid UTF-8 is replaced.
    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .find_map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (decode_lossy(k) == name).then(|| decode_lossy(v))
            })
    }
}

/// Decodes a query component: `+` is a space, bad escapes stay literal.
fn decode_lossy(s: &str) -> String {
    let bytes = percent_decode(s.as_bytes(), true).unwrap_or_else(|| s.as_bytes().to_vec());
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Percent-decodes `input`; with `plus_is_space`, `+` becomes ` `.
/// `None` when a `%` is not followed by two hex digits.
pub fn percent_decode(input: &[u8], plus_is_space: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'%' => {
                let hi = hex_value(*input.get(i + 1)?)?;
                let lo = hex_value(*input.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str, query: &str) -> Request {
        Request {
            method: Method::Get,
            path: path.into(),
            query: query.into(),
            headers: vec![("x-token".into(), "abc".into())],
            body: Vec::new(),
            peer: None,
        }
    }

    #[test]
    fn segments_decode_each_segment_and_keep_encoded_slash_inside() {
        let r = req("/api/v1/queues/a%2Fb/caf%C3%A9", "");
        assert_eq!(
            r.segments().expect("valid"),
            vec!["api", "v1", "queues", "a/b", "café"]
        );
        assert_eq!(
            req("/", "").segments().expect("valid"),
            Vec::<String>::new()
        );
        assert_eq!(req("/a/", "").segments().expect("valid"), vec!["a", ""]);
    }

    #[test]
    fn segments_reject_bad_escapes_and_bad_utf8() {
        assert_eq!(req("/a%zz", "").segments(), Err(HttpError::BadPath));
        assert_eq!(req("/a%4", "").segments(), Err(HttpError::BadPath));
        assert_eq!(req("/a%ff", "").segments(), Err(HttpError::BadPath));
    }

    #[test]
    fn query_param_decodes_plus_and_escapes_and_takes_first() {
        let r = req("/", "a=1&name=hello+w%6Frld&name=second&flag&bad=%zz");
        assert_eq!(r.query_param("name").as_deref(), Some("hello world"));
        assert_eq!(r.query_param("a").as_deref(), Some("1"));
        assert_eq!(r.query_param("flag").as_deref(), Some(""));
        assert_eq!(r.query_param("bad").as_deref(), Some("%zz"));
        assert_eq!(r.query_param("missing"), None);
    }

    #[test]
    fn header_lookup_ignores_case() {
        assert_eq!(req("/", "").header("X-Token"), Some("abc"));
        assert_eq!(Method::parse("BREW"), Method::Other("BREW".into()));
        assert_eq!(Method::parse("PATCH").as_str(), "PATCH");
    }
}
