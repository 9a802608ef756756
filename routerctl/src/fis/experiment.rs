//! Starting an experiment, waiting for it, and which instances it interrupted (from FIS's
//! resolved targets, else from the experiment's own log).

use std::{collections::BTreeSet, time::Duration};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::template::Template;
use super::{CLOCK_SKEW, InstanceSource, LOG_DELIVERY, now_ms};
use crate::cloud::{experiments::Experiments, missing};

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

pub async fn start(aws: &impl Experiments, template_id: &str) -> Result<String> {
    let id = aws.start_experiment(template_id).await.map_err(|e| {
        anyhow::anyhow!(
            "StartExperiment {template_id}: {e} (the caller needs fis:StartExperiment on the \
             template and the experiment; iam:PassRole on its role is needed to create or update \
             a template, not to start one)"
        )
    })?;
    Some(id)
        .filter(|id| !id.is_empty())
        .context("StartExperiment returned no experiment id")
}

/// Polls until the experiment reaches a final state. A failed experiment is an error that says why.
pub async fn wait(
    aws: &impl Experiments,
    id: &str,
    poll: Duration,
    timeout: Duration,
) -> Result<Experiment> {
    let started = tokio::time::Instant::now();
    loop {
        let e = aws
            .experiment(id)
            .await
            .map_err(|e| anyhow::anyhow!("GetExperiment {id}: {e}"))?;
        let status = e.status.as_deref();
        match status {
            Some("failed" | "cancelled") => bail!(
                "experiment {id} {}: {} (a target that resolves to nothing means no running spot \
                 instance carries the cluster tag)",
                status.unwrap_or_default(),
                e.reason.as_deref().unwrap_or("no reason given")
            ),
            Some("completed" | "stopped") => {
                return Ok(Experiment {
                    id: id.to_owned(),
                    template_id: e.template_id,
                    status: status.unwrap_or_default().to_owned(),
                    start_ms: e.start_ms.or(e.creation_ms).unwrap_or_else(|| now_ms(aws)),
                    end_ms: e.end_ms.unwrap_or_else(|| now_ms(aws)),
                    reason: e.reason,
                });
            }
            _ if started.elapsed() > timeout => bail!(
                "experiment {id} still {} after {:?}: stop it with aws fis stop-experiment --id {id}, \
                 or raise --timeout",
                status.unwrap_or("in no state"),
                timeout
            ),
            _ => tokio::time::sleep(poll).await,
        }
    }
}

/// The instances the experiment acted on: FIS's resolved targets, else those its own log names.
pub async fn experiment_instances(
    aws: &impl Experiments,
    experiment: &Experiment,
    template: &Template,
) -> Result<(BTreeSet<String>, InstanceSource)> {
    let mut resolved: BTreeSet<String> = aws
        .resolved_targets(&experiment.id)
        .await
        .map_err(|e| anyhow::anyhow!("ListExperimentResolvedTargets: {e}"))?
        .iter()
        .filter_map(|value| instance_id_in(value))
        .collect();
    if !resolved.is_empty() {
        return Ok((resolved, InstanceSource::Resolved));
    }
    let Some(group) = &template.log_group else {
        return Ok((resolved, InstanceSource::Unknown));
    };
    let logged = aws
        .log_events(
            group,
            &format!("\"{}\"", experiment.id),
            experiment.start_ms - CLOCK_SKEW.as_millis() as i64,
            experiment.end_ms + LOG_DELIVERY.as_millis() as i64,
        )
        .await;
    let events = match logged {
        Ok(events) => events,
        // No log group, no log: the verdict says FIS named no instance.
        Err(e) if e.code == missing::RESOURCE => Vec::new(),
        Err(e) => anyhow::bail!(
            "FilterLogEvents on the experiment log {group}: {e} (the caller needs \
             logs:FilterLogEvents)"
        ),
    };
    for (_, message) in &events {
        resolved.extend(logged_targets(message, &experiment.id));
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
