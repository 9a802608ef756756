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
//!    from the new queue, the sentinel in the old queue was received by nobody;
//! 5. the old rules are disabled, by the `--apply` that read that evidence, and only then;
//! 6. the old rules deleted; 7. the old queue deleted once empty: by adopt only what no tool made
//!    and the operator says they made by hand, else the exact instruction.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use interruption_router::forward::MISSING_QUEUE_RECHECK;

use super::{
    Options,
    discover::{Landscape, OldSetup, Owner},
    evidence::QUIET_WINDOW,
    helm,
};
use crate::verify::{
    queues::Queue,
    tenants::{Sender, check_karpenter_role, check_tenant_policy},
};
use aws_model::{aws::Aws, events::rfc3339};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Done,
    /// Not done; `Action` moves it forward.
    Todo,
    /// Waiting on something that takes time (a new queue's propagation, a round of evidence).
    Waiting,
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
            State::Waiting => "waiting",
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

/// An AWS-side change `--apply` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    DeployTenant {
        stack: String,
        karpenter_role: String,
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
pub enum Evidence {
    /// Read from the account's marks.
    Recorded,
    /// This run read it and it held.
    JustRead,
}

/// Every step of `cluster`, in order.
pub(crate) async fn evaluate(
    aws: &Aws,
    land: &Landscape,
    cluster: &str,
    options: &Options,
    evidence: Evidence,
) -> Vec<Step> {
    let view = &land.clusters[cluster];
    let base = &land.base;
    let queue_name = land
        .queue_names
        .queue_name(cluster)
        .unwrap_or_else(|| format!("{}{cluster}", land.queue_names.prefix()));
    let tenant_stack = aws_model::stacks::tenant_stack_name(&base.name, cluster);
    let setups: Vec<&OldSetup> = view.setups.iter().map(|i| &land.setups[*i]).collect();
    let mut steps = Vec::new();
    let mut step = |number, title: String, state, detail: String, action| {
        steps.push(Step {
            number,
            title,
            state,
            detail,
            action,
            snippet: None,
        })
    };
    let name_role = format!(
        "name Karpenter's controller role of {cluster}: routerctl adopt --cluster {cluster} \
         --karpenter-role {cluster}=<role name>"
    );

    // 1. The tenant stack.
    let router_role = base.output("RouterRoleArn").unwrap_or_default();
    let tenant_ok = view.tenant.as_ref().map(|queue| {
        let sender = Sender {
            label: "router",
            role_arn: router_role,
            account: &base.account,
            partition: &base.partition,
            wrong_role_fix: String::new(),
        };
        let check = check_tenant_policy(queue, &sender, &land.region, "tenant", "");
        (check.passed, check.detail)
    });
    let age = view.tenant.as_ref().and_then(queue_age);
    let (state, detail, action) = match (&tenant_ok, &view.controller, &view.name_taken) {
        (None, _, Some((queue, why))) => name_taken(land, cluster, queue, why),
        (Some((true, _)), _, _) if age.is_some_and(|age| age < ROUTER_LEARNS) => (
            State::Waiting,
            format!(
                "{queue_name} was created {}s ago; every router instance learns of a new queue \
                 within {}s (it remembers a missing queue that long)",
                age.unwrap_or_default().as_secs(),
                MISSING_QUEUE_RECHECK.as_secs()
            ),
            Action::Nothing,
        ),
        (Some((true, detail)), _, _) => (
            State::Done,
            format!("{queue_name}: {detail}"),
            Action::Nothing,
        ),
        (Some((false, detail)), _, _) => (
            State::Blocked,
            format!("{queue_name} exists but its policy is wrong: {detail}"),
            Action::Operator("routerctl verify names the fix".into()),
        ),
        (None, Some(role), None) => (
            State::Todo,
            format!("no queue {queue_name}"),
            Action::Apply(Change::DeployTenant {
                stack: tenant_stack.clone(),
                karpenter_role: role.clone(),
            }),
        ),
        (None, None, None) => (
            State::Blocked,
            format!("no queue {queue_name}, and Karpenter's controller role is not known"),
            Action::Operator(name_role.clone()),
        ),
    };
    let done_1 = state == State::Done;
    step(
        1,
        format!("tenant stack deployed ({queue_name})"),
        state,
        detail,
        action,
    );

    // 2. Karpenter may read it, and no other cluster's Karpenter may: a helm command run in that
    // cluster's kube-context would point its Karpenter here, and it would take this cluster's
    // interruptions (and the probe, which would then prove nothing).
    let (state, detail, action) = match (&view.tenant, done_1) {
        (Some(queue), true) => {
            let check = check_karpenter_role(
                aws,
                base,
                cluster,
                queue,
                view.controller.as_deref(),
                "tenant",
            )
            .await;
            let others = other_readers(land, cluster, queue);
            match (check.passed, &view.controller) {
                (true, _) if !others.is_empty() => (
                    State::Blocked,
                    format!(
                        "{} may also read {queue_name}: a helm command run in such a cluster's \
                         kube-context points its Karpenter here, and it takes {cluster}'s \
                         interruptions",
                        others.join(", ")
                    ),
                    Action::Operator(
                        "scope each of those roles' sqs:ReceiveMessage and sqs:DeleteMessage to \
                         its own cluster's queue, then run adopt again"
                            .into(),
                    ),
                ),
                (true, _) => (State::Done, check.detail, Action::Nothing),
                (false, Some(role)) => (
                    State::Todo,
                    check.detail,
                    Action::Apply(Change::GrantKarpenter {
                        stack: tenant_stack.clone(),
                        karpenter_role: role.clone(),
                    }),
                ),
                (false, None) => (
                    State::Blocked,
                    check.detail,
                    Action::Operator(name_role.clone()),
                ),
            }
        }
        _ => (State::Blocked, "after step 1".to_owned(), Action::Nothing),
    };
    let done_2 = state == State::Done;
    step(
        2,
        format!("Karpenter's controller role may read {queue_name}, no other cluster's"),
        state,
        detail,
        action,
    );

    // 3 and 4: Karpenter moved, on evidence.
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
        Evidence::JustRead => true,
        // Evidence read earlier counts only once every old rule is disabled: it was read by the
        // run that disabled them. Rules enabled again need new evidence.
        Evidence::Recorded => view.verified.is_some_and(after_rollback) && enabled.is_empty(),
    };
    let round = view.round.as_ref().filter(|r| {
        after_rollback(r.started) && !r.expired(old_queues.iter().copied().chain(&view.tenant))
    });
    let expired = view.round.is_some() && round.is_none();
    let helm_target = helm::Target {
        cluster,
        account: &land.account,
        region: &land.region,
        queue: &queue_name,
    };
    let (state, detail, action) = if !done_2 {
        (State::Blocked, "after step 2".to_owned(), Action::Nothing)
    } else if evidenced || round.is_some() {
        (State::Done, "step 4 checks it".to_owned(), Action::Nothing)
    } else {
        let mut detail = "run the helm command below (routerctl never edits a cluster), then \
                          --apply, which checks it (step 4)"
            .to_owned();
        if let Some(at) = rolled_back {
            detail = format!(
                "rolled back at {}: Karpenter was to go back to its old queue; to move again, {detail}",
                rfc3339(at)
            );
        } else if expired {
            detail = format!("the last check was not read in time and expired; {detail}");
        }
        let action = match view.nodes.first() {
            Some(node) => Action::Apply(Change::StartRound { node: node.clone() }),
            None => Action::Operator(
                "no running node of the cluster for the probe to name: adopt needs one".into(),
            ),
        };
        (State::Todo, detail, action)
    };
    // The helm command goes with step 3 while the operator has it to run.
    let snippet = (state == State::Todo).then(|| helm::snippet(&helm_target));
    step(
        3,
        format!("Karpenter pointed at {queue_name}"),
        state,
        detail,
        action,
    );
    let old_names: Vec<&str> = old_queues.iter().map(|q| q.name.as_str()).collect();
    let (state, detail, action) = match (evidenced, round) {
        (true, _) => (
            State::Done,
            match (evidence, view.verified) {
                (Evidence::Recorded, Some(at)) => format!(
                    "seen at {}: it read {queue_name}{}",
                    rfc3339(at),
                    if old_names.is_empty() {
                        String::new()
                    } else {
                        format!(" and nothing read {}", old_names.join(", "))
                    }
                ),
                _ => "seen now".to_owned(),
            },
            Action::Nothing,
        ),
        (false, Some(round)) if !round.ripe() => (
            State::Waiting,
            format!(
                "probe and sentinel sent {} s ago: --apply reads them once {} s old",
                round.age().as_secs(),
                QUIET_WINDOW.as_secs()
            ),
            Action::Nothing,
        ),
        (false, Some(round)) => (
            State::Todo,
            format!(
                "probe {} and the sentinels are {} s old: --apply reads them, and if the probe \
                 was taken from {queue_name} and no sentinel from {}, disables the old rules \
                 (step 5) in the same run",
                round.probe,
                round.age().as_secs(),
                if old_names.is_empty() {
                    "an old queue".to_owned()
                } else {
                    old_names.join(", ")
                }
            ),
            Action::Apply(Change::ReadRound),
        ),
        (false, None) => (State::Blocked, "after step 3".to_owned(), Action::Nothing),
    };
    let done_4 = state == State::Done;
    step(
        4,
        format!(
            "Karpenter seen reading {queue_name}{}",
            if old_names.is_empty() {
                String::new()
            } else {
                format!(", nothing reading {}", old_names.join(", "))
            }
        ),
        state,
        detail,
        action,
    );

    // 5-7. The old set-up, retired only on that evidence.
    let old_rules: Vec<_> = setups.iter().flat_map(|s| s.rules.iter()).collect();
    if setups.is_empty() {
        for (n, title) in [
            (5, "old rules disabled"),
            (6, "old rules deleted"),
            (7, "old queue deleted once empty"),
        ] {
            step(
                n,
                title.into(),
                State::NotNeeded,
                "no old interruption set-up left".into(),
                Action::Nothing,
            );
        }
        steps[2].snippet = snippet;
        return steps;
    }
    let shared: Vec<String> = setups
        .iter()
        .filter(|s| s.clusters.len() > 1)
        .map(|s| {
            format!(
                "{} is read by {}",
                s.queue.name,
                s.clusters
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            )
        })
        .collect();
    let entangled: Vec<String> = old_rules
        .iter()
        .filter(|r| r.enabled && !r.other_targets.is_empty())
        .map(|r| format!("{} also feeds {}", r.name, r.other_targets.join(", ")))
        .collect();
    let (state, detail, action) = if !shared.is_empty() {
        (
            State::Blocked,
            format!(
                "{}: each Karpenter deletes the others' messages; move every cluster reading it \
                 first, then retire it",
                shared.join("; ")
            ),
            Action::Nothing,
        )
    } else if !entangled.is_empty() {
        (
            State::Blocked,
            format!(
                "{}: disabling would cut those off too",
                entangled.join("; ")
            ),
            Action::Operator(format!(
                "remove only the target of {} from these rules (aws events remove-targets), \
                 then run adopt again",
                setups[0].queue.name
            )),
        )
    } else if enabled.is_empty() {
        (
            State::Done,
            format!("{} rule(s) disabled or gone", old_rules.len()),
            Action::Nothing,
        )
    } else if !done_4 {
        (
            State::Blocked,
            format!(
                "{} rule(s) still feed {}: they stay until step 4's evidence holds, and the \
                 --apply that reads it disables them",
                enabled.len(),
                old_names.join(", ")
            ),
            Action::Nothing,
        )
    } else {
        (
            State::Todo,
            format!("{} enabled", enabled.join(", ")),
            Action::Apply(Change::DisableRules(enabled.clone())),
        )
    };
    let done_5 = state == State::Done;
    step(5, "old rules disabled".into(), state, detail, action);

    let (state, detail, action) = if old_rules.is_empty() {
        (State::Done, "no old rule left".to_owned(), Action::Nothing)
    } else if !done_5 {
        (State::Blocked, "after step 5".to_owned(), Action::Nothing)
    } else {
        let names: Vec<&str> = old_rules.iter().map(|r| r.name.as_str()).collect();
        match retire_elsewhere(
            land,
            cluster,
            options,
            old_rules.iter().map(|r| &r.owner),
            6,
        ) {
            Some(how) => (
                State::Todo,
                format!("{} disabled, not deleted", names.join(", ")),
                Action::Operator(how),
            ),
            None => (
                State::Todo,
                format!("{} rule(s) disabled, not deleted", old_rules.len()),
                Action::Apply(Change::DeleteRules {
                    rules: old_rules
                        .iter()
                        .map(|r| (r.name.clone(), r.target_id.clone()))
                        .collect(),
                    queues: setups.iter().map(|s| s.queue.url.clone()).collect(),
                }),
            ),
        }
    };
    let done_6 = state == State::Done;
    step(6, "old rules deleted".into(), state, detail, action);

    // Each old queue in turn; the step is done when none is left (and then reads as "-").
    let first = setups[0];
    let (state, detail, action) = if !done_6 {
        (State::Blocked, "after step 6".to_owned(), Action::Nothing)
    } else if let Some(full) = setups.iter().find(|s| s.depth() > 0) {
        (
            State::Waiting,
            format!(
                "{} holds {} message(s), copies of what {queue_name} received too: they expire \
                 with its retention ({} s), or purge them: aws sqs purge-queue --region {} \
                 --queue-url {}",
                full.queue.name,
                full.depth(),
                full.queue
                    .attributes
                    .get("MessageRetentionPeriod")
                    .map_or("?", String::as_str),
                land.region,
                full.queue.url
            ),
            Action::Nothing,
        )
    } else if let Some(how) = setups
        .iter()
        .find_map(|s| retire_elsewhere(land, cluster, options, [&s.owner], 7))
    {
        (State::Todo, how.clone(), Action::Operator(how))
    } else {
        (
            State::Todo,
            format!("{} is empty and fed by no rule", first.queue.name),
            Action::Apply(Change::DeleteQueue {
                url: first.queue.url.clone(),
            }),
        )
    };
    step(
        7,
        format!("old queue {} deleted once empty", old_names.join(", ")),
        state,
        detail,
        action,
    );
    steps[2].snippet = snippet;
    steps
}

/// Step 1 when a queue that is not the router's holds the tenant queue's name: the router never
/// writes it, so the cluster stays on it, and the router's queue needs another name.
fn name_taken(
    land: &Landscape,
    cluster: &str,
    queue: &Queue,
    why: &str,
) -> (State, String, Action) {
    let prefix = land.queue_names.prefix();
    let whose = land
        .setups
        .iter()
        .find(|s| s.queue.name == queue.name)
        .map(|s| format!("the old set-up's queue, made by {}", s.owner))
        .unwrap_or_else(|| "no set-up adopt knows".to_owned());
    let tenants = land
        .clusters
        .values()
        .filter(|c| c.tenant.is_some())
        .count();
    let how = if tenants == 0 {
        format!(
            "give the router a queue prefix no other tool uses before any tenant stack uses this \
             one: make deploy-base STACK_NAME={} PARAMS=QueuePrefix=<prefix, e.g. \
             interruption-router-> (with your usual variables); adopt then plans \
             <prefix>{cluster} next to {}",
            land.base.name, queue.name
        )
    } else {
        format!(
            "{tenants} tenant queue(s) already use the prefix {prefix}: a new prefix \
             (make deploy-base PARAMS=QueuePrefix=…) means re-deploying their tenant stacks and \
             re-pointing their Karpenters too; or leave {cluster} on its own set-up"
        )
    };
    (
        State::Blocked,
        format!(
            "{} exists and the router's tenant stack did not make it ({why}): it is {whose}. The \
             router never writes it, so {cluster} stays on it (counted as not onboarded), and \
             the router's queue for {cluster} cannot take its name",
            queue.name
        ),
        Action::Operator(how),
    )
}

/// Karpenter controller roles of other clusters (or of none adopt can tell) that may read
/// `queue`.
fn other_readers(land: &Landscape, cluster: &str, queue: &Queue) -> Vec<String> {
    let own = land.clusters[cluster].controller.as_deref();
    land.controllers
        .iter()
        .filter(|c| Some(c.role.name()) != own && c.clusters != [cluster])
        .filter(|c| c.role.may("sqs:ReceiveMessage", &queue.arn).is_allowed())
        .map(|c| {
            format!(
                "{} ({})",
                c.role.name(),
                if c.clusters.is_empty() {
                    "its policy names no cluster".to_owned()
                } else {
                    format!("cluster {}", c.clusters.join(", "))
                }
            )
        })
        .collect()
}

/// How long after a tenant queue's creation adopt counts on every router instance sending to
/// it: [`MISSING_QUEUE_RECHECK`], plus a margin for SQS's whole-second timestamp and clock skew.
pub const ROUTER_LEARNS: Duration = Duration::from_secs(MISSING_QUEUE_RECHECK.as_secs() + 3);

/// How long ago SQS created the queue (its CreatedTimestamp, whole seconds).
fn queue_age(queue: &Queue) -> Option<Duration> {
    // Whole seconds in AWS; the emulator writes a fraction.
    let created: f64 = queue.attributes.get("CreatedTimestamp")?.parse().ok()?;
    SystemTime::now()
        .duration_since(UNIX_EPOCH + Duration::from_secs_f64(created.max(0.0)))
        .ok()
        .or(Some(Duration::ZERO))
}

/// The first step not finished: what `--apply` acts on.
pub fn next(steps: &[Step]) -> Option<&Step> {
    steps.iter().find(|s| !s.state.finished())
}

/// The instruction for the operator when adopt may not delete these itself (step 6 or 7): a tool
/// made them, or nothing says who did and the operator has not said "by hand". `None`: adopt
/// deletes them.
fn retire_elsewhere<'a>(
    land: &Landscape,
    cluster: &str,
    options: &Options,
    owners: impl IntoIterator<Item = &'a Owner>,
    step: u8,
) -> Option<String> {
    let mut stacks: Vec<(String, Vec<String>)> = Vec::new();
    let mut tools: Vec<String> = Vec::new();
    let mut unmarked = false;
    for owner in owners {
        match owner {
            Owner::Stack { stack, logical } => match stacks.iter_mut().find(|(s, _)| s == stack) {
                Some((_, ids)) => ids.push(logical.clone()),
                None => stacks.push((stack.clone(), vec![logical.clone()])),
            },
            Owner::Tool { tool, marks } => {
                let line = format!("{tool} ({marks})");
                if !tools.contains(&line) {
                    tools.push(line);
                }
            }
            Owner::Unmarked => unmarked = true,
        }
    }
    if let Some((stack, ids)) = stacks.first() {
        let what = if step == 6 { "rules" } else { "old queue" };
        return Some(format!(
            "stack {stack} owns the {what} ({}): update it with its template edited, not by \
             hand (it would re-create them): routerctl adopt --cluster {cluster} --stack-template \
             > {stack}.yaml (its template without them{}), then aws cloudformation deploy \
             --region {} --stack-name {stack} --template-file {stack}.yaml --capabilities \
             CAPABILITY_IAM CAPABILITY_NAMED_IAM (it keeps the parameters). Do not delete the \
             stack: Karpenter's getting-started stack also holds Karpenter's IAM",
            ids.join(", "),
            if step == 7 {
                format!(
                    ", and what granted the old queue granting {} instead",
                    land.queue_names.queue_name(cluster).unwrap_or_default()
                )
            } else {
                String::new()
            },
            land.region
        ));
    }
    if !tools.is_empty() {
        return Some(format!(
            "made by {}: remove them from that configuration and apply it (adopt deletes no \
             tool's resources: its next apply would re-create them). EKS Blueprints addons: \
             karpenter_enable_spot_termination = false removes its queue and rules; keep \
             Karpenter's settings.interruptionQueue on the router's queue in its values",
            tools.join("; ")
        ));
    }
    (unmarked && !options.delete_hand_made).then(|| {
        format!(
            "no tool's mark on them (no stack; no Terraform, Pulumi, Crossplane or ACK tag or \
             name): if you made them by hand, routerctl adopt --cluster {cluster} --apply \
             --delete-hand-made deletes them; if a tool made them, remove them there"
        )
    })
}
