//! routerctl's command line: each subcommand's flags and defaults in a file of its own (`Args`,
//! deriving `clap::Args`), with what the command does with them (`Args::run`: the clients it
//! builds, the report it prints). `main.rs` runs what [`Cli`] parses; the docs test parses every
//! `routerctl …` line of the README and docs with it, so a renamed flag fails that test rather
//! than a reader.

use clap::{Parser, Subcommand};

pub mod adopt;
pub mod fis;
pub mod insights;
pub mod simulate;
pub mod verify;

#[derive(Parser)]
#[command(
    name = "routerctl",
    version,
    about = "Operator CLI for interruption-router",
    after_help = "Exit status: 0 when all is well, 1 when a check or verdict failed, 2 when the command could not run."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Send synthetic interruption events for a cluster's running instances to the ingest queue
    /// or the router function (not through EventBridge: AWS refuses aws.* sources there).
    /// Karpenter acts on them: a simulated spot warning drains a real node.
    Simulate(simulate::Args),

    /// Check a live deployment: rules, queues and their policies, the event source mapping, the
    /// function's environment and role, the dashboard and alarms, and every cluster's queue; with
    /// --account, also a member account's spoke stack, spoke role and queues, and the central
    /// bus's policy for it. Exit status 1 on any failure.
    Verify(verify::Args),

    /// Move clusters that run Karpenter with their own interruption queue and rules onto the
    /// router, one checked step at a time. Without --apply or --rollback it only prints, per
    /// cluster, what it runs today and the steps left; nothing changes. Exit status 1 when
    /// --apply finds no step it may take now (the reason is printed).
    Adopt(adopt::Args),

    /// Start a cluster's FIS spot-interruption experiment (cloudformation/fis.yaml), wait for it,
    /// and report from the router's logs which clusters received its events. Exit status 1
    /// unless the target cluster received them and no other cluster did. Interrupts real nodes.
    Fis(fis::Args),

    /// What the router saw of the organisation's interruptions, from its interruption records
    /// (CloudWatch Logs Insights, base.yaml's queries): the most reclaimed node pools by cluster,
    /// kind, instance type and zone, and each cluster's delivery delay, over a window, across
    /// the hubs' regions. Exit status 1 when a delivery was later than 120 s.
    Insights(insights::Args),
}

impl Command {
    /// Runs the command parsed.
    pub async fn run(self) -> anyhow::Result<bool> {
        match self {
            Self::Simulate(args) => args.run().await,
            Self::Verify(args) => args.run().await,
            Self::Adopt(args) => args.run().await,
            Self::Fis(args) => args.run().await,
            Self::Insights(args) => args.run().await,
        }
    }
}
