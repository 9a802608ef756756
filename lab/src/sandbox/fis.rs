//! What moto has no part of: FIS experiment templates (rendered from fis.yaml for one cluster) and
//! the log records FIS and Lambda write to CloudWatch Logs, written as AWS writes them.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use aws_sdk_fis::types::{
    CreateExperimentTemplateActionInput, CreateExperimentTemplateStopConditionInput,
    CreateExperimentTemplateTargetInput, ExperimentTemplateTargetInputFilter,
};
use serde_json::Value;

use local_aws::moto::{ACCOUNT, REGION};

use super::Sandbox;

impl Sandbox {
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
        let template = routerctl::fis::describe_template(&self.aws, template_id).await?;
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
}
