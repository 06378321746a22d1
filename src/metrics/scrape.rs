//! What a scrape reads besides the shard slots' sum: one [`Inputs`] built by
//! the `/metrics` endpoints on the scraping shard and read by every renderer
//! ([`super::prom`], [`super::families`]).

use super::dbsnap::Snapshot;
use super::Board;
use crate::config::Config;

/// What a scrape reads besides the board.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// Summed over shards.
    pub board: &'a Board,
    /// Boot configuration.
    pub cfg: &'a Config,
    /// Jobs waiting for a DB thread now.
    pub db_queued: usize,
    /// The cached DB snapshot.
    pub snap: &'a Snapshot,
    /// Mesh peers and counters.
    pub mesh: &'a crate::mesh::state::MeshState,
    /// Push maintenance as applied on this broker.
    pub push_paused: bool,
    /// Pop maintenance as applied on this broker.
    pub pop_paused: bool,
    /// Ephemeral bytes and depths.
    pub eph: &'a super::ephemeral::EphGauges,
}

/// DB jobs running now: in flight minus queued, capped at the pool size.
pub fn db_active(i: &Inputs) -> u64 {
    let inflight = i.board.sum(|s| &s.db_inflight);
    inflight
        .saturating_sub(i.db_queued as u64)
        .min(i.cfg.db.pool_size as u64)
}
