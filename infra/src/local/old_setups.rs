//! The interruption set-ups clusters run before the router, as `routerctl adopt` finds them in
//! accounts, stood up in the emulator for adopt's test and demo:
//!
//! * [`getting_started`]: Karpenter's getting-started stack (`Karpenter-<cluster>`: a queue named
//!   after the cluster, its policy, five default-bus rules, the controller's managed policy), and
//!   the controller role its guide has eksctl create with that policy attached;
//! * [`terraform_style`]: what a Terraform module makes through the APIs, with its names
//!   (`Karpenter-<cluster>`, `KarpenterSpotInterrupt-<cluster>`, …) and an inline controller
//!   policy, and no tag that says Terraform (teams' default tags vary; adopt then treats the
//!   resources as its own to delete).
//!
//! [`retire_getting_started`] is what the operator does at adopt's steps 6 and 7 for the
//! getting-started stack: remove the rules (step 6), then the queue (step 7) from the template
//! and update the stack.

use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName;
use interruption_router::event::Kind;
use serde_json::json;

use crate::{aws::Aws, stacks};

/// The stand-in of Karpenter's getting-started template (its interruption half).
pub const GETTING_STARTED_TEMPLATE: &str =
    include_str!("../../fixtures/karpenter-getting-started.yaml");

/// The getting-started stack of `cluster`, as Karpenter's guide names it.
pub fn getting_started_stack(cluster: &str) -> String {
    format!("Karpenter-{cluster}")
}

/// The controller role the getting-started guide has eksctl create.
pub fn getting_started_role(cluster: &str) -> String {
    crate::sandbox::karpenter_role_name(cluster)
}

/// The getting-started template's rules.
const RULES: [&str; 5] = [
    "ScheduledChangeRule",
    "SpotInterruptionRule",
    "RebalanceRule",
    "InstanceStateChangeRule",
    "CapacityReservationInterruptionRule",
];

/// The getting-started template's queue, and what refers to it.
const QUEUE: [&str; 2] = [
    "KarpenterInterruptionQueue",
    "KarpenterInterruptionQueuePolicy",
];

/// What the operator removes from the getting-started stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retire {
    /// The five rules (adopt's step 6).
    Rules,
    /// The rules and the queue, with its policy and the controller's statement on it (step 7).
    Queue,
}

/// Deploys the getting-started stack for `cluster` and its controller role; the queue's name.
pub async fn getting_started(aws: &Aws, cluster: &str) -> Result<String> {
    let stack = stacks::create(
        &aws.cfn,
        &getting_started_stack(cluster),
        GETTING_STARTED_TEMPLATE,
        &[("ClusterName", cluster)],
    )
    .await?;
    // moto skips AWS::SQS::QueuePolicy: set the template's document through SQS.
    let queue = cluster.to_owned();
    set_events_policy(aws, &queue).await?;
    let role = getting_started_role(cluster);
    crate::sandbox::create_karpenter_role(&aws.iam, &role).await?;
    aws.iam
        .attach_role_policy()
        .role_name(&role)
        .policy_arn(stack.output("KarpenterControllerPolicyArn")?)
        .send()
        .await
        .with_context(|| format!("AttachRolePolicy {role}"))?;
    Ok(queue)
}

/// Updates the getting-started stack without `what`, as the operator does once adopt says it may
/// go (the controller role and its policy stay).
pub async fn retire_getting_started(aws: &Aws, cluster: &str, what: Retire) -> Result<()> {
    stacks::update(
        &aws.cfn,
        &getting_started_stack(cluster),
        &without(GETTING_STARTED_TEMPLATE, what),
        &[],
    )
    .await?;
    Ok(())
}

/// `template` without `what`: resources are blocks indented two spaces under `Resources:`, the
/// controller's statement on the queue a list item.
fn without(template: &str, what: Retire) -> String {
    let removed: Vec<&str> = match what {
        Retire::Rules => RULES.to_vec(),
        Retire::Queue => RULES.iter().chain(&QUEUE).copied().collect(),
    };
    let mut out = Vec::new();
    let mut skipping_resource = false;
    let mut skipping_statement: Option<usize> = None;
    for line in template.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent == 2 && line.trim_end().ends_with(':') && !line.trim().starts_with('-') {
            let name = line.trim().trim_end_matches(':');
            skipping_resource = removed.contains(&name);
        } else if indent == 0 && !line.trim().is_empty() {
            skipping_resource = false;
        }
        if what == Retire::Queue && line.trim() == "- Sid: AllowInterruptionQueueActions" {
            skipping_statement = Some(indent);
        } else if let Some(at) = skipping_statement
            && !line.trim().is_empty()
            && (indent < at || (indent == at && line.trim().starts_with('-')))
        {
            skipping_statement = None;
        }
        if !skipping_resource && skipping_statement.is_none() {
            out.push(line);
        }
    }
    out.join("\n") + "\n"
}

/// The names a Terraform module gives `cluster`'s interruption resources: the queue, and the
/// rule for each kind.
pub fn terraform_names(cluster: &str) -> (String, Vec<(Kind, String)>) {
    let rule = |what: &str| format!("Karpenter{what}-{cluster}");
    (
        format!("Karpenter-{cluster}"),
        vec![
            (Kind::ScheduledChange, rule("HealthEvent")),
            (Kind::SpotInterruption, rule("SpotInterrupt")),
            (Kind::RebalanceRecommendation, rule("InstanceRebalance")),
            (Kind::StateChange, rule("InstanceStateChange")),
            (
                Kind::CapacityReservationInterruption,
                rule("CapacityReservationInterrupt"),
            ),
        ],
    )
}

/// The controller role a Terraform module makes for `cluster`.
pub fn terraform_role(cluster: &str) -> String {
    format!("KarpenterController-{cluster}")
}

/// A Terraform-style set-up for `cluster`, made through the APIs; the queue's name.
pub async fn terraform_style(aws: &Aws, cluster: &str) -> Result<String> {
    let (queue, rules) = terraform_names(cluster);
    let url = aws
        .sqs
        .create_queue()
        .queue_name(&queue)
        .attributes(QueueAttributeName::MessageRetentionPeriod, "300")
        .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
        .send()
        .await
        .with_context(|| format!("CreateQueue {queue}"))?
        .queue_url()
        .unwrap_or_default()
        .to_owned();
    let arn = queue_arn(aws, &url).await?;
    set_events_policy(aws, &queue).await?;
    for (kind, rule) in rules {
        let pattern = json!({"source": [kind.source()], "detail-type": [kind.detail_type()]});
        aws.events
            .put_rule()
            .name(&rule)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .with_context(|| format!("PutRule {rule}"))?;
        aws.events
            .put_targets()
            .rule(&rule)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("KarpenterInterruptionQueueTarget")
                    .arn(&arn)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("PutTargets {rule}"))?;
    }
    let role = terraform_role(cluster);
    crate::sandbox::create_karpenter_role(&aws.iam, &role).await?;
    let account = crate::aws::arn_account(&arn).unwrap_or_default();
    let region = &aws.region;
    let policy = json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowInterruptionQueueActions", "Effect": "Allow",
         "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
         "Resource": arn},
        {"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow",
         "Action": "eks:DescribeCluster",
         "Resource": format!("arn:aws:eks:{region}:{account}:cluster/{cluster}")}]});
    aws.iam
        .put_role_policy()
        .role_name(&role)
        .policy_name("KarpenterController")
        .policy_document(policy.to_string())
        .send()
        .await
        .with_context(|| format!("PutRolePolicy {role}"))?;
    Ok(queue)
}

/// The policy both set-ups give their queue: EventBridge (and SQS) may send to it.
async fn set_events_policy(aws: &Aws, queue: &str) -> Result<()> {
    let url = aws
        .sqs
        .get_queue_url()
        .queue_name(queue)
        .send()
        .await
        .with_context(|| format!("GetQueueUrl {queue}"))?
        .queue_url()
        .unwrap_or_default()
        .to_owned();
    let arn = queue_arn(aws, &url).await?;
    let policy = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        "Action": "sqs:SendMessage", "Resource": arn}]});
    aws.sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::Policy, policy.to_string())
        .send()
        .await
        .with_context(|| format!("SetQueueAttributes Policy on {queue}"))?;
    Ok(())
}

async fn queue_arn(aws: &Aws, url: &str) -> Result<String> {
    aws.sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .with_context(|| format!("GetQueueAttributes {url}"))?
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .with_context(|| format!("{url} has no QueueArn"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Template;

    #[test]
    fn retiring_removes_the_rules_then_the_queue_and_keeps_the_controller_policy() {
        let without_rules = without(GETTING_STARTED_TEMPLATE, Retire::Rules);
        let template = Template::parse("rules", &without_rules).expect("still a template");
        let resources: Vec<&str> = template.resources().map(|(id, _)| id).collect();
        assert_eq!(
            resources,
            [
                "KarpenterInterruptionQueue",
                "KarpenterInterruptionQueuePolicy",
                "KarpenterControllerPolicy"
            ],
            "{without_rules}"
        );
        assert!(without_rules.contains("AllowInterruptionQueueActions"));

        let retired = without(GETTING_STARTED_TEMPLATE, Retire::Queue);
        let template = Template::parse("retired", &retired).expect("still a template");
        let resources: Vec<&str> = template.resources().map(|(id, _)| id).collect();
        assert_eq!(resources, ["KarpenterControllerPolicy"], "{retired}");
        assert!(
            !retired.contains("AllowInterruptionQueueActions"),
            "{retired}"
        );
        assert!(
            retired.contains("AllowAPIServerEndpointDiscovery"),
            "{retired}"
        );
        assert!(!retired.contains("KarpenterInterruptionQueue"), "{retired}");
    }
}
