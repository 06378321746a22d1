//! What the proxy knows of its control plane, as one immutable value: every
//! cluster (by slug), every live API key (by SHA-256), every user with its
//! per-cluster roles, and the revoked session ids. The control thread loads a
//! whole new [`Snapshot`] from the control database on each change and
//! publishes it; shards only read. Loading blocks (control thread only).
//!
//! Decision: the whole control plane of one proxy deployment fits in memory
//! (thousands of clusters and keys), so a change reloads everything rather
//! than one entry: no partial state can be seen, and the cost is one short
//! read per change notice.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use uuid::Uuid;

use crate::pxdb::describe;

/// A cluster's lifecycle status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Serving.
    Active,
    /// Growing requests refused.
    PushBlocked,
    /// Everything refused.
    Suspended,
    /// Everything refused.
    Deleting,
}

/// What an API key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scopes {
    /// `produce`.
    pub produce: bool,
    /// `consume`.
    pub consume: bool,
    /// `admin`.
    pub admin: bool,
    /// `read`.
    pub read: bool,
}

/// A per-cluster user role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything on the cluster.
    Admin,
    /// Produce and read.
    Producer,
    /// Consume and read.
    Consumer,
    /// Read only.
    Viewer,
}

/// One cluster and the broker (cell) behind it.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Id (the notice payload).
    pub id: Uuid,
    /// First Host label.
    pub slug: String,
    /// The broker's address, resolved when loaded (`None`: unresolvable,
    /// answered 502).
    pub broker: Option<SocketAddr>,
    /// `host:port` of the broker URL, sent as the upstream `Host`.
    pub broker_host: String,
    /// The cell's bearer token (PX-08).
    pub token: Option<String>,
    /// The broker tenant injected as `x-queen-tenant` (PX-09).
    pub broker_tenant: Uuid,
    /// Lifecycle status.
    pub status: Status,
    /// Feature families switched on.
    pub features: HashSet<String>,
}

/// One live (unrevoked) API key.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Key id.
    pub id: Uuid,
    /// The one cluster it is bound to.
    pub cluster: Uuid,
    /// Scopes.
    pub scopes: Scopes,
    /// Requests per second (`None`: unlimited).
    pub rate_rps: Option<u32>,
}

/// One user.
#[derive(Debug, Clone, Default)]
pub struct User {
    /// `users.is_operator`.
    pub is_operator: bool,
    /// Role per cluster id.
    pub roles: HashMap<Uuid, Role>,
}

/// The whole control plane as of one read.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Clusters by slug.
    pub clusters: HashMap<String, Arc<Cluster>>,
    /// Live keys by SHA-256 hex.
    pub keys: HashMap<String, ApiKey>,
    /// Users by id.
    pub users: HashMap<Uuid, User>,
    /// Revoked session token ids.
    pub revoked: HashSet<String>,
}

fn status(s: &str) -> Status {
    match s {
        "active" => Status::Active,
        "push_blocked" => Status::PushBlocked,
        "deleting" => Status::Deleting,
        // The schema admits nothing else; an unknown value fails closed.
        _ => Status::Suspended,
    }
}

fn role(s: &str) -> Role {
    match s {
        "admin" => Role::Admin,
        "producer" => Role::Producer,
        "consumer" => Role::Consumer,
        _ => Role::Viewer,
    }
}

fn scopes(list: &[String]) -> Scopes {
    let has = |s: &str| list.iter().any(|x| x == s);
    Scopes {
        produce: has("produce"),
        consume: has("consume"),
        admin: has("admin"),
        read: has("read"),
    }
}

/// `host:port` of an `http://host:port` URL, and its resolved address.
fn broker_target(url: &str) -> (String, Option<SocketAddr>) {
    let host = url.strip_prefix("http://").unwrap_or(url).to_string();
    let with_port = if host
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        host.clone()
    } else {
        format!("{host}:80")
    };
    let addr = with_port.to_socket_addrs().ok().and_then(|mut a| a.next());
    (host, addr)
}

/// Reads a whole snapshot (one REPEATABLE READ transaction, so it is one
/// consistent view).
pub fn load(client: &mut postgres::Client) -> Result<Snapshot, String> {
    let err = |e: postgres::Error| format!("loading the control snapshot: {}", describe(&e));
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(err)?;
    let mut snap = Snapshot::default();
    for row in tx
        .query(
            "SELECT c.id, c.slug, c.broker_tenant, c.status, c.features, cell.url, cell.token
             FROM queen_proxy.clusters c JOIN queen_proxy.cells cell ON cell.id = c.cell_id",
            &[],
        )
        .map_err(err)?
    {
        let url: String = row.get(5);
        // Both go into the upstream head verbatim: a control character there
        // would split it, so such a cell is unreachable (502), never forwarded.
        let clean = |s: &str| !s.chars().any(|c| c.is_control() || c == ' ');
        let (broker_host, mut broker) = broker_target(&url);
        let mut token: Option<String> = row.get(6);
        if !clean(&broker_host) || !token.as_deref().is_none_or(clean) {
            log::error!(
                "cell {url:?}: URL or token holds control characters; its clusters answer 502"
            );
            broker = None;
            token = None;
        }
        let features: serde_json::Value = row.get(4);
        let features = features
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let status_text: String = row.get(3);
        let cluster = Cluster {
            id: row.get(0),
            slug: row.get(1),
            broker,
            broker_host,
            token,
            broker_tenant: row.get(2),
            status: status(&status_text),
            features,
        };
        snap.clusters
            .insert(cluster.slug.clone(), Arc::new(cluster));
    }
    for row in tx
        .query(
            "SELECT key_sha256, id, cluster_id, scopes, rate_rps FROM queen_proxy.api_keys
             WHERE revoked_at IS NULL",
            &[],
        )
        .map_err(err)?
    {
        let list: Vec<String> = row.get(3);
        let rate: Option<i32> = row.get(4);
        snap.keys.insert(
            row.get(0),
            ApiKey {
                id: row.get(1),
                cluster: row.get(2),
                scopes: scopes(&list),
                rate_rps: rate.map(|r| r.max(1) as u32),
            },
        );
    }
    for row in tx
        .query("SELECT id, is_operator FROM queen_proxy.users", &[])
        .map_err(err)?
    {
        let user = User {
            is_operator: row.get(1),
            roles: HashMap::new(),
        };
        snap.users.insert(row.get(0), user);
    }
    for row in tx
        .query(
            "SELECT user_id, cluster_id, role FROM queen_proxy.cluster_roles",
            &[],
        )
        .map_err(err)?
    {
        let r: String = row.get(2);
        if let Some(u) = snap.users.get_mut(&row.get::<_, Uuid>(0)) {
            u.roles.insert(row.get(1), role(&r));
        }
    }
    for row in tx
        .query("SELECT jti FROM queen_proxy.revoked_tokens", &[])
        .map_err(err)?
    {
        snap.revoked.insert(row.get(0));
    }
    tx.commit().map_err(err)?;
    Ok(snap)
}
