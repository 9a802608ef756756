//! `routerctl adopt`: moves clusters that already run Karpenter with their own interruption
//! set-up (Karpenter's getting-started stack, a Terraform module, EKS Blueprints, or by hand) onto
//! the router, one checked and reversible step at a time, without a moment in which an
//! interruption reaches no queue that Karpenter reads.
//!
//! * `discover` reads what the account runs today, by what resources do rather than by names;
//! * [`steps`] evaluates each cluster's ordered steps against that reading;
//! * [`evidence`] is how adopt knows Karpenter moved: a probe through the router and a sentinel in
//!   the old queue, read by the `--apply` that disables the old rules;
//! * `apply` makes the next step's change (`--apply`), or re-enables the old rules
//!   (`--rollback`), waiting for EventBridge to apply rule changes;
//! * [`helm`] is the command the operator runs to point Karpenter at a queue;
//! * [`stack_edit`] edits the template of a stack that owns an old set-up (`--stack-template`);
//! * `render.rs` writes the report as the operator reads it.
//!
//! A plan changes nothing. `--apply` makes only the first unfinished step's change, and only when
//! that step is adopt's to make and not blocked or waiting; running it again after a failure
//! resumes, because every step is read back from the account rather than remembered.

mod apply;
pub mod connect;
mod discover;
pub mod evidence;
pub mod helm;
#[cfg(test)]
mod on_the_model;
mod render;
pub mod stack_edit;
pub mod steps;

use std::time::Duration;

pub use discover::{Owner, RETIRED_TAG, ROLLBACK_TAG};

use anyhow::{Context, Result, bail};

use self::{
    discover::{Landscape, OldSetup, Tie},
    steps::{Action, Change, Proven, State, Step},
};
use crate::cloud::moves::Moves;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Plan,
    Apply,
    Rollback,
    /// Print the owning stack's template edited for step 6 or 7 ([`stack_edit`]).
    StackTemplate,
}

/// How long adopt waits, by default, after EventBridge reads a rule change back before it counts
/// on it: EventBridge documents no figure ("allow a short period of time"). Waiting costs nothing
/// while both queues are fed; returning too early after a rollback loses what comes meanwhile.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(60);

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
    /// The operator says the old rules and queue adopt finds no tool's mark on were made by hand:
    /// adopt may delete them (steps 6 and 7).
    pub delete_hand_made: bool,
    /// How long after a rule change reads back adopt waits before counting on it.
    pub settle: Duration,
    /// A member account to work in (`--account`), connected by its spoke stack; `None`: the hub's
    /// own account.
    pub member: Option<connect::Member>,
    /// The flags that reach this site (` --account … --profile … --region …`), which every
    /// `routerctl adopt` command adopt prints carries.
    pub site_flags: String,
}

impl Options {
    pub fn plan(stack: &str) -> Self {
        Self {
            stack: stack.to_owned(),
            cluster: None,
            verb: Verb::Plan,
            karpenter_roles: Vec::new(),
            managed_tag: router_core::config::DEFAULT_MANAGED_TAG_KEY.to_owned(),
            delete_hand_made: false,
            settle: DEFAULT_SETTLE,
            member: None,
            site_flags: String::new(),
        }
    }

    /// A plan of one cluster.
    pub fn plan_of(stack: &str, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            ..Self::plan(stack)
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

    pub fn stack_template(stack: &str, cluster: &str) -> Self {
        Self {
            cluster: Some(cluster.to_owned()),
            verb: Verb::StackTemplate,
            ..Self::plan(stack)
        }
    }

    pub fn settle(self, settle: Duration) -> Self {
        Self { settle, ..self }
    }

    /// In `account`, connected by its spoke stack `spoke_stack`, reached with `site_flags`.
    pub fn in_member(self, account: &str, spoke_stack: &str, site_flags: &str) -> Self {
        Self {
            member: Some(connect::Member {
                account: account.to_owned(),
                spoke_stack: spoke_stack.to_owned(),
            }),
            site_flags: site_flags.to_owned(),
            ..self
        }
    }

    /// `routerctl adopt <site flags> --cluster <cluster>`: the start of every command adopt prints.
    pub fn command(&self, cluster: &str) -> String {
        format!("routerctl adopt{} --cluster {cluster}", self.site_flags)
    }

    pub fn delete_hand_made(self) -> Self {
        Self {
            delete_hand_made: true,
            ..self
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
    /// Rolled back, and not seen on the new queue since.
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
    /// `--rollback` re-enabled these rules and waited for EventBridge; the helm command points
    /// Karpenter back.
    RolledBack {
        enabled: Vec<String>,
        waited: Duration,
        helm: String,
    },
    /// `--stack-template`: the owning stack's template, edited for the next step.
    Template {
        stack: String,
        step: u8,
        edit: stack_edit::Edit,
    },
}

#[derive(Debug, Clone)]
pub struct Report {
    pub account: String,
    pub region: String,
    pub stack: String,
    /// The member's spoke stack, when the clusters run in a member account.
    pub spoke_stack: Option<String>,
    /// [`Options::command`] of each cluster is this and ` --cluster <name>`.
    pub command: String,
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

    /// `routerctl adopt <the site's flags> --cluster <cluster>`.
    pub fn command_for(&self, cluster: &str) -> String {
        format!("{} --cluster {cluster}", self.command)
    }
}

/// adopt in the hub's own account and region: one set of clients is both the hub (the base stack) and the site (the clusters).
pub async fn run(site: &impl Moves, options: &Options) -> Result<Report> {
    run_at(site, site, options).await
}

/// adopt with the hub's clients `hub` (the base stack, the router function) and the clients of
/// the account and region the clusters run in, `site` (a member's with `--account`).
pub async fn run_at(hub: &impl Moves, site: &impl Moves, options: &Options) -> Result<Report> {
    let base = discover::base(hub, &options.stack).await?;
    let connection = connect::connect(site, &base, hub.region(), options.member.as_ref()).await?;
    let land = discover::read(
        site,
        base,
        connection,
        &options.managed_tag,
        &options.karpenter_roles,
    )
    .await?;
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
        (None, _) => {
            bail!("--apply, --rollback and --stack-template act on one cluster: pass --cluster")
        }
    };
    let outcome = match (options.verb, cluster) {
        (Verb::Apply, Some(cluster)) => apply_next(site, hub, &land, cluster, options).await?,
        (Verb::Rollback, Some(cluster)) => {
            let done = apply::rollback(site, &land, cluster, options).await?;
            Outcome::RolledBack {
                enabled: done.enabled,
                waited: done.waited,
                helm: done.helm,
            }
        }
        (Verb::StackTemplate, Some(cluster)) => {
            stack_template(site, &land, cluster, options).await?
        }
        _ => Outcome::Planned,
    };
    // After a change, the plan shows the account as it is now.
    let land = match outcome {
        Outcome::Applied { .. } | Outcome::RolledBack { .. } => {
            reread(site, &land, options).await?
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
            steps: steps::evaluate(site, &land, name, options, Proven::Recorded).await,
            rolled_back: view.is_rolled_back(),
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
        spoke_stack: match &land.connection.place {
            connect::Place::Hub => None,
            connect::Place::Spoke(stack) => Some(stack.clone()),
        },
        command: format!("routerctl adopt{}", options.site_flags),
        clusters,
        shared: queue_list(land.shared()),
        unclaimed: queue_list(land.unclaimed()),
        unreadable: land.unreadable.clone(),
        outcome,
    })
}

/// `--apply`: the first unfinished step's change, if it is adopt's to make. Reading a round of
/// evidence is followed, in the same run and only then, by step 5.
async fn apply_next(
    site: &impl Moves,
    hub: &impl Moves,
    land: &Landscape,
    cluster: &str,
    options: &Options,
) -> Result<Outcome> {
    let steps = steps::evaluate(site, land, cluster, options, Proven::Recorded).await;
    let Some(step) = steps::next(&steps) else {
        return Ok(Outcome::Finished);
    };
    Ok(match &step.action {
        Action::Apply(Change::ReadRound) => {
            let reading = apply::read_round(site, hub, land, cluster).await?;
            if let (true, Some(next)) = (reading.problems.is_empty(), &reading.pending) {
                return Ok(Outcome::Applied {
                    step: 4,
                    did: format!("{}; {next}", reading.facts.join("; ")),
                });
            }
            if !reading.held() {
                return Ok(Outcome::Refused {
                    step: 4,
                    why: format!(
                        "step 4's evidence does not hold, nothing changed: {}{}. Run --apply \
                         again once that is fixed: it starts a new check",
                        reading.problems.join("; "),
                        if reading.facts.is_empty() {
                            String::new()
                        } else {
                            format!(" (and: {})", reading.facts.join("; "))
                        }
                    ),
                });
            }
            let seen = reading.facts.join("; ");
            // Step 5 on this evidence, read from the account as it is now.
            let land = reread(site, land, options).await?;
            let steps = steps::evaluate(site, &land, cluster, options, Proven::JustRead).await;
            match steps.iter().find(|s| s.number == 5).map(|s| &s.action) {
                Some(Action::Apply(change @ Change::DisableRules(_))) => Outcome::Applied {
                    step: 5,
                    did: format!(
                        "{seen}; so {}",
                        apply::perform(site, hub, &land, cluster, options, change).await?
                    ),
                },
                _ => Outcome::Applied {
                    step: 4,
                    did: match steps.iter().find(|s| s.number == 5) {
                        Some(five) if five.state == State::Blocked => {
                            format!("{seen}; step 5 is blocked: {}", five.detail)
                        }
                        _ => seen,
                    },
                },
            }
        }
        Action::Apply(change) => Outcome::Applied {
            step: step.number,
            did: apply::perform(site, hub, land, cluster, options, change).await?,
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
    })
}

/// The account read again, around the same base stack.
async fn reread(site: &impl Moves, land: &Landscape, options: &Options) -> Result<Landscape> {
    discover::read(
        site,
        land.base.clone(),
        land.connection.clone(),
        &options.managed_tag,
        &options.karpenter_roles,
    )
    .await
}

/// `--stack-template`: the template of the stack that owns what step 6 or 7 retires, edited.
async fn stack_template(
    site: &impl Moves,
    land: &Landscape,
    cluster: &str,
    options: &Options,
) -> Result<Outcome> {
    let steps = steps::evaluate(site, land, cluster, options, Proven::Recorded).await;
    let next = steps::next(&steps).map_or(0, |s| s.number);
    if !matches!(next, 6 | 7) {
        bail!(
            "{cluster}'s next step is {}: the stack's template is edited at steps 6 (the rules) \
             and 7 (the queue)",
            if next == 0 {
                "none".to_owned()
            } else {
                next.to_string()
            }
        );
    }
    let view = &land.clusters[cluster];
    let setups: Vec<&OldSetup> = view.setups.iter().map(|i| &land.setups[*i]).collect();
    let owned = |owner: &Owner| match owner {
        Owner::Stack { stack, logical } => Some((stack.clone(), logical.clone())),
        _ => None,
    };
    let rules: Vec<(String, String)> = setups
        .iter()
        .flat_map(|s| &s.rules)
        .filter_map(|r| owned(&r.owner))
        .collect();
    let queue = setups.iter().find_map(|s| owned(&s.owner));
    let Some(stack) = rules
        .first()
        .map(|(s, _)| s.clone())
        .or_else(|| queue.as_ref().map(|(s, _)| s.clone()))
    else {
        bail!("no stack owns {cluster}'s old rules or queue: --stack-template has nothing to edit");
    };
    let body = site
        .template_body(&stack)
        .await
        .map_err(|e| anyhow::anyhow!("GetTemplate {stack}: {e}"))?;
    if body.is_empty() {
        bail!("stack {stack} returned no template");
    }
    let rule_ids: Vec<String> = rules
        .into_iter()
        .filter(|(s, _)| *s == stack)
        .map(|(_, id)| id)
        .collect();
    let new_queue = land.queue_names.queue_name(cluster).unwrap_or_default();
    let queue_id = queue
        .filter(|(s, _)| next == 7 && *s == stack)
        .map(|(_, id)| id);
    let edit = stack_edit::retire(
        &body,
        &stack_edit::Retire {
            rules: &rule_ids,
            queue: queue_id.as_deref().map(|id| (id, new_queue.as_str())),
        },
    )
    .with_context(|| format!("editing stack {stack}'s template"))?;
    Ok(Outcome::Template {
        stack,
        step: next,
        edit,
    })
}

/// What a cluster runs today, one fact per line.
fn today(land: &Landscape, name: &str) -> Vec<String> {
    let view = &land.clusters[name];
    let mut lines = Vec::new();
    if let Some(tenant) = &view.tenant {
        lines.push(format!("the router's queue {} exists", tenant.name));
    }
    if let Some((queue, why)) = &view.name_taken {
        lines.push(format!(
            "{} has the router's queue name but the tenant stack did not make it ({why}): the \
             router does not write it",
            queue.name
        ));
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
            .map(|(_, tie)| tie.clone())
            .unwrap_or(Tie::Name);
        lines.push(format!(
            "old queue {}, made by {}; {how}",
            setup.queue.name, setup.owner
        ));
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
                Owner::Stack { stack, .. } => format!("stack {stack}"),
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
