//! One module per command family; [`run`] dispatches the parsed command line.
//!
//! - `flow`: `push`, `pop`, `tail` (messages in and out);
//! - `queues`: `queues`, `queue`, `configure`, `delete`;
//! - `groups`: `groups`, `group`, `seek`;
//! - `inspect`: `dlq`, `dlq retry`, `messages`, `message`;
//! - `maintenance`: both maintenance switches;
//! - `timers`: schedule, list, show, count, pending, cancel;
//! - `kv`: the key/value store;
//! - `bench`: the load scenarios shared with `bench/` (crate `queen-loadgen`).
//!
//! Every handler returns the broker's answer for `--json` unchanged where the spec
//! gives one document, so scripts see the wire contract, not a queenctl dialect.

mod bench;
mod flow;
mod groups;
mod inspect;
mod kv;
mod maintenance;
mod queues;
mod timers;

use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::{Cli, Command};
use crate::client::Client;
use crate::error::Result;

/// What every handler needs: the client and the output mode.
#[derive(Debug)]
pub struct Ctx {
    /// The broker.
    pub client: Client,
    /// `--json`.
    pub json: bool,
}

/// Runs one command; the exit code is 0 unless the command says otherwise
/// (an interrupted `push --stdin` exits 130).
pub fn run(cli: Cli) -> Result<ExitCode> {
    let has_token = cli.token.as_deref().is_some_and(|t| !t.is_empty());
    let url = cli.url.clone();
    let ctx = Ctx {
        client: Client::new(&cli.url, cli.token),
        json: cli.json,
    };
    match cli.command {
        Command::Push(a) => return flow::push(&ctx, &a),
        Command::Pop(a) => flow::pop(&ctx, &a)?,
        Command::Tail(a) => flow::tail(&ctx, &a)?,
        Command::Queues => queues::list(&ctx)?,
        Command::Queue { name } => queues::show(&ctx, &name)?,
        Command::Configure(a) => queues::configure(&ctx, &a)?,
        Command::Delete { queue, yes } => queues::delete(&ctx, &queue, yes)?,
        Command::Groups => groups::list(&ctx)?,
        Command::Group { name } => groups::show(&ctx, &name)?,
        Command::Seek(a) => groups::seek(&ctx, &a)?,
        Command::Dlq(a) => inspect::dlq(&ctx, &a)?,
        Command::Messages(a) => inspect::messages(&ctx, &a)?,
        Command::Message {
            partition_id,
            transaction_id,
        } => inspect::message(&ctx, &partition_id, &transaction_id)?,
        Command::Maintenance { action } => maintenance::run(&ctx, &action)?,
        Command::Timers { action } => timers::run(&ctx, &action)?,
        Command::Kv { action } => kv::run(&ctx, &action)?,
        Command::Bench(a) => return bench::run(&ctx, &url, has_token, &a),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut cmd, "queenctl", &mut script);
            crate::render::out(String::from_utf8_lossy(&script).trim_end())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
