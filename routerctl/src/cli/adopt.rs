//! `routerctl adopt`: its flags, the sites they reach (the hub, and a member through its spoke
//! stack), and the report or template it prints.

use crate::{adopt, verify};

#[derive(clap::Args)]
pub struct Args {
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
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self {
            stack,
            cluster,
            apply,
            rollback,
            stack_template,
            delete_hand_made,
            rule_settle,
            karpenter_roles,
            managed_tag,
            region,
            account,
            profile,
            spoke_stack,
            hub_region,
        } = self;
        let mut options = adopt::Options {
            stack,
            cluster,
            verb: match (apply, rollback, stack_template) {
                (true, _, _) => adopt::Verb::Apply,
                (_, true, _) => adopt::Verb::Rollback,
                (_, _, true) => adopt::Verb::StackTemplate,
                _ => adopt::Verb::Plan,
            },
            karpenter_roles,
            managed_tag,
            delete_hand_made,
            settle: std::time::Duration::from_secs(rule_settle),
            member: None,
            site_flags: String::new(),
        };
        // The flags that reach this site, for the commands adopt prints.
        let flags = [
            ("--account", account.clone()),
            ("--profile", profile.clone()),
            ("--region", region.clone()),
            ("--hub-region", hub_region.clone()),
            (
                "--spoke-stack",
                Some(spoke_stack.clone()).filter(|s| s != verify::DEFAULT_SPOKE_STACK),
            ),
        ];
        options.site_flags = flags
            .iter()
            .filter_map(|(flag, value)| Some(format!(" {flag} {}", value.as_ref()?)))
            .collect();
        let run = async {
            let (hub, site, member) =
                adopt::connect::reach(region, hub_region, account, profile, &spoke_stack).await?;
            options.member = member;
            let report = adopt::run_at(&hub, &site, &options).await?;
            match &report.outcome {
                // The template alone on stdout, to redirect into a file.
                adopt::Outcome::Template { edit, .. } => {
                    eprint!("{}", report.render());
                    print!("{}", edit.template);
                }
                _ => print!("{}", report.render()),
            }
            Ok(report.passed())
        };
        run.await
    }
}
