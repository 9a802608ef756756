//! `routerctl fis`: runs a cluster's FIS spot-interruption experiment (cloudformation/fis.yaml)
//! and proves isolation from the router's own logs: during the experiment's window, every event
//! about the experiment's instances reached the target cluster's queue, and none reached another.
//!
//! Before anything starts, the template is read: it must select spot instances by the target
//! cluster's tag (and no other cluster's) and by the managed tag, i.e. nodes the router routes to
//! that cluster and its Karpenter drains. A template that selects anything else is never started.
//! Once an experiment runs, any later failure names it and says how to stop it.
//!
//! Evidence is what the router recorded for each delivery: the `Deliveries` list of its metric
//! documents, which Lambda keeps at every log level, or (from router builds before it) the
//! `forwarded` log line, which only INFO keeps; both read back with FilterLogEvents over the
//! window. Which instances the experiment interrupted comes from FIS: ListExperimentResolvedTargets,
//! else the experiment's own log (`target-resolution-detail` records). When FIS names none, the
//! run cannot pass: deliveries about some instance of the cluster are no evidence about the one
//! interrupted. Other clusters' deliveries about other instances are normal traffic on a shared
//! router; they are counted, and fail the run only with `strict`.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use aws_sdk_fis::types::ExperimentStatus;
use serde_json::Value;

use crate::aws::{Aws, describe};

/// The tag fis.yaml selects instances by, and the tags it puts on the template.
pub const CLUSTER_TAG: &str = "eks:eks-cluster-name";
/// Other tags that name a cluster (the router's default CLUSTER_TAG_KEYS): a template selecting
/// another cluster by one of them is refused too.
const OTHER_CLUSTER_TAGS: [&str; 2] = ["aws:eks:cluster-name", "kubernetes.io/cluster/"];
/// How much earlier than FIS's start time an event may be logged (clocks, FIS's own latency).
pub const CLOCK_SKEW: Duration = Duration::from_secs(5);
/// Added to the interruption delay: CloudWatch Logs delivery and the state changes' own lag.
pub const LOG_DELIVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Options {
    /// The target cluster; found from the template when not given.
    pub cluster: Option<String>,
    pub template_id: Option<String>,
    /// Report on an experiment that already ran instead of starting one.
    pub experiment_id: Option<String>,
    /// The base stack, for the router's log group.
    pub stack: String,
    pub log_group: Option<String>,
    /// How long past the experiment's end to keep collecting; default: the template's
    /// durationBeforeInterruption plus [`LOG_DELIVERY`].
    pub settle: Option<Duration>,
    pub poll: Duration,
    pub timeout: Duration,
    /// Fail on any delivery to another cluster, even about instances outside the experiment.
    pub strict: bool,
    /// The tag only instances the router routes carry (its MANAGED_TAG_KEY).
    pub managed_tag: String,
}

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

/// The log time range that counts, in ms since the epoch, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from_ms: i64,
    pub to_ms: i64,
}

impl Window {
    pub fn contains(&self, at_ms: i64) -> bool {
        (self.from_ms..=self.to_ms).contains(&at_ms)
    }
}

/// From a little before the experiment started (clock skew) until `settle` after it ended, when
/// the stopping/terminated changes of the interrupted instances have been delivered and logged.
pub fn window(start_ms: i64, end_ms: i64, settle: Duration) -> Window {
    Window {
        from_ms: start_ms - CLOCK_SKEW.as_millis() as i64,
        to_ms: end_ms.max(start_ms) + settle.as_millis() as i64,
    }
}

/// One delivery, from one router log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub at_ms: i64,
    pub event_id: String,
    pub kind: String,
    pub cluster: String,
    pub instances: Vec<String>,
    /// Event `time` to forwarding, as the router measured it (`time` has 1 s resolution).
    pub age_ms: Option<u64>,
}

/// Parses a router log line if it records a delivery. Accepts the tracing JSON layout the router
/// writes (`{"level":…,"fields":{…}}`), the same fields at the top level, and either of those
/// wrapped in a Lambda JSON record's `message`.
pub fn parse_delivery(line: &str, at_ms: i64) -> Option<Delivery> {
    let value: Value = serde_json::from_str(line.trim()).ok()?;
    if let Some(inner) = value["message"]
        .as_str()
        .filter(|m| m.trim_start().starts_with('{'))
        && let Some(delivery) = parse_delivery(inner, at_ms)
    {
        return Some(delivery);
    }
    let fields = if value["fields"].is_object() {
        &value["fields"]
    } else {
        &value
    };
    if fields["outcome"] != "forwarded" {
        return None;
    }
    let text = |k: &str| fields[k].as_str().unwrap_or_default().to_owned();
    Some(Delivery {
        at_ms,
        event_id: text("event_id"),
        kind: text("kind"),
        cluster: fields["cluster"].as_str()?.to_owned(),
        instances: text("instances")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        age_ms: fields["age_ms"].as_u64(),
    })
}

/// One cluster's line of the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterTally {
    /// Deliveries naming an instance of the experiment.
    pub experiment: usize,
    /// Deliveries about other instances (normal traffic on a shared router).
    pub other: usize,
    /// `age_ms` of the experiment deliveries.
    pub ages_ms: Vec<u64>,
    /// The kinds of the experiment deliveries (empty where the router did not record one).
    pub kinds: BTreeSet<String>,
}

#[derive(Debug, Clone)]
pub struct Verdict {
    pub target: String,
    /// Every cluster that received anything, and always the target.
    pub clusters: BTreeMap<String, ClusterTally>,
    /// Deliveries about the experiment's instances to another cluster: isolation broken.
    pub leaks: Vec<Delivery>,
    pub strict: bool,
}

impl Verdict {
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let target = self.clusters.get(&self.target).cloned().unwrap_or_default();
        if target.experiment == 0 {
            problems.push(format!(
                "{} received none of the experiment's events: check the deployment (routerctl \
                 verify), that the interrupted instances carry the cluster tag, and the router's \
                 log group",
                self.target
            ));
        }
        // FIS sends a rebalance recommendation, then the spot interruption warning, then state
        // changes. The warning is what gives Karpenter its two minutes: without it, a run is no
        // evidence that the path works, however many state changes arrived.
        if target.experiment > 0 && !target.kinds.contains(SPOT_WARNING) {
            let seen: Vec<&str> = target
                .kinds
                .iter()
                .map(|k| {
                    if k.is_empty() {
                        "unrecorded"
                    } else {
                        k.as_str()
                    }
                })
                .collect();
            problems.push(if target.kinds.iter().all(String::is_empty) {
                format!(
                    "the router's records do not say which kind each delivery to {} was (a \
                     build from before they did): whether the spot interruption warning arrived \
                     cannot be told. Update the router and run the experiment again",
                    self.target
                )
            } else {
                format!(
                    "no spot interruption warning about the experiment's instances reached {} \
                     (only: {}): the warning gives Karpenter its two minutes. Check the \
                     SpotInterruptionRule (routerctl verify) and that the experiment's action is \
                     aws:ec2:send-spot-instance-interruptions",
                    self.target,
                    seen.join(", ")
                )
            });
        }
        for leak in &self.leaks {
            problems.push(format!(
                "{} received event {} ({}) about the experiment's instance(s) {}",
                leak.cluster,
                leak.event_id,
                leak.kind,
                leak.instances.join(",")
            ));
        }
        if self.strict {
            for (cluster, tally) in &self.clusters {
                if *cluster != self.target && tally.other > 0 {
                    problems.push(format!(
                        "{cluster} received {} other event(s) during the window (--strict)",
                        tally.other
                    ));
                }
            }
        }
        problems
    }

    pub fn passed(&self) -> bool {
        self.problems().is_empty()
    }
}

/// The kind a run needs to pass.
const SPOT_WARNING: &str = "spot-interruption";

/// Sorts deliveries inside `window` by cluster and by whether they name an experiment instance.
pub fn tally(
    target: &str,
    experiment_instances: &BTreeSet<String>,
    deliveries: &[Delivery],
    window: Window,
    strict: bool,
) -> Verdict {
    let mut clusters: BTreeMap<String, ClusterTally> = BTreeMap::new();
    clusters.insert(target.to_owned(), ClusterTally::default());
    let mut leaks = Vec::new();
    for d in deliveries.iter().filter(|d| window.contains(d.at_ms)) {
        let line = clusters.entry(d.cluster.clone()).or_default();
        if d.instances.iter().any(|i| experiment_instances.contains(i)) {
            line.experiment += 1;
            line.ages_ms.extend(d.age_ms);
            line.kinds.insert(d.kind.clone());
            if d.cluster != target {
                leaks.push(d.clone());
            }
        } else {
            line.other += 1;
        }
    }
    Verdict {
        target: target.to_owned(),
        clusters,
        leaks,
        strict,
    }
}

/// Where the experiment's instance list came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstanceSource {
    /// ListExperimentResolvedTargets.
    Resolved,
    /// The experiment's log (`target-resolution-detail` records).
    ExperimentLog,
    /// FIS named none: the deliveries cannot be tied to the experiment.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub experiment: Experiment,
    pub template: Template,
    pub window: Window,
    pub log_group: String,
    pub instances: BTreeSet<String>,
    pub instance_source: InstanceSource,
    pub verdict: Verdict,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.problems().is_empty()
    }

    /// The verdict's problems, and the missing evidence when FIS named no instance.
    pub fn problems(&self) -> Vec<String> {
        if self.instance_source == InstanceSource::Unknown {
            return vec![format!(
                "FIS named no instance this experiment interrupted (ListExperimentResolvedTargets \
                 returned none, and {}), so no delivery can be tied to it: deliveries about other \
                 instances of {} are no evidence. Check that the experiment resolved a target \
                 (aws fis get-experiment --id {}) and that the template logs to CloudWatch Logs \
                 (fis.yaml does)",
                self.template
                    .log_group
                    .as_deref()
                    .map_or("the template has no CloudWatch log group".to_owned(), |g| {
                        format!("its log {g} has no target-resolution-detail record")
                    }),
                self.verdict.target,
                self.experiment.id
            )];
        }
        self.verdict.problems()
    }

    pub fn render(&self) -> String {
        let e = &self.experiment;
        let mut out = format!(
            "experiment {} (template {}) {} in {:.1} s{}\n",
            e.id,
            e.template_id,
            e.status,
            (e.end_ms - e.start_ms) as f64 / 1000.0,
            e.reason
                .as_deref()
                .filter(|_| e.status != "completed")
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
        out += &format!(
            "experiment instances ({}): {}\n",
            match self.instance_source {
                InstanceSource::Resolved => "resolved by FIS".to_owned(),
                InstanceSource::ExperimentLog => "from the experiment's log".to_owned(),
                InstanceSource::Unknown => "FIS named none".to_owned(),
            },
            self.instances
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        out += &format!(
            "router deliveries in {} from {} to {} (event time → forwarded: age_ms)\n",
            self.log_group,
            crate::events::rfc3339(
                UNIX_EPOCH + Duration::from_millis(self.window.from_ms.max(0) as u64)
            ),
            crate::events::rfc3339(
                UNIX_EPOCH + Duration::from_millis(self.window.to_ms.max(0) as u64)
            ),
        );
        out += &format!(
            "  {:<20} {:>10} {:>10} {:>10} {:>8}\n",
            "cluster", "experiment", "p50 ms", "max ms", "other"
        );
        for (cluster, t) in &self.verdict.clusters {
            let mut ages = t.ages_ms.clone();
            ages.sort_unstable();
            let p50 = ages.get(ages.len().saturating_sub(1) / 2);
            let label = if *cluster == self.verdict.target {
                format!("{cluster} (target)")
            } else {
                cluster.clone()
            };
            out += &format!(
                "  {:<20} {:>10} {:>10} {:>10} {:>8}\n",
                label,
                t.experiment,
                p50.map_or("-".into(), u64::to_string),
                ages.last().map_or("-".into(), u64::to_string),
                t.other
            );
        }
        let problems = self.problems();
        if problems.is_empty() {
            let t = &self.verdict.clusters[&self.verdict.target];
            out += &format!(
                "PASS: {} events about the experiment's instances reached {} and no other cluster\n",
                t.experiment, self.verdict.target
            );
        } else {
            for p in &problems {
                out += &format!("  problem: {p}\n");
            }
            out += &format!("FAIL: {} problem(s)\n", problems.len());
        }
        out
    }
}

/// Runs the whole command: find the template and check what it selects, start it (or take the
/// experiment that already ran), wait for it and for its window to close, then report.
/// `progress` is told what it is waiting for. Once an experiment runs, an error names it and how
/// to stop it.
pub async fn run(aws: &Aws, options: &Options, progress: impl Fn(&str)) -> Result<Report> {
    // The template checked before the start, and the cluster it was checked for.
    let (experiment_id, checked) = match &options.experiment_id {
        Some(id) => (id.clone(), None),
        None => {
            let template_id = match (&options.template_id, &options.cluster) {
                (Some(id), _) => id.clone(),
                (None, Some(cluster)) => find_template(aws, cluster).await?,
                (None, None) => bail!("pass --cluster, --template-id or --experiment-id"),
            };
            let template = describe_template(aws, &template_id).await?;
            let cluster = target_cluster(&template, options.cluster.as_deref())?;
            template
                .selects_only(&cluster, &options.managed_tag)
                .map_err(|problem| {
                    anyhow::anyhow!(
                        "not started: {problem}. Deploy fis.yaml for the cluster (make deploy-fis \
                         CLUSTER={cluster} REGION={}) and start that template",
                        aws.region
                    )
                })?;
            progress(&format!(
                "starting experiment template {template_id} against {cluster}"
            ));
            (start(aws, &template_id).await?, Some((template, cluster)))
        }
    };
    let started = checked.is_some();
    let report = observe(aws, options, &experiment_id, checked, &progress).await;
    match report {
        Err(e) if started => Err(e.context(format!(
            "experiment {experiment_id} was started and may still be interrupting nodes: stop it \
             with aws fis stop-experiment --region {} --id {experiment_id}, or report on it later \
             with routerctl fis --experiment-id {experiment_id}",
            aws.region
        ))),
        other => other,
    }
}

/// The cluster an experiment of `template` is judged for: the one asked for, which must be the
/// one it selects.
fn target_cluster(template: &Template, asked: Option<&str>) -> Result<String> {
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

/// Waits for the experiment and its window, then reads the evidence. `checked` is the template
/// and cluster when this command started the experiment; otherwise they are read here.
async fn observe(
    aws: &Aws,
    options: &Options,
    experiment_id: &str,
    checked: Option<(Template, String)>,
    progress: &impl Fn(&str),
) -> Result<Report> {
    progress(&format!("waiting for experiment {experiment_id} to end"));
    let experiment = wait(aws, experiment_id, options.poll, options.timeout).await?;
    let (template, cluster) = match checked {
        Some(checked) => checked,
        None => {
            let template = describe_template(aws, &experiment.template_id).await?;
            let cluster = target_cluster(&template, options.cluster.as_deref())?;
            (template, cluster)
        }
    };
    let settle = options.settle.unwrap_or_else(|| {
        template
            .duration_before_interruption
            .unwrap_or(Duration::from_secs(120))
            + LOG_DELIVERY
    });
    let window = window(experiment.start_ms, experiment.end_ms, settle);
    let wait_ms = window.to_ms - now_ms();
    if wait_ms > 0 {
        progress(&format!(
            "waiting {:.0} s for the instances' state changes and log delivery (--settle)",
            wait_ms as f64 / 1000.0
        ));
        tokio::time::sleep(Duration::from_millis(wait_ms as u64)).await;
    }
    let (instances, instance_source) = experiment_instances(aws, &experiment, &template).await?;
    let log_group = match &options.log_group {
        Some(group) => group.clone(),
        None => router_log_group(aws, &options.stack).await?,
    };
    let deliveries = deliveries(aws, &log_group, window).await?;
    let verdict = tally(&cluster, &instances, &deliveries, window, options.strict);
    Ok(Report {
        experiment,
        template,
        window,
        log_group,
        instances,
        instance_source,
        verdict,
    })
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
fn instance_id_in(value: &str) -> Option<String> {
    let id = value.rsplit('/').next()?;
    let hex = id.strip_prefix("i-")?;
    (matches!(hex.len(), 8 | 17) && hex.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| id.to_owned())
}

/// The base stack's RouterLogGroup (the function's LoggingConfig points at it).
pub async fn router_log_group(aws: &Aws, stack: &str) -> Result<String> {
    crate::aws::stack_resource(aws, stack, "RouterLogGroup")
        .await
        .context("finding the router's log group (pass --stack, or --log-group)")
}

/// Every delivery the router recorded in `window`: from its metric documents' `Deliveries`,
/// which every log level keeps, or, when there are none (a router build before them), from its
/// `forwarded` lines, which INFO keeps.
pub async fn deliveries(aws: &Aws, log_group: &str, window: Window) -> Result<Vec<Delivery>> {
    let recorded = logged(aws, log_group, window, "\"Deliveries\"", |line, at| {
        parse_document_deliveries(line, at)
    })
    .await?;
    if !recorded.is_empty() {
        return Ok(recorded);
    }
    logged(aws, log_group, window, "\"forwarded\"", |line, at| {
        parse_delivery(line, at).into_iter().collect()
    })
    .await
}

/// The log events of `window` matching `pattern` (narrowed server-side), parsed by `parse`.
async fn logged(
    aws: &Aws,
    log_group: &str,
    window: Window,
    pattern: &str,
    parse: impl Fn(&str, i64) -> Vec<Delivery>,
) -> Result<Vec<Delivery>> {
    let mut found = Vec::new();
    let mut pages = aws
        .logs
        .filter_log_events()
        .log_group_name(log_group)
        .start_time(window.from_ms)
        .end_time(window.to_ms)
        .filter_pattern(pattern)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            anyhow::anyhow!(
                "FilterLogEvents on {log_group}: {} (wrong --log-group? the caller needs \
                 logs:FilterLogEvents)",
                describe(&e)
            )
        })?;
        for event in page.events() {
            found.extend(parse(
                event.message().unwrap_or_default(),
                event.timestamp().unwrap_or_default(),
            ));
        }
    }
    Ok(found)
}

/// The deliveries a router metric document lists (`Deliveries`: `[cluster, event id,
/// instances, age ms, kind]` each; earlier builds wrote no kind), also when wrapped in a Lambda
/// JSON record's `message`.
pub fn parse_document_deliveries(line: &str, at_ms: i64) -> Vec<Delivery> {
    let Ok(value) = serde_json::from_str::<Value>(line.trim()) else {
        return Vec::new();
    };
    if let Some(inner) = value["message"].as_str() {
        return parse_document_deliveries(inner, at_ms);
    }
    value["Deliveries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(Delivery {
                at_ms,
                cluster: d[0].as_str()?.to_owned(),
                event_id: d[1].as_str().unwrap_or_default().to_owned(),
                kind: d[4].as_str().unwrap_or_default().to_owned(),
                instances: d[2]
                    .as_str()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
                age_ms: d[3].as_u64(),
            })
        })
        .collect()
}

/// `PT2M`, `PT90S`, `PT1H30M`: the ISO 8601 durations FIS parameters use.
pub fn iso8601_duration(text: &str) -> Option<Duration> {
    let mut rest = text.strip_prefix("PT")?;
    let mut total = 0u64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let n: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        total += n * match unit {
            'H' => 3600,
            'M' => 60,
            'S' => 1,
            _ => return None,
        };
        rest = &rest[digits + 1..];
    }
    Some(Duration::from_secs(total))
}

/// `90s`, `3m`, `1h`, `0s`: durations on the command line.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, e.g. 90s, 3m, 1h"))?;
    let seconds = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?}: the unit must be s, m or h")),
    };
    Ok(Duration::from_secs(seconds))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(at_ms: i64, cluster: &str, instances: &[&str], age_ms: u64) -> Delivery {
        Delivery {
            at_ms,
            event_id: format!("e-{at_ms}"),
            kind: "spot-interruption".into(),
            cluster: cluster.into(),
            instances: instances.iter().map(|s| s.to_string()).collect(),
            age_ms: Some(age_ms),
        }
    }

    #[test]
    fn the_window_runs_from_just_before_the_start_to_settle_after_the_end() {
        let w = window(1_000_000, 1_090_000, Duration::from_secs(180));
        assert_eq!(
            w,
            Window {
                from_ms: 995_000,
                to_ms: 1_270_000
            }
        );
        assert!(w.contains(995_000) && w.contains(1_270_000));
        assert!(!w.contains(994_999) && !w.contains(1_270_001));
        // An end before the start (clock trouble) never shrinks the window below the start.
        assert_eq!(window(1_000_000, 900_000, Duration::ZERO).to_ms, 1_000_000);
    }

    #[test]
    fn the_verdict_needs_target_deliveries_and_no_leaks() {
        let w = window(1_000, 10_000, Duration::ZERO);
        let ours: BTreeSet<String> = ["i-0aaaaaaaaaaaaaaaa".to_owned()].into();
        let ok = [
            delivery(2_000, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 800),
            delivery(3_000, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 1_200),
            // Normal traffic for another cluster: counted, not a failure.
            delivery(4_000, "beta", &["i-0bbbbbbbbbbbbbbbb"], 500),
            // Outside the window: ignored.
            delivery(20_000, "beta", &["i-0aaaaaaaaaaaaaaaa"], 1),
        ];
        let v = tally("alpha", &ours, &ok, w, false);
        assert!(v.passed(), "{:?}", v.problems());
        assert_eq!(v.clusters["alpha"].experiment, 2);
        assert_eq!(v.clusters["alpha"].ages_ms, vec![800, 1_200]);
        assert_eq!(
            v.clusters["beta"],
            ClusterTally {
                experiment: 0,
                other: 1,
                ages_ms: vec![],
                kinds: BTreeSet::new(),
            }
        );
        // --strict also fails on the other cluster's traffic.
        let strict = tally("alpha", &ours, &ok, w, true);
        assert_eq!(strict.problems().len(), 1, "{:?}", strict.problems());

        let leaked = [
            ok[0].clone(),
            delivery(5_000, "beta", &["i-0aaaaaaaaaaaaaaaa"], 900),
        ];
        let v = tally("alpha", &ours, &leaked, w, false);
        assert!(!v.passed());
        assert_eq!(v.leaks.len(), 1);
        assert!(
            v.problems()[0].starts_with("beta received event e-5000"),
            "{:?}",
            v.problems()
        );

        let v = tally("alpha", &ours, &ok[2..], w, false);
        assert!(!v.passed());
        assert!(
            v.problems()[0].starts_with("alpha received none"),
            "{:?}",
            v.problems()
        );
    }

    #[test]
    fn a_run_without_the_spot_interruption_warning_fails() {
        let w = window(1_000, 10_000, Duration::ZERO);
        let ours: BTreeSet<String> = ["i-0aaaaaaaaaaaaaaaa".to_owned()].into();
        let of = |kind: &str, at: i64| Delivery {
            kind: kind.into(),
            ..delivery(at, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 900)
        };
        // FIS's order: a rebalance recommendation, the warning, state changes.
        let full = [
            of("rebalance-recommendation", 2_000),
            of("spot-interruption", 3_000),
            of("state-change", 4_000),
        ];
        assert!(tally("alpha", &ours, &full, w, false).passed());
        let no_warning = [
            of("rebalance-recommendation", 2_000),
            of("state-change", 4_000),
        ];
        let v = tally("alpha", &ours, &no_warning, w, false);
        assert!(!v.passed());
        assert!(
            v.problems()[0].contains("no spot interruption warning")
                && v.problems()[0].contains("only: rebalance-recommendation, state-change"),
            "{:?}",
            v.problems()
        );
        // Records from before kinds were written prove nothing either way.
        let v = tally("alpha", &ours, &[of("", 2_000)], w, false);
        assert!(
            v.problems()[0].contains("do not say which kind"),
            "{:?}",
            v.problems()
        );
    }

    #[test]
    fn lambda_wrapped_and_flat_lines_parse_too() {
        let flat = r#"{"outcome":"forwarded","cluster":"alpha","instances":"i-1,i-2","event_id":"x","kind":"state-change","age_ms":7}"#;
        let d = parse_delivery(flat, 5).unwrap();
        assert_eq!(
            (d.cluster.as_str(), d.instances.len(), d.age_ms),
            ("alpha", 2, Some(7))
        );
        let wrapped =
            serde_json::json!({"timestamp": "…", "level": "INFO", "message": flat}).to_string();
        assert_eq!(parse_delivery(&wrapped, 5), Some(d));
        assert_eq!(
            parse_delivery(r#"{"fields":{"outcome":"ignored"}}"#, 0),
            None
        );
        assert_eq!(
            parse_delivery("START RequestId: 1 Version: $LATEST", 0),
            None
        );
    }

    fn template(tags: &[(&str, &str)]) -> Template {
        Template {
            id: "EXT1".into(),
            cluster: None,
            duration_before_interruption: None,
            targets: vec![TargetSelection {
                name: "ClusterSpotInstances".into(),
                resource_type: "aws:ec2:spot-instance".into(),
                resource_tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                by_arn: false,
            }],
            log_group: None,
        }
    }

    #[test]
    fn a_template_must_select_exactly_the_cluster_and_routed_nodes() {
        let managed = "karpenter.sh/nodepool";
        let ok = template(&[("eks:eks-cluster-name", "alpha"), (managed, "default")]);
        assert_eq!(ok.selects_only("alpha", managed), Ok(()));
        let beta = template(&[("eks:eks-cluster-name", "beta"), (managed, "default")]);
        assert!(
            beta.selects_only("alpha", managed)
                .unwrap_err()
                .contains("beta's nodes")
        );
        let unrouted = template(&[("eks:eks-cluster-name", "alpha")]);
        assert!(
            unrouted
                .selects_only("alpha", managed)
                .unwrap_err()
                .contains("does not select by karpenter.sh/nodepool")
        );
        let two = template(&[
            ("eks:eks-cluster-name", "alpha"),
            ("kubernetes.io/cluster/beta", "owned"),
            (managed, "default"),
        ]);
        assert!(
            two.selects_only("alpha", managed)
                .unwrap_err()
                .contains("another cluster")
        );
        let mut by_arn = ok.clone();
        by_arn.targets[0].by_arn = true;
        assert!(by_arn.selects_only("alpha", managed).is_err());
        let mut instances = ok.clone();
        instances.targets[0].resource_type = "aws:ec2:instance".into();
        assert!(instances.selects_only("alpha", managed).is_err());
    }

    #[test]
    fn experiment_logs_and_metric_documents_are_read() {
        let record = serde_json::json!({"id": "EXP1", "log_type": "target-resolution-detail",
            "version": "2", "details": {"resolved_targets": [
                {"arn": "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0",
                 "target_type": "aws:ec2:spot-instance"}]}})
        .to_string();
        assert_eq!(logged_targets(&record, "EXP1"), ["i-0123456789abcdef0"]);
        assert!(logged_targets(&record, "EXP2").is_empty());
        let document = r#"{"_aws":{},"Received":2,"Deliveries":[["alpha","e1","i-1,i-2",900,"spot-interruption"],["beta","e2","i-3",null]]}"#;
        let found = parse_document_deliveries(document, 7);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].instances, ["i-1", "i-2"]);
        assert_eq!((found[0].age_ms, found[1].age_ms), (Some(900), None));
        // Each delivery's kind; none in an earlier build's four-field entries.
        assert_eq!(
            (found[0].kind.as_str(), found[1].kind.as_str()),
            ("spot-interruption", "")
        );
        let wrapped = serde_json::json!({"message": document}).to_string();
        assert_eq!(parse_document_deliveries(&wrapped, 7), found);
    }

    #[test]
    fn durations() {
        assert_eq!(iso8601_duration("PT2M"), Some(Duration::from_secs(120)));
        assert_eq!(
            iso8601_duration("PT1H30M5S"),
            Some(Duration::from_secs(5405))
        );
        assert_eq!(iso8601_duration("PT"), None);
        assert_eq!(iso8601_duration("P1D"), None);
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(
            parse_duration("3").is_err()
                && parse_duration("m").is_err()
                && parse_duration("2d").is_err()
        );
    }

    #[test]
    fn instance_ids_from_fis_target_information() {
        assert_eq!(
            instance_id_in("arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0")
                .as_deref(),
            Some("i-0123456789abcdef0")
        );
        assert_eq!(instance_id_in("i-0123abcd").as_deref(), Some("i-0123abcd"));
        assert_eq!(instance_id_in("spot-instance"), None);
        assert_eq!(instance_id_in("i-xyz"), None);
    }
}
