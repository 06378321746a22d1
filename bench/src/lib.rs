//! Benchmark harness for the Queen broker.
//!
//! # Layout
//! - `args`: the tiny `--flag value` parser both binaries use.
//! - `claim`: the SKIP LOCKED claim limit `pg-ceiling --mode claim|claimack` measures.
//! - `summarize`: JSON lines of a suite → markdown table of medians/ratios.
//! - `http`, `payload`, `procstat`, `report`, `scenario`: re-exported from
//!   `queen-loadgen` (`../loadgen`), which `queenctl bench` shares; see its
//!   crate doc for the threads and who owns what.
//!
//! The binaries are `queen-bench` (the broker scenarios and `summarize`) and
//! `pg-ceiling` (PostgreSQL alone, same rows); `run.sh` drives both.
#![warn(missing_docs, missing_debug_implementations)]

pub mod args;
pub mod claim;
pub mod summarize;

pub use queen_loadgen::{http, payload, procstat, report, scenario};
