//! `routerctl insights`: its flags, a hub per `--region`, and the report as a table or JSON.

use std::time::Duration;

use aws_clients::aws::Aws;

use crate::{fis, insights, verify};

#[derive(clap::Args)]
pub struct Args {
    /// The window: from this long ago (e.g. 90m, 24h) to now.
    #[arg(long, default_value = insights::DEFAULT_SINCE, value_parser = fis::parse_duration)]
    since: Duration,
    /// Only this cluster's rows (repeatable); default: every cluster.
    #[arg(long = "cluster")]
    clusters: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// A hub's region (repeatable: a hub per region); default: your configured region.
    #[arg(long = "region")]
    regions: Vec<String>,
    /// The base stack, whose RouterLogGroup holds the records (in each region).
    #[arg(long, default_value = verify::DEFAULT_STACK)]
    stack: String,
    /// Query this log group instead of the stack's (in each region).
    #[arg(long)]
    log_group: Option<String>,
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self {
            since,
            clusters,
            json,
            regions,
            stack,
            log_group,
        } = self;
        let options = insights::Options {
            stack,
            log_group,
            since,
            clusters,
        };
        let run = async {
            let mut hubs = Vec::new();
            match regions.is_empty() {
                true => hubs.push(Aws::load(None).await?),
                false => {
                    for region in regions {
                        hubs.push(Aws::load(Some(region)).await?);
                    }
                }
            }
            let report = insights::run(&hubs, &options).await?;
            match json {
                true => println!("{}", serde_json::to_string_pretty(&report.to_json())?),
                false => print!("{}", report.render()),
            }
            Ok(report.passed())
        };
        run.await
    }
}
