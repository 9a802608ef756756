//! `routerctl fis`: its flags; it starts nothing without `--yes` or `--experiment-id`.

use aws_clients::aws::Aws;

use crate::fis;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: fis::Options,
    /// Confirm starting the experiment (it interrupts real spot instances).
    #[arg(long)]
    yes: bool,
    #[arg(long)]
    region: Option<String>,
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self {
            options,
            yes,
            region,
        } = self;
        if options.experiment_id.is_none() && !yes {
            anyhow::bail!(
                "this starts a FIS experiment that interrupts running spot instances of the \
                 cluster; pass --yes to go ahead (or --experiment-id to report on one that ran)"
            );
        }
        match Aws::load(region).await {
            Ok(aws) => fis::run(&aws, &options, |what| eprintln!("  … {what}"))
                .await
                .map(|report| {
                    print!("{}", report.render());
                    report.passed()
                }),
            Err(e) => Err(e),
        }
    }
}
