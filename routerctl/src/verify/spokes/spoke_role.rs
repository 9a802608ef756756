//! `spoke:<account>:role-trust` and `:role-permissions`: the spoke role trusts only the hub's
//! router role and may exactly what the router needs in the account.

use super::hub_bus::STRANGER;
use super::{Hub, Member};
use crate::check::{self, Expect};
use crate::verify::{
    report::{Check, fail, pasted},
    role::Role,
};
use aws_model::policy::{Decision, Principal, Request, evaluate};

pub(super) fn check_role_trust(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let name = hub.name("role-trust");
    let base = hub.base;
    let Some(router) = hub.router_role else {
        return fail(
            &name,
            "the base stack has no RouterRoleArn output: the role the spoke must trust is unknown",
            "update the base stack with this project's cloudformation/base.yaml",
        );
    };
    let restore = format!(
        "update the spoke stack {} in account {} with RouterRoleArn={router} (in the region that \
         creates the role), or put the trust back: aws iam update-assume-role-policy --role-name \
         {} --policy-document '{}'",
        member.spoke_stack,
        member.account,
        role.name(),
        pasted(aws_model::documents::spoke_trust_policy(router))
    );
    let trust = match &role.trust {
        Ok(t) => t,
        Err(e) => return fail(&name, e.clone(), restore),
    };
    let decide = |principal: Principal<'_>| {
        let (arn, account) = match principal {
            Principal::Aws(arn) => (arn, aws_model::aws::arn_account(arn).unwrap_or_default()),
            _ => ("", ""),
        };
        let context = [("aws:PrincipalArn", arn), ("aws:PrincipalAccount", account)];
        evaluate(
            std::slice::from_ref(trust),
            &Request {
                principal,
                action: "sts:AssumeRole",
                resource: &role.arn,
                context: if arn.is_empty() { &[] } else { &context },
            },
        )
    };
    let router_may = decide(Principal::Aws(router));
    let probe = |account: &str| {
        format!(
            "arn:{}:iam::{account}:role/routerctl-verify-probe",
            base.partition
        )
    };
    let others = [
        (probe(&base.account), "another role of the hub account"),
        (probe(member.account), "a role of this account"),
        (probe(STRANGER), "a role of another account"),
    ];
    let refused = |d: &Decision| matches!(d, Decision::NotAllowed | Decision::Denied { .. });
    let admitted: Vec<String> = others
        .iter()
        .map(|(arn, what)| (decide(Principal::Aws(arn)), what.to_string()))
        .chain(
            ["lambda.amazonaws.com", "ec2.amazonaws.com"]
                .map(|service| (decide(Principal::Service(service)), service.to_owned())),
        )
        .filter(|(d, _)| !refused(d))
        .map(|(d, what)| format!("{what} ({d})"))
        .collect();
    check::evaluate(
        name,
        [
            Expect::that(
                router_may.is_allowed(),
                format!("the hub's router role may assume it ({router_may})"),
            )
            .otherwise(
                format!(
                    "the hub's router role {router} may not assume {} ({router_may}): the router \
                     cannot reach {}",
                    role.name(),
                    member.account
                ),
                restore.clone(),
            ),
            Expect::that(admitted.is_empty(), "no other principal may").otherwise(
                format!(
                    "it also admits {}: they could look up instances and write fake \
                     interruptions to this account's clusters",
                    admitted.join(", ")
                ),
                restore,
            ),
        ],
    )
}

pub(super) fn check_role_permissions(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let name = hub.name("role-permissions");
    let base = hub.base;
    let account = member.account;
    let queue = |name: &str| format!("arn:{}:sqs:{}:{account}:{name}", base.partition, hub.region);
    let cluster_queue = queue(&format!("{}routerctl-verify-probe", hub.queue_prefix));
    // Its tenant record (router/src/tenancy.rs): whether a missing queue was onboarded.
    let record = format!(
        "arn:{}:ssm:{}:{account}:parameter/interruption-router/tenant-queues/{}routerctl-verify-probe",
        base.partition, hub.region, hub.queue_prefix
    );
    let other_parameter = format!(
        "arn:{}:ssm:{}:{account}:parameter/routerctl-verify-probe",
        base.partition, hub.region
    );
    let restore = format!(
        "update the spoke stack that creates the role (CreateSpokeRole=true) in account {account}, \
         and remove policies that grant more (aws iam list-role-policies / \
         list-attached-role-policies --role-name {role_name}); or put the policy back: aws iam \
         put-role-policy --role-name {role_name} --policy-name interruption-router-spoke \
         --policy-document '{}'",
        pasted(aws_model::documents::spoke_role_policy(
            account,
            hub.region,
            &hub.queue_prefix
        )),
        role_name = role.name()
    );
    let needed = [
        ("ec2:DescribeInstances", "*"),
        ("tag:GetResources", "*"),
        ("sqs:GetQueueUrl", cluster_queue.as_str()),
        ("sqs:SendMessage", cluster_queue.as_str()),
        // Whether a queue with a cluster's name is a tenant queue (router/src/tenancy.rs).
        ("sqs:ListQueueTags", cluster_queue.as_str()),
        ("sqs:GetQueueAttributes", cluster_queue.as_str()),
        ("ssm:GetParameter", record.as_str()),
    ];
    let outside = queue("routerctl-verify-probe");
    let broader = [
        ("sqs:ReceiveMessage", cluster_queue.as_str()),
        ("sqs:DeleteMessage", cluster_queue.as_str()),
        ("sqs:PurgeQueue", cluster_queue.as_str()),
        ("sqs:SetQueueAttributes", cluster_queue.as_str()),
        ("sqs:SendMessage", outside.as_str()),
        ("ssm:GetParameter", other_parameter.as_str()),
        ("ssm:PutParameter", record.as_str()),
        ("ec2:TerminateInstances", "*"),
        ("ec2:RunInstances", "*"),
        ("ec2:CreateTags", "*"),
        ("tag:TagResources", "*"),
        ("iam:PassRole", "*"),
        ("sts:AssumeRole", "*"),
        ("s3:GetObject", "*"),
    ];
    let missing: Vec<String> = needed
        .iter()
        .filter_map(|(action, resource)| {
            let d = role.may(action, resource);
            (!d.is_allowed()).then(|| format!("{action} on {resource} ({d})"))
        })
        .collect();
    let extra: Vec<String> = broader
        .iter()
        .filter_map(|(action, resource)| {
            let d = role.may(action, resource);
            d.is_allowed().then(|| {
                let on = if *resource == "*" {
                    String::new()
                } else {
                    format!(" on {}", aws_model::aws::arn_name(resource))
                };
                format!("{action}{on} ({d})")
            })
        })
        .collect();
    let role_name = role.name();
    check::evaluate(
        name,
        [
            Expect::that(
                missing.is_empty(),
                format!(
                    "{role_name} may ec2:DescribeInstances and tag:GetResources, \
                     sqs:GetQueueUrl, sqs:SendMessage, sqs:ListQueueTags and \
                     sqs:GetQueueAttributes on {prefix}*, ssm:GetParameter on the tenant records \
                     /interruption-router/tenant-queues/{prefix}*",
                    prefix = hub.queue_prefix
                ),
            )
            .otherwise(
                format!(
                    "{role_name} may not {}: the router cannot route this account's events",
                    missing.join(", ")
                ),
                restore.clone(),
            ),
            Expect::that(extra.is_empty(), "nothing broader").otherwise(
                format!(
                    "{role_name} may also {}: more than the router needs, to a role another \
                     account assumes",
                    extra.join(", ")
                ),
                restore,
            ),
        ],
    )
}
