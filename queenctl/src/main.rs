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

use clap::error::ErrorKind;
use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage(&e),
    };
    match cmd::run(cli) {
        Ok(code) => code,
        // A closed pipe (`queenctl queues | head -1`) is the reader's choice, not a failure.
        Err(error::Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("queenctl: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Help and version print as clap formats them; a usage error becomes one line
/// (clap's first line, the usage hint dropped) and exit code 2.
fn usage(e: &clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || matches!(
            e.kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        )
    {
        let _ = e.print();
        return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
    }
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or_default();
    let mut line = first.trim_start_matches("error: ").to_string();
    // "the following required arguments were not provided:" names them on the next lines.
    if line.ends_with(':') {
        let names: Vec<&str> = text
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        line = format!("{line} {}", names.join(", "));
    }
    eprintln!("queenctl: {line} (try --help)");
    ExitCode::from(2)
}
