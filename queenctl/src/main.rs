//! `queenctl`: the Queen broker from a terminal. Push a test message, watch a queue,
//! find a poisoned message in the DLQ, seek a group, flip maintenance, all over the
//! broker's HTTP API (`shared/spec/http-api.md`).
//!
//! # Layout
//! - `cli`: the clap definition of every command and flag (also feeds `completions`).
//! - `client`: the blocking HTTP client (ureq): base URL, bearer token, JSON in and
//!   out, and the mapping of transport and HTTP failures to [`error::Error`].
//! - `error`: the one error type, each variant one line on stderr and an exit code.
//! - `render`: aligned tables, human units, and `--json` output.
//! - `stop`: the Ctrl-C flag that `tail` and `push --stdin` check between requests.
//! - `cmd`: one module per command family (`push`/`pop`/`tail`, queues, groups,
//!   messages and the DLQ, maintenance).
//!
//! # Threads and ownership
//! Everything runs on the main thread, one request at a time, except two helpers:
//! the Ctrl-C handler thread (from `ctrlc`), which only sets the atomic in `stop`, and
//! the stdin reader of `push --stdin`, which hands lines over a bounded channel so
//! the main thread can notice Ctrl-C while a terminal read is blocked.
#![warn(missing_docs, missing_debug_implementations)]

mod cli;
mod client;
mod cmd;
mod error;
mod render;
mod stop;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("queenctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
