//! [`Experiments`] over the SDK: FIS and CloudWatch Logs.

use aws_clients::aws::Aws;

use super::{FisDateTime, call_error, named};
use crate::cloud::{
    CallError,
    experiments::{
        ExperimentState, ExperimentTemplate, Experiments, LogEvent, TemplateSummary, TemplateTarget,
    },
    missing,
};

impl Experiments for Aws {
    async fn experiment_templates(&self) -> Result<Vec<TemplateSummary>, CallError> {
        let mut found = Vec::new();
        let mut pages = self.fis.list_experiment_templates().into_paginator().send();
        while let Some(page) = pages.next().await {
            for t in page.map_err(call_error)?.experiment_templates() {
                found.push(TemplateSummary {
                    id: t.id().unwrap_or_default().to_owned(),
                    tags: t
                        .tags()
                        .map(|tags| tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                });
            }
        }
        Ok(found)
    }

    async fn experiment_template(&self, id: &str) -> Result<ExperimentTemplate, CallError> {
        let out = self
            .fis
            .get_experiment_template()
            .id(id)
            .send()
            .await
            .map_err(call_error)?;
        let Some(template) = out.experiment_template() else {
            return Ok(ExperimentTemplate::default());
        };
        Ok(ExperimentTemplate {
            targets: template
                .targets()
                .into_iter()
                .flat_map(|t| t.iter())
                .map(|(name, t)| TemplateTarget {
                    name: name.clone(),
                    resource_type: t.resource_type().unwrap_or_default().to_owned(),
                    resource_tags: t
                        .resource_tags()
                        .map(|tags| tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                        .unwrap_or_default(),
                    by_arn: !t.resource_arns().is_empty(),
                })
                .collect(),
            log_group_arn: template
                .log_configuration()
                .and_then(|l| l.cloud_watch_logs_configuration())
                .and_then(|c| c.log_group_arn())
                .map(str::to_owned),
            spot_notices: template
                .actions()
                .into_iter()
                .flat_map(|a| a.values())
                .filter(|a| a.action_id() == Some("aws:ec2:send-spot-instance-interruptions"))
                .filter_map(|a| a.parameters()?.get("durationBeforeInterruption").cloned())
                .collect(),
        })
    }

    async fn start_experiment(&self, template_id: &str) -> Result<String, CallError> {
        let out = self
            .fis
            .start_experiment()
            .experiment_template_id(template_id)
            .tags("started-by", "routerctl")
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .experiment()
            .and_then(|e| e.id())
            .unwrap_or_default()
            .to_owned())
    }

    async fn experiment(&self, id: &str) -> Result<ExperimentState, CallError> {
        let out = self
            .fis
            .get_experiment()
            .id(id)
            .send()
            .await
            .map_err(call_error)?;
        let Some(e) = out.experiment() else {
            return Ok(ExperimentState::default());
        };
        let millis = |t: Option<&FisDateTime>| t.and_then(|t| t.to_millis().ok());
        Ok(ExperimentState {
            template_id: e.experiment_template_id().unwrap_or_default().to_owned(),
            status: e
                .state()
                .and_then(|s| s.status())
                .map(|s| s.as_str().to_owned()),
            reason: e.state().and_then(|s| s.reason()).map(str::to_owned),
            creation_ms: millis(e.creation_time()),
            start_ms: millis(e.start_time()),
            end_ms: millis(e.end_time()),
        })
    }

    async fn resolved_targets(&self, id: &str) -> Result<Vec<String>, CallError> {
        let mut values = Vec::new();
        let mut pages = self
            .fis
            .list_experiment_resolved_targets()
            .experiment_id(id)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            for target in page.map_err(call_error)?.resolved_targets() {
                values.extend(
                    target
                        .target_information()
                        .into_iter()
                        .flat_map(|m| m.values().cloned()),
                );
            }
        }
        Ok(values)
    }

    async fn log_events(
        &self,
        group: &str,
        pattern: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<LogEvent>, CallError> {
        let mut events = Vec::new();
        let mut pages = self
            .logs
            .filter_log_events()
            .log_group_name(group)
            .start_time(from_ms)
            .end_time(to_ms)
            .filter_pattern(pattern)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    let gone = e
                        .as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception());
                    return Err(named(call_error(e), gone, missing::RESOURCE));
                }
            };
            events.extend(page.events().iter().map(|e| {
                (
                    e.timestamp().unwrap_or_default(),
                    e.message().unwrap_or_default().to_owned(),
                )
            }));
        }
        Ok(events)
    }
}
