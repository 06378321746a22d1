//! Authentication and authorization (proxy.md §3, §4): which credential a
//! request carries, whose it is, and whether that principal may use a route
//! class on a cluster. Pure over a [`Snapshot`]; runs on every shard.
//!
//! - A credential is `Authorization: Bearer <x>` or, without that header,
//!   the session cookie. The cookie is ignored on top-level navigations
//!   (`Sec-Fetch-Mode: navigate`) of API paths (the CSRF guard), and a `qk_`
//!   value in a cookie is ignored (keys are never ambient credentials).
//! - `qk_…` is an API key, anything else a session token.
//! - The matrix: an API key needs `produce` for Produce, `consume` for
//!   Consume, `admin` for QueueAdmin, `read` or `admin` for Read, `produce`
//!   or `consume` for Gated, and never gets Operator. A user's role on the
//!   cluster decides: Produce admin/producer, Consume admin/consumer,
//!   QueueAdmin admin, Read any role, Gated any but viewer; a live operator
//!   (`users.is_operator` with `QUEEN_PROXY_OPERATOR_ENABLED`) is admin
//!   everywhere and the only principal of Operator routes.

use uuid::Uuid;

use crate::apikey;
use crate::error::ProxyError;
use crate::route::Class;
use crate::session::SessionKeys;
use crate::snapshot::{ApiKey, Cluster, Role, Snapshot};
use shards::Request;

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A cluster API key.
    Key(ApiKey),
    /// A human session.
    User {
        /// Live operator (operator flag and operator routes enabled).
        operator: bool,
        /// Role on the request's cluster.
        role: Option<Role>,
    },
}

/// True for paths the CSRF guard protects.
fn api_path(path: &str) -> bool {
    ["/api/", "/streams/", "/internal", "/metrics"]
        .iter()
        .any(|p| path.starts_with(p))
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// The credential a request carries, if any (see the module doc).
pub fn credential<'a>(req: &'a Request, cookie_name: &str) -> Option<&'a str> {
    if let Some(auth) = req.header("authorization") {
        let (scheme, value) = auth.trim().split_once(' ')?;
        return (scheme.eq_ignore_ascii_case("bearer") && !value.trim().is_empty())
            .then(|| value.trim());
    }
    let navigate = req
        .header("sec-fetch-mode")
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("navigate"));
    if navigate && api_path(&req.path) {
        return None;
    }
    req.headers
        .iter()
        .filter(|(n, _)| n == "cookie")
        .find_map(|(_, v)| cookie(v, cookie_name))
        .filter(|v| !v.is_empty() && !v.starts_with("qk_"))
}

/// Whose credential this is. `cluster`: the request's cluster (a session
/// limited to another cluster is 403).
pub fn authenticate(
    token: &str,
    snap: &Snapshot,
    sessions: &SessionKeys,
    cluster: Option<&Cluster>,
    operator_enabled: bool,
) -> Result<Principal, ProxyError> {
    if token.starts_with("qk_") {
        if !apikey::well_formed(token) {
            return Err(ProxyError::Unauthorized);
        }
        let key = snap
            .keys
            .get(&apikey::digest(token))
            .ok_or(ProxyError::Unauthorized)?;
        return Ok(Principal::Key(key.clone()));
    }
    let claims = sessions
        .verify(token)
        .map_err(|_| ProxyError::Unauthorized)?;
    if snap.revoked.contains(&claims.jti) {
        return Err(ProxyError::Unauthorized);
    }
    let id: Uuid = claims.sub.parse().map_err(|_| ProxyError::Unauthorized)?;
    let user = snap.users.get(&id).ok_or(ProxyError::Unauthorized)?;
    if let (Some(limit), Some(c)) = (&claims.cluster, cluster) {
        if *limit != c.slug {
            return Err(ProxyError::Forbidden);
        }
    }
    Ok(Principal::User {
        operator: user.is_operator && operator_enabled,
        role: cluster.and_then(|c| user.roles.get(&c.id).copied()),
    })
}

/// True when `who` is a live operator.
pub fn is_operator(who: &Principal) -> bool {
    matches!(who, Principal::User { operator: true, .. })
}

/// May `who` use `class` on `cluster`? Operator routes refused are 404
/// (never a 403 that reveals them); everything else refused is 403.
pub fn authorize(class: Class, who: &Principal, cluster: &Cluster) -> Result<(), ProxyError> {
    if class == Class::Operator {
        return if is_operator(who) {
            Ok(())
        } else {
            Err(ProxyError::RouteBlocked)
        };
    }
    let allowed = match who {
        Principal::Key(key) => {
            let s = key.scopes;
            key.cluster == cluster.id
                && match class {
                    Class::Produce => s.produce,
                    Class::Consume => s.consume,
                    Class::QueueAdmin => s.admin,
                    Class::Read => s.read || s.admin,
                    Class::Gated(..) => s.produce || s.consume,
                    Class::Operator | Class::Blocked => false,
                }
        }
        Principal::User { operator: true, .. } => class != Class::Blocked,
        Principal::User { role: None, .. } => false,
        Principal::User {
            role: Some(role), ..
        } => match class {
            Class::Produce => matches!(role, Role::Admin | Role::Producer),
            Class::Consume => matches!(role, Role::Admin | Role::Consumer),
            Class::QueueAdmin => *role == Role::Admin,
            Class::Read => true,
            Class::Gated(..) => *role != Role::Viewer,
            Class::Operator | Class::Blocked => false,
        },
    };
    if allowed {
        Ok(())
    } else {
        Err(ProxyError::Forbidden)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{Feature, Growth};
    use crate::snapshot::{Scopes, Status};
    use shards::Method;

    fn cluster() -> Cluster {
        Cluster {
            id: Uuid::from_u128(1),
            slug: "acme".into(),
            broker: None,
            broker_host: "b:1".into(),
            token: None,
            broker_tenant: Uuid::from_u128(2),
            status: Status::Active,
            features: Default::default(),
        }
    }

    fn key(scopes: Scopes, cluster: u128) -> Principal {
        Principal::Key(ApiKey {
            id: Uuid::from_u128(9),
            cluster: Uuid::from_u128(cluster),
            scopes,
            rate_rps: None,
        })
    }

    const CLASSES: [Class; 6] = [
        Class::Produce,
        Class::Consume,
        Class::QueueAdmin,
        Class::Read,
        Class::Gated(Feature::Kv, Growth::Grow),
        Class::Operator,
    ];

    fn row(who: &Principal) -> Vec<u16> {
        CLASSES
            .iter()
            .map(|c| match authorize(*c, who, &cluster()) {
                Ok(()) => 200,
                Err(e) => e.status(),
            })
            .collect()
    }

    #[test]
    fn api_key_matrix() {
        let only = |f: fn(&mut Scopes)| {
            let mut s = Scopes::default();
            f(&mut s);
            key(s, 1)
        };
        assert_eq!(
            row(&only(|s| s.produce = true)),
            [200, 403, 403, 403, 200, 404]
        );
        assert_eq!(
            row(&only(|s| s.consume = true)),
            [403, 200, 403, 403, 200, 404]
        );
        assert_eq!(
            row(&only(|s| s.admin = true)),
            [403, 403, 200, 200, 403, 404]
        );
        assert_eq!(
            row(&only(|s| s.read = true)),
            [403, 403, 403, 200, 403, 404]
        );
        let all = Scopes {
            produce: true,
            consume: true,
            admin: true,
            read: true,
        };
        assert_eq!(
            row(&key(all, 7)),
            [403, 403, 403, 403, 403, 404],
            "another cluster's key"
        );
    }

    #[test]
    fn user_matrix() {
        let user = |role, operator| Principal::User { operator, role };
        assert_eq!(
            row(&user(Some(Role::Admin), false)),
            [200, 200, 200, 200, 200, 404]
        );
        assert_eq!(
            row(&user(Some(Role::Producer), false)),
            [200, 403, 403, 200, 200, 404]
        );
        assert_eq!(
            row(&user(Some(Role::Consumer), false)),
            [403, 200, 403, 200, 200, 404]
        );
        assert_eq!(
            row(&user(Some(Role::Viewer), false)),
            [403, 403, 403, 200, 403, 404]
        );
        assert_eq!(row(&user(None, false)), [403, 403, 403, 403, 403, 404]);
        assert_eq!(row(&user(None, true)), [200, 200, 200, 200, 200, 200]);
    }

    fn req(headers: &[(&str, &str)], path: &str) -> Request {
        Request {
            method: Method::Get,
            path: path.into(),
            query: String::new(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
            peer: None,
        }
    }

    #[test]
    fn credentials_header_wins_and_cookie_guards_hold() {
        let c = "queen_session";
        let r = req(
            &[
                ("authorization", "Bearer abc"),
                ("cookie", "queen_session=xyz"),
            ],
            "/api/v1/dlq",
        );
        assert_eq!(credential(&r, c), Some("abc"));
        let r = req(&[("cookie", "a=1; queen_session=xyz")], "/api/v1/dlq");
        assert_eq!(credential(&r, c), Some("xyz"));
        let r = req(
            &[
                ("cookie", "queen_session=xyz"),
                ("sec-fetch-mode", "navigate"),
            ],
            "/api/v1/dlq",
        );
        assert_eq!(credential(&r, c), None, "CSRF guard");
        let r = req(
            &[
                ("cookie", "queen_session=xyz"),
                ("sec-fetch-mode", "navigate"),
            ],
            "/",
        );
        assert_eq!(
            credential(&r, c),
            Some("xyz"),
            "navigation to the dashboard"
        );
        let r = req(&[("cookie", "queen_session=qk_live_abc")], "/api/v1/dlq");
        assert_eq!(credential(&r, c), None, "a key in a cookie");
        let r = req(&[("authorization", "Basic abc")], "/");
        assert_eq!(credential(&r, c), None);
    }
}
