//! Where a member account's spoke stack rules deliver: to the hub's central bus, as the spoke
//! stack's forwarding role, which EventBridge may assume for that rule and which may
//! events:PutEvents on the bus; or, in the hub's region with `HubDirectQueueArn`, straight into
//! the hub's direct queue as the member's direct role, which EventBridge may assume for that
//! rule, which may sqs:SendMessage there, which the queue's policy admits, and which is the role
//! the router routes direct deliveries of this account from (any other is dead-lettered
//! `foreign-sender`).

use std::collections::HashMap;

use aws_sdk_eventbridge::types::Target;

use crate::check::Expect;
use crate::verify::role::{Role, load_role};
use aws_model::{
    access::{ResourcePolicy, authorize_role},
    policy::{Decision, Policy, Principal, Request, evaluate},
};

/// The hub's bus a member's rules forward to, and what the fixes name.
pub(crate) struct HubBus<'a> {
    /// The bus's ARN; `None` when the base stack has no central bus.
    pub bus: Option<&'a str>,
    /// The spoke stack's ForwardToHubRole, when it has one.
    pub forward_role: Option<String>,
    pub account: &'a str,
    pub region: &'a str,
    pub spoke_stack: &'a str,
    /// The check that reports a missing central bus.
    pub bus_check: String,
    /// The hub's direct queue, when it has one.
    pub direct: Option<DirectQueue<'a>>,
}

/// The hub's direct queue, as a member's direct rules must reach it.
pub(crate) struct DirectQueue<'a> {
    pub arn: &'a str,
    /// Its policy as SQS holds it (an error text if it could not be read).
    pub policy: Result<Policy, String>,
    /// The role the router routes this account's direct deliveries from.
    pub role_arn: String,
    pub base_stack: &'a str,
}

impl HubBus<'_> {
    /// The rows for a rule's targets (`rule`, named `name`): one on the hub bus, with a role
    /// EventBridge may assume for this rule and that may put events there; and that role.
    pub(super) async fn judge(
        &self,
        aws: &aws_model::aws::Aws,
        name: &str,
        rule: &str,
        targets: &[Target],
        roles: &mut HashMap<String, Result<Role, String>>,
    ) -> (Vec<Expect>, Option<String>) {
        let Some(bus) = self.bus else {
            return (
                vec![
                    Expect::problem(
                        "cannot tell whether it targets the hub: the base stack has no central bus",
                        format!("see {}", self.bus_check),
                    )
                    .ending(),
                ],
                None,
            );
        };
        if let Some(direct) = &self.direct
            && let Some(target) = targets.iter().find(|t| t.arn() == direct.arn)
        {
            return (
                self.judge_direct(aws, direct, rule, target, roles).await,
                None,
            );
        }
        let put_targets = format!(
            "aws events put-targets --rule {name} --region {} --targets \
             'Id=hub,Arn={bus},RoleArn={}' (in account {})",
            self.region,
            self.forward_role
                .as_deref()
                .unwrap_or("<the spoke stack's ForwardToHubRole ARN>"),
            self.account
        );
        let Some(target) = targets.iter().find(|t| t.arn() == bus) else {
            let found: Vec<&str> = targets.iter().map(|t| t.arn()).collect();
            return (
                vec![
                    Expect::problem(
                        format!("does not target the hub bus {bus} (targets: {found:?})"),
                        put_targets,
                    )
                    .ending(),
                ],
                None,
            );
        };
        let Some(role_arn) = target.role_arn() else {
            return (
                vec![
                    Expect::problem(
                        "its hub target has no role: EventBridge needs one to put events on \
                         another account's bus",
                        put_targets,
                    )
                    .ending(),
                ],
                None,
            );
        };
        if !roles.contains_key(role_arn) {
            let loaded = load_role(aws, role_arn)
                .await
                .map_err(|(problem, _)| problem);
            roles.insert(role_arn.to_owned(), loaded);
        }

        // Expect → what was found → the fix.
        let restore = format!(
            "update the spoke stack {} in account {} (ForwardToHubRole: trust OnlyTheseRules, \
             policy forward-to-hub)",
            self.spoke_stack, self.account
        );
        let rows = match &roles[role_arn] {
            Err(problem) => vec![Expect::problem(
                format!("its target's role: {problem}"),
                format!("{restore}, or {put_targets}"),
            )],
            Ok(role) => {
                let may_put = role.may("events:PutEvents", bus);
                let trusted = trusted_for_rule(role, role_arn, rule, self.account);
                vec![
                    Expect::that(
                        may_put.is_allowed(),
                        format!("→ hub bus as {}", role.name()),
                    )
                    .otherwise(
                        format!(
                            "its target's role {} may not events:PutEvents on {bus} ({may_put})",
                            role.name(),
                        ),
                        restore.clone(),
                    ),
                    trust_row(role, &trusted, restore),
                ]
            }
        };
        (rows, Some(role_arn.to_owned()))
    }
}

impl HubBus<'_> {
    /// The rows for a rule writing the hub's direct queue through `target`.
    async fn judge_direct(
        &self,
        aws: &aws_model::aws::Aws,
        direct: &DirectQueue<'_>,
        rule: &str,
        target: &Target,
        roles: &mut HashMap<String, Result<Role, String>>,
    ) -> Vec<Expect> {
        let restore = format!(
            "update the spoke stack {} in account {} with this release's spoke.yaml and \
             HubDirectQueueArn={} (DirectRole: trust OnlyTheseRules, policy deliver-to-hub)",
            self.spoke_stack, self.account, direct.arn
        );
        let Some(role_arn) = target.role_arn() else {
            return vec![
                Expect::problem(
                    "its direct target has no role: EventBridge sends to another account's \
                     queue only as an execution role",
                    restore,
                )
                .ending(),
            ];
        };
        if role_arn != direct.role_arn {
            return vec![
                Expect::problem(
                    format!(
                        "its direct target sends as {role_arn}, and the router routes this \
                         account's direct deliveries only from {}: every one would be \
                         dead-lettered foreign-sender",
                        direct.role_arn
                    ),
                    restore,
                )
                .ending(),
            ];
        }
        if !roles.contains_key(role_arn) {
            let loaded = load_role(aws, role_arn)
                .await
                .map_err(|(problem, _)| problem);
            roles.insert(role_arn.to_owned(), loaded);
        }
        let role = match &roles[role_arn] {
            Err(problem) => {
                return vec![Expect::problem(
                    format!("its target's role: {problem}"),
                    restore,
                )];
            }
            Ok(role) => role,
        };
        let may_send = role.may("sqs:SendMessage", direct.arn);
        let trusted = trusted_for_rule(role, role_arn, rule, self.account);
        let admitted = match &direct.policy {
            Err(e) => Decision::Undetermined { why: e.clone() },
            Ok(policy) => {
                let hub_account = aws_model::aws::arn_account(direct.arn).unwrap_or_default();
                let context = [
                    ("aws:PrincipalArn", role_arn),
                    ("aws:PrincipalAccount", self.account),
                    ("aws:SecureTransport", "true"),
                ];
                authorize_role(
                    &role.identity(),
                    policy,
                    ResourcePolicy::Ordinary,
                    hub_account,
                    &Request {
                        principal: Principal::Attached,
                        action: "sqs:SendMessage",
                        resource: direct.arn,
                        context: &context,
                    },
                )
            }
        };
        vec![
            Expect::that(
                may_send.is_allowed(),
                format!("→ the hub's direct queue as {}", role.name()),
            )
            .otherwise(
                format!(
                    "its target's role {} may not sqs:SendMessage on {} ({may_send})",
                    role.name(),
                    direct.arn
                ),
                restore.clone(),
            ),
            trust_row(role, &trusted, restore),
            Expect::quietly(admitted.is_allowed()).otherwise(
                format!(
                    "the hub's direct queue refuses {} ({admitted})",
                    role.name()
                ),
                format!(
                    "update the base stack {} so that its ServedAccounts lists {} (or \
                     OrganizationId names its organisation): DirectQueuePolicy admits those \
                     accounts' direct roles",
                    direct.base_stack, self.account
                ),
            ),
        ]
    }
}

/// The row of a rule target's role that EventBridge must be able to assume for the rule.
fn trust_row(role: &Role, trusted: &Decision, restore: String) -> Expect {
    Expect::quietly(trusted.is_allowed()).otherwise(
        format!(
            "EventBridge may not assume {} for this rule ({trusted})",
            role.name()
        ),
        restore,
    )
}

/// What the trust policy of the role at `role_arn` decides for EventBridge assuming it for the
/// rule `rule_arn`.
fn trusted_for_rule(role: &Role, role_arn: &str, rule_arn: &str, account: &str) -> Decision {
    let trust = match &role.trust {
        Ok(trust) => trust,
        Err(e) => return Decision::Undetermined { why: e.clone() },
    };
    let context = [("aws:SourceArn", rule_arn), ("aws:SourceAccount", account)];
    evaluate(
        std::slice::from_ref(trust),
        &Request {
            principal: Principal::Service("events.amazonaws.com"),
            action: "sts:AssumeRole",
            resource: role_arn,
            context: &context,
        },
    )
}
