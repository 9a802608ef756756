//! The experiment template as `routerctl fis` reads it: which instances it selects, and the refusal
//! to start one that could touch another cluster's nodes or nodes the router does not route.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result, bail};

use super::duration::iso8601_duration;
use super::{CLUSTER_TAG, OTHER_CLUSTER_TAGS};
use aws_model::aws::{Aws, describe};

/// The experiment template, as far as this command needs it.
#[derive(Debug, Clone)]
pub struct Template {
    pub id: String,
    /// The value of `eks:eks-cluster-name` its targets select, if they select by that tag.
    pub cluster: Option<String>,
    pub duration_before_interruption: Option<Duration>,
    /// What each target selects: (name, resource type, resource tags, selects by ARN).
    pub targets: Vec<TargetSelection>,
    /// Where FIS writes the experiment's log (a log group name), when it logs to CloudWatch.
    pub log_group: Option<String>,
}

/// One target of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSelection {
    pub name: String,
    pub resource_type: String,
    pub resource_tags: BTreeMap<String, String>,
    /// It names instances by ARN instead of selecting them by tag.
    pub by_arn: bool,
}

impl Template {
    /// Whether starting it interrupts only nodes the router routes to `cluster`: every target
    /// selects spot instances by `cluster`'s tag, by no other cluster's, and by `managed_tag`.
    /// The problem when not.
    pub fn selects_only(&self, cluster: &str, managed_tag: &str) -> Result<(), String> {
        if self.targets.is_empty() {
            return Err(format!("template {} has no targets", self.id));
        }
        for t in &self.targets {
            let name = &t.name;
            if t.resource_type != "aws:ec2:spot-instance" {
                return Err(format!(
                    "target {name} selects {} resources, not aws:ec2:spot-instance",
                    t.resource_type
                ));
            }
            if t.by_arn {
                return Err(format!(
                    "target {name} names instances by ARN: which cluster they belong to cannot be \
                     read from the template"
                ));
            }
            match t.resource_tags.get(CLUSTER_TAG) {
                Some(c) if c == cluster => {}
                Some(other) => {
                    return Err(format!(
                        "target {name} selects {CLUSTER_TAG}={other}: it interrupts {other}'s \
                         nodes, not {cluster}'s"
                    ));
                }
                None => {
                    return Err(format!(
                        "target {name} does not select instances by {CLUSTER_TAG}={cluster}"
                    ));
                }
            }
            if let Some((key, value)) = t.resource_tags.iter().find(|(k, v)| {
                OTHER_CLUSTER_TAGS.iter().any(|o| k.starts_with(o))
                    && !(k.as_str() == format!("kubernetes.io/cluster/{cluster}")
                        || (k.as_str() == "aws:eks:cluster-name" && v.as_str() == cluster))
            }) {
                return Err(format!(
                    "target {name} also selects {key}={value}, another cluster's tag"
                ));
            }
            if !t.resource_tags.contains_key(managed_tag) {
                return Err(format!(
                    "target {name} does not select by {managed_tag}: it can interrupt a node the \
                     router does not route (a managed node group's), which nobody drains"
                ));
            }
        }
        Ok(())
    }
}

/// The cluster an experiment of `template` is judged for: the one asked for, which must be the
/// one it selects.
pub(super) fn target_cluster(template: &Template, asked: Option<&str>) -> Result<String> {
    match (asked, template.cluster.as_deref()) {
        (Some(given), Some(selected)) if given != selected => bail!(
            "template {} interrupts instances of {selected}, not {given}: not started",
            template.id
        ),
        (Some(c), _) | (None, Some(c)) => Ok(c.to_owned()),
        (None, None) => bail!(
            "template {} does not select instances by {CLUSTER_TAG}: pass --cluster",
            template.id
        ),
    }
}

/// The template fis.yaml deployed for `cluster` (tags `cluster` and `app=interruption-router`).
pub async fn find_template(aws: &Aws, cluster: &str) -> Result<String> {
    let mut found = Vec::new();
    let mut pages = aws.fis.list_experiment_templates().into_paginator().send();
    while let Some(page) = pages.next().await {
        let page =
            page.map_err(|e| anyhow::anyhow!("ListExperimentTemplates: {}", describe(&e)))?;
        for t in page.experiment_templates() {
            let tags = t.tags();
            let tag = |k: &str| tags.and_then(|t| t.get(k)).map(String::as_str);
            if tag("cluster") == Some(cluster) && tag("app") == Some("interruption-router") {
                found.extend(t.id().map(str::to_owned));
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no FIS experiment template tagged cluster={cluster}, app=interruption-router in {}: \
             deploy one with make deploy-fis CLUSTER={cluster} REGION={}, or pass --template-id",
            aws.region,
            aws.region
        ),
        many => bail!(
            "{} templates are tagged cluster={cluster}: pass one with --template-id ({})",
            many.len(),
            many.join(", ")
        ),
    }
}

pub async fn describe_template(aws: &Aws, id: &str) -> Result<Template> {
    let out = aws
        .fis
        .get_experiment_template()
        .id(id)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("GetExperimentTemplate {id}: {}", describe(&e)))?;
    let template = out
        .experiment_template()
        .with_context(|| format!("GetExperimentTemplate {id} returned no template"))?;
    let cluster = template
        .targets()
        .into_iter()
        .flat_map(|t| t.values())
        .find_map(|t| t.resource_tags()?.get(CLUSTER_TAG).cloned());
    let targets = template
        .targets()
        .into_iter()
        .flat_map(|t| t.iter())
        .map(|(name, t)| TargetSelection {
            name: name.clone(),
            resource_type: t.resource_type().unwrap_or_default().to_owned(),
            resource_tags: t
                .resource_tags()
                .map(|tags| tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
            by_arn: !t.resource_arns().is_empty(),
        })
        .collect();
    // `arn:<partition>:logs:<region>:<account>:log-group:<name>[:*]`
    let log_group = template
        .log_configuration()
        .and_then(|l| l.cloud_watch_logs_configuration())
        .and_then(|c| c.log_group_arn())
        .and_then(|arn| arn.split(":log-group:").nth(1))
        .map(|rest| rest.trim_end_matches(":*").to_owned());
    let duration_before_interruption = template
        .actions()
        .into_iter()
        .flat_map(|a| a.values())
        .filter(|a| a.action_id() == Some("aws:ec2:send-spot-instance-interruptions"))
        .find_map(|a| a.parameters()?.get("durationBeforeInterruption"))
        .and_then(|d| iso8601_duration(d));
    Ok(Template {
        id: id.to_owned(),
        cluster,
        duration_before_interruption,
        targets,
        log_group,
    })
}
