//! The opt-in CORS switch (security.md SEC-04, http-api.md §21 row 4).
//! Runs on the shards, around every routed request.
//!
//! By default the broker sends no CORS header and `OPTIONS` is routed like
//! any other method (so it answers 404/405). With `QUEEN_CORS_ALLOW_ORIGIN`
//! set (name chosen here, the spec leaves it free) the 0.15 broker's
//! behaviour returns: every routed response carries
//! `Access-Control-Allow-Origin: <value>` and the method/header/max-age
//! headers, and `OPTIONS` on any path answers 204 without authentication.
//! Decision: the value is sent as given (`*` or one origin); codec-level
//! errors (400/408/413/431 answered by the runtime) carry no CORS headers.

use crate::config::Config;
use shards::http::{Method, Request, Response};

/// `Access-Control-Allow-Methods` (the 0.15 broker's list).
const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE, OPTIONS";
/// `Access-Control-Allow-Headers` (the 0.15 broker's list).
const ALLOW_HEADERS: &str = "Content-Type, Authorization";
/// `Access-Control-Max-Age`: one day, as the 0.15 broker sent.
const MAX_AGE_S: &str = "86400";

/// The preflight answer, when the switch is on and `req` is an `OPTIONS`.
pub fn preflight(cfg: &Config, req: &Request) -> Option<Response> {
    let origin = cfg.cors_allow_origin.as_deref()?;
    (req.method == Method::Options).then(|| with_headers(Response::no_content(), origin))
}

/// Adds the CORS headers to `resp` when the switch is on.
pub fn decorate(cfg: &Config, resp: Response) -> Response {
    match cfg.cors_allow_origin.as_deref() {
        Some(origin) => with_headers(resp, origin),
        None => resp,
    }
}

fn with_headers(resp: Response, origin: &str) -> Response {
    resp.with_header("Access-Control-Allow-Origin", origin)
        .with_header("Access-Control-Allow-Methods", ALLOW_METHODS)
        .with_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
        .with_header("Access-Control-Max-Age", MAX_AGE_S)
}
