//! Everything that talks to PostgreSQL. Only the DB thread group (`db_group`)
//! runs this code; shards reach it through their [`client::DbClient`]: a
//! typed [`Job`] on the bounded queue, answered by an id-tagged reply.
//!
//! Every request is one round trip: the SQL procedures in `sql/` take one
//! jsonb argument and return one jsonb result (contracts in `sql/README.md`).

pub mod ack_fused;
pub mod client;
pub mod config;
pub mod db_group;
pub mod jobs;
pub mod kv_group;
pub mod kv_pool;
pub mod payload;
pub mod pg_tls;
pub mod pooled;
pub mod pop_compact;
pub mod pop_texts;
pub mod push_item;
pub mod push_typed;
pub mod pushed;
pub mod schema;
pub mod sql_error;

pub use client::DbClient;
pub use config::DbConfig;
pub use jobs::{Job, JobEnvelope, Proc, ReplyEnvelope, StoreError, StoreReply};
pub use push_item::PushItem;
pub use pushed::{PushStatus, Pushed};
