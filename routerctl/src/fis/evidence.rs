//! What the router recorded for each delivery (its metric documents' `Deliveries`, or the older
//! `forwarded` log line), read back over the experiment's window, and the verdict on it.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use anyhow::{Context, Result};
use serde_json::Value;

use super::CLOCK_SKEW;
use crate::cloud::experiments::Experiments;

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
    // An interruption record (`record`: router_core::insight) is data about the same delivery,
    // not its line.
    if fields["outcome"] != "forwarded" || fields.get("record").is_some() {
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

/// The base stack's RouterLogGroup (the function's LoggingConfig points at it).
pub async fn router_log_group(aws: &impl Experiments, stack: &str) -> Result<String> {
    aws.stack_resources(stack)
        .await
        .map_err(|e| anyhow::anyhow!("DescribeStackResources {stack}: {e}"))?
        .remove("RouterLogGroup")
        .with_context(|| format!("stack {stack} has no resource RouterLogGroup"))
        .context("finding the router's log group (pass --stack, or --log-group)")
}

/// Every delivery the router recorded in `window`: from its metric documents' `Deliveries`,
/// which every log level keeps, or, when there are none (a router build before them), from its
/// `forwarded` lines, which INFO keeps.
pub async fn deliveries(
    aws: &impl Experiments,
    log_group: &str,
    window: Window,
) -> Result<Vec<Delivery>> {
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
pub(super) async fn logged(
    aws: &impl Experiments,
    log_group: &str,
    window: Window,
    pattern: &str,
    parse: impl Fn(&str, i64) -> Vec<Delivery>,
) -> Result<Vec<Delivery>> {
    let events = aws
        .log_events(log_group, pattern, window.from_ms, window.to_ms)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "FilterLogEvents on {log_group}: {e} (wrong --log-group? the caller needs \
                 logs:FilterLogEvents)"
            )
        })?;
    Ok(events
        .iter()
        .flat_map(|(at, message)| parse(message, *at))
        .collect())
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
