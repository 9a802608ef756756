//! `routerctl`: check and exercise a real deployment, and move clusters onto it. Each command's
//! flags, and what it does with them, are in `cli/` (one file per command).

use std::process::ExitCode;

use clap::Parser;
use routerctl::cli::Cli;

#[tokio::main]
async fn main() -> ExitCode {
    routerctl::exit_code(Cli::parse().command.run().await)
}
