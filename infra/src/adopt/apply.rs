//! What `--apply` and `--rollback` change in the account: one [`Change`] at a time, each checked
//! again against the account just before it is made (a queue that filled up since the plan is
//! not deleted), and each safe to run twice (a rule already disabled stays disabled; a stack that
//! already exists is reported, not re-created).

use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::types::QueueAttributeName;

use super::{
    discover::{Landscape, PROBE_TAG, RESUME_TAG, RETIRED_TAG, ROLLBACK_TAG, Switch},
    steps::{Change, helm_command},
};
use crate::{
    aws::{Aws, describe},
    events::rfc3339,
    simulate::{self, SimKind},
    stacks,
};

impl Change {
    /// What applying it does, in a sentence (the plan's "next" line).
    pub fn describe(&self) -> String {
        match self {
            Change::DeployTenant {
                stack,
                karpenter_role,
            } => format!(
                "deploys tenant stack {stack} (cloudformation/tenant.yaml) granting \
                 {karpenter_role} its queue"
            ),
            Change::GrantKarpenter {
                stack,
                karpenter_role,
            } => format!("updates tenant stack {stack} with KarpenterRoleName={karpenter_role}"),
            Change::Probe { node } => format!(
                "sends a probe through the router: a rebalance recommendation for {node}, which \
                 Karpenter reads and deletes without acting on it"
            ),
            Change::DisableRules(rules) => format!("disables {}", rules.join(", ")),
            Change::DeleteRules { rules, .. } => format!(
                "deletes {}",
                rules
                    .iter()
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Change::DeleteQueue { url } => format!("deletes {url}"),
        }
    }
}

/// Makes `change` for `cluster`; what was done, in a sentence.
pub async fn perform(
    aws: &Aws,
    land: &Landscape,
    cluster: &str,
    change: &Change,
) -> Result<String> {
    match change {
        Change::DeployTenant {
            stack,
            karpenter_role,
        } => {
            if stack_exists(aws, stack).await? {
                bail!(
                    "stack {stack} exists but its queue is not there: look at its events \
                     (aws cloudformation describe-stack-events --stack-name {stack}), delete it \
                     if it failed, and run adopt again"
                );
            }
            let mut parameters = vec![
                ("ClusterName", cluster),
                ("KarpenterRoleName", karpenter_role.as_str()),
            ];
            // The queue imports <RouterName>:… from the stack that connects this region.
            if let Some(router) = land.base.parameter("RouterName") {
                parameters.push(("RouterName", router));
            }
            let created =
                stacks::create(&aws.cfn, stack, stacks::TENANT_TEMPLATE, &parameters).await?;
            Ok(format!(
                "deployed {stack}: queue {}, which the router writes and {karpenter_role} may read",
                created.output("QueueName").unwrap_or("?")
            ))
        }
        Change::GrantKarpenter {
            stack,
            karpenter_role,
        } => {
            if !stack_exists(aws, stack).await? {
                bail!(
                    "the tenant queue was not made by stack {stack}: grant {karpenter_role} \
                     sqs:ReceiveMessage, sqs:DeleteMessage, sqs:GetQueueUrl and \
                     sqs:GetQueueAttributes on it where the queue is defined, then run adopt again"
                );
            }
            stacks::update(
                &aws.cfn,
                stack,
                stacks::TENANT_TEMPLATE,
                &[("KarpenterRoleName", karpenter_role)],
            )
            .await?;
            Ok(format!(
                "updated {stack}: {karpenter_role} may read the new queue"
            ))
        }
        Change::Probe { node } => {
            let function = land.base.output("FunctionName").with_context(|| {
                format!("base stack {} has no FunctionName output", land.base.name)
            })?;
            let options = simulate::Options {
                instances: vec![node.clone()],
                ..simulate::Options::new(cluster, SimKind::Rebalance, function)
            };
            let report = simulate::run(aws, &options).await?;
            if report.failed() > 0 {
                bail!("the probe was not sent:\n{}", report.render());
            }
            if let Some(tenant) = &land.clusters[cluster].tenant {
                tag_queue(aws, &tenant.url, PROBE_TAG, &rfc3339(SystemTime::now())).await?;
            }
            Ok(format!(
                "sent probe {} (a rebalance recommendation for {node}) through {function}; \
                 once Karpenter deletes it, SQS reports it within minutes: run adopt again then",
                report.event_ids().join(", ")
            ))
        }
        Change::DisableRules(rules) => {
            for rule in rules {
                aws.events
                    .disable_rule()
                    .name(rule)
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("DisableRule {rule}: {}", describe(&e)))?;
            }
            Ok(format!(
                "disabled {}: the old queue gets no new event; \
                 routerctl adopt --cluster {cluster} --rollback re-enables them",
                rules.join(", ")
            ))
        }
        Change::DeleteRules { rules, queues } => {
            // Marked first: with its rules gone, only the mark may tie a queue to the cluster.
            for url in queues {
                tag_queue(aws, url, RETIRED_TAG, cluster).await?;
            }
            let mut deleted = Vec::new();
            for (rule, target) in rules {
                aws.events
                    .remove_targets()
                    .rule(rule)
                    .ids(target)
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("RemoveTargets {rule}: {}", describe(&e)))?;
                let left = aws
                    .events
                    .list_targets_by_rule()
                    .rule(rule)
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("ListTargetsByRule {rule}: {}", describe(&e)))?;
                if left.targets().is_empty() {
                    aws.events
                        .delete_rule()
                        .name(rule)
                        .send()
                        .await
                        .map_err(|e| anyhow::anyhow!("DeleteRule {rule}: {}", describe(&e)))?;
                    deleted.push(rule.as_str());
                }
            }
            Ok(format!("deleted {}", deleted.join(", ")))
        }
        Change::DeleteQueue { url } => {
            let out = aws
                .sqs
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("GetQueueAttributes {url}: {}", describe(&e)))?;
            let held: u64 = [
                QueueAttributeName::ApproximateNumberOfMessages,
                QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
                QueueAttributeName::ApproximateNumberOfMessagesDelayed,
            ]
            .iter()
            .filter_map(|a| out.attributes()?.get(a)?.parse::<u64>().ok())
            .sum();
            if held > 0 {
                bail!("{url} holds {held} message(s) again: not deleted; run adopt again");
            }
            aws.sqs
                .delete_queue()
                .queue_url(url)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("DeleteQueue {url}: {}", describe(&e)))?;
            Ok(format!("deleted {url}"))
        }
    }
}

/// What `--rollback` did.
#[derive(Debug, Clone)]
pub struct RolledBack {
    /// The old rules it re-enabled.
    pub enabled: Vec<String>,
    /// The helm command that points Karpenter back at its old queue.
    pub helm: String,
}

/// Re-enables `cluster`'s old rules and marks its tenant queue: until `--resume`, no deletion from
/// the new queue counts as Karpenter reading it, so no rule is disabled again. Refused when
/// nothing is left to go back to (the old rules are deleted).
pub async fn rollback(aws: &Aws, land: &Landscape, cluster: &str) -> Result<RolledBack> {
    let view = &land.clusters[cluster];
    let setups: Vec<_> = view.setups.iter().map(|i| &land.setups[*i]).collect();
    let Some(old) = setups.iter().find(|s| !s.rules.is_empty()) else {
        bail!(
            "{cluster} has no old rule left to re-enable (deleted at step 6, or it never had \
             any): keep Karpenter on the router's queue"
        );
    };
    let mut enabled = Vec::new();
    for rule in setups.iter().flat_map(|s| &s.rules).filter(|r| !r.enabled) {
        aws.events
            .enable_rule()
            .name(&rule.name)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("EnableRule {}: {}", rule.name, describe(&e)))?;
        enabled.push(rule.name.clone());
    }
    if let Some(tenant) = &view.tenant {
        tag_queue(aws, &tenant.url, ROLLBACK_TAG, &rfc3339(SystemTime::now())).await?;
    }
    Ok(RolledBack {
        enabled,
        helm: helm_command(&old.queue.name),
    })
}

/// Records that the operator has pointed `cluster`'s Karpenter at the new queue again after a
/// rollback: from now on its deletions there count (step 4) and the steps go on.
pub async fn resume(aws: &Aws, land: &Landscape, cluster: &str) -> Result<()> {
    let view = &land.clusters[cluster];
    let (Switch::RolledBack(_), Some(tenant)) = (view.switch, &view.tenant) else {
        bail!("{cluster} was not rolled back (or is resumed already): nothing to resume");
    };
    tag_queue(aws, &tenant.url, RESUME_TAG, &rfc3339(SystemTime::now())).await
}

/// Marks a queue: adopt keeps its own state (probes, retirement, rollback, resume) in queue tags.
async fn tag_queue(aws: &Aws, url: &str, key: &str, value: &str) -> Result<()> {
    aws.sqs
        .tag_queue()
        .queue_url(url)
        .tags(key, value)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("TagQueue {url}: {}", describe(&e)))?;
    Ok(())
}

async fn stack_exists(aws: &Aws, stack: &str) -> Result<bool> {
    match aws.cfn.describe_stacks().stack_name(stack).send().await {
        Ok(out) => Ok(out.stacks().iter().any(|s| {
            s.stack_status()
                .is_some_and(|st| st.as_str() != "DELETE_COMPLETE")
        })),
        Err(e)
            if aws_sdk_cloudformation::error::ProvideErrorMetadata::message(&e)
                .is_some_and(|m| m.contains("does not exist")) =>
        {
            Ok(false)
        }
        Err(e) => bail!("DescribeStacks {stack}: {}", describe(&e)),
    }
}
