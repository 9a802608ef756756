//! `tenant:<cluster>:karpenter-role`: Karpenter's controller role may receive and delete from its
//! cluster's tenant queue.

use super::Site;
use crate::deployment::Queue;
use crate::{
    check::{self, Expect},
    cloud::{Cloud, role_fix},
    verify::report::{Check, fail},
};
use aws_model::policy::{Decision, Policy};

/// What Karpenter's interruption controller does with its queue (Karpenter's own controller
/// policy, statement AllowInterruptionQueueActions).
pub const KARPENTER_QUEUE_ACTIONS: [&str; 3] =
    ["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"];

/// `tenant:<cluster>:karpenter-role`: the cluster's Karpenter controller role may read its queue.
/// The role is `--karpenter-role <cluster>=<role>`, else the tenant stack's KarpenterRoleName
/// (the stack that created the queue, or `make deploy-tenant`'s stack name).
pub(crate) async fn check_karpenter_role(
    aws: &impl Cloud,
    site: &Site<'_>,
    cluster: &str,
    queue: &Queue,
    given: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:karpenter-role");
    let name_it = format!(
        "name Karpenter's controller role: {} KARPENTER_ROLE=<its role name> (the tenant stack \
         then grants {} on {}), or, when the role's own policies already grant them, routerctl \
         verify --karpenter-role {cluster}=<its role name>",
        site.command(cluster),
        KARPENTER_QUEUE_ACTIONS.join(", "),
        queue.name
    );
    let role_name = match given {
        Some(role) => role.to_owned(),
        None => match tenant_stack_parameter(aws, site, cluster, &queue.url, "KarpenterRoleName")
            .await
        {
            Some(role) if !role.is_empty() => role,
            _ => {
                return fail(
                    &name,
                    format!(
                        "no Karpenter controller role is named for {cluster}: Karpenter's \
                         getting-started controller policy allows only the queue it created \
                         itself, so its controller gets AccessDenied on {} and handles no \
                         interruption",
                        queue.name
                    ),
                    name_it,
                );
            }
        },
    };
    let arn = format!(
        "arn:{}:iam::{}:role/{role_name}",
        site.partition, site.account
    );
    let role = match aws.role(&arn).await {
        Ok(role) => role,
        Err(e) => {
            return fail(
                &name,
                e.to_string(),
                format!("{}; or {name_it}", role_fix(&e)),
            );
        }
    };
    let policy = queue
        .attribute("Policy")
        .and_then(|text| Policy::parse("queue policy", text).ok());
    let mut refused = Vec::new();
    for action in KARPENTER_QUEUE_ACTIONS {
        let mut decision = role.may(action, &queue.arn);
        // The queue policy may deny it (it denies plain HTTP only, which Karpenter never uses).
        if let (true, Some(policy)) = (decision.is_allowed(), &policy) {
            let by_queue = queue.decision(policy, &arn, action);
            if let Decision::Denied { .. } = by_queue {
                decision = by_queue;
            }
        }
        if !decision.is_allowed() {
            refused.push(format!("{action} ({decision})"));
        }
    }

    // Expect → what was found → the fix.
    check::evaluate(
        name,
        [Expect::that(
            refused.is_empty(),
            format!(
                "{role_name} may {} on {}",
                KARPENTER_QUEUE_ACTIONS.join(", "),
                queue.name
            ),
        )
        .otherwise(
            format!(
                "Karpenter's controller role {role_name} may not {} on {}: Karpenter gets \
                 AccessDenied and handles no interruption",
                refused.join(", "),
                queue.name
            ),
            format!(
                "{} KARPENTER_ROLE={role_name}, which grants exactly these on this queue",
                site.command(cluster)
            ),
        )],
    )
}

/// A parameter of the tenant stack that created the queue at `queue_url`: the stack CloudFormation
/// names for that physical resource, else the first of the names `make deploy-tenant` (and the
/// site's conventions) give the cluster's stack that exists ([`Site::tenant_stacks`]), which is
/// also where a caller refused DescribeStackResources looks.
pub(crate) async fn tenant_stack_parameter(
    aws: &impl Cloud,
    site: &Site<'_>,
    cluster: &str,
    queue_url: &str,
    key: &str,
) -> Option<String> {
    // Refused DescribeStackResources, the stack is looked for by the names it would have.
    let owner = aws.stack_of(queue_url).await.ok().flatten();
    for stack in owner.into_iter().chain(site.tenant_stacks(cluster)) {
        if let Ok(mut found) = aws.stack(&stack).await {
            return found.parameters.remove(key);
        }
    }
    None
}
