//! `spoke:<account>:stack`: the spoke stack is complete, forwards to this hub's bus, and exports
//! the QueuePrefix and the role the router assumes (tenant.yaml imports both).

use super::{Hub, Member, Spoke};
use crate::{
    check::{self, Check, Expect},
    cloud::{Cloud, Stack},
    deployment::base,
};

/// The states a stack serves from.
const SETTLED: [&str; 3] = [
    "CREATE_COMPLETE",
    "UPDATE_COMPLETE",
    "UPDATE_ROLLBACK_COMPLETE",
];

pub(super) async fn check_spoke_stack(
    aws: &impl Cloud,
    hub: &Hub<'_>,
    member: &Member<'_>,
    checks: &mut Vec<Check>,
) -> Option<Spoke> {
    let name = hub.name("stack");
    let stack_name = member.spoke_stack;
    let account = member.account;
    // Where: the stack in the member account.
    let described = aws.stack(stack_name).await.map_err(|e| {
        format!("{stack_name} in account {account}: {e} (pass its name with --spoke-stack)")
    });
    let stack = match &described {
        Ok(stack) => stack,
        Err(_) => {
            checks.push(check::evaluate(
                name,
                [Expect::lookup(&described, hub.deploy_spoke(member))],
            ));
            return None;
        }
    };
    let resources = base::resources(aws, stack_name).await;
    let (check, spoke) = judge(hub, member, stack, resources);
    checks.push(check);
    Some(spoke)
}

/// The check of the spoke stack as DescribeStacks and DescribeStackResources answered (no AWS
/// here: each finding has its unit test), and what the member's other checks read from it.
pub(super) fn judge(
    hub: &Hub<'_>,
    member: &Member<'_>,
    stack: &Stack,
    resources: Result<std::collections::BTreeMap<String, String>, String>,
) -> (Check, Spoke) {
    let name = hub.name("stack");
    let stack_name = member.spoke_stack;
    let account = member.account;
    let status = stack.status.as_str();
    let outputs = &stack.outputs;
    let output = |key: &str| outputs.get(key).map(String::as_str);
    let update = |parameter: &str, value: &str| {
        format!("update the spoke stack {stack_name} in account {account} with {parameter}={value}")
    };
    let prefix = hub.queue_prefix.as_str();
    let exported_role = output("RegionRouterRoleArn").or(output("RouterRoleArn"));

    // Expect → what was found → the fix.
    let mut rows = vec![
        Expect::that(SETTLED.contains(&status), format!("{stack_name}: {status}")).otherwise(
            format!("{stack_name} is {status}"),
            format!(
                "see why: aws cloudformation describe-stack-events --stack-name {stack_name} \
                 --region {} (in account {account})",
                hub.region
            ),
        ),
    ];
    // Without the central bus there is nothing to compare: that is hub-bus-policy's finding.
    if let Some(bus) = hub.bus {
        let found = output("HubEventBusArn");
        rows.push(
            Expect::that(found == Some(bus), format!("forwards to {bus}")).otherwise(
                format!(
                    "it forwards to {}, not this hub's central bus {bus}",
                    found.unwrap_or("(no HubEventBusArn output)")
                ),
                update("HubEventBusArn", bus),
            ),
        );
    }
    rows.extend([
        Expect::that(
            output("QueuePrefix") == Some(prefix),
            format!("QueuePrefix {prefix} as the router's"),
        )
        .otherwise(
            format!(
                "its QueuePrefix is {}, but the router names queues {prefix}<cluster>: it cannot \
                 send to this account's tenant queues",
                output("QueuePrefix").unwrap_or("missing")
            ),
            format!(
                "{}, then update its tenant stacks (they import it)",
                update("QueuePrefix", prefix)
            ),
        ),
        Expect::that(
            exported_role == Some(hub.spoke_role_arn.as_str()),
            "exports the spoke role for tenant queue policies",
        )
        .otherwise(
            format!(
                "it exports RouterRoleArn {} for tenant queue policies, but the router assumes {}",
                exported_role.unwrap_or("(none)"),
                hub.spoke_role_arn
            ),
            format!(
                "update the spoke stack {stack_name} in account {account} with {}",
                hub.spoke_role_parameters()
            ),
        ),
        Expect::lookup(
            &resources,
            "run verify with cloudformation:DescribeStackResources in the member account",
        ),
    ]);
    let spoke = Spoke {
        resources: resources.unwrap_or_default(),
        alarm_topic: output("AlarmTopicArn").map(str::to_owned),
    };
    (check::evaluate(name, rows), spoke)
}
