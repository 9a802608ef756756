//! `tenant:<cluster>:queue`, `:encryption`, `:queue-policy`, `:router-role`, `:karpenter-role`,
//! `:read`: each cluster's Karpenter queue (from `--cluster`, or every queue the router's naming
//! template matches) exists and is the tenant stack's (not another tool's queue of the same name,
//! which the router does not write), is encrypted, admits the router role as its only sender, the
//! role may send to it, the cluster's Karpenter controller role may read it (Karpenter's
//! getting-started controller policy allows only the queue it created itself, named after the
//! cluster), and someone does: nothing in it is older than a minute. The queue-policy, ownership
//! and read checks and the discovery are shared with the member accounts (`spokes.rs`), where the
//! sender is the spoke role.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use interruption_router::{
    config::{Config, QueueNameTemplate},
    tenancy::{self, Ownership, TENANT_TAG},
};
use serde_json::{Value, json};

use super::{
    queues::{Queue, encryption, load_queue, set_policy_command},
    report::{Check, Findings, fail, pass},
    role::Role,
    stack::Base,
};
use aws_model::{
    aws::{Aws, arn_name, describe},
    policy::{Decision, Policy},
};

/// How the router names queues: the function's template; if the environment is broken, the
/// stack's QueuePrefix, so one mistake is reported once. `None` (with a failed `tenants` check)
/// when neither is known.
pub(super) fn template(
    base: &Base,
    config: Option<&Config>,
    checks: &mut Vec<Check>,
) -> Option<QueueNameTemplate> {
    let template = config.map(|c| c.queue_names.clone()).or_else(|| {
        QueueNameTemplate::parse(&format!("{}{{cluster}}", base.output("QueuePrefix")?)).ok()
    });
    if template.is_none() {
        checks.push(fail(
            "tenants",
            "no queue naming: the function environment is invalid and the stack has no QueuePrefix output",
            "fix function:environment first",
        ));
    }
    template
}

/// Every cluster's queue in the hub account: the named `clusters`, else every queue the template
/// matches (the stack's own queues left out).
pub(super) async fn check(
    aws: &Aws,
    base: &Base,
    template: &QueueNameTemplate,
    role: Option<&Role>,
    clusters: &[String],
    karpenter_roles: &[(String, String)],
    checks: &mut Vec<Check>,
) {
    let region = &aws.region;
    let own: Vec<&str> = [
        base.output("IngestQueueArn"),
        base.output("DeadLetterQueueArn"),
    ]
    .into_iter()
    .flatten()
    .map(arn_name)
    .collect();
    let clusters = if clusters.is_empty() {
        match discover_clusters(aws, template, &own).await {
            Ok(found) if found.is_empty() => {
                checks.push(fail(
                    "tenants",
                    format!(
                        "no queue named {}… in {region}: the router has nowhere to deliver",
                        template.prefix()
                    ),
                    format!(
                        "deploy cloudformation/tenant.yaml per cluster (make deploy-tenant \
                         CLUSTER=<name> REGION={region} STACK_NAME={}), or name clusters with --cluster",
                        base.name
                    ),
                ));
                return;
            }
            Ok(found) => found,
            Err(problem) => {
                checks.push(fail("tenants", problem, "name the clusters with --cluster"));
                return;
            }
        }
    } else {
        clusters.to_vec()
    };
    for cluster in &clusters {
        let karpenter = karpenter_roles
            .iter()
            .find(|(c, _)| c == cluster)
            .map(|(_, r)| r.as_str());
        check_tenant(aws, base, template, cluster, role, karpenter, checks).await;
    }
}

/// Clusters whose queues exist under the router's naming, leaving out the stack's own queues.
pub(super) async fn discover_clusters(
    aws: &Aws,
    template: &QueueNameTemplate,
    own: &[&str],
) -> Result<Vec<String>, String> {
    let mut clusters = Vec::new();
    let mut pages = aws
        .sqs
        .list_queues()
        .queue_name_prefix(template.prefix())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| format!("ListQueues: {}", describe(&e)))?;
        for url in page.queue_urls() {
            let name = url.rsplit('/').next().unwrap_or_default();
            if own.contains(&name) {
                continue;
            }
            if let Some(cluster) = cluster_of(template, name) {
                clusters.push(cluster);
            }
        }
    }
    clusters.sort();
    Ok(clusters)
}

/// The cluster a queue name belongs to under `template`, if any.
pub fn cluster_of(template: &QueueNameTemplate, queue: &str) -> Option<String> {
    let probe = template.queue_name("x")?;
    let suffix = &probe[template.prefix().len() + 1..];
    let cluster = queue
        .strip_prefix(template.prefix())?
        .strip_suffix(suffix)?;
    (template.queue_name(cluster).as_deref() == Some(queue)).then(|| cluster.to_owned())
}

async fn check_tenant(
    aws: &Aws,
    base: &Base,
    template: &QueueNameTemplate,
    cluster: &str,
    role: Option<&Role>,
    karpenter_role: Option<&str>,
    checks: &mut Vec<Check>,
) {
    let region = &aws.region;
    let prefix = format!("tenant:{cluster}");
    let Some(name) = template.queue_name(cluster) else {
        checks.push(fail(
            &format!("{prefix}:queue"),
            format!(
                "\"{cluster}\" cannot form an SQS queue name after {}",
                template.prefix()
            ),
            "cluster names used as queue names must be 1-80 letters, digits, '-' or '_' in total",
        ));
        return;
    };
    let deploy = format!(
        "deploy the tenant stack: make deploy-tenant CLUSTER={cluster} REGION={region} STACK_NAME={}",
        base.name
    );
    let arn = format!(
        "arn:{}:sqs:{region}:{}:{name}",
        base.partition, base.account
    );
    match load_queue(aws, &name).await {
        Err(problem) => checks.push(fail(
            &format!("{prefix}:queue"),
            format!("{problem}: the router dead-letters every event for {cluster}"),
            format!("{deploy} (its QueuePrefix must equal the base stack's)"),
        )),
        Ok(queue) => {
            let router_role = base.output("RouterRoleArn");
            let owned = check_ownership(aws, &queue, cluster, router_role, &prefix).await;
            let foreign = !owned.passed;
            checks.push(owned);
            if foreign {
                // Another tool's queue: its policy and grants are that tool's business.
                return;
            }
            let mut f = Findings::default();
            encryption(&queue, &mut f, region);
            checks.push(f.into_check(format!("{prefix}:encryption")));
            if let Some(role_arn) = router_role {
                let sender = Sender {
                    label: "router",
                    role_arn,
                    account: &base.account,
                    partition: &base.partition,
                    wrong_role_fix: format!(
                        "the policy must name the router role: update the tenant stack with \
                         BaseStackName empty (it then imports the router role the base stack {} \
                         exports for the region) or RouterRoleArn={role_arn}",
                        base.name
                    ),
                };
                checks.push(check_tenant_policy(
                    &queue,
                    &sender,
                    region,
                    &format!("{prefix}:queue-policy"),
                    &deploy,
                ));
            }
            checks.push(
                check_karpenter_role(aws, base, cluster, &queue, karpenter_role, &prefix).await,
            );
            let reader = match karpenter_role {
                Some(role) => Some(role.to_owned()),
                None => tenant_stack_parameter(aws, base, cluster, &queue.url, "KarpenterRoleName")
                    .await
                    .filter(|r| !r.is_empty()),
            };
            checks.push(check_read(aws, &queue, cluster, reader.as_deref(), &prefix).await);
        }
    }
    if let Some(role) = role {
        let mut f = Findings::default();
        let mut refused = Vec::new();
        let mut statements = Vec::new();
        for (action, statement) in ROUTER_QUEUE_ACTIONS {
            let d = role.may(action, &arn);
            if d.is_allowed() {
                continue;
            }
            refused.push(format!("{action} ({d})"));
            if !statements.contains(&statement) {
                statements.push(statement);
            }
        }
        if refused.is_empty() {
            f.ok(format!(
                "{} may {} on {name}",
                role.name(),
                ROUTER_QUEUE_ACTIONS.map(|(a, _)| a).join(", ")
            ));
        } else {
            f.problem(
                format!("{} may not {} on {name}", role.name(), refused.join(", ")),
                format!(
                    "the role may use <QueuePrefix>* only: give the tenant stack the base \
                     stack's QueuePrefix ({}), or restore the role's {} statement(s) (update the \
                     base stack)",
                    base.output("QueuePrefix")
                        .unwrap_or("see its QueuePrefix output"),
                    statements.join(" and ")
                ),
            );
        }
        checks.push(f.into_check(format!("{prefix}:router-role")));
    }
}

/// What the router does to a cluster queue, and base.yaml's statement that allows it: send, and
/// tell a tenant queue from a look-alike.
pub const ROUTER_QUEUE_ACTIONS: [(&str, &str); 4] = [
    ("sqs:GetQueueUrl", "SendToClusterQueues"),
    ("sqs:SendMessage", "SendToClusterQueues"),
    ("sqs:ListQueueTags", "ReadClusterQueueOwnership"),
    ("sqs:GetQueueAttributes", "ReadClusterQueueOwnership"),
];

/// `<prefix>:queue`: the queue with the cluster's name is the tenant stack's, as the router judges
/// it ([`interruption_router::tenancy`]): its tenant tag, or a policy admitting the router alone. A
/// look-alike (EKS Blueprints names its own queue `karpenter-<cluster>`) is not written by the
/// router, so the cluster is not onboarded.
pub(crate) async fn check_ownership(
    aws: &Aws,
    queue: &Queue,
    cluster: &str,
    sender: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:queue");
    let tags = match aws.sqs.list_queue_tags().queue_url(&queue.url).send().await {
        Ok(out) => out.tags().cloned().unwrap_or_default(),
        Err(e) => {
            return fail(
                &name,
                format!("ListQueueTags {}: {}", queue.name, describe(&e)),
                "run verify with sqs:ListQueueTags",
            );
        }
    };
    let judged = tenancy::by_tag(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), cluster)
        .unwrap_or_else(|| tenancy::by_policy(queue.attribute(QueueAttributeName::Policy), sender));
    match judged {
        Ownership::Tenant => pass(
            &name,
            format!("{} exists, tagged {TENANT_TAG}={cluster}", queue.name),
        ),
        Ownership::LegacyTenant => pass(
            &name,
            format!(
                "{} exists, made by a tenant stack from before the {TENANT_TAG} tag (its policy \
                 admits the router alone); updating the stack adds the tag",
                queue.name
            ),
        ),
        Ownership::Foreign(why) => fail(
            &name,
            format!(
                "{} exists but the tenant stack did not make it: {why}. It looks like another \
                 tool's queue (EKS Blueprints names its own karpenter-<cluster>); the router does \
                 not write it, so {cluster} is not onboarded (counted as NoTenantQueue.{cluster}, \
                 paging nobody)",
                queue.name
            ),
            format!(
                "routerctl adopt --cluster {cluster} plans the move: the router's queue needs a \
                 name no other tool uses"
            ),
        ),
    }
}

/// How old a message in a cluster's queue may be: Karpenter long-polls and deletes what it reads
/// within seconds; the tenant stack's alarm pages at the same age.
pub const UNREAD_AFTER: Duration = Duration::from_secs(60);

/// `<prefix>:read`: nothing in the queue is older than [`UNREAD_AFTER`]. One receive that hides
/// nothing (visibility 0) and looks at what comes back; Karpenter deletes whatever it reads,
/// however often it was received.
pub(crate) async fn check_read(
    aws: &Aws,
    queue: &Queue,
    cluster: &str,
    reader: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:read");
    let out = match aws
        .sqs
        .receive_message()
        .queue_url(&queue.url)
        .max_number_of_messages(10)
        .visibility_timeout(0)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                &name,
                format!("ReceiveMessage {}: {}", queue.name, describe(&e)),
                "run verify with sqs:ReceiveMessage on the cluster queues (it hides nothing: \
                 visibility 0)",
            );
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let oldest = out
        .messages()
        .iter()
        .filter_map(|m| {
            m.attributes()?
                .get(&MessageSystemAttributeName::SentTimestamp)?
                .parse::<u64>()
                .ok()
        })
        .map(|sent| Duration::from_millis(now.saturating_sub(sent)))
        .max();
    match oldest {
        Some(age) if age >= UNREAD_AFTER => fail(
            &name,
            format!(
                "{} holds a message {} s old: nobody reads it, and {cluster}'s Karpenter gets no \
                 interruption from the router (Karpenter deletes what it reads within seconds)",
                queue.name,
                age.as_secs()
            ),
            format!(
                "check {}: Karpenter's settings.interruptionQueue in cluster {cluster} (helm get \
                 values karpenter; or the Git repository Argo CD or Flux applies, which may have \
                 put an old value back), that its pods run, and that the role may still receive \
                 from and delete in {} (tenant:{cluster}:karpenter-role)",
                reader.map_or_else(
                    || "the Karpenter controller role (no tenant stack names it)".to_owned(),
                    |r| format!("the reader, role {r}")
                ),
                queue.name
            ),
        ),
        Some(age) => pass(
            &name,
            format!(
                "its oldest message is {} s old: someone reads it",
                age.as_secs()
            ),
        ),
        None => pass(&name, "empty: nothing waits unread"),
    }
}

/// What Karpenter's interruption controller does with its queue (Karpenter's own controller
/// policy, statement AllowInterruptionQueueActions).
pub const KARPENTER_QUEUE_ACTIONS: [&str; 3] =
    ["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"];

/// `tenant:<cluster>:karpenter-role`: the cluster's Karpenter controller role may read its queue.
/// The role is `--karpenter-role <cluster>=<role>`, else the tenant stack's KarpenterRoleName
/// (the stack that created the queue, or `make deploy-tenant`'s stack name).
pub(crate) async fn check_karpenter_role(
    aws: &Aws,
    base: &Base,
    cluster: &str,
    queue: &Queue,
    given: Option<&str>,
    prefix: &str,
) -> Check {
    let name = format!("{prefix}:karpenter-role");
    let region = &aws.region;
    let name_it = format!(
        "name Karpenter's controller role: make deploy-tenant CLUSTER={cluster} REGION={region} \
         STACK_NAME={} KARPENTER_ROLE=<its role name> (the tenant stack then grants {} on {}), or, \
         when the role's own policies already grant them, routerctl verify --karpenter-role \
         {cluster}=<its role name>",
        base.name,
        KARPENTER_QUEUE_ACTIONS.join(", "),
        queue.name
    );
    let role_name = match given {
        Some(role) => role.to_owned(),
        None => match tenant_stack_parameter(aws, base, cluster, &queue.url, "KarpenterRoleName")
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
        base.partition, base.account
    );
    let role = match super::role::load_role(aws, &arn).await {
        Ok(role) => role,
        Err((problem, fix)) => return fail(&name, problem, format!("{fix}; or {name_it}")),
    };
    let policy = queue
        .attribute(QueueAttributeName::Policy)
        .and_then(|text| Policy::parse("queue policy", text).ok());
    let mut f = Findings::default();
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
    if refused.is_empty() {
        f.ok(format!(
            "{role_name} may {} on {}",
            KARPENTER_QUEUE_ACTIONS.join(", "),
            queue.name
        ));
    } else {
        f.problem(
            format!(
                "Karpenter's controller role {role_name} may not {} on {}: Karpenter gets \
                 AccessDenied and handles no interruption",
                refused.join(", "),
                queue.name
            ),
            format!(
                "make deploy-tenant CLUSTER={cluster} REGION={region} STACK_NAME={} \
                 KARPENTER_ROLE={role_name}, which grants exactly these on this queue",
                base.name
            ),
        );
    }
    f.into_check(name)
}

/// A parameter of the tenant stack that created the queue at `queue_url`: the stack CloudFormation
/// names for that physical resource, or the one `make deploy-tenant` names for the cluster.
async fn tenant_stack_parameter(
    aws: &Aws,
    base: &Base,
    cluster: &str,
    queue_url: &str,
    key: &str,
) -> Option<String> {
    let owner = aws
        .cfn
        .describe_stack_resources()
        .physical_resource_id(queue_url)
        .send()
        .await
        .ok()
        .and_then(|out| {
            out.stack_resources()
                .first()
                .and_then(|r| r.stack_name())
                .map(str::to_owned)
        });
    let stack = owner.unwrap_or_else(|| aws_model::stacks::tenant_stack_name(&base.name, cluster));
    let described = aws
        .cfn
        .describe_stacks()
        .stack_name(&stack)
        .send()
        .await
        .ok()?;
    aws_model::stacks::parameters(described.stacks().first()?).remove(key)
}

/// The one principal a tenant queue must admit as sender: the hub's router role, or in a member
/// account the spoke role.
pub(crate) struct Sender<'a> {
    /// How the report calls it: `router`, `spoke role`.
    pub label: &'a str,
    pub role_arn: &'a str,
    /// The queue's account and partition.
    pub account: &'a str,
    pub partition: &'a str,
    /// What to do when the policy names another role.
    pub wrong_role_fix: String,
}

/// The tenant queue's policy lets the sender send, and denies every other sender.
pub(crate) fn check_tenant_policy(
    queue: &Queue,
    sender: &Sender<'_>,
    region: &str,
    name: &str,
    deploy: &str,
) -> Check {
    let role_arn = sender.role_arn;
    let restore = format!(
        "{deploy}; or restore the policy now: {}",
        set_policy_command(
            region,
            &queue.url,
            &tenant_queue_policy(&queue.arn, role_arn)
        )
    );
    let Some(text) = queue.attribute(QueueAttributeName::Policy) else {
        return fail(
            name,
            format!(
                "{} has no queue policy: it does not grant the {}, and any principal in the \
                 account with sqs:SendMessage can write a fake interruption",
                queue.name, sender.label
            ),
            restore,
        );
    };
    let policy = match Policy::parse("queue policy", text) {
        Ok(p) => p,
        Err(e) => return fail(name, e, restore),
    };
    let decide = |principal: &str| queue.decision(&policy, principal, "sqs:SendMessage");
    let mut f = Findings::default();
    match decide(role_arn) {
        d @ Decision::Allowed { .. } => f.ok(format!("{} {d}", sender.label)),
        d => f.problem(
            format!(
                "the {} role {role_arn} is {d} (a principal shown as AROA… is a deleted role)",
                sender.label.trim_end_matches(" role")
            ),
            format!("{}; {restore}", sender.wrong_role_fix),
        ),
    }
    let other = format!(
        "arn:{}:iam::{}:role/routerctl-verify-probe",
        sender.partition, sender.account
    );
    match decide(&other) {
        Decision::Denied { .. } => f.ok("other senders denied"),
        d => f.problem(
            format!(
                "other principals in the account are not denied ({d}): anyone with \
                 sqs:SendMessage can write a fake interruption and drain a node"
            ),
            restore,
        ),
    }
    f.into_check(name)
}

/// tenant.yaml's InterruptionQueuePolicy for these ARNs.
pub fn tenant_queue_policy(queue_arn: &str, router_role_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": router_role_arn},
         "Action": "sqs:SendMessage", "Resource": queue_arn},
        {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": router_role_arn}}},
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
         "Resource": queue_arn, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_queue_names_map_back_to_clusters() {
        let t = QueueNameTemplate::parse("karpenter-{cluster}").unwrap();
        assert_eq!(cluster_of(&t, "karpenter-alpha").as_deref(), Some("alpha"));
        assert_eq!(cluster_of(&t, "other-alpha"), None);
        assert_eq!(cluster_of(&t, "karpenter-"), None);
        let t = QueueNameTemplate::parse("{cluster}_interruptions").unwrap();
        assert_eq!(
            cluster_of(&t, "beta_interruptions").as_deref(),
            Some("beta")
        );
        assert_eq!(cluster_of(&t, "beta_other"), None);
    }
}
