//! The route → access level table (security.md SEC-13/14, http-api.md §21)
//! and the role set that satisfies each level. Pure; runs on the shards.
//!
//! The level is a function of (method, decoded path segments), so routes
//! other developers add are covered without editing this file. Unknown
//! routes fall back by shape: anything under `/api/v1/system/`,
//! `/internal/` or `/api/v1/migration/` is ADMIN; an unknown GET under
//! `/api/` or `/streams/` is READ_ONLY; any other unknown method there is
//! READ_WRITE (SEC-14 "(inferred)"). A GET outside `/api/`, `/internal/`
//! and `/streams/` is the dashboard (PUBLIC, http-api.md §21 row 5).

use shards::http::Method;

/// What a route demands (SEC-13). A set of acceptable roles, not a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// No token needed.
    Public,
    /// admin, read-write, read-only.
    ReadOnly,
    /// admin, read-write, write-only.
    WriteOnly,
    /// admin, read-write.
    ReadWrite,
    /// admin only.
    Admin,
}

/// A set of roles held by a token (bit flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles(u8);

impl Roles {
    /// The `admin` role.
    pub const ADMIN: Roles = Roles(1);
    /// The `read-write` role.
    pub const READ_WRITE: Roles = Roles(2);
    /// The `read-only` role.
    pub const READ_ONLY: Roles = Roles(4);
    /// The `write-only` role.
    pub const WRITE_ONLY: Roles = Roles(8);

    /// Adds `other`'s roles.
    pub fn add(&mut self, other: Roles) {
        self.0 |= other.0;
    }

    fn any(self, of: Roles) -> bool {
        self.0 & of.0 != 0
    }

    /// Whether these roles satisfy `level` (the table of SEC-13).
    pub fn satisfy(self, level: Level) -> bool {
        let admin_rw = Roles(Self::ADMIN.0 | Self::READ_WRITE.0);
        match level {
            Level::Public => true,
            Level::ReadOnly => self.any(Roles(admin_rw.0 | Self::READ_ONLY.0)),
            Level::WriteOnly => self.any(Roles(admin_rw.0 | Self::WRITE_ONLY.0)),
            Level::ReadWrite => self.any(admin_rw),
            Level::Admin => self.any(Self::ADMIN),
        }
    }
}

/// The level of `method` on `segs` (percent-decoded path segments).
pub fn route_level(method: &Method, segs: &[&str]) -> Level {
    use Level::*;
    use Method::*;
    let get = matches!(method, Get | Head);
    match (method, segs) {
        (_, ["health"] | ["metrics"] | ["metrics", "prometheus"]) => Public,
        (_, ["auth", ..]) => Public,
        (_, ["api", "v1", "system", ..] | ["internal", ..] | ["api", "v1", "migration", ..]) => {
            Admin
        }
        (Post, ["api", "v1", "stats", "refresh"]) => Admin,
        (Delete, ["api", "v1", "consumer-groups", ..]) => Admin,
        (Delete, ["api", "v1", "resources", "queues", ..]) => Admin,
        (Delete, ["api", "v1", "dlq"]) => Admin,
        (Delete, ["api", "v1", "queues", _, "clear"]) => Admin,
        (Post, ["api", "v1", "push"] | ["api", "v1", "timers"]) => WriteOnly,
        (Post, ["api", "v1", "ephemeral", "push"]) => WriteOnly,
        (Post, ["api", "v1", "resources", "kv", "list"]) => ReadOnly,
        (Post, ["streams", "v1", "state", "get"]) => ReadOnly,
        (_, ["api", "v1", "pop", ..] | ["api", "v1", "ephemeral", "pop", ..]) => ReadWrite,
        (_, ["api" | "streams", ..]) if get => ReadOnly,
        (_, ["api" | "streams", ..]) => ReadWrite,
        _ if get => Public,
        (Options, _) => Public,
        _ => ReadWrite,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lv(m: Method, p: &str) -> Level {
        let segs: Vec<&str> = p.trim_start_matches('/').split('/').collect();
        let segs = if p == "/" { Vec::new() } else { segs };
        route_level(&m, &segs)
    }

    #[test]
    fn table_matches_the_endpoint_index() {
        use Level::*;
        use Method::*;
        assert_eq!(lv(Get, "/health"), Public);
        assert_eq!(lv(Get, "/"), Public);
        assert_eq!(lv(Get, "/assets/app.js"), Public);
        assert_eq!(lv(Post, "/api/v1/push"), WriteOnly);
        assert_eq!(lv(Get, "/api/v1/pop/queue/q"), ReadWrite);
        assert_eq!(lv(Get, "/api/v1/pop"), ReadWrite);
        assert_eq!(lv(Get, "/api/v1/resources/queues"), ReadOnly);
        assert_eq!(lv(Delete, "/api/v1/resources/queues/q"), Admin);
        assert_eq!(lv(Post, "/api/v1/system/maintenance"), Admin);
        assert_eq!(lv(Get, "/api/v1/system/shared-state"), Admin);
        assert_eq!(lv(Get, "/api/v1/dlq"), ReadOnly);
        assert_eq!(lv(Delete, "/api/v1/dlq"), Admin);
        assert_eq!(lv(Post, "/api/v1/ack"), ReadWrite);
        assert_eq!(lv(Post, "/api/v1/configure"), ReadWrite);
        assert_eq!(lv(Post, "/api/v1/resources/kv/list"), ReadOnly);
        assert_eq!(lv(Post, "/streams/v1/queries"), ReadWrite);
        assert_eq!(lv(Post, "/streams/v1/cycle"), ReadWrite);
        assert_eq!(lv(Post, "/streams/v1/state/get"), ReadOnly);
        assert_eq!(lv(Get, "/streams/v1/queries"), ReadOnly);
        assert_eq!(lv(Post, "/api/v1/new-thing"), ReadWrite);
        assert_eq!(lv(Get, "/api/v1/new-thing"), ReadOnly);
    }

    #[test]
    fn levels_are_a_set_not_a_ladder() {
        let wo = Roles::WRITE_ONLY;
        let ro = Roles::READ_ONLY;
        assert!(wo.satisfy(Level::WriteOnly) && !wo.satisfy(Level::ReadOnly));
        assert!(ro.satisfy(Level::ReadOnly) && !ro.satisfy(Level::WriteOnly));
        assert!(!wo.satisfy(Level::ReadWrite) && !ro.satisfy(Level::ReadWrite));
        assert!(!Roles::READ_WRITE.satisfy(Level::Admin));
        assert!(Roles::ADMIN.satisfy(Level::ReadOnly) && Roles::ADMIN.satisfy(Level::WriteOnly));
        assert!(!Roles::default().satisfy(Level::ReadOnly));
    }
}
