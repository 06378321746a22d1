//! The two maintenance switches: push maintenance (pushes go to the spool, the
//! spool replays when it is turned off) and pop maintenance (pops deliver nothing).

use serde_json::json;

use super::Ctx;
use crate::cli::{MaintenanceAction, OnOff};
use crate::error::Result;
use crate::render::{self, count, yes_no};

fn on_off(v: &serde_json::Value) -> &'static str {
    match v.as_bool() {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    }
}

/// `maintenance status | on | off | pop [on|off]`.
pub fn run(ctx: &Ctx, action: &MaintenanceAction) -> Result<()> {
    let (path, set) = match action {
        MaintenanceAction::Status => ("/api/v1/system/maintenance", None),
        MaintenanceAction::On => ("/api/v1/system/maintenance", Some(true)),
        MaintenanceAction::Off => ("/api/v1/system/maintenance", Some(false)),
        MaintenanceAction::Pop { state } => (
            "/api/v1/system/maintenance/pop",
            state.map(|s| matches!(s, OnOff::On)),
        ),
    };
    let ans = match set {
        Some(on) => ctx.client.post(path, &json!({ "enabled": on }))?,
        None => ctx.client.get(path)?,
    };
    if ctx.json {
        return render::json(&ans.body);
    }
    let b = &ans.body;
    let mut rows = Vec::new();
    if b.get("maintenanceMode").is_some() {
        rows.push((
            "push maintenance".to_string(),
            on_off(&b["maintenanceMode"]).to_string(),
        ));
    }
    if b.get("popMaintenanceMode").is_some() {
        rows.push((
            "pop maintenance".to_string(),
            on_off(&b["popMaintenanceMode"]).to_string(),
        ));
    }
    if b.get("bufferedMessages").is_some() {
        rows.push((
            "spooled messages".to_string(),
            count(&b["bufferedMessages"]),
        ));
        rows.push(("spool healthy".to_string(), yes_no(&b["bufferHealthy"])));
    }
    render::out(&render::pairs(rows))
}
