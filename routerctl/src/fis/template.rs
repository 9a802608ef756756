//! The experiment template as `routerctl fis` reads it: which instances it selects, and the refusal
//! to start one that could touch another cluster's nodes or nodes the router does not route.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Result, bail};

use super::duration::iso8601_duration;
use super::{CLUSTER_TAG, OTHER_CLUSTER_TAGS};
use crate::cloud::experiments::Experiments;

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
pub async fn find_template(aws: &impl Experiments, cluster: &str) -> Result<String> {
    let found: Vec<String> = aws
        .experiment_templates()
        .await
        .map_err(|e| anyhow::anyhow!("ListExperimentTemplates: {e}"))?
        .into_iter()
        .filter(|t| {
            let tag = |k: &str| t.tags.get(k).map(String::as_str);
            tag("cluster") == Some(cluster) && tag("app") == Some("interruption-router")
        })
        .map(|t| t.id)
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!(
            "no FIS experiment template tagged cluster={cluster}, app=interruption-router in {}: \
             deploy one with make deploy-fis CLUSTER={cluster} REGION={}, or pass --template-id",
            aws.region(),
            aws.region()
        ),
        many => bail!(
            "{} templates are tagged cluster={cluster}: pass one with --template-id ({})",
            many.len(),
            many.join(", ")
        ),
    }
}

pub async fn describe_template(aws: &impl Experiments, id: &str) -> Result<Template> {
    let template = aws
        .experiment_template(id)
        .await
        .map_err(|e| anyhow::anyhow!("GetExperimentTemplate {id}: {e}"))?;
    let cluster = template
        .targets
        .iter()
        .find_map(|t| t.resource_tags.get(CLUSTER_TAG).cloned());
    let targets = template
        .targets
        .into_iter()
        .map(|t| TargetSelection {
            name: t.name,
            resource_type: t.resource_type,
            resource_tags: t.resource_tags.into_iter().collect(),
            by_arn: t.by_arn,
        })
        .collect();
    // `arn:<partition>:logs:<region>:<account>:log-group:<name>[:*]`
    let log_group = template
        .log_group_arn
        .as_deref()
        .and_then(|arn| arn.split(":log-group:").nth(1))
        .map(|rest| rest.trim_end_matches(":*").to_owned());
    let duration_before_interruption = template
        .spot_notices
        .iter()
        .find_map(|d| iso8601_duration(d));
    Ok(Template {
        id: id.to_owned(),
        cluster,
        duration_before_interruption,
        targets,
        log_group,
    })
}
