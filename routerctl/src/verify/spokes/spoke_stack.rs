//! `spoke:<account>:stack`: the spoke stack is complete, forwards to this hub's bus, and exports
//! the QueuePrefix and the role the router assumes (tenant.yaml imports both).

use std::collections::HashMap;

use super::{Hub, Member, Spoke};
use crate::verify::{
    report::{Check, Findings, fail},
    stack::{self},
};
use aws_model::aws::{Aws, describe};

pub(super) async fn check_spoke_stack(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    checks: &mut Vec<Check>,
) -> Option<Spoke> {
    let name = hub.name("stack");
    let stack_name = member.spoke_stack;
    let described = match aws
        .cfn
        .describe_stacks()
        .stack_name(stack_name)
        .send()
        .await
    {
        Ok(d) => d,
        Err(e) => {
            checks.push(fail(
                &name,
                format!(
                    "{stack_name} in account {}: {} (pass its name with --spoke-stack)",
                    member.account,
                    describe(&e)
                ),
                hub.deploy_spoke(member),
            ));
            return None;
        }
    };
    let Some(stack) = described.stacks().first() else {
        checks.push(fail(
            &name,
            format!("{stack_name} does not exist in account {}", member.account),
            hub.deploy_spoke(member),
        ));
        return None;
    };
    let mut f = Findings::default();
    let status = stack
        .stack_status()
        .map(|s| s.as_str())
        .unwrap_or("unknown");
    if [
        "CREATE_COMPLETE",
        "UPDATE_COMPLETE",
        "UPDATE_ROLLBACK_COMPLETE",
    ]
    .contains(&status)
    {
        f.ok(format!("{stack_name}: {status}"));
    } else {
        f.problem(
            format!("{stack_name} is {status}"),
            format!(
                "see why: aws cloudformation describe-stack-events --stack-name {stack_name} \
                 --region {} (in account {})",
                hub.region, member.account
            ),
        );
    }
    let outputs: HashMap<String, String> = stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect();
    let update = |parameter: &str, value: &str| {
        format!(
            "update the spoke stack {stack_name} in account {} with {parameter}={value}",
            member.account
        )
    };
    match (outputs.get("HubEventBusArn"), hub.bus) {
        (Some(found), Some(bus)) if found == bus => f.ok(format!("forwards to {bus}")),
        (found, Some(bus)) => f.problem(
            format!(
                "it forwards to {}, not this hub's central bus {bus}",
                found.map_or("(no HubEventBusArn output)", String::as_str)
            ),
            update("HubEventBusArn", bus),
        ),
        // The missing central bus is hub-bus-policy's finding.
        (_, None) => {}
    }
    match outputs.get("QueuePrefix") {
        Some(prefix) if *prefix == hub.queue_prefix => {
            f.ok(format!("QueuePrefix {prefix} as the router's"))
        }
        found => f.problem(
            format!(
                "its QueuePrefix is {}, but the router names queues {}<cluster>: it cannot send to \
                 this account's tenant queues",
                found.map_or("missing", String::as_str),
                hub.queue_prefix
            ),
            format!(
                "{}, then update its tenant stacks (they import it)",
                update("QueuePrefix", &hub.queue_prefix)
            ),
        ),
    }
    match outputs
        .get("RegionRouterRoleArn")
        .or(outputs.get("RouterRoleArn"))
    {
        Some(role) if *role == hub.spoke_role_arn => {
            f.ok("exports the spoke role for tenant queue policies")
        }
        found => f.problem(
            format!(
                "it exports RouterRoleArn {} for tenant queue policies, but the router assumes \
                 {}",
                found.map_or("(none)", String::as_str),
                hub.spoke_role_arn
            ),
            update("SpokeRoleName", hub.spoke_role_name),
        ),
    }
    let resources = match stack::resources(aws, stack_name).await {
        Ok(r) => r,
        Err(problem) => {
            f.problem(
                problem,
                "run verify with cloudformation:DescribeStackResources in the member account",
            );
            Default::default()
        }
    };
    checks.push(f.into_check(name));
    Some(Spoke { resources })
}
