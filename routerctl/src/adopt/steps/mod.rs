//! The ordered steps that move one cluster onto the router, each read from the account as it is
//! now: what it expects, whether that holds, and what moves it forward (something `--apply`
//! does, or something only the operator can do). One function evaluates them all, in order; a
//! step that depends on an unfinished one is blocked, which is how `--apply` can never run a step
//! out of order (it runs only the first unfinished one).
//!
//! 1. the tenant stack is deployed (`<prefix><cluster>`, a tenant queue admitting the router);
//! 2. Karpenter's controller role may read the new queue, and no other cluster's may;
//! 3. Karpenter is pointed at the new queue (the operator's helm command), then `--apply` starts
//!    step 4's round;
//! 4. evidence, read by `--apply` ([`super::evidence`]): the probe through the router was taken
//!    from the new queue, and the sentinel in the old queue was received by nobody (or, where the
//!    old queue holds a backlog a look cannot search, SQS counted no receive or delete from it);
//! 5. the old rules are disabled, by the `--apply` that read that evidence, and only then;
//! 6. the old rules deleted; 7. the old queue deleted once empty: by adopt only what no tool made
//!    and the operator says they made by hand, else the exact instruction.
//!
//! `evaluate` is that list; each step's judgement is a function of its own, over the `Facts`
//! all steps read: steps 1-4 (the new queue, Karpenter's move) in `moving.rs`, steps 5-7 (the old
//! set-up retired) in `retiring.rs`.

pub(crate) mod moving;
mod retiring;

use std::time::SystemTime;

pub use self::moving::ROUTER_LEARNS;
use super::{
    Options,
    discover::{Cluster, Landscape, OldRule, OldSetup},
    evidence::{
        Round,
        counts::{self, Counted},
    },
    helm,
};
use crate::cloud::moves::Moves;
use crate::deployment::Queue;
use router_core::event::{Kind, Kinds};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Done,
    /// Not done; `Action` moves it forward.
    Todo,
    /// Waiting on something that takes time (a new queue's propagation, a round of evidence,
    /// CloudWatch's minutes, a queue emptying).
    Waiting {
        /// The account's instant this wait ends by time alone; none where it ends on something
        /// adopt cannot time (CloudWatch's minutes arriving, a queue emptying). Looking before
        /// it only reads the same plan again.
        until: Option<SystemTime>,
    },
    /// Waiting on an earlier step, or on something adopt must not decide.
    Blocked,
    /// Nothing to do: the cluster has no old set-up.
    NotNeeded,
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::Done => "done",
            State::Todo => "to do",
            State::Waiting { .. } => "waiting",
            State::Blocked => "blocked",
            State::NotNeeded => "-",
        }
    }

    fn finished(&self) -> bool {
        matches!(self, State::Done | State::NotNeeded)
    }
}

/// What moves a step forward.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--apply` does it.
    Apply(Change),
    /// The operator does it (the text says how).
    Operator(String),
    Nothing,
}

/// The event kinds a tenant is deployed with: those the cluster's old rules delivered (enabled
/// rules; a team that dropped or disabled a kind's rule keeps it off), all five where no rule is
/// found. The router's queue also takes rebalance recommendations while adopt needs them: step
/// 4's probe is one (Karpenter only records a Kubernetes event for it), so a choice without them
/// gets them added, and the plan says how to take them out once adopted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantKinds {
    /// What the old rules delivered.
    pub chosen: Kinds,
    /// What the tenant is deployed with: `chosen` and rebalance recommendations.
    pub deployed: Kinds,
}

pub fn tenant_kinds(old_rules: &[&OldRule]) -> TenantKinds {
    let delivered: Kinds = old_rules
        .iter()
        .filter(|r| r.enabled)
        .flat_map(|r| r.kinds.iter().copied())
        .collect();
    let chosen = if delivered.is_empty() {
        Kinds::ALL
    } else {
        delivered
    };
    TenantKinds {
        chosen,
        deployed: chosen.with(Kind::RebalanceRecommendation),
    }
}

/// An AWS-side change `--apply` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    DeployTenant {
        stack: String,
        karpenter_role: String,
        /// What the old rules delivered ([`tenant_kinds`]).
        kinds: TenantKinds,
    },
    GrantKarpenter {
        stack: String,
        karpenter_role: String,
    },
    /// Step 4's round: the probe through the router, a sentinel into each old queue.
    StartRound {
        node: String,
    },
    /// Reads the round; if it holds, step 5 in the same run.
    ReadRound,
    DisableRules(Vec<String>),
    /// Each rule's old-queue target removed, the rule deleted once it has no target left; the
    /// queues are marked first ([`super::discover::RETIRED_TAG`]) so they stay found.
    DeleteRules {
        rules: Vec<(String, String)>,
        queues: Vec<String>,
    },
    DeleteQueue {
        url: String,
    },
}

#[derive(Debug, Clone)]
pub struct Step {
    pub number: u8,
    pub title: String,
    pub state: State,
    pub detail: String,
    pub action: Action,
    /// A command for the operator to run first, printed under the plan (the helm snippet).
    pub snippet: Option<String>,
}

/// Whether step 4's evidence holds: read in this very run (the `--apply` that then disables the
/// old rules), or read earlier with every old rule disabled since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proven {
    /// Read from the account's marks.
    Recorded,
    /// This run read it and it held.
    JustRead,
}

/// What a step decided: its state, what it found, and what moves it forward.
type Judged = (State, String, Action);

/// One cluster as every step reads it, named once.
pub(super) struct Facts<'a> {
    land: &'a Landscape,
    view: &'a Cluster,
    cluster: &'a str,
    options: &'a Options,
    base: &'a crate::deployment::Base,
    /// The tenant queue's name, and the tenant stack that makes it.
    queue_name: String,
    tenant_stack: String,
    /// The old set-ups its Karpenter reads, their rules, and their queues' names.
    setups: Vec<&'a OldSetup>,
    old_rules: Vec<&'a OldRule>,
    old_names: Vec<&'a str>,
    /// The old rules still enabled.
    enabled: Vec<String>,
    /// What step 2 tells the operator when Karpenter's role is not known.
    name_role: String,
    rolled_back: Option<SystemTime>,
    /// Step 4's evidence holds ([`Proven`]).
    evidenced: bool,
    /// The evidence round under way, unless a rollback or its queues' retention voided it.
    round: Option<&'a Round>,
    /// A round was under way and expired.
    expired: bool,
    /// For a round with a backlog whose window has ended: SQS's counts of each old queue as
    /// CloudWatch has them now (none where they could not be read: `--apply` says why).
    counted: Vec<(&'a str, Option<Counted>)>,
    /// The account's clock as adopt reads it (the seam's: AWS's wall clock, or the model's).
    now: SystemTime,
}

impl<'a> Facts<'a> {
    fn new(
        land: &'a Landscape,
        cluster: &'a str,
        options: &'a Options,
        evidence: Proven,
        now: SystemTime,
    ) -> Self {
        let view = &land.clusters[cluster];
        let base = &land.base;
        let queue_name = land
            .queue_names
            .queue_name(cluster)
            .unwrap_or_else(|| format!("{}{cluster}", land.queue_names.prefix()));
        let setups: Vec<&OldSetup> = view.setups.iter().map(|i| &land.setups[*i]).collect();
        let enabled: Vec<String> = setups
            .iter()
            .flat_map(|s| &s.rules)
            .filter(|r| r.enabled)
            .map(|r| r.name.clone())
            .collect();
        let old_queues: Vec<&Queue> = setups.iter().map(|s| &s.queue).collect();
        let rolled_back = view.rolled_back;
        let after_rollback = |at: SystemTime| rolled_back.is_none_or(|rb| at > rb);
        let evidenced = match evidence {
            Proven::JustRead => true,
            // Evidence read earlier counts only once every old rule is disabled: it was read by
            // the run that disabled them. Rules enabled again need new evidence.
            Proven::Recorded => view.verified.is_some_and(after_rollback) && enabled.is_empty(),
        };
        let round = view.round.as_ref().filter(|r| {
            after_rollback(r.started)
                && !r.expired(now, old_queues.iter().copied().chain(&view.tenant))
        });
        Facts {
            land,
            view,
            cluster,
            options,
            base,
            tenant_stack: aws_model::stacks::tenant_stack_name(&base.name, cluster),
            old_rules: setups.iter().flat_map(|s| s.rules.iter()).collect(),
            old_names: old_queues.iter().map(|q| q.name.as_str()).collect(),
            setups,
            enabled,
            name_role: format!(
                "name Karpenter's controller role of {cluster}: {} --karpenter-role \
                 {cluster}=<role name>",
                options.command(cluster)
            ),
            rolled_back,
            evidenced,
            expired: view.round.is_some() && round.is_none(),
            round,
            queue_name,
            counted: Vec::new(),
            now,
        }
    }

    /// Reads SQS's counts of the old queues, where a ripe round with a backlog needs them.
    async fn count(&mut self, site: &impl Moves) {
        let now = self.now;
        let Some(window) = self.round.filter(|r| r.ripe(now)).and_then(|r| r.window()) else {
            return;
        };
        for setup in &self.setups {
            let name = setup.queue.name.as_str();
            let counted = counts::fetch(site, name, &window)
                .await
                .ok()
                .map(|points| counts::judge(&window, &points));
            self.counted.push((name, counted));
        }
    }
}

/// Every step of `cluster`, in order: each blocked until the one before it is done.
pub(crate) async fn evaluate(
    site: &impl Moves,
    land: &Landscape,
    cluster: &str,
    options: &Options,
    evidence: Proven,
) -> Vec<Step> {
    let mut f = Facts::new(land, cluster, options, evidence, site.now());
    f.count(site).await;
    let q = &f.queue_name;
    let mut steps = Vec::new();
    let mut step = |number, title: String, (state, detail, action): Judged| {
        let done = state == State::Done;
        steps.push(Step {
            number,
            title,
            state,
            detail,
            action,
            snippet: None,
        });
        done
    };
    let done_1 = step(
        1,
        format!("tenant stack deployed ({q})"),
        moving::tenant_stack(&f),
    );
    let done_2 = step(
        2,
        format!("Karpenter's controller role may read {q}, no other cluster's"),
        moving::karpenter_may_read(site, &f, done_1).await,
    );
    let pointed = moving::karpenter_pointed(&f, done_2);
    // The helm command goes with step 3 while the operator has it to run.
    let snippet = (pointed.0 == State::Todo).then(|| {
        helm::snippet(&helm::Target {
            cluster,
            account: &land.account,
            region: &land.region,
            queue: q,
        })
    });
    step(3, format!("Karpenter pointed at {q}"), pointed);
    let done_4 = step(
        4,
        moving::seen_title(&f),
        moving::karpenter_seen(&f, evidence),
    );
    if f.setups.is_empty() {
        for (n, title) in [
            (5, "old rules disabled"),
            (6, "old rules deleted"),
            (7, "old queue deleted once empty"),
        ] {
            let gone = "no old interruption set-up left".into();
            step(n, title.into(), (State::NotNeeded, gone, Action::Nothing));
        }
    } else {
        let done_5 = step(
            5,
            "old rules disabled".into(),
            retiring::old_rules_disabled(&f, done_4),
        );
        let done_6 = step(
            6,
            "old rules deleted".into(),
            retiring::old_rules_deleted(&f, done_5),
        );
        step(
            7,
            format!("old queue {} deleted once empty", f.old_names.join(", ")),
            retiring::old_queue_deleted(&f, done_6),
        );
    }
    steps[2].snippet = snippet;
    steps
}

/// The first step not finished: what `--apply` acts on.
pub fn next(steps: &[Step]) -> Option<&Step> {
    steps.iter().find(|s| !s.state.finished())
}

#[cfg(test)]
mod tests {
    use super::{Kind, Kinds, OldRule, tenant_kinds};
    use crate::adopt::discover::Owner;

    fn rule(kinds: &[Kind], enabled: bool) -> OldRule {
        OldRule {
            name: format!("{kinds:?}"),
            arn: String::new(),
            enabled,
            kinds: kinds.to_vec(),
            target_id: "1".into(),
            other_targets: Vec::new(),
            owner: Owner::Unmarked,
        }
    }

    /// EKS Blueprints' set-up has no capacity-reservation rule: its cluster keeps that choice.
    #[test]
    fn a_tenant_takes_what_the_enabled_old_rules_delivered() {
        let rules = [
            rule(&[Kind::SpotInterruption], true),
            rule(&[Kind::RebalanceRecommendation], true),
            rule(&[Kind::StateChange], true),
            rule(&[Kind::ScheduledChange], true),
            // Disabled by its team: off, as a deleted rule is.
            rule(&[Kind::CapacityReservationInterruption], false),
        ];
        let kinds = tenant_kinds(&rules.iter().collect::<Vec<_>>());
        assert_eq!(kinds.chosen, kinds.deployed);
        assert!(!kinds.chosen.contains(Kind::CapacityReservationInterruption));
        assert_eq!(kinds.chosen.iter().count(), 4);
    }

    #[test]
    fn rebalance_is_added_for_the_probe_and_no_rule_means_every_kind() {
        let rules = [rule(&[Kind::SpotInterruption, Kind::StateChange], true)];
        let kinds = tenant_kinds(&rules.iter().collect::<Vec<_>>());
        let chosen: Kinds = [Kind::SpotInterruption, Kind::StateChange]
            .into_iter()
            .collect();
        assert_eq!(kinds.chosen, chosen);
        assert_eq!(kinds.deployed, chosen.with(Kind::RebalanceRecommendation));
        assert_eq!(tenant_kinds(&[]).chosen, Kinds::ALL);
    }
}
