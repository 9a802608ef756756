//! The interruption set-ups clusters run before the router, as `routerctl adopt` finds them in
//! accounts, stood up in the emulator for adopt's tests and demo. Names, policies and tags are
//! those each tool gives (aws-ia/terraform-aws-eks-blueprints-addons v1.24, terraform-aws-
//! modules/terraform-aws-eks v21 `modules/karpenter`, karpenter-provider-aws v1.14):
//!
//! * [`Flavour::GettingStarted`]: Karpenter's getting-started stack `Karpenter-<cluster>` (the
//!   stand-in template in `routerctl/fixtures`), and the controller role its guide has eksctl create
//!   with the stack's policies attached by name;
//! * [`Flavour::TerraformModule`]: terraform-aws-eks's karpenter module: queue
//!   `Karpenter-<cluster>`, rules `Karpenter<Kind>-<name_prefix id>` tagged `ClusterName`, a
//!   controller role with the policy attached;
//! * [`Flavour::Blueprints`]: EKS Blueprints addons: queue `karpenter-<cluster>` (the router's
//!   default name), rules `Karpenter-<Kind>-<name_prefix id>` tagged `ClusterName`, four kinds
//!   (no capacity-reservation rule), a queue policy that lets EventBridge send and denies nobody;
//! * [`Flavour::ByHand`]: what someone made through the console: Terraform-like names, no tag, no
//!   stack, an inline controller policy.

use anyhow::{Context, Result};
use aws_sdk_eventbridge::types::Tag;
use aws_sdk_sqs::types::QueueAttributeName;
use interruption_router::event::Kind;
use serde_json::json;

use aws_clients::aws::Aws;

/// How a cluster handles interruptions before the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    GettingStarted,
    TerraformModule,
    Blueprints,
    ByHand,
}

impl Flavour {
    /// The kinds its rules send to its queue (EKS Blueprints has no capacity-reservation rule).
    pub fn kinds(self) -> Vec<Kind> {
        let all = [
            Kind::SpotInterruption,
            Kind::RebalanceRecommendation,
            Kind::StateChange,
            Kind::ScheduledChange,
            Kind::CapacityReservationInterruption,
        ];
        all.into_iter()
            .filter(|k| self != Flavour::Blueprints || *k != Kind::CapacityReservationInterruption)
            .collect()
    }

    pub fn label(self) -> &'static str {
        match self {
            Flavour::GettingStarted => "Karpenter's getting-started stack",
            Flavour::TerraformModule => "terraform-aws-eks's karpenter module",
            Flavour::Blueprints => "EKS Blueprints addons",
            Flavour::ByHand => "made by hand",
        }
    }
}

/// What [`stand_up`] made: the queue Karpenter reads, and its controller role.
#[derive(Debug, Clone)]
pub struct Made {
    pub queue: String,
    pub role: String,
}

/// Stands `flavour`'s set-up up for `cluster`.
pub async fn stand_up(aws: &Aws, flavour: Flavour, cluster: &str) -> Result<Made> {
    let id = |kind: &str| name_prefix_id(cluster, kind);
    let spec = match flavour {
        Flavour::GettingStarted => return getting_started(aws, cluster).await,
        Flavour::TerraformModule => Spec {
            queue: format!("Karpenter-{cluster}"),
            rule: Box::new(move |kind| format!("Karpenter{kind}-{}", id(kind))),
            tagged: true,
            target_id: "KarpenterInterruptionQueueTarget",
            role: format!("KarpenterController-{cluster}"),
        },
        Flavour::Blueprints => Spec {
            queue: format!("karpenter-{cluster}"),
            rule: Box::new(move |kind| format!("Karpenter-{kind}-{}", id(kind))),
            tagged: true,
            target_id: "KarpenterQueueTarget",
            role: format!("karpenter-{cluster}-controller"),
        },
        Flavour::ByHand => Spec {
            queue: format!("Karpenter-{cluster}"),
            rule: Box::new(move |kind| format!("Karpenter{kind}-{cluster}")),
            tagged: false,
            target_id: "KarpenterInterruptionQueueTarget",
            role: format!("KarpenterController-{cluster}"),
        },
    };
    made_through_apis(aws, cluster, flavour, spec).await
}

/// What a set-up made through the APIs is called.
struct Spec<'a> {
    queue: String,
    /// A rule's name from its kind's short name (`SpotInterrupt`).
    rule: Box<dyn Fn(&str) -> String + 'a>,
    /// Rules tagged `ClusterName`, as both Terraform modules tag them.
    tagged: bool,
    target_id: &'static str,
    role: String,
}

/// The stand-in of Karpenter's getting-started template (its interruption half).
pub const GETTING_STARTED_TEMPLATE: &str =
    include_str!("../../tests/fixtures/karpenter-getting-started.yaml");

/// The getting-started stack of `cluster`, as Karpenter's guide names it.
pub fn getting_started_stack(cluster: &str) -> String {
    format!("Karpenter-{cluster}")
}

/// The getting-started template's rules (logical ids).
pub const RULES: [&str; 5] = [
    "ScheduledChangeRule",
    "SpotInterruptionRule",
    "RebalanceRule",
    "InstanceStateChangeRule",
    "CapacityReservationInterruptionRule",
];

/// Deploys the getting-started stack for `cluster` and its controller role, with the stack's
/// policies attached by name as the guide's eksctl does.
async fn getting_started(aws: &Aws, cluster: &str) -> Result<Made> {
    aws_clients::stacks::create(
        &aws.cfn,
        &getting_started_stack(cluster),
        GETTING_STARTED_TEMPLATE,
        &[("ClusterName", cluster)],
    )
    .await?;
    // moto skips AWS::SQS::QueuePolicy: set the template's document through SQS.
    let queue = cluster.to_owned();
    set_policy(aws, &queue, true).await?;
    let role = crate::sandbox::karpenter_role_name(cluster);
    crate::sandbox::create_karpenter_role(&aws.iam, &role).await?;
    let account = account(aws).await?;
    for policy in ["EKSIntegrationPolicy", "InterruptionPolicy"] {
        let arn = format!("arn:aws:iam::{account}:policy/KarpenterController{policy}-{cluster}");
        aws.iam
            .attach_role_policy()
            .role_name(&role)
            .policy_arn(&arn)
            .send()
            .await
            .with_context(|| format!("AttachRolePolicy {arn} to {role}"))?;
    }
    Ok(Made { queue, role })
}

/// Terraform's `name_prefix` id: 26 digits (a timestamp and a counter), stable per rule here.
pub fn name_prefix_id(cluster: &str, kind: &str) -> String {
    let seed = cluster
        .bytes()
        .chain(kind.bytes())
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!("2026111812000000{:010}", seed % 10_000_000_000)
}

/// A set-up made through the APIs as Terraform (or a person) makes it: the queue, a policy that
/// lets EventBridge send, a rule per kind of `flavour`, a controller role with a policy on the
/// queue and the cluster.
async fn made_through_apis(
    aws: &Aws,
    cluster: &str,
    flavour: Flavour,
    spec: Spec<'_>,
) -> Result<Made> {
    let queue = spec.queue.as_str();
    let url = aws
        .sqs
        .create_queue()
        .queue_name(queue)
        .attributes(QueueAttributeName::MessageRetentionPeriod, "300")
        .attributes(QueueAttributeName::SqsManagedSseEnabled, "true")
        .send()
        .await
        .with_context(|| format!("CreateQueue {queue}"))?
        .queue_url()
        .unwrap_or_default()
        .to_owned();
    let arn = queue_arn(aws, &url).await?;
    set_policy(aws, queue, false).await?;
    for kind in flavour.kinds() {
        let short = match kind {
            Kind::ScheduledChange => "HealthEvent",
            Kind::SpotInterruption => "SpotInterrupt",
            Kind::RebalanceRecommendation => "InstanceRebalance",
            Kind::StateChange => "InstanceStateChange",
            Kind::CapacityReservationInterruption => "CRInterruption",
        };
        let rule = (spec.rule)(short);
        let pattern = json!({"source": [kind.source()], "detail-type": [kind.detail_type()]});
        let mut put = aws
            .events
            .put_rule()
            .name(&rule)
            .event_pattern(pattern.to_string());
        if spec.tagged {
            put = put.tags(Tag::builder().key("ClusterName").value(cluster).build()?);
        }
        put.send()
            .await
            .with_context(|| format!("PutRule {rule}"))?;
        aws.events
            .put_targets()
            .rule(&rule)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id(spec.target_id)
                    .arn(&arn)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("PutTargets {rule}"))?;
    }
    let role = spec.role;
    crate::sandbox::create_karpenter_role(&aws.iam, &role).await?;
    let account = aws_model::arn::arn_account(&arn).unwrap_or_default();
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
    Ok(Made {
        queue: queue.to_owned(),
        role,
    })
}

/// The policy the set-ups give their queue: EventBridge (and SQS) may send; the getting-started
/// stack's also denies plain HTTP.
async fn set_policy(aws: &Aws, queue: &str, deny_http: bool) -> Result<()> {
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
    let mut statements = vec![json!({"Sid": "SendEventsToQueue", "Effect": "Allow",
        "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        "Action": "sqs:SendMessage", "Resource": arn})];
    if deny_http {
        statements.push(
            json!({"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*",
            "Action": "sqs:*", "Resource": arn,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
        );
    }
    let policy = json!({"Version": "2012-10-17", "Statement": statements});
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

async fn account(aws: &Aws) -> Result<String> {
    let me = aws
        .sts
        .get_caller_identity()
        .send()
        .await
        .context("GetCallerIdentity")?;
    me.account().map(str::to_owned).context("no account")
}
