//! Where a member account's spoke stack rules deliver: to the hub's central bus, as the spoke
//! stack's forwarding role, which EventBridge may assume for that rule and which may
//! events:PutEvents on the bus.

use std::collections::HashMap;

use aws_sdk_eventbridge::types::Target;

use crate::check::Expect;
use crate::verify::role::{Role, load_role};
use aws_model::policy::{Decision, Principal, Request, evaluate};

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
                    Expect::quietly(trusted.is_allowed()).otherwise(
                        format!(
                            "EventBridge may not assume {} for this rule ({trusted})",
                            role.name()
                        ),
                        restore,
                    ),
                ]
            }
        };
        (rows, Some(role_arn.to_owned()))
    }
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
