//! Header rewriting toward the broker (PX-07..PX-10) and back to the
//! caller. Pure; runs on every shard.
//!
//! Upstream, the caller's headers pass except: hop-by-hop headers and any
//! header the caller's `Connection` names (PX-07), `Host` (the broker's own
//! is sent), `Authorization` (PX-08: replaced by the cell token when the
//! cell has one), `x-queen-tenant` (PX-09: removed before the cluster's is
//! set), `x-queen-request-id` (PX-10: ours replaces it), `Cookie` (it may
//! carry the session token, which is the caller's, not the broker's),
//! `Expect` (the proxy's listener already answered it) and
//! `Content-Length` (the body was de-chunked; its length is written anew).
//!
//! Back to the caller only the headers in [`RELAYED`] pass (the response
//! type names headers with static strings; a broker header the list does
//! not know is dropped, which fails closed).

use crate::snapshot::Cluster;
use shards::Request;

/// Removed going upstream (PX-07 and the rest of the module doc).
const DROPPED: [&str; 14] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "authorization",
    "x-queen-tenant",
    "x-queen-request-id",
    "cookie",
    "expect",
    "content-length",
];

/// Response headers passed back to the caller, as written.
const RELAYED: [&str; 16] = [
    "Content-Type",
    "Cache-Control",
    "Retry-After",
    "Location",
    "ETag",
    "Last-Modified",
    "Vary",
    "Content-Security-Policy",
    "X-Content-Type-Options",
    "X-Frame-Options",
    "Access-Control-Allow-Origin",
    "Access-Control-Allow-Methods",
    "Access-Control-Allow-Headers",
    "Access-Control-Max-Age",
    "Access-Control-Expose-Headers",
    "WWW-Authenticate",
];

/// What the upstream head needs besides the request.
#[derive(Debug)]
pub struct Identity<'a> {
    /// The cluster (broker host, token, tenant).
    pub cluster: &'a Cluster,
    /// Set `x-queen-tenant` (QUEEN_PROXY_TENANT_HEADER).
    pub tenant_header: bool,
    /// This request's id.
    pub request_id: &'a str,
}

/// The request head sent to the broker.
pub fn upstream_head(req: &Request, who: &Identity<'_>) -> Vec<u8> {
    let named_by_connection: Vec<String> = req
        .headers
        .iter()
        .filter(|(n, _)| n == "connection")
        .flat_map(|(_, v)| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(req.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(req.path.as_bytes());
    if !req.query.is_empty() {
        out.push(b'?');
        out.extend_from_slice(req.query.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(who.cluster.broker_host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &req.headers {
        if DROPPED.contains(&name.as_str()) || named_by_connection.contains(name) {
            continue;
        }
        push_header(&mut out, name, value);
    }
    if let Some(token) = &who.cluster.token {
        push_header(&mut out, "authorization", &format!("Bearer {token}"));
    }
    if who.tenant_header {
        push_header(
            &mut out,
            "x-queen-tenant",
            &who.cluster.broker_tenant.to_string(),
        );
    }
    push_header(&mut out, "x-queen-request-id", who.request_id);
    if !req.body.is_empty() || !matches!(req.method, shards::Method::Get | shards::Method::Head) {
        push_header(&mut out, "content-length", &req.body.len().to_string());
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The broker's response headers the caller gets.
pub fn relayed(headers: &[(String, String)]) -> Vec<(&'static str, String)> {
    headers
        .iter()
        .filter_map(|(n, v)| {
            RELAYED
                .iter()
                .find(|r| r.eq_ignore_ascii_case(n))
                .map(|r| (*r, v.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Status;
    use shards::Method;
    use uuid::Uuid;

    #[test]
    fn identity_headers_are_replaced_and_hop_by_hop_dropped() {
        let cluster = Cluster {
            id: Uuid::nil(),
            slug: "acme".into(),
            broker: None,
            broker_host: "127.0.0.1:6632".into(),
            token: Some("cell-token".into()),
            broker_tenant: Uuid::from_u128(5),
            status: Status::Active,
            features: Default::default(),
        };
        let req = Request {
            method: Method::Post,
            path: "/api/v1/push".into(),
            query: "a=1".into(),
            headers: [
                ("host", "acme.example"),
                ("authorization", "Bearer qk_live_x"),
                ("x-queen-tenant", "11111111-1111-4111-8111-111111111111"),
                ("connection", "keep-alive, x-secret"),
                ("x-secret", "1"),
                ("transfer-encoding", "chunked"),
                ("content-type", "application/json"),
                ("cookie", "queen_session=abc"),
            ]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
            body: b"{}".to_vec(),
            peer: None,
        };
        let who = Identity {
            cluster: &cluster,
            tenant_header: true,
            request_id: "rid-1",
        };
        let head = String::from_utf8(upstream_head(&req, &who)).expect("ascii");
        assert_eq!(
            head,
            format!(
                "POST /api/v1/push?a=1 HTTP/1.1\r\nhost: 127.0.0.1:6632\r\ncontent-type: application/json\r\n\
                 authorization: Bearer cell-token\r\nx-queen-tenant: {}\r\nx-queen-request-id: rid-1\r\n\
                 content-length: 2\r\n\r\n",
                Uuid::from_u128(5)
            )
        );
        let back = relayed(&[
            ("content-type".into(), "a/b".into()),
            ("x-internal".into(), "1".into()),
        ]);
        assert_eq!(back, vec![("Content-Type", "a/b".to_string())]);
    }
}
