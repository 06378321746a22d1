//! The command line: no subcommand serves; `admin …` runs one control-plane
//! call against the control database (`PXDB_*`) and prints one JSON object.

use clap::{Parser, Subcommand};

/// queen-proxy: the front door of a Queen broker.
#[derive(Debug, Parser)]
#[command(name = "queen-proxy", version, about)]
pub struct Cli {
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve (the default).
    Serve,
    /// One control-plane call; prints one JSON object.
    #[command(subcommand)]
    Admin(Admin),
}

/// The control-plane calls.
#[derive(Debug, Subcommand)]
pub enum Admin {
    /// Create (or reuse) a tenant and create a cluster on a broker.
    Bootstrap {
        /// Tenant name (reused when it exists).
        #[arg(long)]
        tenant: String,
        /// Cluster slug: the first Host label it answers on.
        #[arg(long)]
        cluster: String,
        /// The broker, `http://host:port`.
        #[arg(long)]
        broker_url: String,
        /// Bearer token the proxy presents to the broker.
        #[arg(long)]
        broker_token: Option<String>,
        /// Broker tenant UUID to inject (default: a new one).
        #[arg(long)]
        broker_tenant: Option<String>,
    },
    /// Issue an API key; the key is printed this once only.
    IssueKey {
        /// Cluster slug.
        #[arg(long)]
        cluster: String,
        /// Comma-separated subset of produce, consume, read, admin.
        #[arg(long)]
        scopes: String,
        /// Environment label in the key (`qk_<env>_…`).
        #[arg(long, default_value = "live")]
        env: String,
        /// Requests per second allowed (default: unlimited).
        #[arg(long)]
        rate_rps: Option<u32>,
    },
    /// Revoke an API key.
    RevokeKey {
        /// Key id.
        #[arg(long)]
        id: String,
    },
    /// List a cluster's keys (never the keys themselves).
    ListKeys {
        /// Cluster slug.
        #[arg(long)]
        cluster: String,
    },
    /// Set a cluster's status.
    SetStatus {
        /// Cluster slug.
        #[arg(long)]
        cluster: String,
        /// active, push_blocked, suspended or deleting.
        #[arg(long)]
        status: String,
    },
    /// Create a console user of a tenant.
    CreateUser {
        /// Tenant name.
        #[arg(long)]
        tenant: String,
        /// E-mail address.
        #[arg(long)]
        email: String,
        /// Operator (admin everywhere where operator routes are enabled).
        #[arg(long)]
        operator: bool,
    },
    /// Give a user a role on a cluster.
    GrantRole {
        /// User id.
        #[arg(long)]
        user: String,
        /// Cluster slug.
        #[arg(long)]
        cluster: String,
        /// admin, producer, consumer or viewer.
        #[arg(long)]
        role: String,
    },
    /// Revoke one session token by its `jti`.
    RevokeSession {
        /// User id.
        #[arg(long)]
        user: String,
        /// Token id.
        #[arg(long)]
        jti: String,
    },
    /// Mint a session token for a user with the configured signing key
    /// (the console login this proxy does not have yet).
    MintSession {
        /// User id.
        #[arg(long)]
        user: String,
        /// Limit the session to one cluster slug.
        #[arg(long)]
        cluster: Option<String>,
    },
}
