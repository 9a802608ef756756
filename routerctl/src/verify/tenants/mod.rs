//! `tenant:<cluster>:queue`, `:record`, `:encryption`, `:queue-policy`, `:router-role`,
//! `:karpenter-role`, `:read`, `:key`: each cluster's Karpenter queue (from `--cluster`, or every
//! queue the router's naming template matches) exists and is the tenant stack's (not another
//! tool's queue of the same name, which the router does not write), has its tenant record beside
//! it (without it a queue deleted by hand pages nobody), is encrypted, admits the router's role as
//! its only sender (the policy tenant.yaml renders is the fix), the role may send to it and read
//! its record, the cluster's Karpenter controller role may read it (Karpenter's getting-started
//! controller policy allows only the queue it created itself, named after the cluster), and
//! someone does: nothing in it is older than a minute.
//!
//! One set of checks for every [`Site`]: the hub's account (the sender is the router role) and each
//! member account (`spoke:<account>:tenant:<cluster>:…`, the sender is the spoke role, and the
//! `:router-role` check is `:spoke-role`).

mod karpenter;
mod reading;
mod site;
#[cfg(test)]
mod tests;

use crate::deployment::{Base, Queue, Role, load_queue};
use router_core::{
    config::{Config, QueueNameTemplate},
    tenancy,
};

use super::{
    keys,
    queues::{encryption, set_policy_command},
    report::{Check, fail, pass},
};
use crate::{
    check::{self, Expect},
    cloud::{Cloud, missing},
};
use aws_model::policy::{Decision, Policy};

pub(crate) use self::karpenter::check_karpenter_role;
pub(crate) use self::karpenter::tenant_stack_parameter;
pub use self::reading::ROUTER_QUEUE_ACTIONS;
pub(crate) use self::reading::{check_ownership, check_read};
pub(crate) use self::site::{Place, Site};
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

/// Every cluster's queue at `site`: the named `clusters`, else every queue the template matches
/// (`own`, the base stack's own queues, left out).
#[allow(clippy::too_many_arguments)]
pub(super) async fn check(
    aws: &impl Cloud,
    site: &Site<'_>,
    template: &QueueNameTemplate,
    role: Option<&Role>,
    own: &[&str],
    clusters: &[String],
    karpenter_roles: &[(String, String)],
    checks: &mut Vec<Check>,
) {
    let clusters = if clusters.is_empty() {
        match discover_clusters(aws, template, own).await {
            // A hub that serves other accounts may run no cluster of its own: its queues are
            // the members', each checked with --account.
            Ok(found) if found.is_empty() && site.serves_others => {
                checks.push(pass(
                    &site.name("tenants"),
                    format!(
                        "no queue named {}… in {}: this account runs no onboarded cluster here; \
                         the router serves other accounts (verify each with --account <id>)",
                        template.prefix(),
                        site.region
                    ),
                ));
                return;
            }
            Ok(found) if found.is_empty() => {
                checks.push(fail(
                    &site.name("tenants"),
                    site.nowhere(template.prefix()),
                    site.deploy_any(),
                ));
                return;
            }
            Ok(found) => found,
            Err(problem) => {
                checks.push(fail(
                    &site.name("tenants"),
                    problem,
                    "run verify with sqs:ListQueues, or name the clusters with --cluster",
                ));
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
        check_tenant(aws, site, template, cluster, role, karpenter, checks).await;
    }
}

/// Clusters whose queues exist under the router's naming, leaving out the stack's own queues.
pub(super) async fn discover_clusters(
    aws: &impl Cloud,
    template: &QueueNameTemplate,
    own: &[&str],
) -> Result<Vec<String>, String> {
    let mut clusters = Vec::new();
    let urls = aws
        .queue_urls(template.prefix())
        .await
        .map_err(|e| format!("ListQueues: {e}"))?;
    for url in &urls {
        let name = url.rsplit('/').next().unwrap_or_default();
        if own.contains(&name) {
            continue;
        }
        if let Some(cluster) = cluster_of(template, name) {
            clusters.push(cluster);
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
    aws: &impl Cloud,
    site: &Site<'_>,
    template: &QueueNameTemplate,
    cluster: &str,
    role: Option<&Role>,
    karpenter_role: Option<&str>,
    checks: &mut Vec<Check>,
) {
    let region = site.region;
    let prefix = site.name(&format!("tenant:{cluster}"));
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
    let deploy = site.deploy(cluster);
    let arn = format!(
        "arn:{}:sqs:{region}:{}:{name}",
        site.partition, site.account
    );
    let record = tenant_record(aws, &name).await;
    match load_queue(aws, &name).await {
        Err(problem) => checks.push(fail(
            &format!("{prefix}:queue"),
            match record {
                Ok(true) => format!(
                    "{problem}, while its tenant record stands: the router dead-letters every \
                     event for {cluster} (queue-missing)"
                ),
                _ => format!(
                    "{problem}, and it has no tenant record: the router counts {cluster} as not \
                     onboarded and delivers nothing to it"
                ),
            },
            match record {
                // The stack stands without its queue: an update would not bring it back.
                Ok(true) => format!(
                    "the queue was deleted outside its tenant stack, which an update does not \
                     repair: delete the tenant stack and {deploy}"
                ),
                _ => format!("{deploy} (its QueuePrefix must equal the router's)"),
            },
        )),
        Ok(queue) => {
            let owned = check_ownership(aws, &queue, cluster, site.sender, &prefix).await;
            let foreign = !owned.passed;
            checks.push(owned);
            if foreign {
                // Another tool's queue: its policy and grants are that tool's business.
                return;
            }
            checks.push(check_record(&record, &name, cluster, &prefix, &deploy));
            checks.push(check::evaluate(
                format!("{prefix}:encryption"),
                [encryption(&queue, region)],
            ));
            // Karpenter's controller role, whom the queue's policy lets alone read.
            let reader = match karpenter_role {
                Some(role) => Some(role.to_owned()),
                None => tenant_stack_parameter(aws, site, cluster, &queue.url, "KarpenterRoleName")
                    .await
                    .filter(|r| !r.is_empty()),
            };
            if let Some(role_arn) = site.sender {
                let sender = Sender {
                    label: site.sender_label(),
                    role_arn,
                    account: site.account,
                    partition: site.partition,
                    wrong_role_fix: site.wrong_sender(role_arn),
                };
                checks.push(check_queue_policy(
                    &queue,
                    &sender,
                    reader.as_deref(),
                    region,
                    &format!("{prefix}:queue-policy"),
                    &site.redeploy(cluster),
                ));
            }
            checks.push(
                check_karpenter_role(aws, site, cluster, &queue, karpenter_role, &prefix).await,
            );
            checks.push(check_read(aws, &queue, cluster, reader.as_deref(), &prefix).await);
            // Karpenter's role is read again only for a queue under a KMS key.
            let keyed = queue.attribute("KmsMasterKeyId").is_some();
            let karpenter = match &reader {
                Some(name) if keyed => {
                    let arn = format!("arn:{}:iam::{}:role/{name}", site.partition, site.account);
                    aws.role(&arn).await.ok()
                }
                _ => None,
            };
            let mut users = Vec::new();
            let sender_role = format!("the {} role", site.sender_label().trim_end_matches(" role"));
            if let Some(role) = role {
                users.push(keys::KeyUser::Role {
                    what: &sender_role,
                    identity: role.identity(),
                    actions: keys::PRODUCE,
                });
            }
            if let Some(karpenter) = &karpenter {
                users.push(keys::KeyUser::Role {
                    what: "Karpenter's controller role",
                    identity: karpenter.identity(),
                    actions: keys::CONSUME,
                });
            }
            let name = format!("{prefix}:key");
            // An organisation's key: the statements its policy needs, as tenant.yaml writes them
            // into a key of its own for this sender.
            let kms_key = tenant_stack_parameter(aws, site, cluster, &queue.url, "KmsKey").await;
            let given = match (keys::is_given(kms_key.as_deref()), role) {
                (true, Some(role)) => aws_model::documents::key_statements(
                    aws_model::documents::KeyedStack::Tenant,
                    site.account,
                    site.region,
                    role.identity().arn,
                )
                .ok(),
                _ => None,
            };
            let owner = match &given {
                Some(statements) => keys::Owner::Given(statements),
                None => keys::Owner::Stack,
            };
            if let Some(check) =
                keys::check(aws, &queue, &users, &name, &site.redeploy(cluster), owner).await
            {
                checks.push(check);
            }
        }
    }
    if let Some(role) = role {
        checks.push(check_sender_may(role, site, &arn, &name, &prefix));
    }
}

/// Whether the tenant record of the queue named `queue` exists (`Err`: it could not be read).
pub(crate) async fn tenant_record(aws: &impl Cloud, queue: &str) -> Result<bool, String> {
    let name = tenancy::record_name(queue);
    match aws.parameter(&name).await {
        Ok(_) => Ok(true),
        Err(e) if e.code == missing::PARAMETER => Ok(false),
        Err(e) => Err(format!("GetParameter {name}: {e}")),
    }
}

/// `<prefix>:record`: the tenant record beside the queue, which tells the router a queue deleted
/// by hand was lost (it pages) rather than that the cluster left (it counts).
pub(crate) fn check_record(
    record: &Result<bool, String>,
    queue: &str,
    cluster: &str,
    prefix: &str,
    deploy: &str,
) -> Check {
    let name = tenancy::record_name(queue);
    check::evaluate(
        format!("{prefix}:record"),
        [match record {
            Ok(true) => Expect::found(format!(
                "{name} stands: if {queue} is deleted by hand, {cluster}'s events are \
                 dead-lettered (queue-missing), which pages"
            )),
            Ok(false) => Expect::problem(
                format!(
                    "no tenant record {name}: if {queue} is deleted by hand, the router counts \
                     {cluster} as not onboarded and pages nobody"
                ),
                format!("update the tenant stack, which writes it (TenantRecord): {deploy}"),
            ),
            Err(problem) => Expect::problem(
                problem.clone(),
                "run verify with ssm:GetParameter on /interruption-router/tenant-queues/*",
            ),
        }],
    )
}

/// `<prefix>:router-role` (`:spoke-role` in a member): the sender's own policies let it do to the
/// cluster's queue (`arn`, named `queue`) what the router does, and read its tenant record.
fn check_sender_may(role: &Role, site: &Site<'_>, arn: &str, queue: &str, prefix: &str) -> Check {
    let mut refused = Vec::new();
    let mut statements = Vec::new();
    for (action, statement) in ROUTER_QUEUE_ACTIONS {
        let d = role.may(action, arn);
        if d.is_allowed() {
            continue;
        }
        refused.push(format!("{action} ({d})"));
        if !statements.contains(&statement) {
            statements.push(statement);
        }
    }
    // Its tenant record, read when the queue is missing.
    let record = format!(
        "arn:{}:ssm:{}:{}:parameter{}",
        site.partition,
        site.region,
        site.account,
        tenancy::record_name(queue)
    );
    let d = role.may("ssm:GetParameter", &record);
    if !d.is_allowed() {
        refused.push(format!("ssm:GetParameter on its tenant record ({d})"));
        statements.push("ReadTenantRecords");
    }

    // Expect → what was found → the fix.
    check::evaluate(
        format!("{prefix}:{}", site.sender_check()),
        [Expect::that(
            refused.is_empty(),
            format!(
                "{} may {} on {queue}, and read its tenant record",
                role.name(),
                ROUTER_QUEUE_ACTIONS.map(|(a, _)| a).join(", ")
            ),
        )
        .otherwise(
            format!("{} may not {} on {queue}", role.name(), refused.join(", ")),
            site.sender_reach(&statements.join(" and ")),
        )],
    )
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
    check_queue_policy(queue, sender, None, region, name, deploy)
}

/// As [`check_tenant_policy`], and when Karpenter's controller role is known (`reader`, a role
/// name: the tenant stack's `KarpenterRoleName`, or `--karpenter-role`), that the policy denies
/// every other principal receiving (tenant.yaml's DenyReadersOtherThanKarpenter): another reader
/// would take the cluster's interruptions.
pub(crate) fn check_queue_policy(
    queue: &Queue,
    sender: &Sender<'_>,
    reader: Option<&str>,
    region: &str,
    name: &str,
    deploy: &str,
) -> Check {
    let role_arn = sender.role_arn;
    // tenant.yaml's policy for this queue, sender and reader, as the stack would put it back.
    let restore =
        match aws_model::documents::tenant_queue_policy_read_by(&queue.arn, role_arn, reader) {
            Ok(policy) => format!(
                "{deploy}; or restore the policy now: {}",
                set_policy_command(region, &queue.url, &policy)
            ),
            Err(e) => format!("{deploy} (tenant.yaml's policy could not be rendered here: {e:#})"),
        };
    // Where: the queue's policy.
    let policy = queue
        .attribute("Policy")
        .ok_or_else(|| {
            format!(
                "{} has no queue policy: it does not grant the {}, and any principal in the \
                 account with sqs:SendMessage can write a fake interruption",
                queue.name, sender.label
            )
        })
        .and_then(|text| Policy::parse("queue policy", text));
    let policy = match &policy {
        Ok(policy) => policy,
        Err(_) => return check::evaluate(name, [Expect::lookup(&policy, restore)]),
    };
    let decide = |principal: &str| queue.decision(policy, principal, "sqs:SendMessage");
    let sender_may = decide(role_arn);
    let other = format!(
        "arn:{}:iam::{}:role/routerctl-verify-probe",
        sender.partition, sender.account
    );
    let other_may = decide(&other);
    let other_reads = queue.decision(policy, &other, "sqs:ReceiveMessage");
    let readers = reader.map(|role| {
        Expect::that(
            matches!(other_reads, Decision::Denied { .. }),
            format!("other readers than {role} denied"),
        )
        .otherwise(
            format!(
                "other principals in the account are not denied sqs:ReceiveMessage \
                 ({other_reads}): anyone allowed it by their own policies takes the cluster's \
                 interruptions (Karpenter deletes what it reads), and only {role} should \
                 (statement DenyReadersOtherThanKarpenter)"
            ),
            restore.clone(),
        )
    });

    // Expect → what was found → the fix.
    check::evaluate(
        name,
        [
            Expect::that(
                matches!(sender_may, Decision::Allowed { .. }),
                format!("{} {sender_may}", sender.label),
            )
            .otherwise(
                format!(
                    "the {} role {role_arn} is {sender_may} (a principal shown as AROA… is a \
                     deleted role)",
                    sender.label.trim_end_matches(" role")
                ),
                format!("{}; {restore}", sender.wrong_role_fix),
            ),
            Expect::that(
                matches!(other_may, Decision::Denied { .. }),
                "other senders denied",
            )
            .otherwise(
                format!(
                    "other principals in the account are not denied ({other_may}): anyone with \
                     sqs:SendMessage can write a fake interruption and drain a node"
                ),
                restore,
            ),
        ]
        .into_iter()
        .chain(readers),
    )
}
