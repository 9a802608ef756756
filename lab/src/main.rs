//! `lab`: the whole system on a local AWS emulator, no account needed (`make demo`): the router
//! binary behind a local Lambda Runtime API and event source mapping, the real stacks deployed on
//! moto, and stand-ins for what moto leaves out. Not shipped to operators: `routerctl` is the
//! operator CLI, and links none of this.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "lab",
    version,
    about = "interruption-router on a local AWS emulator",
    after_help = "Exit status: 0 when every event reached its cluster, 1 when one did not, 2 when the lab could not run."
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
        /// Accounts, the hub included: with 2 or more, the hub serves member accounts through
        /// its central bus and spoke stacks, each with a cluster named `prod`.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
        accounts: u16,
        /// Regions each member account has clusters in (with --accounts).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=4))]
        regions: u16,
        /// Instead, move clusters that run Karpenter's getting-started and Terraform-style
        /// interruption set-ups onto the router with `routerctl adopt`, while events keep coming.
        #[arg(long, conflicts_with_all = ["clusters", "instances", "batch_size", "keep", "accounts", "regions"])]
        adopt: bool,
        /// Instead, deploy the stacks as AWS would have them (stack `ir`, clusters alpha and
        /// gamma, Karpenter nodes; no router running) and keep the emulator up for trying
        /// `routerctl verify` and `simulate` against it.
        #[arg(long, conflicts_with_all = ["clusters", "instances", "batch_size", "keep", "accounts", "regions", "adopt"])]
        sandbox: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo {
            adopt: true,
            router_bin,
            ..
        } => lab::adoption::run(router_bin).await,
        Command::Demo { sandbox: true, .. } => lab::kept::run().await.map(|()| true),
        Command::Demo {
            instances,
            router_bin,
            accounts,
            regions,
            ..
        } if accounts > 1 || regions > 1 => {
            let options = lab::organisation::Options {
                accounts: accounts.max(2).into(),
                regions: regions.into(),
                instances: instances.into(),
                router_bin,
            };
            lab::organisation::run(options)
                .await
                .map(|report| report.passed())
        }
        Command::Demo {
            clusters,
            instances,
            batch_size,
            keep,
            router_bin,
            ..
        } => {
            let options = lab::Options {
                clusters: clusters.into(),
                instances: instances.into(),
                batch_size,
                keep,
                router_bin,
            };
            lab::run(options).await.map(|report| report.passed())
        }
    };
    routerctl::exit_code(result)
}
