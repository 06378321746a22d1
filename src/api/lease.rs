//! `POST /api/v1/lease/:leaseId/extend` (http-api.md §6): prolongs every
//! live claim carrying the lease, in the caller's tenant only (a lease of
//! another tenant answers as one that does not exist). Answers an object (client-preferred);
//! an unknown or expired lease is 200 with `success: false` and no
//! `newExpiresAt`.

use super::params;
use super::reply::ok_json;
use crate::error::ApiError;
use crate::shard::Shard;
use crate::store::Proc;
use serde_json::{json, Value};
use shards::http::{Request, Response};
use std::rc::Rc;

/// Extension when the body names no `seconds`.
const DEFAULT_EXTEND_SECONDS: i64 = 60;
/// Longest single extension (one week).
const MAX_EXTEND_SECONDS: i64 = 7 * 86_400;

/// Handles the extension.
pub async fn handle(shard: &Rc<Shard>, req: &Request, lease: &str) -> Result<Response, ApiError> {
    let body = params::optional_body(req)?.unwrap_or_default();
    let seconds = match body.get("seconds") {
        None | Some(Value::Null) => DEFAULT_EXTEND_SECONDS,
        Some(v) => match v.as_i64() {
            Some(s) if (1..=MAX_EXTEND_SECONDS).contains(&s) => s,
            _ => {
                return Err(ApiError::BadRequest(format!(
                    "seconds must be an integer between 1 and {MAX_EXTEND_SECONDS}"
                )))
            }
        },
    };
    if !crate::ids::is_uuid(lease) {
        return Ok(ok_json(
            &json!({ "leaseId": lease, "success": false, "error": "Lease not found" }),
        ));
    }
    // Issue 17: a lease id alone must not reach another tenant's claim.
    let tenant = crate::auth::tenant(&shard.cfg.auth, req)?;
    let r = shard
        .db
        .call(
            Proc::ExtendLease,
            json!({ "tenant": tenant, "leaseId": lease, "seconds": seconds }),
        )
        .await?;
    let body = if r.get("success").and_then(Value::as_bool) == Some(true) {
        json!({ "leaseId": lease, "success": true, "expiresAt": r.get("expiresAt"), "newExpiresAt": r.get("newExpiresAt") })
    } else {
        json!({ "leaseId": lease, "success": false, "error": r.get("error").cloned().unwrap_or(json!("Lease not found")) })
    };
    Ok(ok_json(&body))
}
