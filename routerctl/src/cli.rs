//! routerctl's command line: every subcommand, flag and default, in one place. `main.rs` runs
//! what it parses; the docs test parses every `routerctl …` line of the README and docs with it,
//! so a renamed flag fails that test rather than a reader.

use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::{adopt, fis, insights, simulate, verify};

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
    Simulate {
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
    },

    /// Check a live deployment: rules, queues and their policies, the event source mapping, the
    /// function's environment and role, the dashboard and alarms, and every cluster's queue; with
    /// --account, also a member account's spoke stack, spoke role and queues, and the central
    /// bus's policy for it. Exit status 1 on any failure.
    Verify {
        /// The base stack's name.
        #[arg(long, default_value = verify::DEFAULT_STACK)]
        stack: String,
        /// A cluster whose queue to check (repeatable); default: every queue the router's naming
        /// template matches.
        #[arg(long = "cluster")]
        clusters: Vec<String>,
        /// Also check this member account (12 digits), reached by assuming its spoke role with
        /// your credentials, or with --profile.
        #[arg(long, value_parser = verify::parse_account_id)]
        account: Option<String>,
        /// The member account's spoke stack (cloudformation/spoke.yaml), in the same region.
        #[arg(long, default_value = verify::DEFAULT_SPOKE_STACK, requires = "account")]
        spoke_stack: String,
        /// Reach the member account with this profile instead of assuming the spoke role (which
        /// trusts only the hub's router role, and may not read CloudFormation, EventBridge or IAM).
        #[arg(long, requires = "account")]
        profile: Option<String>,
        /// The organisation the central bus's policy admits (aws:PrincipalOrgID), o-…; without it
        /// an organisation-wide bus policy is reported as undetermined.
        #[arg(long, value_parser = verify::parse_org_id, requires = "account")]
        org_id: Option<String>,
        /// Karpenter's controller role for a cluster whose tenant stack does not name it
        /// (KarpenterRoleName), as <cluster>=<role name>; repeatable.
        #[arg(long = "karpenter-role", value_parser = verify::parse_cluster_role)]
        karpenter_roles: Vec<(String, String)>,
        #[arg(long)]
        region: Option<String>,
    },

    /// Move clusters that run Karpenter with their own interruption queue and rules onto the
    /// router, one checked step at a time. Without --apply or --rollback it only prints, per
    /// cluster, what it runs today and the steps left; nothing changes. Exit status 1 when
    /// --apply finds no step it may take now (the reason is printed).
    Adopt {
        /// The router's base stack.
        #[arg(long, default_value = verify::DEFAULT_STACK)]
        stack: String,
        /// The cluster to plan, apply or roll back (default for a plan: every cluster).
        #[arg(long, required_if_eq_any = [("apply", "true"), ("rollback", "true"), ("stack_template", "true")])]
        cluster: Option<String>,
        /// Make the next step's AWS-side change, if it is adopt's to make and safe now.
        #[arg(long, conflicts_with_all = ["rollback", "stack_template"])]
        apply: bool,
        /// Re-enable the cluster's old rules, wait for EventBridge to apply that, and print the
        /// helm command back to its old queue.
        #[arg(long, conflicts_with = "stack_template")]
        rollback: bool,
        /// Print the template of the stack that owns the cluster's old rules or queue, edited for
        /// step 6 or 7 (deploy it with aws cloudformation deploy).
        #[arg(long)]
        stack_template: bool,
        /// With --apply: the old rules and queue that carry no tool's mark were made by hand, and
        /// adopt may delete them at steps 6 and 7.
        #[arg(long, requires = "apply")]
        delete_hand_made: bool,
        /// Seconds to wait after a rule change reads back before counting on it (EventBridge
        /// applies rule changes "after a short period").
        #[arg(long, default_value_t = adopt::DEFAULT_SETTLE.as_secs())]
        rule_settle: u64,
        /// Karpenter's controller role for a cluster adopt cannot find it for, as
        /// <cluster>=<role name>; repeatable.
        #[arg(long = "karpenter-role", value_parser = verify::parse_cluster_role)]
        karpenter_roles: Vec<(String, String)>,
        /// The tag key on Karpenter's nodes (the router's MANAGED_TAG_KEY).
        #[arg(long, default_value = router_core::config::DEFAULT_MANAGED_TAG_KEY)]
        managed_tag: String,
        /// The clusters' region (default: the hub's, or your configured region).
        #[arg(long)]
        region: Option<String>,
        /// The clusters run in this member account (12 digits), which a spoke stack connects to
        /// the hub; adopt works there with --profile's credentials.
        #[arg(long, value_parser = verify::parse_account_id)]
        account: Option<String>,
        /// A profile with credentials of --account (what adopt reads and deploys there:
        /// docs/adopting.md).
        #[arg(long, requires = "account")]
        profile: Option<String>,
        /// The member's spoke stack (cloudformation/spoke.yaml) in --region.
        #[arg(long, default_value = verify::DEFAULT_SPOKE_STACK)]
        spoke_stack: String,
        /// The base stack's region, when the clusters run in another (default: --region).
        #[arg(long)]
        hub_region: Option<String>,
    },

    /// Start a cluster's FIS spot-interruption experiment (cloudformation/fis.yaml), wait for it,
    /// and report from the router's logs which clusters received its events. Exit status 1
    /// unless the target cluster received them and no other cluster did. Interrupts real nodes.
    #[command(group = clap::ArgGroup::new("experiment").required(true).multiple(true).args(["cluster", "template_id", "experiment_id"]))]
    Fis {
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
    },

    /// What the router saw of the organisation's interruptions, from its interruption records
    /// (CloudWatch Logs Insights, base.yaml's queries): the most reclaimed node pools by cluster,
    /// kind, instance type and zone, and each cluster's delivery delay, over a window, across
    /// the hubs' regions. Exit status 1 when a delivery was later than 120 s.
    Insights {
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
    },
}
