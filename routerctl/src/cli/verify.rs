//! `routerctl verify`: its flags, and the report it prints.

use aws_clients::aws::Aws;

use crate::verify;

#[derive(clap::Args)]
pub struct Args {
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
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self {
            stack,
            clusters,
            account,
            spoke_stack,
            profile,
            org_id,
            karpenter_roles,
            region,
        } = self;
        let options = verify::Options {
            stack,
            clusters,
            account,
            spoke_stack,
            profile,
            org_id,
            karpenter_roles,
        };
        let run = async {
            let report = verify::run(&Aws::load(region).await?, &options).await;
            print!("{}", report.render());
            Ok(report.passed())
        };
        run.await
    }
}
