//! `spoke:<account>:rule:<name>`: the five rules on the member's default bus, as the hub's, each
//! targeting the hub bus with a role EventBridge may assume and that may put events there.

use std::collections::HashMap;

use aws_sdk_eventbridge::operation::list_targets_by_rule::ListTargetsByRuleOutput;
use interruption_router::event::Kind;

use super::{Hub, Member, Spoke};
use crate::check::{self, Expect};
use crate::verify::{
    report::Check,
    role::{Role, load_role},
    rules::{RULES, find_rule, state_bus_and_pattern},
};
use aws_model::{
    aws::{Aws, describe},
    policy::{Decision, Principal, Request, evaluate},
};

/// The five rules; the ARNs of the roles their hub targets use.
pub(super) async fn check_rules(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    spoke: &Spoke,
    checks: &mut Vec<Check>,
) -> Vec<String> {
    let mut roles: HashMap<String, Result<Role, String>> = HashMap::new();
    let mut forwarders: Vec<String> = Vec::new();
    for (logical, kind) in RULES {
        let (check, role) = check_rule(aws, hub, member, spoke, logical, kind, &mut roles).await;
        checks.push(check);
        if let Some(role) = role.filter(|r| !forwarders.contains(r)) {
            forwarders.push(role);
        }
    }
    forwarders
}

async fn check_rule(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    spoke: &Spoke,
    logical: &str,
    kind: Kind,
    roles: &mut HashMap<String, Result<Role, String>>,
) -> (Check, Option<String>) {
    let check_name = hub.name(&format!("rule:{logical}"));
    let region = hub.region;
    // Where: the rule, its target on the hub bus and that target's role.
    let found = find_rule(
        aws,
        &spoke.resources,
        logical,
        None,
        (
            format!("the spoke stack {} has no {logical}", member.spoke_stack),
            "update the spoke stack with this project's cloudformation/spoke.yaml",
        ),
        format!(
            "CloudFormation does not re-create deleted resources on its own: delete and \
             re-deploy the spoke stack {} in account {}",
            member.spoke_stack, member.account
        ),
    )
    .await;
    let (name, rule) = match found {
        Ok(found) => found,
        Err(row) => return (check::evaluate(check_name, [row]), None),
    };
    let rule_arn = rule.arn().map(str::to_owned).unwrap_or_else(|| {
        format!(
            "arn:{}:events:{region}:{}:rule/{name}",
            hub.base.partition, member.account
        )
    });
    let mut rows = state_bus_and_pattern(&rule, name, kind, None, region).to_vec();
    let forward = match find_forward(aws, hub, member, spoke, name).await {
        Ok(forward) => forward,
        Err(row) => {
            rows.push(row);
            return (check::evaluate(check_name, rows), None);
        }
    };
    let role_arn = forward.role_arn.as_str();
    if !roles.contains_key(role_arn) {
        let loaded = load_role(aws, role_arn)
            .await
            .map_err(|(problem, _)| problem);
        roles.insert(role_arn.to_owned(), loaded);
    }

    // Expect → what was found → the fix.
    let restore = format!(
        "update the spoke stack {} in account {} (ForwardToHubRole: trust OnlyTheseRules, policy \
         forward-to-hub)",
        member.spoke_stack, member.account
    );
    match &roles[role_arn] {
        Err(problem) => rows.push(Expect::problem(
            format!("its target's role: {problem}"),
            format!("{restore}, or {}", forward.put_targets),
        )),
        Ok(role) => {
            let may_put = role.may("events:PutEvents", forward.bus);
            let trusted = trusted_for_rule(role, role_arn, &rule_arn, member.account);
            rows.extend([
                Expect::that(
                    may_put.is_allowed(),
                    format!("→ hub bus as {}", role.name()),
                )
                .otherwise(
                    format!(
                        "its target's role {} may not events:PutEvents on {} ({may_put})",
                        role.name(),
                        forward.bus
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
            ]);
        }
    }
    (check::evaluate(check_name, rows), Some(forward.role_arn))
}

/// How a spoke rule forwards: to the hub bus, as a role.
struct Forward<'a> {
    bus: &'a str,
    role_arn: String,
    /// The command that points the rule at the hub bus with the spoke stack's role.
    put_targets: String,
}

/// The rule's target on the hub bus and its role; the row that ends the check when there is none.
async fn find_forward<'a>(
    aws: &Aws,
    hub: &Hub<'a>,
    member: &Member<'_>,
    spoke: &Spoke,
    name: &str,
) -> Result<Forward<'a>, Expect> {
    let region = hub.region;
    let Some(bus) = hub.bus else {
        return Err(Expect::problem(
            "cannot tell whether it targets the hub: the base stack has no central bus",
            format!("see {}", hub.name("hub-bus-policy")),
        )
        .ending());
    };
    let forward_role = spoke.resources.get("ForwardToHubRole").map(|r| {
        format!(
            "arn:{}:iam::{}:role/{r}",
            hub.base.partition, member.account
        )
    });
    let put_targets = format!(
        "aws events put-targets --rule {name} --region {region} --targets \
         'Id=hub,Arn={bus},RoleArn={}' (in account {})",
        forward_role
            .as_deref()
            .unwrap_or("<the spoke stack's ForwardToHubRole ARN>"),
        member.account
    );
    let listed: Result<ListTargetsByRuleOutput, String> = aws
        .events
        .list_targets_by_rule()
        .rule(name)
        .send()
        .await
        .map_err(|e| format!("ListTargetsByRule {name}: {}", describe(&e)));
    let targets = match &listed {
        Ok(listed) => listed.targets(),
        Err(_) => {
            return Err(Expect::lookup(
                &listed,
                "run verify with events:ListTargetsByRule",
            ));
        }
    };
    let Some(target) = targets.iter().find(|t| t.arn() == bus) else {
        let found: Vec<&str> = targets.iter().map(|t| t.arn()).collect();
        return Err(Expect::problem(
            format!("does not target the hub bus {bus} (targets: {found:?})"),
            put_targets,
        )
        .ending());
    };
    let Some(role_arn) = target.role_arn() else {
        return Err(Expect::problem(
            "its hub target has no role: EventBridge needs one to put events on another \
             account's bus",
            put_targets,
        )
        .ending());
    };
    Ok(Forward {
        bus,
        role_arn: role_arn.to_owned(),
        put_targets,
    })
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
