//! `spoke:<account>:tenant:<cluster>:…`: every cluster queue in the member account is encrypted,
//! admits the spoke role as its only sender, and the role may send to it.

use interruption_router::config::QueueNameTemplate;

use super::{Hub, Member};
use crate::check::{self, Expect};
use crate::verify::{
    keys,
    queues::{encryption, load_queue},
    report::{Check, fail},
    role::Role,
    tenants::{
        Sender, check_ownership, check_read, check_record, check_tenant_policy, discover_clusters,
        tenant_record, tenant_stack_parameter,
    },
};
use aws_model::aws::Aws;

pub(super) async fn check_tenants(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    template: &QueueNameTemplate,
    role: Option<&Role>,
    checks: &mut Vec<Check>,
) {
    let account = member.account;
    let region = hub.region;
    let deploy = format!(
        "deploy cloudformation/tenant.yaml per cluster in account {account}, region {region} \
         (make deploy-tenant CLUSTER=<name> REGION={region} with that account's credentials): it \
         imports the spoke role and QueuePrefix the spoke stack {} exports for the region",
        member.spoke_stack
    );
    let clusters = match discover_clusters(aws, template, &[]).await {
        Ok(found) if found.is_empty() => {
            checks.push(fail(
                &hub.name("tenants"),
                format!(
                    "no queue named {}… in account {account}, {region}: the router has nowhere \
                     to deliver this account's events",
                    template.prefix()
                ),
                deploy,
            ));
            return;
        }
        Ok(found) => found,
        Err(problem) => {
            checks.push(fail(
                &hub.name("tenants"),
                problem,
                "run verify with sqs:ListQueues in the member account",
            ));
            return;
        }
    };
    for cluster in &clusters {
        let prefix = format!("tenant:{cluster}");
        let Some(queue_name) = template.queue_name(cluster) else {
            continue;
        };
        let queue = match load_queue(aws, &queue_name).await {
            Ok(q) => q,
            Err(problem) => {
                checks.push(fail(
                    &hub.name(&format!("{prefix}:queue")),
                    problem,
                    &deploy,
                ));
                continue;
            }
        };
        let owned = check_ownership(
            aws,
            &queue,
            cluster,
            Some(&hub.spoke_role_arn),
            &hub.name(&prefix),
        )
        .await;
        let foreign = !owned.passed;
        checks.push(owned);
        if foreign {
            continue;
        }
        checks.push(check_record(
            &tenant_record(aws, &queue_name).await,
            &queue_name,
            cluster,
            &hub.name(&prefix),
            &deploy,
        ));
        checks.push(check::evaluate(
            hub.name(&format!("{prefix}:encryption")),
            [encryption(&queue, region)],
        ));
        let sender = Sender {
            label: "spoke role",
            role_arn: &hub.spoke_role_arn,
            account,
            partition: &hub.base.partition,
            wrong_role_fix: format!(
                "the policy must name the spoke role: update the tenant stack with BaseStackName \
                 empty (it then imports the spoke role the spoke stack {} exports for the region) \
                 or RouterRoleArn={}",
                member.spoke_stack, hub.spoke_role_arn
            ),
        };
        checks.push(check_tenant_policy(
            &queue,
            &sender,
            region,
            &hub.name(&format!("{prefix}:queue-policy")),
            &format!(
                "re-deploy the tenant stack of {cluster} in account {account} with BaseStackName \
                 empty (it imports what the spoke stack {} exports for the region)",
                member.spoke_stack
            ),
        ));
        if let Some(role) = role {
            let d = role.may("sqs:SendMessage", &queue.arn);
            checks.push(check::evaluate(
                hub.name(&format!("{prefix}:spoke-role")),
                [Expect::that(
                    d.is_allowed(),
                    format!("{} may send to {queue_name} ({d})", role.name()),
                )
                .otherwise(
                    format!(
                        "{} may not sqs:SendMessage to {queue_name}: {d}",
                        role.name()
                    ),
                    format!(
                        "the spoke role may send to <QueuePrefix>* only: deploy the tenant stack \
                         with BaseStackName empty, so it imports the spoke stack {}'s QueuePrefix \
                         ({}), or restore the role's SendToClusterQueues statement",
                        member.spoke_stack, hub.queue_prefix
                    ),
                )],
            ));
        }
        let karpenter_role =
            tenant_stack_parameter(aws, hub.base, cluster, &queue.url, "KarpenterRoleName")
                .await
                .filter(|r| !r.is_empty());
        let redeploy = format!(
            "update the tenant stack of {cluster} with account {account}'s credentials: make \
             deploy-tenant CLUSTER={cluster} REGION={region}"
        );
        let key_name = hub.name(&format!("{prefix}:key"));
        let key = keys::check_member_tenant(
            aws,
            &queue,
            role,
            karpenter_role.as_deref(),
            &key_name,
            &redeploy,
        );
        if let Some(check) = key.await {
            checks.push(check);
        }
        checks.push(check_read(aws, &queue, cluster, None, &hub.name(&prefix)).await);
    }
}
