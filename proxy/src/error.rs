//! Every refusal the proxy answers itself, and the one function that turns
//! it into a status and a JSON body `{"error", "code"}` (proxy.md §5). The
//! pipeline returns these; nothing else builds error bodies. No body ever
//! carries database text, upstream error text or a credential.

use shards::Response;

/// A request the proxy answers without (or instead of) the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    /// The Host names no cluster (421).
    ClusterUnknown,
    /// The cluster is suspended or being deleted (403).
    ClusterSuspended,
    /// A growing request on a `push_blocked` cluster (403).
    PushBlocked,
    /// The route is not forwarded (404, also for refused operator routes).
    RouteBlocked,
    /// The feature family is off for this cluster (403).
    FeatureGated {
        /// The family.
        feature: &'static str,
    },
    /// No usable credential (401).
    Unauthorized,
    /// A credential that may not do this here (403).
    Forbidden,
    /// The key's request rate is spent (429).
    RateLimited {
        /// Seconds until a request would pass.
        retry_after_s: u64,
    },
    /// The broker could not be reached (502).
    BadGateway,
    /// The broker did not answer in time (504).
    UpstreamTimeout,
    /// The control data is older than the stale grace, or not loaded yet (503).
    ControlUnavailable,
}

impl ProxyError {
    /// Status, machine code and human text.
    fn parts(&self) -> (u16, &'static str, String) {
        match self {
            ProxyError::ClusterUnknown => (
                421,
                "cluster_unknown",
                "no cluster answers on this host".into(),
            ),
            ProxyError::ClusterSuspended => {
                (403, "cluster_suspended", "this cluster is suspended".into())
            }
            ProxyError::PushBlocked => (
                403,
                "push_blocked",
                "pushing to this cluster is blocked".into(),
            ),
            ProxyError::RouteBlocked => (404, "route_blocked", "not available".into()),
            ProxyError::FeatureGated { feature } => (
                403,
                "feature_gated",
                format!("the {feature} feature is not enabled for this cluster"),
            ),
            ProxyError::Unauthorized => (
                401,
                "unauthorized",
                "a valid API key or session is required".into(),
            ),
            ProxyError::Forbidden => (
                403,
                "forbidden",
                "this credential may not do that here".into(),
            ),
            ProxyError::RateLimited { .. } => {
                (429, "rate_limited", "request rate limit reached".into())
            }
            ProxyError::BadGateway => (502, "bad_gateway", "the broker cannot be reached".into()),
            ProxyError::UpstreamTimeout => (
                504,
                "upstream_timeout",
                "the broker did not answer in time".into(),
            ),
            ProxyError::ControlUnavailable => (
                503,
                "control_unavailable",
                "the proxy's control data is not available".into(),
            ),
        }
    }

    /// The status this error is answered with.
    #[cfg(test)]
    pub fn status(&self) -> u16 {
        self.parts().0
    }

    /// The response.
    pub fn to_response(&self) -> Response {
        let (status, code, error) = self.parts();
        let body = serde_json::json!({"error": error, "code": code}).to_string();
        let mut r = Response::json(status, body);
        if let ProxyError::RateLimited { retry_after_s } = self {
            r = r.with_header("Retry-After", retry_after_s.to_string());
        }
        if let ProxyError::Unauthorized = self {
            r = r.with_header("WWW-Authenticate", "Bearer");
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_name_the_code_and_rate_limits_say_when() {
        let r = ProxyError::RouteBlocked.to_response();
        assert_eq!(r.status, 404);
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"error": "not available", "code": "route_blocked"})
        );
        let r = ProxyError::RateLimited { retry_after_s: 2 }.to_response();
        assert_eq!(r.status, 429);
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| *n == "Retry-After" && v == "2"));
        assert_eq!(ProxyError::ClusterUnknown.status(), 421);
    }
}
