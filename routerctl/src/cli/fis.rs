//! `routerctl fis`: its flags; it starts nothing without `--yes` or `--experiment-id`.

use std::time::Duration;

use aws_clients::aws::Aws;

use crate::fis;

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("experiment").required(true).multiple(true).args(["cluster", "template_id", "experiment_id"]))]
pub struct Args {
    /// The target cluster; its template is the one tagged cluster=<name>.
    #[arg(long)]
    cluster: Option<String>,
    /// Start this experiment template instead of looking it up.
    #[arg(long)]
    template_id: Option<String>,
    /// Report on an experiment that already ran; starts nothing.
    #[arg(long, conflicts_with = "template_id")]
    experiment_id: Option<String>,
    /// The base stack, whose RouterLogGroup holds the router's logs.
    #[arg(long, default_value = "interruption-router")]
    stack: String,
    /// Read the router's logs from this log group instead.
    #[arg(long)]
    log_group: Option<String>,
    /// How long after the experiment to keep collecting (e.g. 3m); default: the template's
    /// durationBeforeInterruption plus 60 s.
    #[arg(long, value_parser = fis::parse_duration)]
    settle: Option<Duration>,
    /// Give up waiting for the experiment after this long.
    #[arg(long, default_value = "30m", value_parser = fis::parse_duration)]
    timeout: Duration,
    /// Also fail if another cluster received any event during the window.
    #[arg(long)]
    strict: bool,
    /// The tag the router routes by (its MANAGED_TAG_KEY): the template must select by it.
    #[arg(long, default_value = router_core::config::DEFAULT_MANAGED_TAG_KEY)]
    managed_tag: String,
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
            cluster,
            template_id,
            experiment_id,
            stack,
            log_group,
            settle,
            timeout,
            strict,
            managed_tag,
            yes,
            region,
        } = self;
        if experiment_id.is_none() && !yes {
            anyhow::bail!(
                "this starts a FIS experiment that interrupts running spot instances of the \
                 cluster; pass --yes to go ahead (or --experiment-id to report on one that ran)"
            );
        }
        let options = fis::Options {
            cluster,
            template_id,
            experiment_id,
            stack,
            log_group,
            settle,
            poll: Duration::from_secs(5),
            timeout,
            strict,
            managed_tag,
        };
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
