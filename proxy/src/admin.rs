//! The admin command line (`queen-proxy admin …`): each call connects to the
//! control database, applies the schema (so the first call works before
//! any proxy ran), runs one control-plane function (which appends its one
//! `queen_proxy.operations` row and notifies the running proxies), and
//! prints one JSON object on stdout: the answer, or `{"error", "code"}`
//! with exit status 1. Runs on the main thread; blocking is fine here.

use serde_json::{json, Value};
use uuid::Uuid;

use crate::apikey;
use crate::cli::Admin;
use crate::config;
use crate::pxdb;
use crate::session::SessionKeys;

/// Scopes a key may carry.
const SCOPES: [&str; 4] = ["produce", "consume", "admin", "read"];

/// A refusal: machine code and text.
struct Refusal(&'static str, String);

/// Runs one admin call and exits.
pub fn run(cmd: Admin) -> ! {
    match call(cmd) {
        Ok(v) => {
            println!("{v}");
            std::process::exit(0)
        }
        Err(Refusal(code, error)) => {
            println!("{}", json!({"error": error, "code": code}));
            std::process::exit(1)
        }
    }
}

fn uuid_arg(name: &str, v: &str) -> Result<Uuid, Refusal> {
    v.parse().map_err(|_| {
        Refusal(
            "bad_request",
            format!("--{name} must be a UUID (got {v:?})"),
        )
    })
}

fn db_error(e: postgres::Error) -> Refusal {
    use postgres::error::SqlState;
    let code = match e.code() {
        Some(c) if *c == SqlState::NO_DATA_FOUND => "not_found",
        Some(c)
            if *c == SqlState::INVALID_PARAMETER_VALUE
                || *c == SqlState::UNIQUE_VIOLATION
                || *c == SqlState::CHECK_VIOLATION =>
        {
            "bad_request"
        }
        _ => "control_db_error",
    };
    Refusal(code, pxdb::describe(&e))
}

fn call(cmd: Admin) -> Result<Value, Refusal> {
    if let Admin::MintSession { user, cluster } = &cmd {
        let keys = SessionKeys::from_env().map_err(|e| Refusal("bad_config", e))?;
        uuid_arg("user", user)?;
        let token = keys
            .mint(user, cluster.as_deref(), keys.ttl_s)
            .map_err(|e| Refusal("bad_config", e))?;
        return Ok(json!({"token": token, "expiresIn": keys.ttl_s}));
    }
    let cfg = config::pxdb_from_env().map_err(|e| Refusal("bad_config", e))?;
    let mut db = pxdb::connect(&cfg).map_err(|e| Refusal("control_db_error", e))?;
    pxdb::schema::apply(&mut db).map_err(|e| Refusal("control_db_error", e.to_string()))?;
    match cmd {
        Admin::Bootstrap {
            tenant,
            cluster,
            broker_url,
            broker_token,
            broker_tenant,
        } => {
            let bt = broker_tenant
                .as_deref()
                .map(|t| uuid_arg("broker-tenant", t))
                .transpose()?;
            let row = db
                .query_one(
                    "SELECT tenant_id, cluster_id, broker_tenant FROM queen_proxy.bootstrap_tenant($1, $2, $3, $4, $5)",
                    &[&tenant, &cluster, &broker_url, &broker_token, &bt],
                )
                .map_err(db_error)?;
            let (t, c, b): (Uuid, Uuid, Uuid) = (row.get(0), row.get(1), row.get(2));
            Ok(json!({"tenantId": t, "clusterId": c, "brokerTenant": b}))
        }
        Admin::IssueKey {
            cluster,
            scopes,
            env,
            rate_rps,
        } => {
            let list: Vec<String> = scopes
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if let Some(bad) = list.iter().find(|s| !SCOPES.contains(&s.as_str())) {
                return Err(Refusal(
                    "scope_unknown",
                    format!("unknown scope {bad:?}: scopes are produce, consume, read, admin"),
                ));
            }
            if list.is_empty() {
                return Err(Refusal("scope_unknown", "--scopes names no scope".into()));
            }
            if !apikey::valid_env(&env) {
                return Err(Refusal(
                    "bad_request",
                    "--env must be 1 to 16 lower-case letters or digits".into(),
                ));
            }
            let key = apikey::generate(&env);
            let rate = rate_rps.map(|r| r.clamp(1, i32::MAX as u32) as i32);
            let row = db
                .query_one(
                    "SELECT queen_proxy.issue_api_key($1, $2, $3, $4, $5)",
                    &[&cluster, &env, &apikey::digest(&key), &list, &rate],
                )
                .map_err(db_error)?;
            let id: Uuid = row.get(0);
            Ok(json!({"id": id, "key": key}))
        }
        Admin::RevokeKey { id } => {
            let id = uuid_arg("id", &id)?;
            db.execute("SELECT queen_proxy.revoke_api_key($1)", &[&id])
                .map_err(db_error)?;
            Ok(json!({"id": id, "revoked": true}))
        }
        Admin::ListKeys { cluster } => {
            db.query_one(
                "SELECT id FROM queen_proxy.cluster_by_slug($1)",
                &[&cluster],
            )
            .map_err(db_error)?;
            let rows = db
                .query(
                    "SELECT id, env, scopes, rate_rps, created_at::text, revoked_at::text FROM queen_proxy.list_api_keys($1)",
                    &[&cluster],
                )
                .map_err(db_error)?;
            let keys: Vec<Value> = rows
                .iter()
                .map(|r| {
                    json!({
                        "id": r.get::<_, Uuid>(0), "env": r.get::<_, String>(1),
                        "scopes": r.get::<_, Vec<String>>(2), "rateRps": r.get::<_, Option<i32>>(3),
                        "createdAt": r.get::<_, String>(4), "revokedAt": r.get::<_, Option<String>>(5),
                    })
                })
                .collect();
            Ok(json!({"cluster": cluster, "keys": keys}))
        }
        Admin::SetStatus { cluster, status } => {
            db.execute(
                "SELECT queen_proxy.set_cluster_status($1, $2)",
                &[&cluster, &status],
            )
            .map_err(db_error)?;
            Ok(json!({"cluster": cluster, "status": status}))
        }
        Admin::CreateUser {
            tenant,
            email,
            operator,
        } => {
            let row = db
                .query_one(
                    "SELECT queen_proxy.create_user($1, $2, $3)",
                    &[&tenant, &email, &operator],
                )
                .map_err(db_error)?;
            let id: Uuid = row.get(0);
            Ok(json!({"id": id, "email": email, "operator": operator}))
        }
        Admin::GrantRole {
            user,
            cluster,
            role,
        } => {
            let u = uuid_arg("user", &user)?;
            db.execute(
                "SELECT queen_proxy.grant_role($1, $2, $3)",
                &[&u, &cluster, &role],
            )
            .map_err(db_error)?;
            Ok(json!({"user": u, "cluster": cluster, "role": role}))
        }
        Admin::RevokeSession { user, jti } => {
            let u = uuid_arg("user", &user)?;
            db.execute("SELECT queen_proxy.revoke_session($1, $2)", &[&u, &jti])
                .map_err(db_error)?;
            Ok(json!({"jti": jti, "revoked": true}))
        }
        Admin::MintSession { .. } => unreachable!("answered above, before connecting"),
    }
}
