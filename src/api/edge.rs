//! Checks every request passes before routing, whatever its endpoint (issue 17):
//! - a NUL byte in a path segment or query parameter is a 400 naming it
//!   (PostgreSQL refuses NUL in text, and its error text must never reach a
//!   client);
//! - a non-empty body that is not `application/json` is a 415: the API takes
//!   JSON only, and a `text/plain` or form body is what a foreign web page
//!   can send without a CORS preflight;
//! - a state-changing request whose `Origin` is neither this broker's own
//!   origin nor `QUEEN_CORS_ALLOW_ORIGIN` is a 403, so a page an operator
//!   happens to open cannot flip maintenance or delete a queue while JWT is off;
//! - an API request a browser marks as coming from another site
//!   (`Sec-Fetch-Site` other than `same-origin` or `none`) is a 403 unless its
//!   `Origin` is `QUEEN_CORS_ALLOW_ORIGIN`: a foreign page's `<img>` or link
//!   sends a GET without `Origin`, and a pop with `autoAck=true` consumes
//!   messages (`same-site` counts as foreign: `localhost:3000` and
//!   `localhost:6632` are one site). Clients that are not browsers send no
//!   `Sec-Fetch-Site`; a URL typed into the address bar sends `none`;
//! - with `QUEEN_ALLOWED_HOSTS` set, a `Host` outside the list is a 421, which
//!   defeats DNS rebinding (a rebound page reaches the broker under its own
//!   host name). Every path is checked, `/health` and `/metrics` too (they
//!   tell a rebound page about the broker), so the list must hold the names
//!   probes and scrapers use;
//! - two `Host` headers are a 400 (RFC 9112).
//!
//! Decisions (inferred): a body-less POST stays accepted (several endpoints
//! take none); `application/json` may carry parameters (`; charset=utf-8`)
//! and `+json` subtypes count as JSON; a body of only white space counts as
//! none; Host names compare case-insensitively, without the port and one
//! trailing dot.

use crate::error::ApiError;
use shards::http::{Method, Request};

/// What the checks need to know of the configuration.
#[derive(Debug, Clone, Copy)]
pub struct EdgeRules<'a> {
    /// `QUEEN_ALLOWED_HOSTS`, lower-cased; empty = any host.
    pub allowed_hosts: &'a [String],
    /// `QUEEN_CORS_ALLOW_ORIGIN`, when set.
    pub cors_allow_origin: Option<&'a str>,
}

/// Runs every check; the first that fails answers the request.
pub fn check(rules: EdgeRules<'_>, req: &Request, segs: &[&str]) -> Result<(), ApiError> {
    check_host(rules, req)?;
    check_nul(req, segs)?;
    check_body_type(req)?;
    check_origin(rules, req)?;
    if segs.first() == Some(&"api") {
        check_fetch_site(rules, req)?;
    }
    Ok(())
}

fn check_nul(req: &Request, segs: &[&str]) -> Result<(), ApiError> {
    if let Some(i) = segs.iter().position(|s| s.contains('\0')) {
        return Err(ApiError::BadRequest(format!(
            "path segment {} contains a NUL byte (%00), which no name may hold",
            i + 1
        )));
    }
    // Decoding can only make a NUL from `%00` or a raw NUL; every other
    // request skips the per-parameter decoding (and its allocations).
    if !req.query.contains("%00") && !req.query.contains('\0') {
        return Ok(());
    }
    for pair in req.query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(k);
        if key.contains('\0') || decode(v).contains('\0') {
            return Err(ApiError::BadRequest(format!(
                "query parameter {:?} contains a NUL byte (%00), which no value may hold",
                key.replace('\0', "%00")
            )));
        }
    }
    Ok(())
}

fn decode(s: &str) -> String {
    let bytes =
        shards::http::percent_decode(s.as_bytes(), true).unwrap_or_else(|| s.as_bytes().to_vec());
    String::from_utf8_lossy(&bytes).into_owned()
}

fn is_json(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

fn check_body_type(req: &Request) -> Result<(), ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match req.header("content-type") {
        Some(ct) if is_json(ct) => Ok(()),
        got => Err(ApiError::UnsupportedMediaType(format!(
            "request bodies must be JSON sent with Content-Type: application/json (got {}); \
             with curl: curl -H 'Content-Type: application/json' -d '{{...}}'",
            got.map_or_else(|| "no Content-Type".to_string(), |c| format!("{c:?}"))
        ))),
    }
}

fn changes_state(m: &Method) -> bool {
    !matches!(m, Method::Get | Method::Head | Method::Options)
}

fn check_origin(rules: EdgeRules<'_>, req: &Request) -> Result<(), ApiError> {
    let Some(origin) = req.header("origin") else {
        return Ok(());
    };
    if !changes_state(&req.method) {
        return Ok(());
    }
    let origin = origin.trim();
    // The broker's own origin is the host it was reached under: `Host`, or
    // behind a reverse proxy `X-Forwarded-Host`. A page cannot forge the
    // latter on a cross-site request: it is no CORS-safelisted header, so
    // the browser would send a preflight first, which this broker grants only
    // to QUEEN_CORS_ALLOW_ORIGIN (allowed here anyway).
    let own = ["host", "x-forwarded-host"].iter().any(|h| {
        req.header(h).is_some_and(|host| {
            let host = host.split(',').next().unwrap_or("").trim();
            !host.is_empty()
                && (origin.eq_ignore_ascii_case(&format!("http://{host}"))
                    || origin.eq_ignore_ascii_case(&format!("https://{host}")))
        })
    });
    if own || cors_allowed(rules, Some(origin)) {
        return Ok(());
    }
    Err(ApiError::CrossOrigin(format!(
        "a {} from origin {origin:?} is refused: only this broker's own pages and \
         QUEEN_CORS_ALLOW_ORIGIN may change state",
        req.method.as_str()
    )))
}

/// Whether `origin` is the one `QUEEN_CORS_ALLOW_ORIGIN` lets in.
fn cors_allowed(rules: EdgeRules<'_>, origin: Option<&str>) -> bool {
    match (rules.cors_allow_origin, origin) {
        (Some("*"), _) => true,
        (Some(a), Some(o)) => a.eq_ignore_ascii_case(o.trim()),
        _ => false,
    }
}

fn check_fetch_site(rules: EdgeRules<'_>, req: &Request) -> Result<(), ApiError> {
    let Some(site) = req.header("sec-fetch-site") else {
        return Ok(());
    };
    let site = site.trim().to_ascii_lowercase();
    if site == "same-origin" || site == "none" || cors_allowed(rules, req.header("origin")) {
        return Ok(());
    }
    Err(ApiError::CrossOrigin(format!(
        "a {site} request from a browser page is refused: the API answers this broker's \
         own pages and QUEEN_CORS_ALLOW_ORIGIN"
    )))
}

/// The host name of a `Host` header: lower case, without the port.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

fn check_host(rules: EdgeRules<'_>, req: &Request) -> Result<(), ApiError> {
    if req.headers.iter().filter(|(n, _)| n == "host").count() > 1 {
        return Err(ApiError::BadRequest("more than one Host header".into()));
    }
    if rules.allowed_hosts.is_empty() {
        return Ok(());
    }
    let name = req.header("host").map(host_name).unwrap_or_default();
    if rules.allowed_hosts.contains(&name) {
        return Ok(());
    }
    Err(ApiError::MisdirectedHost(format!(
        "host {name:?} is not served here (QUEEN_ALLOWED_HOSTS)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: Method, headers: &[(&str, &str)], body: &[u8]) -> Request {
        Request {
            method,
            path: "/api/v1/system/maintenance".into(),
            query: String::new(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
            peer: None,
        }
    }

    const OPEN: EdgeRules<'static> = EdgeRules {
        allowed_hosts: &[],
        cors_allow_origin: None,
    };

    #[test]
    fn json_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
    }

    #[test]
    fn a_simple_cross_site_post_is_refused_and_an_empty_one_is_not() {
        let r = req(Method::Post, &[("content-type", "text/plain")], b"{}");
        assert!(matches!(
            check_body_type(&r),
            Err(ApiError::UnsupportedMediaType(_))
        ));
        assert!(check_body_type(&req(Method::Post, &[], b"")).is_ok());
        let r = req(Method::Post, &[("content-type", "application/json")], b"{}");
        assert!(check_body_type(&r).is_ok());
    }

    #[test]
    fn origins() {
        let own = req(
            Method::Post,
            &[
                ("host", "127.0.0.1:6632"),
                ("origin", "http://127.0.0.1:6632"),
            ],
            b"",
        );
        assert!(check_origin(OPEN, &own).is_ok());
        let evil = req(
            Method::Post,
            &[
                ("host", "127.0.0.1:6632"),
                ("origin", "http://evil.example"),
            ],
            b"",
        );
        assert!(matches!(
            check_origin(OPEN, &evil),
            Err(ApiError::CrossOrigin(_))
        ));
        let allowed = EdgeRules {
            allowed_hosts: &[],
            cors_allow_origin: Some("http://evil.example"),
        };
        assert!(check_origin(allowed, &evil).is_ok());
        let read = req(Method::Get, &[("origin", "http://evil.example")], b"");
        assert!(check_origin(OPEN, &read).is_ok());
        let proxied = req(
            Method::Post,
            &[
                ("host", "10.0.0.5:6632"),
                ("x-forwarded-host", "queen.example.com"),
                ("origin", "https://queen.example.com"),
            ],
            b"",
        );
        assert!(check_origin(OPEN, &proxied).is_ok());
    }

    #[test]
    fn a_foreign_page_cannot_fetch_the_api_but_a_typed_url_and_own_pages_can() {
        let foreign = req(Method::Get, &[("sec-fetch-site", "cross-site")], b"");
        assert!(matches!(
            check_fetch_site(OPEN, &foreign),
            Err(ApiError::CrossOrigin(_))
        ));
        let sibling = req(Method::Get, &[("sec-fetch-site", "same-site")], b"");
        assert!(check_fetch_site(OPEN, &sibling).is_err());
        for ok in ["same-origin", "none"] {
            assert!(
                check_fetch_site(OPEN, &req(Method::Get, &[("sec-fetch-site", ok)], b"")).is_ok()
            );
        }
        assert!(check_fetch_site(OPEN, &req(Method::Get, &[], b"")).is_ok());
        let console = EdgeRules {
            allowed_hosts: &[],
            cors_allow_origin: Some("https://console.example"),
        };
        let r = req(
            Method::Get,
            &[
                ("sec-fetch-site", "cross-site"),
                ("origin", "https://console.example"),
            ],
            b"",
        );
        assert!(check_fetch_site(console, &r).is_ok());
    }

    #[test]
    fn hosts() {
        assert_eq!(host_name("localhost."), "localhost");
        assert!(matches!(
            check_host(
                OPEN,
                &req(Method::Get, &[("host", "a"), ("host", "b")], b"")
            ),
            Err(ApiError::BadRequest(_))
        ));
        assert_eq!(host_name("LocalHost:6632"), "localhost");
        assert_eq!(host_name("[::1]:6632"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
        let list = ["localhost".to_string()];
        let rules = EdgeRules {
            allowed_hosts: &list,
            cors_allow_origin: None,
        };
        let r = req(Method::Get, &[("host", "localhost:6632")], b"");
        assert!(check_host(rules, &r).is_ok());
        let r = req(Method::Get, &[("host", "rebound.example:6632")], b"");
        assert!(matches!(
            check_host(rules, &r),
            Err(ApiError::MisdirectedHost(_))
        ));
    }
}
