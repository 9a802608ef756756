//! `routerctl`: run the router locally, and check and exercise a real deployment.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "routerctl",
    version,
    about = "Operator CLI for interruption-router"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole system on a local AWS emulator and check every event reached its cluster.
    Demo {
        /// Number of clusters (each gets a tenant stack and its own queue); at least 2, so one
        /// Health event can span two clusters.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(2..=64))]
        clusters: u16,
        /// Karpenter nodes per cluster, each interrupted by a simulated FIS spot experiment.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=100))]
        instances: u16,
        /// Records per invocation (default: the base stack's event source mapping BatchSize).
        #[arg(long)]
        batch_size: Option<usize>,
        /// Leave the emulator running and print how to point the aws CLI at it.
        #[arg(long)]
        keep: bool,
        /// The router binary (default: next to routerctl, from the same cargo build).
        #[arg(long)]
        router_bin: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo {
            clusters,
            instances,
            batch_size,
            keep,
            router_bin,
        } => {
            let options = routerctl::demo::Options {
                clusters: clusters.into(),
                instances: instances.into(),
                batch_size,
                keep,
                router_bin,
            };
            routerctl::demo::run(options)
                .await
                .map(|report| report.passed())
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
