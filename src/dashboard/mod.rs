//! The dashboard's static routes (http-api.md §20), served by every shard
//! from the one listener. The files under `dashboard/` (plain HTML, CSS and
//! JavaScript modules: no build step) are embedded in the binary, so the
//! `queen` binary is the whole product; `WEBAPP_ROOT` serves the same layout
//! from disk instead (read with glommio file I/O: never blocks the shard).
//!
//! # Routes (decisions where §20 is silent)
//! - `GET /` → `index.html`, `Cache-Control: no-cache`.
//! - `GET /assets/<file>` and `GET /assets/<tag>/<file>` → the asset,
//!   `public, max-age=31536000, immutable`. The file names are not hashed,
//!   so `index.html` is served with its asset URLs rewritten to carry
//!   [`asset_tag`] (a hash of every embedded file): an upgrade changes the
//!   URLs, and relative module imports inherit the tag. A missing asset is a
//!   404, never the SPA shell (a script answered with HTML only confuses).
//! - Any other `GET` outside `/api/`, `/health`, `/metrics`, `/ws/` → the file
//!   if it exists (`max-age=3600`), else `index.html` (SPA fallback).
//! - A `..` segment (after percent-decoding), or a segment holding `/`, `\`
//!   or NUL → 403. Unmatched paths under the reserved prefixes → 404.

use crate::error::ApiError;
use crate::shard::Shard;
use shards::http::Response;
use std::rc::Rc;
use std::sync::OnceLock;

/// Caching of `index.html` and the SPA fallback: always revalidate.
const NO_CACHE: &str = "no-cache";
/// Caching of `/assets/*` (URLs change with the content, see [`asset_tag`]).
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Caching of other files at the root (favicon): an hour.
const ONE_HOUR: &str = "public, max-age=3600";
/// Largest file served from `WEBAPP_ROOT` (bigger ones are a mistake, not a dashboard).
const MAX_DISK_FILE: u64 = 16 << 20;
/// Placeholder in `index.html` replaced by `/assets/<tag>`.
const ASSETS_PLACEHOLDER: &str = "/assets/";

/// The embedded files, by path relative to `dashboard/`.
const FILES: &[(&str, &[u8])] = &[
    ("index.html", include_bytes!("../../dashboard/index.html")),
    ("favicon.svg", include_bytes!("../../dashboard/favicon.svg")),
    (
        "assets/app.css",
        include_bytes!("../../dashboard/assets/app.css"),
    ),
    (
        "assets/app.js",
        include_bytes!("../../dashboard/assets/app.js"),
    ),
    (
        "assets/api.js",
        include_bytes!("../../dashboard/assets/api.js"),
    ),
    (
        "assets/chart.js",
        include_bytes!("../../dashboard/assets/chart.js"),
    ),
    (
        "assets/views.js",
        include_bytes!("../../dashboard/assets/views.js"),
    ),
];

/// Whether the static routes answer `segs` (GET paths no API route matched).
pub fn claims(segs: &[&str]) -> bool {
    !matches!(
        segs.first().copied(),
        Some("api" | "health" | "metrics" | "ws" | "internal" | "streams")
    )
}

/// A short hash of every embedded file (FNV-1a, hex): changes with any asset.
pub fn asset_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (name, body) in FILES {
            for b in name.as_bytes().iter().chain(body.iter()) {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        format!("{:012x}", h & 0xffff_ffff_ffff)
    })
}

/// Serves a static route.
pub async fn handle(shard: &Rc<Shard>, segs: &[&str]) -> Result<Response, ApiError> {
    if segs
        .iter()
        .any(|s| *s == ".." || s.contains(['/', '\\', '\0']))
    {
        return Err(ApiError::Forbidden);
    }
    let root = shard.cfg.webapp_root.as_deref();
    match segs {
        [] | [""] | ["index.html"] => index(root).await,
        ["assets", .., ""] | ["assets"] => Err(ApiError::NoSuchRoute),
        ["assets", file] | ["assets", _, file] => match load(root, &format!("assets/{file}")).await
        {
            Some(body) => Ok(file_response(file, body, IMMUTABLE)),
            None => Err(ApiError::NoSuchRoute),
        },
        _ => {
            let rel = segs.join("/");
            match load(root, &rel).await {
                Some(body) if !rel.is_empty() => Ok(file_response(&rel, body, ONE_HOUR)),
                _ => index(root).await,
            }
        }
    }
}

/// `index.html` with its asset URLs tagged.
async fn index(root: Option<&str>) -> Result<Response, ApiError> {
    let body = load(root, "index.html")
        .await
        .ok_or(ApiError::NoSuchRoute)?;
    let html = String::from_utf8_lossy(&body).replace(
        ASSETS_PLACEHOLDER,
        &format!("{ASSETS_PLACEHOLDER}{}/", asset_tag()),
    );
    Ok(hardened(
        Response::text(200, "text/html; charset=utf-8", html)
            .with_header("Cache-Control", NO_CACHE),
    ))
}

fn file_response(name: &str, body: Vec<u8>, cache: &str) -> Response {
    hardened(
        Response::text(200, content_type(name), body)
            .with_header("Cache-Control", cache.to_string()),
    )
}

/// The dashboard's content policy: scripts, styles, images and API calls from
/// this origin only (the dashboard has no inline script or style and loads
/// nothing from elsewhere), and no page may frame it.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";

/// Adds the browser-side protections to a dashboard response (issue 17):
/// no MIME sniffing (a JSON or text body is never run as script), the
/// content policy above, and no framing (clickjacking).
fn hardened(r: Response) -> Response {
    r.with_header("X-Content-Type-Options", "nosniff")
        .with_header("Content-Security-Policy", CSP)
        .with_header("X-Frame-Options", "DENY")
}

/// The `Content-Type` for a file name.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, e)| e) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// A file's bytes: from `root` when set, else embedded. `None` when missing.
async fn load(root: Option<&str>, rel: &str) -> Option<Vec<u8>> {
    match root {
        None => FILES
            .iter()
            .find(|(n, _)| *n == rel)
            .map(|(_, b)| b.to_vec()),
        Some(dir) => read_disk(&format!("{}/{rel}", dir.trim_end_matches('/'))).await,
    }
}

async fn read_disk(path: &str) -> Option<Vec<u8>> {
    let file = glommio::io::BufferedFile::open(path).await.ok()?;
    let size = file.file_size().await.ok()?;
    let out = if size <= MAX_DISK_FILE {
        file.read_at(0, size as usize)
            .await
            .ok()
            .map(|r| r.to_vec())
    } else {
        None
    };
    let _ = file.close().await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_prefixes_are_not_claimed() {
        assert!(!claims(&["api", "v1", "nope"]));
        assert!(!claims(&["metrics", "x"]));
        assert!(claims(&["queues", "q1"]));
        assert!(claims(&[]));
    }

    #[test]
    fn the_tag_is_stable_and_short() {
        assert_eq!(asset_tag(), asset_tag());
        assert_eq!(asset_tag().len(), 12);
    }
}
