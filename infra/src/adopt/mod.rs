//! `routerctl adopt`: moves clusters that already run Karpenter with their own interruption
//! set-up (Karpenter's getting-started stack, a Terraform module, or by hand) onto the router,
//! one checked and reversible step at a time, without a moment in which an interruption reaches
//! no queue that Karpenter reads.
//!
//! * [`discover`] reads what the account runs today, by what resources do rather than by names;
//! * [`steps`] evaluates each cluster's ordered steps against that reading;
//! * [`apply`] makes the next step's change (`--apply`), or re-enables the old rules
//!   (`--rollback`).
//!
//! A plan changes nothing. `--apply` makes only the first unfinished step's change, and only when
//! that step is adopt's to make and not blocked or waiting; running it again after a failure
//! resumes, because every step is read back from the account rather than remembered.

mod apply;
mod discover;
pub mod steps;

use std::fmt::Write;

pub use discover::{CONSUMING_WINDOW, PROBE_TAG, RETIRED_TAG, ROLLBACK_TAG};

use anyhow::{Result, bail};

use self::{
    discover::{Evidence, Landscape, OldSetup},
    steps::{Action, State, Step},
};
use crate::aws::Aws;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Plan,
    Apply,
    Rollback,
    Resume,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// The router's base stack.
    pub stack: String,
    /// One cluster (required by apply and rollback); a plan covers all without it.
    pub cluster: Option<String>,
    pub verb: Verb,
    /// `(cluster, role name)`: Karpenter controller roles adopt cannot find by their policies.
    pub karpenter_roles: Vec<(String, String)>,
    /// The tag key that marks Karpenter's nodes (the router's MANAGED_TAG_KEY).
    pub managed_tag: String,
}

impl Options {
    pub fn plan(stack: &str) -> Self {
        Self {
            stack: stack.to_owned(),
            cluster: None,
            verb: Verb::Plan,
            karpenter_roles: Vec::new(),
            managed_tag: interruption_router::config::DEFAULT_MANAGED_TAG_KEY.to_owned(),
        }
    }

    pub fn apply(stack: &str, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            verb: Verb::Apply,
            ..Self::plan(stack)
        }
    }

    pub fn rollback(stack: &str, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            verb: Verb::Rollback,
            ..Self::plan(stack)
        }
    }

    pub fn resume(stack: &str, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            verb: Verb::Resume,
            ..Self::plan(stack)
        }
    }
}

/// One cluster's part of the plan.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    pub name: String,
    pub nodes: usize,
    /// What it runs today, one line per fact.
    pub today: Vec<String>,
    pub steps: Vec<Step>,
    /// Rolled back and not resumed: after pointing Karpenter at the new queue again, the operator
    /// runs `--resume`.
    pub rolled_back: bool,
}

impl ClusterPlan {
    pub fn step(&self, number: u8) -> &Step {
        &self.steps[usize::from(number) - 1]
    }

    /// The first step not finished, if any.
    pub fn next(&self) -> Option<&Step> {
        steps::next(&self.steps)
    }
}

/// What the command did.
#[derive(Debug, Clone)]
pub enum Outcome {
    Planned,
    /// `--apply` made step `step`'s change.
    Applied {
        step: u8,
        did: String,
    },
    /// `--apply` found nothing it may do now.
    Refused {
        step: u8,
        why: String,
    },
    /// Every step is finished.
    Finished,
    /// `--rollback` re-enabled these rules; the helm command points Karpenter back.
    RolledBack {
        enabled: Vec<String>,
        helm: String,
    },
    /// `--resume` recorded that Karpenter reads the new queue again.
    Resumed,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub account: String,
    pub region: String,
    pub stack: String,
    pub shadow: bool,
    /// The clusters planned, after any change was made.
    pub clusters: Vec<ClusterPlan>,
    /// Queues several clusters' Karpenters read.
    pub shared: Vec<String>,
    /// Interruption queues no cluster could be tied to.
    pub unclaimed: Vec<String>,
    /// Rules whose pattern adopt could not evaluate, and why.
    pub unreadable: Vec<(String, String)>,
    pub outcome: Outcome,
}

impl Report {
    /// Exit status 0: a plan, a change made, nothing left to do, or a rollback.
    pub fn passed(&self) -> bool {
        !matches!(self.outcome, Outcome::Refused { .. })
    }

    pub fn cluster(&self, name: &str) -> Option<&ClusterPlan> {
        self.clusters.iter().find(|c| c.name == name)
    }
}

pub async fn run(aws: &Aws, options: &Options) -> Result<Report> {
    let base = discover::base(aws, &options.stack).await?;
    let land = discover::read(aws, base, &options.managed_tag, &options.karpenter_roles).await?;
    let cluster = match (&options.cluster, options.verb) {
        (Some(cluster), _) => {
            if !land.clusters.contains_key(cluster) {
                bail!(
                    "{cluster} is not a cluster adopt sees in {} {}: it has no running instance \
                     tagged {} and no interruption queue tied to it (names: {})",
                    land.account,
                    land.region,
                    options.managed_tag,
                    land.clusters.keys().cloned().collect::<Vec<_>>().join(", ")
                );
            }
            Some(cluster.as_str())
        }
        (None, Verb::Plan) => None,
        (None, _) => bail!("--apply, --rollback and --resume act on one cluster: pass --cluster"),
    };
    let outcome = match (options.verb, cluster) {
        (Verb::Apply, Some(cluster)) => {
            let steps = steps::evaluate(aws, &land, cluster).await;
            match steps::next(&steps) {
                None => Outcome::Finished,
                Some(step) => match &step.action {
                    Action::Apply(change) => Outcome::Applied {
                        step: step.number,
                        did: apply::perform(aws, &land, cluster, change).await?,
                    },
                    Action::Operator(what) => Outcome::Refused {
                        step: step.number,
                        why: format!("step {} is yours: {what}", step.number),
                    },
                    Action::Nothing => Outcome::Refused {
                        step: step.number,
                        why: format!(
                            "step {} is {}: {}",
                            step.number,
                            step.state.label(),
                            step.detail
                        ),
                    },
                },
            }
        }
        (Verb::Rollback, Some(cluster)) => {
            let done = apply::rollback(aws, &land, cluster).await?;
            Outcome::RolledBack {
                enabled: done.enabled,
                helm: done.helm,
            }
        }
        (Verb::Resume, Some(cluster)) => {
            apply::resume(aws, &land, cluster).await?;
            Outcome::Resumed
        }
        _ => Outcome::Planned,
    };
    // After a change, the plan shows the account as it is now.
    let land = match outcome {
        Outcome::Applied { .. } | Outcome::RolledBack { .. } | Outcome::Resumed => {
            discover::read(
                aws,
                land.base,
                &options.managed_tag,
                &options.karpenter_roles,
            )
            .await?
        }
        _ => land,
    };
    let mut clusters = Vec::new();
    for (name, view) in &land.clusters {
        if cluster.is_some_and(|c| c != name) {
            continue;
        }
        clusters.push(ClusterPlan {
            name: name.clone(),
            nodes: view.nodes.len(),
            today: today(&land, name),
            steps: steps::evaluate(aws, &land, name).await,
            rolled_back: matches!(view.switch, discover::Switch::RolledBack(_)),
        });
    }
    let queue_list = |setups: Vec<&OldSetup>| -> Vec<String> {
        setups
            .iter()
            .map(|s| {
                let readers: Vec<&str> = s.clusters.iter().map(|(c, _)| c.as_str()).collect();
                if readers.is_empty() {
                    let roles = match s.readers.as_slice() {
                        [] => String::new(),
                        roles => format!(
                            "; readable by {}, whose policies name no cluster",
                            roles.join(", ")
                        ),
                    };
                    format!("{} ({}; {}{roles})", s.queue.name, rules_line(s), s.owner)
                } else {
                    format!("{} read by {}", s.queue.name, readers.join(", "))
                }
            })
            .collect()
    };
    Ok(Report {
        account: land.account.clone(),
        region: land.region.clone(),
        stack: land.base.name.clone(),
        shadow: land.shadow(),
        clusters,
        shared: queue_list(land.shared()),
        unclaimed: queue_list(land.unclaimed()),
        unreadable: land.unreadable.clone(),
        outcome,
    })
}

/// What a cluster runs today, one fact per line.
fn today(land: &Landscape, name: &str) -> Vec<String> {
    let view = &land.clusters[name];
    let mut lines = Vec::new();
    if let Some(tenant) = &view.tenant {
        lines.push(format!("the router's queue {} exists", tenant.name));
    }
    if view.setups.is_empty() && view.tenant.is_none() {
        lines.push(
            "no interruption set-up found: no default-bus rule sends Karpenter's events to a \
             queue its Karpenter may read, so it handles no interruption today"
                .to_owned(),
        );
    }
    for setup in view.setups.iter().map(|i| &land.setups[*i]) {
        let how = setup
            .clusters
            .iter()
            .find(|(c, _)| c == name)
            .map(|(_, evidence)| evidence.clone())
            .unwrap_or(Evidence::Name);
        let mut line = format!(
            "old queue {}, made by {}; {how}",
            setup.queue.name, setup.owner
        );
        match setup.deleted_recently {
            Some(n) if n > 0.0 => write!(
                line,
                "; {n:.0} message(s) deleted in the last {} min",
                discover::CONSUMING_WINDOW.as_secs() / 60
            )
            .unwrap(),
            Some(_) => line.push_str("; nothing deleted from it lately"),
            None => {}
        }
        lines.push(line);
        lines.push(format!("{} fed by {}", setup.queue.name, rules_line(setup)));
    }
    match &view.controller {
        Some(role) => lines.push(format!("Karpenter's controller role: {role}")),
        None => lines.push(
            "Karpenter's controller role: not found (pass --karpenter-role <cluster>=<role>)"
                .to_owned(),
        ),
    }
    lines
}

/// `5 rules (kinds), 5 enabled, by <owner>: names` for a set-up.
fn rules_line(setup: &OldSetup) -> String {
    if setup.rules.is_empty() {
        return "no rule".to_owned();
    }
    let enabled = setup.rules.iter().filter(|r| r.enabled).count();
    let owners: Vec<String> = {
        let mut owners: Vec<String> = setup
            .rules
            .iter()
            .map(|r| match &r.owner {
                discover::Owner::Stack { stack, .. } => format!("stack {stack}"),
                other => other.to_string(),
            })
            .collect();
        owners.sort();
        owners.dedup();
        owners
    };
    format!(
        "{} rule(s) made by {} ({enabled} enabled): {}",
        setup.rules.len(),
        owners.join("; "),
        setup.kinds().into_iter().collect::<Vec<_>>().join(", "),
    )
}

impl Report {
    pub fn render(&self) -> String {
        let mut out = format!(
            "routerctl adopt: account {}, {}, router stack {}{}\n",
            self.account,
            self.region,
            self.stack,
            if self.shadow {
                " (SHADOW MODE: the router sends nothing; no cluster can move until it forwards)"
            } else {
                ""
            }
        );
        for cluster in &self.clusters {
            let _ = writeln!(
                out,
                "\n{}: {} Karpenter node(s)",
                cluster.name, cluster.nodes
            );
            for (n, line) in cluster.today.iter().enumerate() {
                let _ = writeln!(out, "  {} {line}", if n == 0 { "today:" } else { "      " });
            }
            for step in &cluster.steps {
                let _ = writeln!(
                    out,
                    "  {}. [{:<7}] {}: {}",
                    step.number,
                    step.state.label(),
                    step.title,
                    step.detail
                );
            }
            let next = match cluster.next() {
                None => "nothing: it is on the router and its old set-up is gone".to_owned(),
                Some(step) => match &step.action {
                    Action::Apply(change) => format!(
                        "routerctl adopt --cluster {} --apply {}",
                        cluster.name,
                        change.describe()
                    ),
                    Action::Operator(what) => format!("yours: {what}"),
                    Action::Nothing if step.state == State::Waiting => {
                        format!("wait: {}", step.detail)
                    }
                    Action::Nothing => format!("step {} is blocked: {}", step.number, step.detail),
                },
            };
            let _ = writeln!(out, "  next: {next}");
        }
        if !self.shared.is_empty() {
            let _ = writeln!(
                out,
                "\nqueues several clusters read (each Karpenter deletes the others' messages, so \
                 each cluster misses interruptions):"
            );
            for q in &self.shared {
                let _ = writeln!(out, "  {q}");
            }
        }
        if !self.unclaimed.is_empty() {
            let _ = writeln!(
                out,
                "\ninterruption queues no cluster could be tied to (name one's Karpenter role \
                 with --karpenter-role <cluster>=<role>; adopt leaves them alone):"
            );
            for q in &self.unclaimed {
                let _ = writeln!(out, "  {q}");
            }
        }
        if !self.unreadable.is_empty() {
            let _ = writeln!(out, "\nrules adopt could not evaluate (left alone):");
            for (rule, why) in &self.unreadable {
                let _ = writeln!(out, "  {rule}: {why}");
            }
        }
        match &self.outcome {
            Outcome::Planned => {}
            Outcome::Applied { step, did } => {
                let _ = writeln!(out, "\napplied step {step}: {did}");
            }
            Outcome::Refused { why, .. } => {
                let _ = writeln!(out, "\nnothing applied: {why}");
            }
            Outcome::Finished => {
                let _ = writeln!(out, "\nnothing to apply: every step is done");
            }
            Outcome::Resumed => {
                let _ = writeln!(
                    out,
                    "\nresumed: Karpenter's deletions from the router's queue count from now on"
                );
            }
            Outcome::RolledBack { enabled, helm } => {
                let _ = writeln!(
                    out,
                    "\nrolled back: {}; no old rule is disabled again until you have pointed \
                     Karpenter at the router's queue again and run --resume, and Karpenter is seen \
                     consuming it after that. To go back now, {helm}",
                    if enabled.is_empty() {
                        "the old rules were still enabled".to_owned()
                    } else {
                        format!("re-enabled {}", enabled.join(", "))
                    }
                );
            }
        }
        out
    }
}
