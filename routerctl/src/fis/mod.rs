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

mod duration;
mod evidence;
mod experiment;
#[cfg(test)]
mod on_the_model;
mod template;
#[cfg(test)]
mod tests;

use std::{
    collections::BTreeSet,
    time::{Duration, UNIX_EPOCH},
};

use anyhow::{Result, bail};

use crate::cloud::experiments::Experiments;

pub use self::duration::{iso8601_duration, parse_duration};
pub use self::evidence::{
    ClusterTally, Delivery, Verdict, Window, deliveries, parse_delivery, parse_document_deliveries,
    router_log_group, tally, window,
};
pub use self::experiment::{Experiment, experiment_instances, logged_targets, start, wait};
use self::template::target_cluster;
pub use self::template::{TargetSelection, Template, describe_template, find_template};
/// The tag fis.yaml selects instances by, and the tags it puts on the template.
pub const CLUSTER_TAG: &str = "eks:eks-cluster-name";
/// Other tags that name a cluster (the router's default CLUSTER_TAG_KEYS): a template selecting
/// another cluster by one of them is refused too.
const OTHER_CLUSTER_TAGS: [&str; 2] = ["aws:eks:cluster-name", "kubernetes.io/cluster/"];
/// How much earlier than FIS's start time an event may be logged (clocks, FIS's own latency).
pub const CLOCK_SKEW: Duration = Duration::from_secs(5);
/// Added to the interruption delay: CloudWatch Logs delivery and the state changes' own lag.
pub const LOG_DELIVERY: Duration = Duration::from_secs(60);

/// What to run and report on: `routerctl fis`'s flags (`--yes` and `--region` aside).
#[derive(Debug, Clone, clap::Args)]
#[command(group = clap::ArgGroup::new("experiment").required(true).multiple(true).args(["cluster", "template_id", "experiment_id"]))]
pub struct Options {
    /// The target cluster; its template is the one tagged cluster=<name> (found from the
    /// template when not given).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Start this experiment template instead of looking it up.
    #[arg(long)]
    pub template_id: Option<String>,
    /// Report on an experiment that already ran; starts nothing.
    #[arg(long, conflicts_with = "template_id")]
    pub experiment_id: Option<String>,
    /// The base stack, whose RouterLogGroup holds the router's logs.
    #[arg(long, default_value = "interruption-router")]
    pub stack: String,
    /// Read the router's logs from this log group instead.
    #[arg(long)]
    pub log_group: Option<String>,
    /// How long after the experiment to keep collecting (e.g. 3m); default: the template's
    /// durationBeforeInterruption plus 60 s (LOG_DELIVERY).
    #[arg(long, value_parser = parse_duration)]
    pub settle: Option<Duration>,
    /// How often the experiment's state is read while it runs.
    #[arg(skip = Duration::from_secs(5))]
    pub poll: Duration,
    /// Give up waiting for the experiment after this long.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Also fail if another cluster received any event during the window, even about instances
    /// outside the experiment.
    #[arg(long)]
    pub strict: bool,
    /// The tag the router routes by (its MANAGED_TAG_KEY): the template must select by it.
    #[arg(long, default_value = router_core::config::DEFAULT_MANAGED_TAG_KEY)]
    pub managed_tag: String,
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
            aws_model::events::rfc3339(
                UNIX_EPOCH + Duration::from_millis(self.window.from_ms.max(0) as u64)
            ),
            aws_model::events::rfc3339(
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
pub async fn run(
    aws: &impl Experiments,
    options: &Options,
    progress: impl Fn(&str),
) -> Result<Report> {
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
                        aws.region()
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
            aws.region()
        ))),
        other => other,
    }
}

/// Waits for the experiment and its window, then reads the evidence. `checked` is the template
/// and cluster when this command started the experiment; otherwise they are read here.
async fn observe(
    aws: &impl Experiments,
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
    let wait_ms = window.to_ms - now_ms(aws);
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

/// The clock `aws` keeps (the wall clock in AWS), in ms since the epoch.
pub(super) fn now_ms(aws: &impl crate::cloud::Cloud) -> i64 {
    aws.now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}
