//! The real stacks deployed into the emulator, completed so the deployment reads back as it would
//! in AWS: what the tests of `simulate`, `verify` and `fis` run against.
//!
//! moto 5.2.5 creates base.yaml's, spoke.yaml's and tenant.yaml's resources, but it
//! silently skips `AWS::SQS::QueuePolicy`, `AWS::FIS::ExperimentTemplate` and
//! `AWS::CloudWatch::Alarm`, creates the central event bus without its policy, and stores the
//! inline policies CloudFormation gives a role as Python reprs, not JSON (with a statement an
//! `!If` drops left in as `None`).
//! [`Sandbox::deploy`] (and [`Sandbox::deploy_hub`], [`Sandbox::deploy_spoke`]) put each back
//! through the service's own API, with the document the stack's own template defines, rendered
//! for that deployment by aws-model ([`Rendered`]: its parameters, the region's exports, the
//! physical ids and ARNs of what it made), never with `verify`'s expectations: so `verify` is
//! tested against what CloudFormation would have made, not against what it wrote itself.

mod alarms;
mod fis;
mod spoke;

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::Value;

use aws_clients::deployed::Rendered;
use aws_clients::{
    aws::Aws,
    stacks::{Source, Stack},
};
use aws_model::stacks;
use local_aws::moto::{MotoServer, sdk_config_for};
use routerctl::verify::{ALARMS, Monitored};

pub use self::spoke::Spoke;

/// Where [`Sandbox::deploy_from`] takes base.yaml and tenant.yaml from.
pub struct Templates<'a> {
    pub base: Source<'a>,
    pub tenant: Source<'a>,
}

/// The deployment, and clients for the emulator.
pub struct Sandbox {
    pub aws: Aws,
    pub base: Stack,
    pub clusters: Vec<String>,
}

impl Sandbox {
    /// Deploys base.yaml as `stack` and one tenant.yaml per cluster (stack
    /// `<stack>-tenant-<cluster>`, as `make deploy-tenant` names it).
    pub async fn deploy(moto: &MotoServer, stack: &str, clusters: &[&str]) -> Result<Self> {
        Self::deploy_with(moto, stack, clusters, &[]).await
    }

    /// As [`Sandbox::deploy`], with the central bus serving `members` (CentralBus=Enabled,
    /// ServedAccounts): the hub of [`Sandbox::deploy_spoke`]s.
    pub async fn deploy_hub(
        moto: &MotoServer,
        stack: &str,
        clusters: &[&str],
        members: &[&str],
    ) -> Result<Self> {
        let served = members.join(",");
        let parameters = [
            ("CentralBus", "Enabled"),
            ("ServedAccounts", served.as_str()),
        ];
        Self::deploy_with(moto, stack, clusters, &parameters).await
    }

    /// As [`Sandbox::deploy`], with more base stack parameters; each tenant takes those of
    /// them `make deploy-tenant` inherits from the base stack ([`stacks::TENANT_INHERITS`]: its
    /// key, its alarm topic).
    pub async fn deploy_with(
        moto: &MotoServer,
        stack: &str,
        clusters: &[&str],
        parameters: &[(&str, &str)],
    ) -> Result<Self> {
        Self::deploy_in(moto, local_aws::moto::REGION, stack, clusters, parameters).await
    }

    /// As [`Sandbox::deploy_with`], in `region` (a hub per region: the same stack name in each).
    pub async fn deploy_in(
        moto: &MotoServer,
        region: &str,
        stack: &str,
        clusters: &[&str],
        parameters: &[(&str, &str)],
    ) -> Result<Self> {
        // Where the stack's default CodeS3Key finds the release's zip: a bucket per region, as
        // Lambda reads code only from its own region's.
        let bucket = match region {
            local_aws::moto::REGION => "sandbox-artifacts".to_owned(),
            other => format!("sandbox-artifacts-{other}"),
        };
        moto.put_object(
            &bucket,
            &stacks::release_code_key("arm64"),
            b"placeholder: the router runs as a local process",
        )
        .await?;
        let mut all = vec![("CodeS3Bucket", bucket.as_str())];
        all.extend_from_slice(parameters);
        let templates = Templates {
            base: Source::Body(stacks::BASE_TEMPLATE),
            tenant: Source::Body(stacks::TENANT_TEMPLATE),
        };
        let inherited: Vec<(&str, &str)> = parameters
            .iter()
            .filter(|(key, _)| stacks::TENANT_INHERITS.contains(key))
            .copied()
            .collect();
        Self::deploy_from(moto, region, stack, clusters, &templates, &all, &inherited).await
    }

    /// The stacks from `templates` (a release's URLs, say) in `region`, base.yaml with exactly
    /// `parameters` and each tenant with its cluster, Karpenter's role and `tenant_parameters`,
    /// completed as [`Sandbox::deploy`] completes them.
    pub async fn deploy_from(
        moto: &MotoServer,
        region: &str,
        stack: &str,
        clusters: &[&str],
        templates: &Templates<'_>,
        parameters: &[(&str, &str)],
        tenant_parameters: &[(&str, &str)],
    ) -> Result<Self> {
        let config = sdk_config_for(moto.endpoint())
            .await
            .to_builder()
            .region(Some(aws_config::Region::new(region.to_owned())))
            .build();
        let aws = Aws::new(&config)?;
        let base =
            aws_clients::stacks::create_as(&aws.cfn, stack, templates.base, parameters).await?;
        for cluster in clusters {
            // The safe path the README walks: Karpenter's controller role is named, so the
            // tenant stack lets it read the new queue.
            let karpenter = karpenter_role_name(cluster);
            create_karpenter_role(&aws.iam, &karpenter).await?;
            aws_clients::stacks::create_as(
                &aws.cfn,
                &stacks::tenant_stack_name(stack, cluster),
                templates.tenant,
                // No BaseStackName: the queue imports the region's exports (base.yaml's here).
                &[
                    &[("ClusterName", *cluster), ("KarpenterRoleName", &karpenter)],
                    tenant_parameters,
                ]
                .concat(),
            )
            .await?;
        }
        let sandbox = Self {
            aws,
            base,
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
        };
        sandbox.complete().await?;
        Ok(sandbox)
    }

    pub fn stack(&self) -> &str {
        &self.base.name
    }

    pub fn function_name(&self) -> Result<&str> {
        self.base.output("FunctionName")
    }

    pub fn router_role_arn(&self) -> Result<&str> {
        self.base.output("RouterRoleArn")
    }

    /// The emulator's URL of a queue (stack outputs carry the AWS host, not the emulator's).
    pub async fn queue_url(&self, name: &str) -> Result<String> {
        aws_clients::aws::queue_url(&self.aws.sqs, name).await
    }

    pub async fn ingest_queue_url(&self) -> Result<String> {
        self.queue_url(&format!("{}-ingest", self.stack())).await
    }

    /// The physical name of one of the base stack's resources.
    pub async fn resource(&self, logical: &str) -> Result<String> {
        aws_clients::aws::stack_resource(&self.aws, self.stack(), logical).await
    }

    /// The deployed function's environment: what the local router process must run with.
    pub async fn function_environment(&self) -> Result<Vec<(String, String)>> {
        let config = self
            .aws
            .lambda
            .get_function_configuration()
            .function_name(self.function_name()?)
            .send()
            .await?;
        Ok(config
            .environment()
            .and_then(|e| e.variables())
            .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    /// Puts back what moto left out of the deployment: each queue and bus policy as the stack's
    /// own template defines it for this deployment ([`Rendered`]), the alarms, and the role
    /// policies as JSON.
    async fn complete(&self) -> Result<()> {
        let base = Rendered::of(&self.aws, self.stack()).await?;
        for (policy, queue) in [
            ("IngestQueuePolicy", "IngestQueue"),
            ("DeadLetterQueuePolicy", "DeadLetterQueue"),
        ] {
            put_queue_policy(&self.aws, &base, policy, queue).await?;
        }
        // CentralBus=Enabled: the direct queue, which member accounts' rules write themselves.
        if self.base.outputs.contains_key("DirectQueueArn") {
            put_queue_policy(&self.aws, &base, "DirectQueuePolicy", "DirectQueue").await?;
        }
        for cluster in &self.clusters {
            self.complete_tenant(cluster, None).await?;
        }
        let bus_policy = base.property("HubEventBus", &["Policy"])?;
        if let Some(bus) = self.base.outputs.get("HubEventBusArn") {
            self.aws
                .events
                .put_permission()
                .event_bus_name(bus_name(bus))
                .policy(bus_policy.to_string())
                .send()
                .await
                .context("PutPermission on the central bus")?;
        }
        self.create_alarms().await?;
        // A topic the stack was given is the platform team's own, subscribed to already.
        if self
            .base_parameters()
            .await?
            .get("AlarmTopicArn")
            .is_none_or(|t| t.is_empty())
        {
            subscribe_on_call(&self.aws, self.base.output("AlarmTopicArn")?, self.stack()).await?;
        }
        let role = self.router_role_arn()?.to_owned();
        self.rewrite_role_policies_as_json(&role).await
    }

    /// What moto skips of `cluster`'s tenant stack (deployed with the sandbox, or later by
    /// `routerctl adopt`): the queue's policy as tenant.yaml defines it for that stack, and the
    /// Karpenter role's inline policies as JSON.
    pub async fn complete_tenant(&self, cluster: &str, karpenter_role: Option<&str>) -> Result<()> {
        let stack = stacks::tenant_stack_name(self.stack(), cluster);
        let tenant = Rendered::of(&self.aws, &stack).await?;
        put_queue_policy(
            &self.aws,
            &tenant,
            "InterruptionQueuePolicy",
            "InterruptionQueue",
        )
        .await?;
        if let Some(karpenter) = karpenter_role {
            rewrite_role_policies_as_json(&self.aws.iam, karpenter).await?;
        }
        Ok(())
    }

    /// base.yaml's alarms on the router's metrics (moto's CloudFormation skips
    /// AWS::CloudWatch::Alarm), named as CloudFormation names them (`<stack>-<logical id>-<suffix>`),
    /// notifying the stack's alarm topic. The one on unreachable accounts only for a router that
    /// assumes spoke roles, as the template's condition says.
    pub async fn create_alarms(&self) -> Result<()> {
        let parameters = self.base_parameters().await?;
        let assumes_spoke_roles = parameters
            .get("ServedAccounts")
            .is_some_and(|s| !s.is_empty())
            || parameters.get("CentralBus").map(String::as_str) == Some("Enabled");
        for spec in ALARMS {
            if spec.serving_others_only && !assumes_spoke_roles {
                continue;
            }
            self.create_alarm(spec.logical).await?;
        }
        Ok(())
    }

    /// One of base.yaml's alarms on the router's metrics, by logical id.
    pub async fn create_alarm(&self, logical: &str) -> Result<()> {
        let spec = ALARMS
            .iter()
            .find(|s| s.logical == logical)
            .with_context(|| format!("base.yaml has no alarm {logical}"))?;
        let monitored = Monitored {
            namespace: interruption_router::config::DEFAULT_METRICS_NAMESPACE,
            function: self.function_name()?,
            topic: Some(self.base.output("AlarmTopicArn")?),
        };
        let name = format!("{}-{logical}-SANDBOX", self.stack());
        alarms::put(spec, &self.aws.cloudwatch, &name, &monitored).await
    }

    /// The base stack's parameters, as deployed.
    async fn base_parameters(&self) -> Result<BTreeMap<String, String>> {
        let stack = aws_clients::stacks::describe(&self.aws.cfn, self.stack()).await?;
        Ok(aws_clients::stacks::parameters(&stack))
    }

    async fn rewrite_role_policies_as_json(&self, role_arn: &str) -> Result<()> {
        rewrite_role_policies_as_json(&self.aws.iam, role_arn).await
    }
}

/// `policy`'s document (an `AWS::SQS::QueuePolicy` of `stack`) put on `queue` (its logical id),
/// as CloudFormation would have put it.
pub(crate) async fn put_queue_policy(
    aws: &Aws,
    stack: &Rendered,
    policy: &str,
    queue: &str,
) -> Result<()> {
    let document = stack.property(policy, &["PolicyDocument"])?;
    let arn = stack
        .stage
        .resources
        .get(queue)
        .and_then(|r| r.get("Arn"))
        .with_context(|| format!("{}: no queue {queue}", stack.stage.stack_name))?;
    let url = aws_clients::aws::queue_url(&aws.sqs, aws_model::arn::arn_name(arn)).await?;
    aws.sqs
        .set_queue_attributes()
        .queue_url(url)
        .attributes(QueueAttributeName::Policy, document.to_string())
        .send()
        .await
        .with_context(|| format!("SetQueueAttributes Policy on {arn}"))?;
    Ok(())
}

/// Deletes default-bus rule `rule` as a person or a Terraform apply does, outside any stack: its
/// targets first (EventBridge refuses to delete a rule that still has any), then the rule.
/// The on-call's subscription to a stack's alarm topic (an SQS queue `<stack>-on-call`, which
/// SNS confirms at once), as a platform team subscribes its pager: without one the alarms page
/// nobody, and `routerctl verify` fails `alarm-topic`.
pub(crate) async fn subscribe_on_call(aws: &Aws, topic: &str, stack: &str) -> Result<()> {
    let queue = aws
        .sqs
        .create_queue()
        .queue_name(format!("{stack}-on-call"))
        .send()
        .await
        .context("CreateQueue (the on-call's)")?;
    let url = queue.queue_url().context("no queue URL")?;
    let arn = aws
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await?
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .context("no queue ARN")?;
    aws.sns
        .subscribe()
        .topic_arn(topic)
        .protocol("sqs")
        .endpoint(arn)
        .send()
        .await
        .with_context(|| format!("Subscribe to {topic}"))?;
    Ok(())
}

pub async fn delete_rule(events: &aws_sdk_eventbridge::Client, rule: &str) -> Result<()> {
    let targets = events.list_targets_by_rule().rule(rule).send().await?;
    let ids: Vec<String> = targets
        .targets()
        .iter()
        .map(|t| t.id().to_owned())
        .collect();
    if !ids.is_empty() {
        events
            .remove_targets()
            .rule(rule)
            .set_ids(Some(ids))
            .send()
            .await?;
    }
    events.delete_rule().name(rule).send().await?;
    Ok(())
}

/// The Karpenter controller role the sandbox gives `cluster`, as Karpenter's getting-started
/// guide makes it: eksctl's Pod Identity association names it `<cluster>-karpenter`
/// (`step02-create-cluster.sh`; the guide's CloudFormation stack makes only the policies).
/// `KarpenterControllerRole-<cluster>` is the migration guide's name, not this one.
pub fn karpenter_role_name(cluster: &str) -> String {
    format!("{cluster}-karpenter")
}

/// A role as Karpenter's getting-started guide creates it for the controller (trusting EKS Pod
/// Identity), without its policies: the tenant stack adds the queue's.
pub async fn create_karpenter_role(iam: &aws_sdk_iam::Client, name: &str) -> Result<()> {
    let trust = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]});
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(trust.to_string())
        .send()
        .await
        .with_context(|| format!("CreateRole {name}"))?;
    Ok(())
}

/// The bus name in an event bus ARN.
fn bus_name(arn: &str) -> &str {
    arn.split_once(":event-bus/").map_or(arn, |(_, name)| name)
}

/// moto keeps CloudFormation's inline role policies as `str(dict)`; IAM returns JSON. `role` may be
/// a name or an ARN.
pub(crate) async fn rewrite_role_policies_as_json(
    iam: &aws_sdk_iam::Client,
    role_arn: &str,
) -> Result<()> {
    let role = role_arn.rsplit('/').next().unwrap_or(role_arn);
    let names = iam.list_role_policies().role_name(role).send().await?;
    for name in names.policy_names() {
        let doc = iam
            .get_role_policy()
            .role_name(role)
            .policy_name(name)
            .send()
            .await?;
        let text = aws_model::policy::decode_iam_document(doc.policy_document())
            .map_err(anyhow::Error::msg)?;
        if serde_json::from_str::<Value>(&text).is_ok() {
            continue;
        }
        // The templates' documents hold no quotes, booleans or None inside strings, so the
        // repr maps to JSON by swapping the quote character; the parse below checks that. moto
        // also keeps a statement an `!If` drops with AWS::NoValue as None, which CloudFormation
        // removes from the list.
        let json = text.replace('\'', "\"").replace("None", "null");
        let Ok(mut document) = serde_json::from_str::<Value>(&json) else {
            bail!("{role}/{name}: cannot turn moto's policy repr into JSON: {text}");
        };
        if let Some(statements) = document["Statement"].as_array_mut() {
            statements.retain(|s| !s.is_null());
        }
        iam.put_role_policy()
            .role_name(role)
            .policy_name(name)
            .policy_document(document.to_string())
            .send()
            .await?;
    }
    Ok(())
}
