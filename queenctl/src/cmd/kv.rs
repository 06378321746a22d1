//! `kv`: the key/value store through `POST /api/v1/kv` (one op per command,
//! the route the 1.3.0 client uses), plus the dashboard's key listing and
//! namespace counts (`/api/v1/resources/kv/*`). `--json` prints the op's
//! result (or the broker's answer) unchanged.

use serde_json::{json, Value};

use super::Ctx;
use crate::cli::{KvAction, KvExpiry};
use crate::error::{Error, Result};
use crate::render::{self, text};

fn expiry(e: &KvExpiry) -> Value {
    match e.ttl {
        Some(t) => json!({ "ttlSeconds": t }),
        None => json!({ "forever": true }),
    }
}

fn with(mut op: Value, extra: Value) -> Value {
    if let (Some(o), Value::Object(x)) = (op.as_object_mut(), extra) {
        o.extend(x);
    }
    op
}

/// Runs one op and returns its result.
fn one(ctx: &Ctx, op: Value) -> Result<Value> {
    let ans = ctx
        .client
        .post("/api/v1/kv", &json!({ "operations": [op] }))?;
    match ans.body["results"].get(0) {
        Some(r) => Ok(r.clone()),
        None => Err(Error::BadAnswer {
            what: "POST /api/v1/kv".into(),
            detail: "no results[0]".into(),
        }),
    }
}

fn parse_value(s: &str) -> Result<Value> {
    serde_json::from_str(s).map_err(|e| Error::BadPayload {
        line: None,
        detail: e.to_string(),
    })
}

/// `kv get | put | incr | delete | list | namespaces`.
pub fn run(ctx: &Ctx, action: &KvAction) -> Result<()> {
    let r = match action {
        KvAction::Get { ns, key } => one(ctx, json!({"op": "get", "ns": ns, "key": key}))?,
        KvAction::Put {
            ns,
            key,
            value,
            expiry: e,
            expect,
        } => {
            let mut op = with(
                json!({"op": "put", "ns": ns, "key": key, "value": parse_value(value)?}),
                expiry(e),
            );
            if let Some(v) = expect {
                op["expect"] = json!(v);
            }
            one(ctx, op)?
        }
        KvAction::Incr {
            ns,
            key,
            delta,
            expiry: e,
        } => one(
            ctx,
            with(
                json!({"op": "incr", "ns": ns, "key": key, "delta": delta}),
                expiry(e),
            ),
        )?,
        KvAction::Delete { ns, key, expect } => {
            let mut op = json!({"op": "delete", "ns": ns, "key": key});
            if let Some(v) = expect {
                op["expect"] = json!(v);
            }
            one(ctx, op)?
        }
        KvAction::List {
            ns,
            prefix,
            after,
            limit,
        } => match prefix {
            Some(p) => one(
                ctx,
                json!({"op": "getPrefix", "ns": ns, "prefix": p, "after": after,
                       "limit": limit, "keysOnly": true}),
            )?,
            None => {
                ctx.client
                    .post(
                        "/api/v1/resources/kv/list",
                        &json!({"ns": ns, "after": after, "limit": limit}),
                    )?
                    .body
            }
        },
        KvAction::Namespaces => ctx.client.get("/api/v1/resources/kv/namespaces")?.body,
    };
    if ctx.json {
        return render::json(&r);
    }
    render::out(&human(action, &r))
}

fn human(action: &KvAction, r: &Value) -> String {
    match action {
        KvAction::Get { .. } if r["found"] != true => "not found".to_string(),
        KvAction::Get { .. } => render::pairs(vec![
            ("value".into(), r["value"].to_string()),
            ("version".into(), text(&r["version"])),
            ("expires".into(), expires(&r["expiresAt"])),
            ("updated".into(), text(&r["updatedAt"])),
        ]),
        KvAction::List { .. } => {
            let rows = r["rows"].as_array().cloned().unwrap_or_default();
            let mut t = render::table(
                &["KEY", "VERSION", "EXPIRES"],
                &["VERSION"],
                rows.iter()
                    .map(|k| {
                        vec![
                            text(&k["key"]),
                            text(&k["version"]),
                            expires(&k["expiresAt"]),
                        ]
                    })
                    .collect(),
            );
            if r["truncated"] == true {
                t.push_str(&format!("\nmore: --after {}", text(&r["nextAfter"])));
            }
            t
        }
        KvAction::Namespaces => render::table(
            &["NAMESPACE", "KEYS"],
            &["KEYS"],
            r["namespaces"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|n| vec![text(&n["namespace"]), text(&n["rows"])])
                .collect(),
        ),
        _ if r["applied"] == true => format!("applied, version {}", text(&r["version"])),
        _ => format!(
            "not applied: {} (current version {})",
            text(&r["reason"]),
            text(&r["version"])
        ),
    }
}

fn expires(v: &Value) -> String {
    if v.is_null() {
        "never".into()
    } else {
        text(v)
    }
}
