//! `routerctl verify`: checks a live deployment of the base stack (and its tenant queues, and with
//! `--account` one member account's spoke stack) against what the router needs to deliver every
//! interruption, and says how to fix each failure.
//!
//! Everything is read from AWS, not from the template: drift (a rule disabled by hand, a queue
//! re-created unencrypted, an event source mapping edited) is what this exists to catch. Expected
//! rule patterns come from the router's own [`Kind`](router_core::event::Kind) list, and
//! the function's environment is validated with the router's own
//! [`Config::from_lookup`](router_core::config::Config::from_lookup), so verify and the
//! router cannot disagree. Permissions are evaluated with [`aws_model::policy`] (queue, function and
//! bus policies, roles' inline and managed policies, permission boundaries and trust policies);
//! SCPs are not.
//!
//! Every check has a stable name and, when it fails, a fix. A site is checked once: the hub's
//! account and each member account (`--account`) go through the same checks where they share a
//! concern, with the site saying what differs (the sender, the check names, the fixes' wording):
//! the rules (`rules::RuleSite`: to the ingest queue at the hub, to the hub's bus or its direct
//! queue in a member),
//! the tenant queues (`tenants::Site`), and the role the router routes with there
//! (`routing_role.rs`: the router role at the hub, the spoke role in a member). The documents a
//! fix puts back are those this release's templates render for the deployment
//! ([`aws_model::documents`]), not copies written out here.
//!
//! One file per family of checks, in the order [`run`] reports them:
//!
//! * `stack.rs`: `stack`, the base stack and the outputs everything else is found by;
//! * `version.rs`: `version`, the release the stack was deployed from, and whether it is this
//!   routerctl's;
//! * `rules/`: `rule:<name>`, the five rules (and their central-bus copies), and a member's;
//! * `queues.rs`: `ingest-queue`, `dead-letter-queue`, their `:policy`, `event-source-mapping`;
//! * `direct_queue.rs` (CentralBus=Enabled): `direct-queue`, `direct-queue:policy` (the served
//!   accounts' direct roles may send, nothing else), `event-source-mapping:direct`;
//! * `function/`: `function`, `function:environment`, `router-role`,
//!   `router-role:assume-spoke-roles`;
//! * `monitoring/`: `dashboard`, `alarm:<name>` (late forwards, access denied, unreachable
//!   accounts, missing metric documents), `function:metrics`;
//! * `alarm_topic.rs`: `alarm-topic` (and a member's `spoke:<account>:alarm-topic`): the topic
//!   every alarm notifies has a confirmed subscription, or the alarms page nobody;
//! * `keys.rs`: `ingest-queue:key`, `dead-letter-queue:key` (and `tenant:<cluster>:key`, from
//!   `tenants/`): a queue under a KMS key, its key enabled, customer managed, and usable by each
//!   principal on the path (key policy, role policies and boundary together);
//! * `tenants/`: `tenant:<cluster>:queue`, `:record`, `:encryption`, `:queue-policy`,
//!   `:router-role`, `:karpenter-role`, `:read`, `:key`;
//! * `spokes/`: `spoke:<account>:…`, one member account (`--account`): whether it is served and
//!   reached, its spoke stack, the hub bus's policy for it, the spoke role's trust, then the
//!   shared checks above for its rules, its role and its tenant queues.
//!
//! Every check is judged by [`crate::check::evaluate`] (the engine `adopt` shares): a check reads
//! AWS (where: a lookup that fails ends it, [`crate::check::Expect::lookup`]), then states its rows
//! (expect → what was found → the fix), as `spokes/spoke_stack.rs` does. Shared: `report.rs` (the report);
//! with adopt, [`crate::deployment`] (the base stack, a queue, a role, each read once).

mod alarm_topic;
mod direct_queue;
mod function;
pub(crate) mod keys;
mod monitoring;
pub(crate) mod queues;
mod report;
mod routing_role;
pub(crate) mod rules;
mod spokes;
pub(crate) mod stack;
pub(crate) mod tenants;
#[cfg(test)]
mod tests;
mod version;

pub use monitoring::{ALARMS, AlarmSpec, MISSING_EXPRESSION, Monitored, Watches};
pub use report::{Check, Report};
pub use rules::{HUB_RULES, RULES};
pub use spokes::{parse_account_id, parse_org_id};
pub use tenants::cluster_of;

use crate::cloud::Cloud;

/// The base stack's name unless `--stack` says otherwise.
pub const DEFAULT_STACK: &str = "interruption-router";
/// A member account's spoke stack unless `--spoke-stack` says otherwise.
pub const DEFAULT_SPOKE_STACK: &str = "interruption-router-spoke";

/// What to check: `routerctl verify`'s flags (`--region` aside: the clients are built from it).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The base stack's name.
    #[arg(long, default_value = DEFAULT_STACK)]
    pub stack: String,
    /// A cluster whose queue to check (repeatable); default: every queue the router's naming
    /// template matches.
    #[arg(long = "cluster")]
    pub clusters: Vec<String>,
    /// Also check this member account (12 digits), reached by assuming its spoke role with
    /// your credentials, or with --profile: its spoke stack, the spoke role, the hub bus's policy
    /// for it, and its tenant queues.
    #[arg(long, value_parser = parse_account_id)]
    pub account: Option<String>,
    /// The member account's spoke stack (cloudformation/spoke.yaml), in the same region.
    #[arg(long, default_value = DEFAULT_SPOKE_STACK, requires = "account")]
    pub spoke_stack: String,
    /// Reach the member account with this profile instead of assuming the spoke role (which
    /// trusts only the hub's router role, and may not read CloudFormation, EventBridge or IAM).
    #[arg(long, requires = "account")]
    pub profile: Option<String>,
    /// The organisation the central bus's policy admits (aws:PrincipalOrgID), o-…; without it
    /// an organisation-wide bus policy is reported as undetermined.
    #[arg(long, value_parser = parse_org_id, requires = "account")]
    pub org_id: Option<String>,
    /// Karpenter's controller role for a cluster whose tenant stack does not name it
    /// (KarpenterRoleName), as <cluster>=<role name>; repeatable.
    #[arg(long = "karpenter-role", value_parser = parse_cluster_role)]
    pub karpenter_roles: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            stack: DEFAULT_STACK.to_owned(),
            clusters: Vec::new(),
            account: None,
            spoke_stack: DEFAULT_SPOKE_STACK.to_owned(),
            profile: None,
            org_id: None,
            karpenter_roles: Vec::new(),
        }
    }
}

/// `--karpenter-role <cluster>=<role name>`.
pub fn parse_cluster_role(value: &str) -> Result<(String, String), String> {
    let (cluster, role) = value
        .split_once('=')
        .ok_or_else(|| format!("{value:?} is not <cluster>=<role name>"))?;
    let role_name = |r: &str| {
        !r.is_empty()
            && r.len() <= 64
            && r.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
    };
    if cluster.is_empty() || !role_name(role) {
        return Err(format!(
            "{value:?}: give a cluster name and an IAM role name (not an ARN), e.g. alpha=KarpenterController-alpha"
        ));
    }
    Ok((cluster.to_owned(), role.to_owned()))
}

/// Runs every check. AWS errors (a missing resource, a denied read) become failed checks with
/// their fix, so there is no error to return.
pub async fn run(aws: &impl Cloud, options: &Options) -> Report {
    let mut report = Report {
        stack: options.stack.clone(),
        region: aws.region().to_owned(),
        spoke: options
            .account
            .as_ref()
            .map(|a| (a.clone(), options.spoke_stack.clone())),
        checks: Vec::new(),
    };
    let checks = &mut report.checks;

    // The base stack: everything else is found through its outputs and resources.
    let Some(base) = stack::check(aws, &options.stack, checks).await else {
        return report;
    };
    checks.push(version::check(&base, aws.region()));
    // Rules first: the queue and function policies are checked against their ARNs.
    let function = function::load(aws, &base).await;
    let rules = rules::check(aws, &base, checks).await.arns;
    let rule_arns: Vec<String> = rules.values().cloned().collect();
    let timeout = function.as_ref().ok().and_then(|f| f.timeout);
    queues::check(aws, &base, &rules, timeout, checks).await;
    direct_queue::check(aws, &base, timeout, checks).await;
    let config = function::check(&base, &function, checks);
    let role = function::check_role(aws, &base, config.as_ref(), checks).await;
    keys::check_base(aws, &base, &rule_arns, role.as_ref(), checks).await;
    monitoring::check(aws, &base, config.as_ref(), checks).await;
    checks.push(
        alarm_topic::check(
            aws,
            &alarm_topic::Site {
                name: "alarm-topic".into(),
                topic: base.alarm_topic(),
                region: aws.region(),
                deploy: format!(
                    "update stack {} with this release's base.yaml (make deploy-base BUCKET=… \
                     REGION={}): given no topic, it creates one for its alarms; or give yours \
                     with ALARM_TOPIC=<topic ARN>",
                    base.name,
                    aws.region()
                ),
            },
        )
        .await,
    );
    let template = tenants::template(&base, config.as_ref(), checks);
    if let Some(template) = &template {
        // The base stack's own queues are not tenants.
        let own: Vec<&str> = [
            base.output("IngestQueueArn"),
            base.output("DeadLetterQueueArn"),
        ]
        .into_iter()
        .flatten()
        .map(aws_model::arn::arn_name)
        .collect();
        tenants::check(
            aws,
            &tenants::Site::hub(&base, aws.region()),
            template,
            role.as_ref(),
            &own,
            &options.clusters,
            &options.karpenter_roles,
            checks,
        )
        .await;
    }
    if let Some(account) = &options.account {
        let member = spokes::Member {
            account,
            spoke_stack: &options.spoke_stack,
            profile: options.profile.as_deref(),
            org_id: options.org_id.as_deref(),
        };
        spokes::check(
            aws,
            &base,
            config.as_ref(),
            template.as_ref(),
            &member,
            checks,
        )
        .await;
    }
    report
}
