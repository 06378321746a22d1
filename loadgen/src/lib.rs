//! Load scenarios for the Queen broker, shared by the bench harness (`bench/`) and
//! `queenctl bench`, so both measure the same way and print the same summary.
//!
//! # Layout
//! - `http`: a blocking HTTP/1.1 keep-alive client, one connection per
//!   worker thread.
//! - `payload`: request bodies (push items with a timestamped ~100-byte
//!   payload, ack batches) written straight into reused buffers.
//! - `procstat`: CPU and memory of the broker, PostgreSQL and the bench,
//!   from `/proc`, over the measured window.
//! - `report`: latency histograms (hdrhistogram, µs), error counts, the
//!   no-loss check, and the JSON line each run prints.
//! - `scenario`: `push`, `drain`, `latency` and `ephemeral` (RAM-only
//!   queues) against a running broker.
//!
//! # Threads and ownership
//! The main thread owns the clock: it sleeps through the warm-up, flips the
//! shared phase to measuring, opens the `/proc` window, and stops. Each
//! worker thread owns one connection and its own histograms and counters,
//! shares only atomics, and hands its stats back when joined, so nothing on
//! the request path takes a lock. One more thread samples memory every
//! 200 ms. Why threads and blocking sockets rather than an event loop: at
//! this box's rates (thousands of requests/s) the cost is the same and the
//! code is plainer; the bench reports its own CPU so you can tell when it
//! starts to matter.
#![warn(missing_docs, missing_debug_implementations)]

pub mod http;
pub mod payload;
pub mod procstat;
pub mod report;
pub mod scenario;
