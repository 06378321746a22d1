//! The dashboard's static routes (http-api.md §20) served from the binary's
//! embedded copy, and from `WEBAPP_ROOT` when set.

mod common;

use common::*;

#[test]
fn root_serves_the_index_without_caching() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.get("/");
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert!(r.text().contains("<title>Queen</title>"), "{}", r.text());
}

/// The tagged URL of `file` as `index.html` references it.
fn asset_url(b: &Broker, file: &str) -> String {
    let html = b.get("/").text();
    let at = html
        .find(&format!("/{file}\""))
        .unwrap_or_else(|| panic!("{file} in {html}"));
    let start = html[..at].rfind('"').unwrap() + 1;
    html[start..at + file.len() + 1].to_string()
}

#[test]
fn assets_are_cached_immutably_under_a_content_tag() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let url = asset_url(&b, "app.js");
    assert!(
        url.starts_with("/assets/") && url.matches('/').count() == 3,
        "{url}"
    );
    let r = b.get(&url);
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("cache-control"),
        Some("public, max-age=31536000, immutable")
    );
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/javascript"));
    let css = b.get(&asset_url(&b, "app.css"));
    assert!(css.header("content-type").unwrap().starts_with("text/css"));
    // A module imported relatively from app.js resolves under the same tag.
    let tag_dir = &url[..url.rfind('/').unwrap()];
    assert_eq!(b.get(&format!("{tag_dir}/views.js")).status, 200);
}

/// Issue 17: the shell and every asset carry nosniff, a same-origin content policy
/// and a framing ban.
#[test]
fn dashboard_responses_forbid_sniffing_foreign_content_and_framing() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for path in [
        "/".to_string(),
        asset_url(&b, "app.js"),
        asset_url(&b, "app.css"),
        "/favicon.svg".into(),
    ] {
        let r = b.get(&path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(
            csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp:?}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains('*'),
            "{path}: {csp:?}"
        );
    }
}

#[test]
fn a_missing_asset_is_404_not_the_shell() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    assert_eq!(b.get("/assets/nope.js").status, 404);
}

#[test]
fn unknown_paths_fall_back_to_the_index() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.get("/queues/some-queue");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    assert!(r.text().contains("<title>Queen</title>"));
    let fav = b.get("/favicon.svg");
    assert_eq!(fav.status, 200);
    assert_eq!(fav.header("cache-control"), Some("public, max-age=3600"));
    assert!(fav
        .header("content-type")
        .unwrap()
        .starts_with("image/svg+xml"));
}

#[test]
fn path_traversal_is_forbidden() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for path in [
        "/assets/../Cargo.toml",
        "/%2e%2e/etc/passwd",
        "/a/..%2f..%2fetc",
        "/assets/x/../../x",
    ] {
        let r = b.get(path);
        assert_eq!(r.status, 403, "{path}: {}", r.text());
    }
}

#[test]
fn unmatched_api_health_and_metrics_paths_are_404() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    for path in [
        "/api/v1/nope",
        "/api",
        "/health/x",
        "/metrics/nope",
        "/ws/x",
    ] {
        let r = b.get(path);
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_eq!(r.json()["code"], "no_such_route", "{path}");
    }
}

#[test]
fn webapp_root_serves_from_disk() {
    let dir = std::env::temp_dir().join(format!("queen-webapp-{}", random_uuid()));
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(
        dir.join("index.html"),
        "<html>disk copy <script src=\"/assets/x.js\"></script></html>",
    )
    .unwrap();
    std::fs::write(dir.join("assets/x.js"), "console.log(1)").unwrap();
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("WEBAPP_ROOT", dir.to_str().unwrap())
        .start();
    let r = b.get("/");
    assert!(r.text().contains("disk copy"), "{}", r.text());
    let js = b.get("/assets/x.js");
    assert_eq!(js.status, 200);
    assert_eq!(js.text(), "console.log(1)");
    assert_eq!(
        b.get("/assets/app.js").status,
        404,
        "the embedded copy is not used"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_dashboard_and_metrics_stay_public_with_jwt_on() {
    let db = Db::fresh();
    let b = Broker::builder(&db)
        .env("JWT_ENABLED", "true")
        .env(
            "JWT_SECRET",
            "a-test-secret-of-sufficient-length-0123456789",
        )
        .start();
    assert_eq!(b.get("/").status, 200);
    assert_eq!(b.get(&asset_url(&b, "app.css")).status, 200);
    assert_eq!(b.get("/queues/x").status, 200);
    assert_eq!(b.get("/metrics").status, 200);
    assert_eq!(b.get("/metrics/prometheus").status, 200);
    // The views' data is not: the dashboard then asks for a token.
    assert_eq!(b.get("/api/v1/resources/overview").status, 401);
}
