//! `routerctl simulate`: its flags, and the clients it sends with (the cluster's account and
//! region pick the instances; the hub's clients send).

use aws_clients::aws::Aws;

use crate::simulate;

#[derive(clap::Args)]
pub struct Args {
    /// The cluster: the value of the instances' cluster tag.
    #[arg(long)]
    cluster: String,
    /// What to send; `health` is one event naming every selected instance, `fis` four per
    /// instance (rebalance, warning, stopping, terminated).
    #[arg(long, value_enum)]
    kind: simulate::SimKind,
    /// How many running instances to pick (lowest ids first).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100), conflicts_with = "instances")]
    count: u16,
    /// Pick this instance instead (repeatable); it must carry the cluster tag.
    #[arg(long = "instance", value_name = "ID")]
    instances: Vec<String>,
    /// The ingest queue URL, or the router function's name or ARN (invoked with the SQS batch
    /// the ingest queue would have given it: the ingest queue admits only the stack's rules).
    #[arg(long, value_name = "QUEUE_URL|FUNCTION")]
    to: String,
    /// The state of `--kind state` events.
    #[arg(long, default_value = "terminated")]
    state: String,
    /// The tag naming the cluster; `kubernetes.io/cluster/*` selects by that key instead.
    #[arg(long, default_value = "eks:eks-cluster-name")]
    cluster_tag: String,
    /// Pick only instances with this tag key (the router's MANAGED_TAG_KEY); '' for any.
    #[arg(long, default_value = router_core::config::DEFAULT_MANAGED_TAG_KEY)]
    managed_tag: String,
    /// The cluster's region (its instances, and the events' `region`).
    #[arg(long)]
    region: Option<String>,
    /// The cluster's account, when it is a member account of a hub: its instances are
    /// picked there, with your credentials if they are in that account, else with --profile
    /// (the spoke role trusts only the hub's router role), and the events carry it.
    #[arg(long, value_name = "ACCOUNT_ID")]
    account: Option<String>,
    /// A profile with credentials of --account (ec2:DescribeInstances is enough).
    #[arg(long, requires = "account")]
    profile: Option<String>,
    /// The region of --to, when the hub is not in the cluster's region.
    #[arg(long)]
    hub_region: Option<String>,
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self {
            cluster,
            kind,
            count,
            instances,
            to,
            state,
            cluster_tag,
            managed_tag,
            region,
            account,
            profile,
            hub_region,
        } = self;
        let options = simulate::Options {
            cluster,
            kind,
            count: count.into(),
            instances,
            to,
            state,
            cluster_tag,
            managed_tag,
        };
        // The cluster's account and region pick the instances; the hub's clients send.
        let run = async {
            let caller = Aws::load(region.clone()).await?;
            let site = match &account {
                Some(account) => {
                    let region = caller.region.clone();
                    simulate::load_site(&caller, &region, account, profile.as_deref()).await?
                }
                None => caller,
            };
            let hub = match (&account, hub_region) {
                (None, None) => site.clone(),
                (_, hub_region) => Aws::load(hub_region.or(region)).await?,
            };
            let report = simulate::run_from(&hub, &site, &options).await?;
            print!("{}", report.render());
            Ok(report.failed() == 0)
        };
        run.await
    }
}
