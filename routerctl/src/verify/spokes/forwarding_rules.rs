//! `spoke:<account>:rule:<name>`: the five rules on the member's default bus, as the hub's, each
//! targeting the hub bus with a role EventBridge may assume and that may put events there.

use std::collections::HashMap;

use aws_sdk_eventbridge::operation::list_targets_by_rule::ListTargetsByRuleOutput;
use interruption_router::event::Kind;

use super::{Hub, Member, Spoke};
use crate::verify::{
    report::{Check, Findings},
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
    let found = find_rule(
        aws,
        &check_name,
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
        Err(check) => return (check, None),
    };
    let rule_arn = rule.arn().map(str::to_owned).unwrap_or_else(|| {
        format!(
            "arn:{}:events:{region}:{}:rule/{name}",
            hub.base.partition, member.account
        )
    });
    let mut f = Findings::default();
    state_bus_and_pattern(&rule, name, kind, None, region, &mut f);
    let Some(bus) = hub.bus else {
        f.problem(
            "cannot tell whether it targets the hub: the base stack has no central bus",
            format!("see {}", hub.name("hub-bus-policy")),
        );
        return (f.into_check(check_name), None);
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
    let targets: Result<ListTargetsByRuleOutput, String> = aws
        .events
        .list_targets_by_rule()
        .rule(name)
        .send()
        .await
        .map_err(|e| format!("ListTargetsByRule {name}: {}", describe(&e)));
    let targets = match targets {
        Ok(t) => t,
        Err(problem) => {
            f.problem(problem, "run verify with events:ListTargetsByRule");
            return (f.into_check(check_name), None);
        }
    };
    let Some(target) = targets.targets().iter().find(|t| t.arn() == bus) else {
        let found: Vec<&str> = targets.targets().iter().map(|t| t.arn()).collect();
        f.problem(
            format!("does not target the hub bus {bus} (targets: {found:?})"),
            put_targets,
        );
        return (f.into_check(check_name), None);
    };
    let Some(role_arn) = target.role_arn() else {
        f.problem(
            "its hub target has no role: EventBridge needs one to put events on another \
             account's bus",
            put_targets,
        );
        return (f.into_check(check_name), None);
    };
    let restore = format!(
        "update the spoke stack {} in account {} (ForwardToHubRole: trust OnlyTheseRules, policy \
         forward-to-hub)",
        member.spoke_stack, member.account
    );
    if !roles.contains_key(role_arn) {
        let loaded = load_role(aws, role_arn)
            .await
            .map_err(|(problem, _)| problem);
        roles.insert(role_arn.to_owned(), loaded);
    }
    match &roles[role_arn] {
        Err(problem) => f.problem(
            format!("its target's role: {problem}"),
            format!("{restore}, or {put_targets}"),
        ),
        Ok(role) => {
            let d = role.may("events:PutEvents", bus);
            if d.is_allowed() {
                f.ok(format!("→ hub bus as {}", role.name()));
            } else {
                f.problem(
                    format!(
                        "its target's role {} may not events:PutEvents on {bus} ({d})",
                        role.name()
                    ),
                    restore.clone(),
                );
            }
            let trusted = match &role.trust {
                Ok(trust) => {
                    let context = [
                        ("aws:SourceArn", rule_arn.as_str()),
                        ("aws:SourceAccount", member.account),
                    ];
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
                Err(e) => Decision::Undetermined { why: e.clone() },
            };
            if !trusted.is_allowed() {
                f.problem(
                    format!(
                        "EventBridge may not assume {} for this rule ({trusted})",
                        role.name()
                    ),
                    restore,
                );
            }
        }
    }
    (f.into_check(check_name), Some(role_arn.to_owned()))
}
