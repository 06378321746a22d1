//! The HTTP API: one file per endpoint (its request parsing, validation and
//! handler), and this one `match` that lists every route.
//!
//! Handlers return `Result<Response, ApiError>`; errors become JSON here
//! (`ApiError::into_response`) and nowhere else.

mod ack;
mod admin;
mod buffers;
mod configure;
mod cors;
mod dlq;
mod edge;
mod ephemeral;
mod groups;
mod health;
mod kv;
mod kv_switch;
mod lease;
mod locks;
mod maintenance;
mod messages;
mod metrics;
pub mod params;
mod pop;
mod pop_answer;
pub mod pop_autopilot;
mod pop_conflation;
mod push;
mod push_items;
mod reply;
mod resources;
mod seal;
mod shared_state;
mod status;
mod streams;
mod timers;
mod timers_ops;
mod traces;
mod txn;

use crate::error::ApiError;
use crate::shard::Shard;
use shards::http::{Method, Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// The shard's request handler.
#[derive(Debug)]
pub struct Router {
    /// The shard serving the requests.
    shard: Rc<Shard>,
}

impl Router {
    /// A router for `shard`.
    pub fn new(shard: Rc<Shard>) -> Router {
        Router { shard }
    }
}

impl shards::listen::Handler for Router {
    fn handle(&self, req: Request) -> Pin<Box<dyn Future<Output = Response>>> {
        let shard = self.shard.clone();
        Box::pin(async move {
            let resp = match cors::preflight(&shard.cfg, &req) {
                Some(r) => r,
                None => route(&shard, req)
                    .await
                    .unwrap_or_else(ApiError::into_response),
            };
            let resp = cors::decorate(&shard.cfg, resp);
            shard.counters.request(resp.status);
            resp
        })
    }
}

/// Finds the endpoint for `req` and runs it.
async fn route(shard: &Rc<Shard>, mut req: Request) -> Result<Response, ApiError> {
    if !shard.cfg.auth.tenancy_header {
        // SEC-18: with tenancy off the header means nothing; drop it so no
        // handler can take it for a tenant.
        req.headers.retain(|(name, _)| name != "x-queen-tenant");
    }
    let segs = req
        .segments()
        .map_err(|e| ApiError::BadRequest(format!("bad path: {e}")))?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    // NUL, body type, Origin and Host, before any endpoint reads the request.
    edge::check(
        edge::EdgeRules {
            allowed_hosts: &shard.cfg.allowed_hosts,
            cors_allow_origin: shard.cfg.cors_allow_origin.as_deref(),
        },
        &req,
        &s,
    )?;
    // Tenant header shape and JWT access level, for every route (src/auth).
    crate::auth::prepare(&shard.cfg.auth, &shard.tokens, &req).await;
    crate::auth::check(&shard.cfg.auth, &shard.tokens, &req, &s)?;
    use Method::*;
    match (&req.method, s.as_slice()) {
        (Get, ["health"]) => health::handle(shard).await,
        (Get, ["metrics"]) => metrics::json(shard).await,
        (Get, ["metrics", "prometheus"]) => metrics::prometheus(shard).await,
        (Post, ["api", "v1", "configure"]) => configure::handle(shard, &req).await,
        (Post, ["api", "v1", "push"]) => push::handle(shard, &mut req).await,
        (Get, ["api", "v1", "pop", "queue", q]) => {
            pop::handle(shard, &req, pop::Scope::queue(q)).await
        }
        (Get, ["api", "v1", "pop", "queue", q, "partition", p]) => {
            pop::handle(shard, &req, pop::Scope::partition(q, p)).await
        }
        (Get, ["api", "v1", "pop"]) => pop::handle(shard, &req, pop::Scope::discovery(&req)).await,
        (Post, ["api", "v1", "ack"]) => ack::handle_one(shard, &req).await,
        (Post, ["api", "v1", "ack", "batch"]) => ack::handle_batch(shard, &req).await,
        (Post, ["api", "v1", "lease", id, "extend"]) => lease::handle(shard, &req, id).await,
        (Post, ["api", "v1", "transaction"]) => txn::handle(shard, &req).await,
        (Get, ["api", "v1", "dlq"]) => dlq::handle(shard, &req).await,
        (Get, ["api", "v1", "system", "shared-state"]) => shared_state::handle(shard).await,
        (Get, ["api", "v1", "system", "maintenance"]) => maintenance::get_push(shard).await,
        (Post, ["api", "v1", "system", "maintenance"]) => {
            maintenance::set(shard, &req, false).await
        }
        (Get, ["api", "v1", "system", "maintenance", "pop"]) => maintenance::get_pop(shard).await,
        (Post, ["api", "v1", "system", "maintenance", "pop"]) => {
            maintenance::set(shard, &req, true).await
        }
        // key/value store (§15) and locks (§17)
        (Post, ["api", "v1", "kv"]) => kv::batch(shard, &req).await,
        (Get, ["api", "v1", "kv", ns, tail @ ..]) if !tail.is_empty() => {
            kv::get_one(shard, &req, ns, tail).await
        }
        (Put, ["api", "v1", "kv", ns, tail @ ..]) if !tail.is_empty() => {
            kv::put_one(shard, &req, ns, tail).await
        }
        (Delete, ["api", "v1", "kv", ns, tail @ ..]) if !tail.is_empty() => {
            kv::delete_one(shard, &req, ns, tail).await
        }
        (Post, ["api", "v1", "locks"]) => locks::handle(shard, &req).await,
        (Get, ["api", "v1", "resources", "kv", "namespaces"]) => kv::namespaces(shard, &req).await,
        (Post, ["api", "v1", "resources", "kv", "list"]) => kv::list(shard, &req).await,
        (Get, ["api", "v1", "system", "kv-timers"]) => kv_switch::get(shard).await,
        (Post, ["api", "v1", "system", "kv-timers"]) => kv_switch::set(shard, &req).await,
        (Get, ["api", "v1", "status", "buffers"]) => buffers::handle(shard).await,
        // status and analytics (§12)
        (Get, ["api", "v1", "status"]) => status::status(shard, &req).await,
        (Get, ["api", "v1", "status", "queues"]) => status::queues(shard, &req).await,
        (Get, ["api", "v1", "status", "queues", q]) => status::queue(shard, &req, q).await,
        (Get, ["api", "v1", "status", "queues", q, "messages"]) => {
            status::queue_messages(shard, &req, q).await
        }
        (Get, ["api", "v1", "status", "analytics"]) => status::analytics(shard, &req).await,
        (Get, ["api", "v1", "analytics", "worker-metrics"]) => {
            status::worker_metrics(shard, &req).await
        }
        (Get, ["api", "v1", "analytics", "queue-parked-replicas"]) => {
            status::parked_replicas(shard, &req).await
        }
        (Get, ["api", "v1", "analytics", v]) => status::analytics_view(shard, &req, v).await,
        // consumer groups (§11): `lagging` before `{group}`
        (Get, ["api", "v1", "consumer-groups"]) => groups::list(shard, &req).await,
        (Get, ["api", "v1", "consumer-groups", "lagging"]) => groups::lagging(shard, &req).await,
        (Get, ["api", "v1", "consumer-groups", g]) => groups::detail(shard, &req, g).await,
        (Delete, ["api", "v1", "consumer-groups", g]) => groups::delete(shard, &req, g, None).await,
        (Post, ["api", "v1", "consumer-groups", g, "subscription"]) => {
            groups::subscription(shard, &req, g).await
        }
        (Delete, ["api", "v1", "consumer-groups", g, "queues", q]) => {
            groups::delete(shard, &req, g, Some(q)).await
        }
        (Post, ["api", "v1", "consumer-groups", g, "queues", q, "seek"]) => {
            groups::seek(shard, &req, g, q, None).await
        }
        (Post, ["api", "v1", "consumer-groups", g, "queues", q, "partitions", p, "seek"]) => {
            groups::seek(shard, &req, g, q, Some(p)).await
        }
        // resources (§8)
        (Get, ["api", "v1", "resources", "queues"]) => resources::queues(shard, &req).await,
        (Get, ["api", "v1", "resources", "queues", q]) => resources::queue(shard, &req, q).await,
        (Delete, ["api", "v1", "resources", "queues", q]) => {
            resources::delete_queue(shard, &req, q).await
        }
        (Get, ["api", "v1", "resources", "queues", q, "depth"]) => {
            resources::depth(shard, &req, q).await
        }
        (Get, ["api", "v1", "resources", "namespaces"]) => resources::namespaces(shard, &req).await,
        (Get, ["api", "v1", "resources", "tasks"]) => resources::tasks(shard, &req).await,
        (Get, ["api", "v1", "resources", "overview"]) => resources::overview(shard, &req).await,
        (Get, ["api", "v1", "resources", "partitions"]) => resources::partitions(shard, &req).await,
        (Delete, ["api", "v1", "queues", q, "clear"]) => resources::clear(shard, &req, q).await,
        (Post, ["api", "v1", "stats", "refresh"]) => resources::stats_refresh(shard, &req).await,
        // messages and dead letters (§9)
        (Get, ["api", "v1", "messages"]) => messages::list(shard, &req).await,
        (Get, ["api", "v1", "messages", p, t]) => messages::detail(shard, &req, p, t).await,
        (Delete, ["api", "v1", "messages", p, t]) => messages::delete(shard, &req, p, t).await,
        (Post, ["api", "v1", "messages", p, t, "retry"]) => {
            messages::retry(shard, &req, p, t).await
        }
        (Post, ["api", "v1", "messages", p, t, "dlq"]) => messages::to_dlq(shard, &req, p, t).await,
        (Delete, ["api", "v1", "dlq"]) => messages::dlq_delete(shard, &req).await,
        (Post, ["api", "v1", "dlq", id, "replay"]) => messages::replay_by_id(shard, &req, id).await,
        // traces (§10): `by-name` before `{partitionId}/{transactionId}`
        (Post, ["api", "v1", "traces"]) => traces::add(shard, &req).await,
        (Get, ["api", "v1", "traces", "names"]) => traces::names(shard, &req).await,
        (Get, ["api", "v1", "traces", "by-name", n]) => traces::by_name(shard, &req, n).await,
        (Get, ["api", "v1", "traces", p, t]) => traces::by_message(shard, &req, p, t).await,
        // timers (§16): the key is the path's tail (it may hold `/`)
        (Post, ["api", "v1", "timers"]) => timers::batch(shard, &req).await,
        (Get, ["api", "v1", "timers", q]) => timers::list(shard, &req, q).await,
        (Get, ["api", "v1", "timers", q, key @ ..]) => timers::peek(shard, &req, q, key).await,
        (Delete, ["api", "v1", "timers", q, key @ ..]) if !key.is_empty() => {
            timers::cancel(shard, &req, q, key).await
        }
        (Get, ["api", "v1", "resources", "timers"]) => timers::pending(shard, &req).await,
        // ephemeral queues (§18)
        (Post, ["api", "v1", "ephemeral", "configure"]) => {
            ephemeral::configure::handle(shard, &req).await
        }
        (Post, ["api", "v1", "ephemeral", "push"]) => ephemeral::push::handle(shard, &req).await,
        (Get, ["api", "v1", "ephemeral", "pop"]) => ephemeral::pop::handle(shard, &req).await,
        (Post, ["api", "v1", "ephemeral", "ack"]) => ephemeral::ack::handle(shard, &req).await,
        (Post, ["api", "v1", "ephemeral", "reset"]) => ephemeral::admin::reset(shard, &req).await,
        (Delete, ["api", "v1", "ephemeral", "queue", q]) => {
            ephemeral::admin::delete(shard, &req, q).await
        }
        (Get, ["api", "v1", "ephemeral", "queues"]) => ephemeral::queues::list(shard, &req).await,
        (Get, ["api", "v1", "ephemeral", "queues", q, "depth"]) => {
            ephemeral::queues::depth(shard, &req, q).await
        }
        // streams (§19)
        (Post, ["streams", "v1", "queries"]) => streams::queries::register(shard, &req).await,
        (Get, ["streams", "v1", "queries"]) => streams::queries::list(shard, &req).await,
        (Post, ["streams", "v1", "cycle"]) => streams::cycle::handle(shard, &req).await,
        (Post, ["streams", "v1", "state", "get"]) => streams::state::get(shard, &req).await,
        (_, path) if known_path(path) => Err(ApiError::MethodNotAllowed),
        (Get, path) if crate::dashboard::claims(path) => {
            crate::dashboard::handle(shard, path).await
        }
        _ => Err(ApiError::NoSuchRoute),
    }
}

/// Whether some method serves `path` (to tell 405 from 404).
fn known_path(s: &[&str]) -> bool {
    matches!(
        s,
        ["health"]
            | ["metrics"]
            | ["metrics", "prometheus"]
            | ["api", "v1", "configure"]
            | ["api", "v1", "push"]
            | ["api", "v1", "pop"]
            | ["api", "v1", "pop", "queue", _]
            | ["api", "v1", "pop", "queue", _, "partition", _]
            | ["api", "v1", "ack"]
            | ["api", "v1", "ack", "batch"]
            | ["api", "v1", "lease", _, "extend"]
            | ["api", "v1", "transaction"]
            | ["api", "v1", "dlq"]
            | ["api", "v1", "system", "shared-state"]
            | ["api", "v1", "system", "maintenance"]
            | ["api", "v1", "system", "maintenance", "pop"]
            | ["api", "v1", "system", "kv-timers"]
            | ["api", "v1", "kv" | "locks"]
            | ["api", "v1", "kv", _, _, ..]
            | ["api", "v1", "resources", "kv", "namespaces" | "list"]
            | ["api", "v1", "status", "buffers"]
            | ["api", "v1", "status"]
            | ["api", "v1", "status", "queues" | "analytics"]
            | ["api", "v1", "status", "queues", _]
            | ["api", "v1", "status", "queues", _, "messages"]
            | [
                "api",
                "v1",
                "analytics",
                "system-metrics"
                    | "worker-metrics"
                    | "queue-lag"
                    | "queue-ops"
                    | "queue-parked-replicas"
                    | "retention"
                    | "postgres-stats"
            ]
            | ["api", "v1", "consumer-groups"]
            | ["api", "v1", "consumer-groups", _]
            | ["api", "v1", "consumer-groups", _, "subscription"]
            | ["api", "v1", "consumer-groups", _, "queues", _]
            | ["api", "v1", "consumer-groups", _, "queues", _, "seek"]
            | [
                "api",
                "v1",
                "consumer-groups",
                _,
                "queues",
                _,
                "partitions",
                _,
                "seek"
            ]
            | ["api", "v1", "resources", "queues"]
            | ["api", "v1", "resources", "queues", _]
            | ["api", "v1", "resources", "queues", _, "depth"]
            | ["api", "v1", "resources", "namespaces"]
            | ["api", "v1", "resources", "tasks"]
            | ["api", "v1", "resources", "overview"]
            | ["api", "v1", "resources", "partitions"]
            | ["api", "v1", "queues", _, "clear"]
            | ["api", "v1", "stats", "refresh"]
            | ["api", "v1", "messages"]
            | ["api", "v1", "messages", _, _]
            | ["api", "v1", "messages", _, _, "retry" | "dlq"]
            | ["api", "v1", "dlq", _, "replay"]
            | ["api", "v1", "traces"]
            | ["api", "v1", "traces", "names"]
            | ["api", "v1", "traces", _, _]
            | ["api", "v1", "timers"]
            | ["api", "v1", "timers", _, ..]
            | ["api", "v1", "resources", "timers"]
            | [
                "api",
                "v1",
                "ephemeral",
                "configure" | "push" | "pop" | "ack" | "reset" | "queues"
            ]
            | ["api", "v1", "ephemeral", "queue", _]
            | ["api", "v1", "ephemeral", "queues", _, "depth"]
            | ["streams", "v1", "queries" | "cycle"]
            | ["streams", "v1", "state", "get"]
    )
}
