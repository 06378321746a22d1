//! One shard of the proxy: its state ([`Shard`]) and the request pipeline
//! (proxy.md §5), in the load-bearing order: control data, cluster (421),
//! status gate (403), classification (404 / feature 403 / push_blocked 403),
//! credential (401), authorization (403), rate (429), forward (502 / 504).
//! The body cap (413) is answered by the listener's codec before any of
//! this, so an oversized body is never buffered. Runs on the shard's own
//! executor; one future per request, dropped if the client leaves.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shards::{Method, Request, Response, ShardId};

use crate::auth::{self, Principal};
use crate::config::Config;
use crate::control::Control;
use crate::error::ProxyError;
use crate::limits::Buckets;
use crate::metrics::Board;
use crate::rewrite::{self, Identity};
use crate::route::{self, Class, Growth};
use crate::snapshot::{Cluster, Snapshot, Status};
use crate::upstream::{Upstream, UpstreamError};

/// A long poll's wait when the client names none (ms), as the broker's.
const DEFAULT_POLL_WAIT_MS: u64 = 30_000;

/// Everything one shard owns.
#[derive(Debug)]
pub struct Shard {
    /// This shard's index (its metrics slot).
    id: ShardId,
    /// Boot configuration (immutable).
    cfg: Arc<Config>,
    /// The control snapshot (written by the control thread only).
    control: Arc<Control>,
    /// Keep-alive connections to brokers; used by request futures.
    upstream: Upstream,
    /// Per-key rate buckets; used by request futures.
    buckets: RefCell<Buckets>,
    /// Every shard's metrics (this shard writes slot `id`).
    metrics: Arc<Board>,
    /// Requests seen, for request ids.
    nr_requests: Cell<u64>,
    /// Random per-boot prefix of request ids.
    boot: u32,
}

/// A step's outcome: the class when known, and the answer.
type Outcome = (Option<Class>, Result<Response, ProxyError>);

impl Shard {
    /// The shard `id` with empty pools.
    pub fn new(id: ShardId, cfg: Arc<Config>, control: Arc<Control>, metrics: Arc<Board>) -> Shard {
        Shard {
            id,
            upstream: Upstream::new(cfg.connect_timeout),
            cfg,
            control,
            buckets: RefCell::new(Buckets::default()),
            metrics,
            nr_requests: Cell::new(0),
            boot: rand::random(),
        }
    }

    /// Answers one request.
    pub async fn handle(&self, req: Request) -> Response {
        let n = self.nr_requests.get() + 1;
        self.nr_requests.set(n);
        let rid = format!("px-{:08x}-{}-{n}", self.boot, self.id.0);
        let started = Instant::now();
        let (class, answer) = self.pipeline(&req, &rid).await;
        let resp = answer.unwrap_or_else(|e| {
            log::debug!("{rid} {} {}: refused: {e:?}", req.method.as_str(), req.path);
            e.to_response()
        });
        log::debug!(
            "{rid} {} {} -> {} in {} us",
            req.method.as_str(),
            req.path,
            resp.status,
            started.elapsed().as_micros()
        );
        self.metrics.count(self.id.0, class, resp.status);
        resp.with_header("x-queen-request-id", rid)
    }

    async fn pipeline(&self, req: &Request, rid: &str) -> Outcome {
        let Some(snap) = self.control.current() else {
            return (None, Err(ProxyError::ControlUnavailable));
        };
        if req.path == "/metrics/prometheus" {
            return (Some(Class::Operator), self.own_metrics(req, &snap));
        }
        let Some(cluster) = self.resolve(req, &snap) else {
            return (None, Err(ProxyError::ClusterUnknown));
        };
        let class = route::classify(&req.method, &req.path);
        if let Err(e) = self.admit(req, class, &snap, &cluster) {
            return (Some(class), Err(e));
        }
        (Some(class), self.forward(req, &cluster, rid).await)
    }

    /// The cluster of the Host's first label (port and trailing dot
    /// stripped, lower-cased), else the dev default.
    fn resolve(&self, req: &Request, snap: &Snapshot) -> Option<Arc<Cluster>> {
        let host = req.header("host").unwrap_or("").trim();
        let host = if host.starts_with('[') {
            host
        } else {
            host.rsplit_once(':').map_or(host, |(h, _)| h)
        };
        let label = host.trim_end_matches('.').split('.').next().unwrap_or("");
        snap.clusters
            .get(&label.to_ascii_lowercase())
            .or_else(|| snap.clusters.get(self.cfg.default_cluster.as_deref()?))
            .cloned()
    }

    /// Steps 2 to 5: status gate, class, credential, authorization, rate.
    fn admit(
        &self,
        req: &Request,
        class: Class,
        snap: &Snapshot,
        cluster: &Cluster,
    ) -> Result<(), ProxyError> {
        if matches!(cluster.status, Status::Suspended | Status::Deleting) {
            return Err(ProxyError::ClusterSuspended);
        }
        let blocked = cluster.status == Status::PushBlocked;
        match class {
            Class::Blocked => return Err(ProxyError::RouteBlocked),
            Class::Operator if !self.cfg.operator_enabled => return Err(ProxyError::RouteBlocked),
            Class::Produce if blocked => return Err(ProxyError::PushBlocked),
            Class::Gated(feature, growth) => {
                if !cluster.features.contains(feature.key()) {
                    return Err(ProxyError::FeatureGated {
                        feature: feature.key(),
                    });
                }
                if blocked && growth == Growth::Grow {
                    return Err(ProxyError::PushBlocked);
                }
            }
            _ => {}
        }
        let who = self.principal(req, class, snap, Some(cluster))?;
        auth::authorize(class, &who, cluster)?;
        if let Principal::Key(key) = &who {
            if let Some(rate) = key.rate_rps {
                if let Err(retry_after_s) =
                    self.buckets.borrow_mut().take(key.id, rate, Instant::now())
                {
                    if self.cfg.enforce {
                        return Err(ProxyError::RateLimited { retry_after_s });
                    }
                    log::info!(
                        "shadow mode: key {} over {rate} req/s on {}",
                        key.id,
                        cluster.slug
                    );
                }
            }
        }
        Ok(())
    }

    /// The caller's principal; on an operator route every failure is the
    /// same 404 as a refusal.
    fn principal(
        &self,
        req: &Request,
        class: Class,
        snap: &Snapshot,
        cluster: Option<&Cluster>,
    ) -> Result<Principal, ProxyError> {
        let found = match auth::credential(req, &self.cfg.cookie_name) {
            None => Err(ProxyError::Unauthorized),
            Some(token) => auth::authenticate(
                token,
                snap,
                &self.cfg.sessions,
                cluster,
                self.cfg.operator_enabled,
            ),
        };
        match found {
            Err(_) if class == Class::Operator => Err(ProxyError::RouteBlocked),
            other => other,
        }
    }

    /// The proxy's own Prometheus text, to a live operator only.
    fn own_metrics(&self, req: &Request, snap: &Snapshot) -> Result<Response, ProxyError> {
        if !self.cfg.operator_enabled || !matches!(req.method, Method::Get | Method::Head) {
            return Err(ProxyError::RouteBlocked);
        }
        let who = self.principal(req, Class::Operator, snap, None)?;
        if !auth::is_operator(&who) {
            return Err(ProxyError::RouteBlocked);
        }
        Ok(Response::text(
            200,
            "text/plain; version=0.0.4",
            self.metrics.render(),
        ))
    }

    /// Step 6: the exchange with the broker.
    async fn forward(
        &self,
        req: &Request,
        cluster: &Cluster,
        rid: &str,
    ) -> Result<Response, ProxyError> {
        let addr = cluster.broker.ok_or(ProxyError::BadGateway)?;
        let head = rewrite::upstream_head(
            req,
            &Identity {
                cluster,
                tenant_header: self.cfg.tenant_header,
                request_id: rid,
            },
        );
        let started = Instant::now();
        let result = self
            .upstream
            .exchange(
                addr,
                &head,
                &req.body,
                req.method == Method::Head,
                self.timeout_of(req),
            )
            .await;
        self.metrics.upstream(self.id.0, started.elapsed());
        let resp = result.map_err(|e| match e {
            UpstreamError::Unreachable => ProxyError::BadGateway,
            UpstreamError::Timeout => ProxyError::UpstreamTimeout,
        })?;
        Ok(Response {
            status: resp.status,
            headers: rewrite::relayed(&resp.headers),
            body: resp.body,
            spliced: None,
        })
    }

    /// PX-11: a long poll waits `min(timeout or 30 s, max) + margin`.
    fn timeout_of(&self, req: &Request) -> Duration {
        let wait = req.query_param("wait").is_some_and(|w| w == "true");
        if !route::is_long_poll(&req.path, wait) {
            return self.cfg.upstream_timeout;
        }
        let asked = req
            .query_param("timeout")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(DEFAULT_POLL_WAIT_MS);
        Duration::from_millis(asked).min(self.cfg.longpoll_max) + self.cfg.longpoll_margin
    }
}

/// Runs shard `id` until shutdown: the HTTP server with the pipeline.
pub async fn run(
    shard: Rc<Shard>,
    server: Rc<shards::ServerConfig>,
    shutdown: shards::ShutdownListener,
) {
    let handler = move |req: Request| {
        let shard = shard.clone();
        async move { shard.handle(req).await }
    };
    if let Err(e) = shards::serve(server, Rc::new(handler), shutdown).await {
        eprintln!("queen-proxy: {e}");
        std::process::exit(1);
    }
}
