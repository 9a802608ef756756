//! The real stacks deployed into the emulator, completed so the deployment reads back as it would
//! in AWS: what the tests of `simulate`, `verify` and `fis` run against.
//!
//! moto 5.2.5 creates base.yaml's (Queue mode), spoke.yaml's and tenant.yaml's resources, but it
//! silently skips `AWS::SQS::QueuePolicy`, `AWS::FIS::ExperimentTemplate` and
//! `AWS::CloudWatch::Alarm`, creates the central event bus without its policy, and stores the
//! inline policies CloudFormation gives a role as Python reprs, not JSON (with a statement an
//! `!If` drops left in as `None`). It cannot create base.yaml in Direct mode at all: it resolves
//! `Fn::GetAtt IngestQueue` inside the role policy's `!If` branch that Direct mode drops, and
//! fails the stack.
//! [`Sandbox::deploy`] (and [`Sandbox::deploy_hub`], [`Sandbox::deploy_spoke`]) put each back
//! through the service's own API, with the document the template defines (resolved for this
//! stack: [`crate::verify::events_queue_policy`], [`crate::verify::tenant_queue_policy`],
//! [`crate::verify::hub_bus_policy`], the LateForwardsAlarm), so `verify` reads what AWS would
//! return.

use std::{
    collections::BTreeMap,
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use aws_sdk_fis::types::{
    CreateExperimentTemplateActionInput, CreateExperimentTemplateStopConditionInput,
    CreateExperimentTemplateTargetInput, ExperimentTemplateTargetInputFilter,
};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::Value;

use crate::verify::{
    self, ALARMS, HUB_RULES, Monitored, RULES, events_queue_policy, hub_bus_policy,
    tenant_queue_policy,
};
use aws_model::{
    aws::Aws,
    stacks::{self, Stack},
};
use local_aws::moto::{ACCOUNT, MotoServer, REGION, sdk_config_as, sdk_config_for};

/// The deployment, and clients for the emulator.
pub struct Sandbox {
    pub aws: Aws,
    pub base: Stack,
    pub clusters: Vec<String>,
}

impl Sandbox {
    /// Deploys base.yaml as `stack` (Queue mode) and one tenant.yaml per cluster (stack
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

    /// As [`Sandbox::deploy`], with more base stack parameters.
    pub async fn deploy_with(
        moto: &MotoServer,
        stack: &str,
        clusters: &[&str],
        parameters: &[(&str, &str)],
    ) -> Result<Self> {
        let aws = Aws::new(&sdk_config_for(moto.endpoint()).await)?;
        moto.put_object(
            "sandbox-artifacts",
            "bootstrap.zip",
            b"placeholder: the router runs as a local process",
        )
        .await?;
        let mut all = vec![
            ("CodeS3Bucket", "sandbox-artifacts"),
            ("IngestMode", "Queue"),
        ];
        all.extend_from_slice(parameters);
        let base = stacks::create(&aws.cfn, stack, stacks::BASE_TEMPLATE, &all).await?;
        for cluster in clusters {
            // The safe path the README walks: Karpenter's controller role is named, so the
            // tenant stack lets it read the new queue.
            let karpenter = karpenter_role_name(cluster);
            create_karpenter_role(&aws.iam, &karpenter).await?;
            stacks::create(
                &aws.cfn,
                &stacks::tenant_stack_name(stack, cluster),
                stacks::TENANT_TEMPLATE,
                // No BaseStackName: the queue imports the region's exports (base.yaml's here).
                &[("ClusterName", cluster), ("KarpenterRoleName", &karpenter)],
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
        let out = self
            .aws
            .sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .with_context(|| format!("GetQueueUrl {name}"))?;
        Ok(out.queue_url().context("no queue url")?.to_owned())
    }

    pub async fn ingest_queue_url(&self) -> Result<String> {
        self.queue_url(&format!("{}-ingest", self.stack())).await
    }

    /// The physical name of one of the base stack's resources.
    pub async fn resource(&self, logical: &str) -> Result<String> {
        aws_model::aws::stack_resource(&self.aws, self.stack(), logical).await
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

    /// What fis.yaml creates for `cluster` (moto skips the CloudFormation resource), rendered
    /// from the template itself for stack `<stack>-fis-<cluster>`; its id.
    pub async fn create_fis_template(&self, cluster: &str) -> Result<String> {
        self.create_fis_template_from(aws_model::stacks::FIS_TEMPLATE, cluster)
            .await
    }

    /// As [`Sandbox::create_fis_template`], from another version of fis.yaml.
    pub async fn create_fis_template_from(&self, yaml: &str, cluster: &str) -> Result<String> {
        use aws_sdk_fis::types::{
            CreateExperimentTemplateLogConfigurationInput,
            ExperimentTemplateCloudWatchLogsLogConfigurationInput,
        };
        let template = aws_model::template::Template::parse("fis.yaml", yaml)?;
        let stack = format!("{}-fis-{}", self.stack(), cluster.replace('_', "-"));
        let stage = aws_model::template::Stage::new(&stack, ACCOUNT, REGION)
            .parameter("ClusterName", cluster);
        let deployment = template.deploy(&stage)?;
        let p = deployment
            .properties("SpotInterruptionExperiment")?
            .context("fis.yaml has no SpotInterruptionExperiment")?;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut request = self
            .aws
            .fis
            .create_experiment_template()
            .description(text(&p["Description"]))
            .role_arn(text(&p["RoleArn"]));
        for condition in p["StopConditions"].as_array().into_iter().flatten() {
            request = request.stop_conditions(
                CreateExperimentTemplateStopConditionInput::builder()
                    .source(text(&condition["Source"]))
                    .build()?,
            );
        }
        for (name, t) in p["Targets"].as_object().into_iter().flatten() {
            let mut target = CreateExperimentTemplateTargetInput::builder()
                .resource_type(text(&t["ResourceType"]))
                .selection_mode(text(&t["SelectionMode"]));
            for (k, v) in t["ResourceTags"].as_object().into_iter().flatten() {
                target = target.resource_tags(k, text(v));
            }
            for f in t["Filters"].as_array().into_iter().flatten() {
                let values = f["Values"].as_array().into_iter().flatten().map(text);
                target = target.filters(
                    ExperimentTemplateTargetInputFilter::builder()
                        .path(text(&f["Path"]))
                        .set_values(Some(values.collect()))
                        .build()?,
                );
            }
            request = request.targets(name, target.build()?);
        }
        for (name, a) in p["Actions"].as_object().into_iter().flatten() {
            let mut action = CreateExperimentTemplateActionInput::builder()
                .action_id(text(&a["ActionId"]))
                .description(text(&a["Description"]));
            for (k, v) in a["Parameters"].as_object().into_iter().flatten() {
                action = action.parameters(k, text(v));
            }
            for (k, v) in a["Targets"].as_object().into_iter().flatten() {
                action = action.targets(k, text(v));
            }
            request = request.actions(name, action.build()?);
        }
        if let Some(group) =
            p["LogConfiguration"]["CloudWatchLogsConfiguration"]["LogGroupArn"].as_str()
        {
            request = request.log_configuration(
                CreateExperimentTemplateLogConfigurationInput::builder()
                    .log_schema_version(2)
                    .cloud_watch_logs_configuration(
                        ExperimentTemplateCloudWatchLogsLogConfigurationInput::builder()
                            .log_group_arn(group)
                            .build()?,
                    )
                    .build()?,
            );
        }
        for (k, v) in p["Tags"].as_object().into_iter().flatten() {
            request = request.tags(k, text(v));
        }
        let out = request.send().await.context("CreateExperimentTemplate")?;
        out.experiment_template()
            .and_then(|t| t.id())
            .map(str::to_owned)
            .context("no template id")
    }

    /// Writes the router's stdout lines to the router's log group, stamped now: what Lambda does
    /// with a function's output.
    pub async fn ship_logs(&self, lines: &[String]) -> Result<()> {
        let group = self.resource("RouterLogGroup").await?;
        self.ship_logs_to(&group, lines).await
    }

    /// Writes lines to `group` (created if missing), stamped now.
    pub async fn ship_logs_to(&self, group: &str, lines: &[String]) -> Result<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64;
        let exists = self
            .aws
            .logs
            .describe_log_groups()
            .log_group_name_prefix(group)
            .send()
            .await?
            .log_groups()
            .iter()
            .any(|g| g.log_group_name() == Some(group));
        if !exists {
            self.aws
                .logs
                .create_log_group()
                .log_group_name(group)
                .send()
                .await
                .with_context(|| format!("CreateLogGroup {group}"))?;
        }
        let stream = format!("local/{now}");
        self.aws
            .logs
            .create_log_stream()
            .log_group_name(group)
            .log_stream_name(&stream)
            .send()
            .await
            .context("CreateLogStream")?;
        let events = lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| InputLogEvent::builder().timestamp(now).message(l).build())
            .collect::<Result<Vec<_>, _>>()?;
        self.aws
            .logs
            .put_log_events()
            .log_group_name(group)
            .log_stream_name(&stream)
            .set_log_events(Some(events))
            .send()
            .await
            .context("PutLogEvents")?;
        Ok(())
    }

    /// What FIS writes to an experiment's log (schema version 2) when it resolves a spot
    /// instance target (moto's FIS writes no log): one `target-resolution-detail` record naming
    /// each instance's ARN, in the template's log group.
    pub async fn log_fis_target_resolution(
        &self,
        template_id: &str,
        experiment_id: &str,
        instances: &[String],
    ) -> Result<()> {
        let template = crate::fis::describe_template(&self.aws, template_id).await?;
        let group = template
            .log_group
            .with_context(|| format!("template {template_id} logs to no CloudWatch log group"))?;
        let record = serde_json::json!({
            "id": experiment_id,
            "log_type": "target-resolution-detail",
            "event_timestamp": aws_model::events::rfc3339(SystemTime::now()),
            "version": "2",
            "details": {
                "account_id": ACCOUNT,
                "target_name": "ClusterSpotInstances",
                "target_resolution_status": "completed",
                "resolved_targets": instances.iter().map(|i| serde_json::json!({
                    "arn": format!("arn:aws:ec2:{REGION}:{ACCOUNT}:instance/{i}"),
                    "target_type": "aws:ec2:spot-instance",
                })).collect::<Vec<_>>(),
            },
        });
        self.ship_logs_to(&group, &[record.to_string()]).await
    }

    /// Puts back what moto left out of the deployment.
    async fn complete(&self) -> Result<()> {
        let mut rules = Vec::new();
        for (logical, _) in RULES {
            let name = self.resource(logical).await?;
            let rule = self.aws.events.describe_rule().name(&name).send().await?;
            rules.push(rule.arn().context("rule without ARN")?.to_owned());
        }
        // The central bus's copies of the rules, whose ARNs the queue policies name too.
        let hub_bus = self.base.outputs.get("HubEventBusArn").cloned();
        if let Some(bus) = &hub_bus {
            let bus = bus_name(bus);
            for (logical, _) in HUB_RULES {
                let name = self.resource(logical).await?;
                let rule = self
                    .aws
                    .events
                    .describe_rule()
                    .name(&name)
                    .event_bus_name(bus)
                    .send()
                    .await?;
                rules.push(rule.arn().context("rule without ARN")?.to_owned());
            }
        }
        for output in ["DeadLetterQueueArn", "IngestQueueArn"] {
            let queue = self.base.output(output)?.to_owned();
            let sid = match output {
                "IngestQueueArn" => "AllowTheseRulesOnly",
                _ => "AllowDeadLettersFromTheseRules",
            };
            self.set_queue_policy(&queue, events_queue_policy(&queue, &rules, sid))
                .await?;
        }
        let role = self.router_role_arn()?.to_owned();
        for cluster in &self.clusters {
            let queue = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:karpenter-{cluster}");
            self.set_queue_policy(&queue, tenant_queue_policy(&queue, &role))
                .await?;
        }
        if let Some(bus) = &hub_bus {
            self.put_hub_bus_policy(bus).await?;
        }
        self.create_alarms().await?;
        self.rewrite_role_policies_as_json(&role).await
    }

    /// What moto skips of a tenant stack deployed after [`Sandbox::deploy`] (by `routerctl adopt`,
    /// say): the queue's policy, and the Karpenter role's inline policies as JSON.
    pub async fn complete_tenant(&self, cluster: &str, karpenter_role: Option<&str>) -> Result<()> {
        let role = self.router_role_arn()?.to_owned();
        let queue = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:karpenter-{cluster}");
        self.set_queue_policy(&queue, tenant_queue_policy(&queue, &role))
            .await?;
        if let Some(karpenter) = karpenter_role {
            rewrite_role_policies_as_json(&self.aws.iam, karpenter).await?;
        }
        Ok(())
    }

    /// base.yaml's HubEventBus policy (moto's CloudFormation creates the bus without it).
    async fn put_hub_bus_policy(&self, bus: &str) -> Result<()> {
        let parameters = self.base_parameters().await?;
        let parameter = |key: &str| parameters.get(key).map(String::as_str).unwrap_or_default();
        let policy = hub_bus_policy(
            bus,
            parameter("ServedAccounts"),
            Some(parameter("OrganizationId")),
        );
        self.aws
            .events
            .put_permission()
            .event_bus_name(bus_name(bus))
            .policy(policy.to_string())
            .send()
            .await
            .context("PutPermission on the central bus")?;
        Ok(())
    }

    /// base.yaml's alarms on the router's metrics (moto's CloudFormation skips
    /// AWS::CloudWatch::Alarm), named as CloudFormation names them (`<stack>-<logical id>-<suffix>`),
    /// without actions (no AlarmTopicArn). The one on unreachable accounts only for a router that
    /// serves others, as the template's condition says.
    pub async fn create_alarms(&self) -> Result<()> {
        let parameters = self.base_parameters().await?;
        let served = parameters
            .get("ServedAccounts")
            .map(String::as_str)
            .unwrap_or_default();
        for spec in ALARMS {
            if spec.serving_others_only && served.is_empty() {
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
            topic: None,
        };
        let name = format!("{}-{logical}-SANDBOX", self.stack());
        spec.put(&self.aws.cloudwatch, &name, &monitored).await
    }

    /// The base stack's parameters, as deployed.
    async fn base_parameters(&self) -> Result<BTreeMap<String, String>> {
        let described = self
            .aws
            .cfn
            .describe_stacks()
            .stack_name(self.stack())
            .send()
            .await?;
        Ok(described
            .stacks()
            .first()
            .map(aws_model::stacks::parameters)
            .unwrap_or_default())
    }

    /// spoke.yaml in `account` (stack [`verify::DEFAULT_SPOKE_STACK`], forwarding to this hub's
    /// central bus, creating the spoke role) and one tenant.yaml per cluster importing from it,
    /// completed as [`Sandbox::deploy`] completes the hub: tenant queue policies admitting the
    /// spoke role, inline role policies as JSON. The account is reached as moto allows, with the
    /// credentials AssumeRole returns for its spoke role.
    pub async fn deploy_spoke(
        &self,
        moto: &MotoServer,
        account: &str,
        clusters: &[&str],
    ) -> Result<Spoke> {
        let spoke_role = interruption_router::config::DEFAULT_SPOKE_ROLE_NAME;
        let aws = Aws::new(&sdk_config_as(moto.endpoint(), account, REGION, spoke_role).await?)?;
        let stack = stacks::create(
            &aws.cfn,
            verify::DEFAULT_SPOKE_STACK,
            stacks::SPOKE_TEMPLATE,
            &[
                ("HubEventBusArn", self.base.output("HubEventBusArn")?),
                ("RouterRoleArn", self.router_role_arn()?),
            ],
        )
        .await?;
        let role = stack.output("SpokeRoleArn")?.to_owned();
        for cluster in clusters {
            stacks::create(
                &aws.cfn,
                &stacks::tenant_stack_name(verify::DEFAULT_SPOKE_STACK, cluster),
                stacks::TENANT_TEMPLATE,
                // No BaseStackName: the queue imports the region's exports (the spoke's here).
                &[("ClusterName", cluster)],
            )
            .await?;
            let name = format!("karpenter-{cluster}");
            let url = aws
                .sqs
                .get_queue_url()
                .queue_name(&name)
                .send()
                .await
                .with_context(|| format!("GetQueueUrl {name} in {account}"))?
                .queue_url()
                .context("no queue url")?
                .to_owned();
            let arn = format!("arn:aws:sqs:{REGION}:{account}:{name}");
            aws.sqs
                .set_queue_attributes()
                .queue_url(url)
                .attributes(
                    QueueAttributeName::Policy,
                    tenant_queue_policy(&arn, &role).to_string(),
                )
                .send()
                .await
                .with_context(|| format!("SetQueueAttributes Policy on {arn}"))?;
        }
        let forward = aws_model::aws::stack_resource(&aws, &stack.name, "ForwardToHubRole").await?;
        for role in [role.as_str(), forward.as_str()] {
            rewrite_role_policies_as_json(&aws.iam, role).await?;
        }
        Ok(Spoke {
            aws,
            account: account.to_owned(),
            stack,
            clusters: clusters.iter().map(|c| c.to_string()).collect(),
        })
    }

    async fn set_queue_policy(&self, queue_arn: &str, policy: Value) -> Result<()> {
        let url = self.queue_url(aws_model::aws::arn_name(queue_arn)).await?;
        self.aws
            .sqs
            .set_queue_attributes()
            .queue_url(url)
            .attributes(QueueAttributeName::Policy, policy.to_string())
            .send()
            .await
            .with_context(|| format!("SetQueueAttributes Policy on {queue_arn}"))?;
        Ok(())
    }

    async fn rewrite_role_policies_as_json(&self, role_arn: &str) -> Result<()> {
        rewrite_role_policies_as_json(&self.aws.iam, role_arn).await
    }
}

/// A member account's spoke stack and tenant stacks ([`Sandbox::deploy_spoke`]), and clients
/// acting in that account.
pub struct Spoke {
    pub aws: Aws,
    pub account: String,
    pub stack: Stack,
    pub clusters: Vec<String>,
}

impl Spoke {
    /// The role the hub's router assumes in this account.
    pub fn role_arn(&self) -> Result<&str> {
        self.stack.output("SpokeRoleArn")
    }
}

/// The Karpenter controller role the sandbox gives `cluster` (Karpenter's getting-started stack
/// names it `KarpenterControllerRole-<cluster>`).
pub fn karpenter_role_name(cluster: &str) -> String {
    format!("KarpenterControllerRole-{cluster}")
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
async fn rewrite_role_policies_as_json(iam: &aws_sdk_iam::Client, role_arn: &str) -> Result<()> {
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
