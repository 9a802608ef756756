//! Starting an experiment, waiting for it, and which instances it interrupted (from FIS's
//! resolved targets, else from the experiment's own log).

use std::{collections::BTreeSet, time::Duration};

use anyhow::{Context, Result, bail};
use aws_sdk_fis::types::ExperimentStatus;
use serde_json::Value;

use super::template::Template;
use super::{CLOCK_SKEW, InstanceSource, LOG_DELIVERY, now_ms};
use aws_model::aws::{Aws, describe};

/// A finished experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub id: String,
    pub template_id: String,
    pub status: String,
    pub reason: Option<String>,
    pub start_ms: i64,
    pub end_ms: i64,
}

pub async fn start(aws: &Aws, template_id: &str) -> Result<String> {
    let out = aws
        .fis
        .start_experiment()
        .experiment_template_id(template_id)
        .tags("started-by", "routerctl")
        .send()
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "StartExperiment {template_id}: {} (the caller needs fis:StartExperiment on the \
                 template and the experiment; iam:PassRole on its role is needed to create or \
                 update a template, not to start one)",
                describe(&e)
            )
        })?;
    out.experiment()
        .and_then(|e| e.id())
        .map(str::to_owned)
        .context("StartExperiment returned no experiment id")
}

/// Polls until the experiment reaches a final state. A failed experiment is an error that says why.
pub async fn wait(aws: &Aws, id: &str, poll: Duration, timeout: Duration) -> Result<Experiment> {
    let started = std::time::Instant::now();
    loop {
        let out = aws
            .fis
            .get_experiment()
            .id(id)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GetExperiment {id}: {}", describe(&e)))?;
        let e = out.experiment().context("GetExperiment returned nothing")?;
        let state = e.state();
        let status = state.and_then(|s| s.status());
        let reason = state.and_then(|s| s.reason()).map(str::to_owned);
        let millis =
            |t: Option<&aws_sdk_fis::primitives::DateTime>| t.and_then(|t| t.to_millis().ok());
        match status {
            Some(ExperimentStatus::Failed) | Some(ExperimentStatus::Cancelled) => bail!(
                "experiment {id} {}: {} (a target that resolves to nothing means no running spot \
                 instance carries the cluster tag)",
                status.map(|s| s.as_str()).unwrap_or_default(),
                reason.as_deref().unwrap_or("no reason given")
            ),
            Some(ExperimentStatus::Completed) | Some(ExperimentStatus::Stopped) => {
                let start_ms = millis(e.start_time())
                    .or(millis(e.creation_time()))
                    .unwrap_or_else(now_ms);
                return Ok(Experiment {
                    id: id.to_owned(),
                    template_id: e.experiment_template_id().unwrap_or_default().to_owned(),
                    status: status.map(|s| s.as_str().to_owned()).unwrap_or_default(),
                    reason,
                    start_ms,
                    end_ms: millis(e.end_time()).unwrap_or_else(now_ms),
                });
            }
            _ if started.elapsed() > timeout => bail!(
                "experiment {id} still {} after {:?}: stop it with aws fis stop-experiment --id {id}, \
                 or raise --timeout",
                status.map(|s| s.as_str()).unwrap_or("in no state"),
                timeout
            ),
            _ => tokio::time::sleep(poll).await,
        }
    }
}

/// The instances the experiment acted on: FIS's resolved targets, else those its own log names.
pub async fn experiment_instances(
    aws: &Aws,
    experiment: &Experiment,
    template: &Template,
) -> Result<(BTreeSet<String>, InstanceSource)> {
    let mut resolved = BTreeSet::new();
    let mut pages = aws
        .fis
        .list_experiment_resolved_targets()
        .experiment_id(&experiment.id)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page =
            page.map_err(|e| anyhow::anyhow!("ListExperimentResolvedTargets: {}", describe(&e)))?;
        for target in page.resolved_targets() {
            for value in target
                .target_information()
                .into_iter()
                .flat_map(|m| m.values())
            {
                resolved.extend(instance_id_in(value));
            }
        }
    }
    if !resolved.is_empty() {
        return Ok((resolved, InstanceSource::Resolved));
    }
    let Some(group) = &template.log_group else {
        return Ok((resolved, InstanceSource::Unknown));
    };
    let mut pages = aws
        .logs
        .filter_log_events()
        .log_group_name(group)
        .start_time(experiment.start_ms - CLOCK_SKEW.as_millis() as i64)
        .end_time(experiment.end_ms + LOG_DELIVERY.as_millis() as i64)
        .filter_pattern(format!("\"{}\"", experiment.id))
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = match page {
            Ok(page) => page,
            // No log group, no log: the verdict says FIS named no instance.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                break;
            }
            Err(e) => anyhow::bail!(
                "FilterLogEvents on the experiment log {group}: {} (the caller needs \
                 logs:FilterLogEvents)",
                describe(&e)
            ),
        };
        for event in page.events() {
            resolved.extend(logged_targets(
                event.message().unwrap_or_default(),
                &experiment.id,
            ));
        }
    }
    let source = if resolved.is_empty() {
        InstanceSource::Unknown
    } else {
        InstanceSource::ExperimentLog
    };
    Ok((resolved, source))
}

/// The instances a FIS experiment log record (schema version 2) says were resolved as targets:
/// `{"id": <experiment>, "log_type": "target-resolution-detail", "details": {"resolved_targets":
/// [{"arn": …}, …]}}`. Lenient where AWS was not observed here: any ARN or id of an instance in
/// `resolved_targets`.
pub fn logged_targets(line: &str, experiment_id: &str) -> Vec<String> {
    let Ok(record) = serde_json::from_str::<Value>(line) else {
        return Vec::new();
    };
    if record["id"] != experiment_id || record["log_type"] != "target-resolution-detail" {
        return Vec::new();
    }
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
            Value::Object(map) => map.values().for_each(|i| strings(i, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    strings(&record["details"]["resolved_targets"], &mut found);
    found.into_iter().filter_map(instance_id_in).collect()
}

/// `i-…` from a bare id or an instance ARN.
pub(super) fn instance_id_in(value: &str) -> Option<String> {
    let id = value.rsplit('/').next()?;
    let hex = id.strip_prefix("i-")?;
    (matches!(hex.len(), 8 | 17) && hex.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| id.to_owned())
}
