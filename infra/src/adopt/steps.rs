//! The ordered steps that move one cluster onto the router, each read from the account as it is
//! now: what it expects, whether that holds, and what moves it forward (something `--apply`
//! does, or something only the operator can do). One function evaluates them all, in order; a
//! step that depends on an unfinished one is blocked, which is how `--apply` can never run a step
//! out of order (it runs only the first unfinished one).
//!
//! 1. the tenant stack is deployed (`<prefix><cluster>`, admitting the router);
//! 2. Karpenter's controller role may read the new queue;
//! 3. Karpenter points at the new queue (helm; routerctl never edits a cluster);
//! 4. Karpenter is seen consuming the new queue (SQS's NumberOfMessagesDeleted for it);
//! 5. the old rules are disabled; 6. then deleted; 7. the old queue deleted once empty.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use interruption_router::forward::MISSING_QUEUE_RECHECK;

use super::discover::{CONSUMING_WINDOW, Landscape, OldSetup, Owner, Switch, deleted_since};
use crate::{
    aws::Aws,
    events::rfc3339,
    verify::tenants::{Sender, check_karpenter_role, check_tenant_policy},
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Done,
    /// Not done; `Action` moves it forward.
    Todo,
    /// Waiting on something that takes time (metrics, messages expiring).
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
    Probe {
        node: String,
    },
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
}

/// Every step of `cluster`, in order.
pub(crate) async fn evaluate(aws: &Aws, land: &Landscape, cluster: &str) -> Vec<Step> {
    let view = &land.clusters[cluster];
    let base = &land.base;
    let queue_name = land
        .queue_names
        .queue_name(cluster)
        .unwrap_or_else(|| format!("{}{cluster}", land.queue_names.prefix()));
    let tenant_stack = crate::stacks::tenant_stack_name(&base.name, cluster);
    let setups: Vec<&OldSetup> = view.setups.iter().map(|i| &land.setups[*i]).collect();
    let mut steps = Vec::new();
    let mut step = |number, title: String, state, detail: String, action| {
        steps.push(Step {
            number,
            title,
            state,
            detail,
            action,
        })
    };
    let name_role = format!(
        "name Karpenter's controller role of {cluster}: routerctl adopt --cluster {cluster} \
         --karpenter-role {cluster}=<role name>"
    );

    // 1. The tenant stack.
    let router_role = base.output("RouterRoleArn").unwrap_or_default();
    let tenant_ok = match &view.tenant {
        None => None,
        Some(queue) => {
            let sender = Sender {
                label: "router",
                role_arn: router_role,
                account: &base.account,
                partition: &base.partition,
                wrong_role_fix: String::new(),
            };
            let check = check_tenant_policy(queue, &sender, &land.region, "tenant", "");
            Some((check.passed, check.detail))
        }
    };
    let age = view.tenant.as_ref().and_then(queue_age);
    let (state, detail, action) = match (&tenant_ok, &view.controller) {
        (Some((true, _)), _) if age.is_some_and(|age| age < ROUTER_LEARNS) => (
            State::Waiting,
            format!(
                "{queue_name} was created {}s ago; every router instance learns of a new queue \
                 within {}s (it remembers a missing queue that long)",
                age.unwrap_or_default().as_secs(),
                MISSING_QUEUE_RECHECK.as_secs()
            ),
            Action::Nothing,
        ),
        (Some((true, detail)), _) => (
            State::Done,
            format!("{queue_name}: {detail}"),
            Action::Nothing,
        ),
        (Some((false, detail)), _) => (
            State::Blocked,
            format!("{queue_name} exists but its policy is wrong: {detail}"),
            Action::Operator("routerctl verify names the fix".into()),
        ),
        (None, Some(role)) => (
            State::Todo,
            format!("no queue {queue_name}"),
            Action::Apply(Change::DeployTenant {
                stack: tenant_stack.clone(),
                karpenter_role: role.clone(),
            }),
        ),
        (None, None) => (
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

    // 2. Karpenter may read it.
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
            match (check.passed, &view.controller) {
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
        format!("Karpenter's controller role may read {queue_name}"),
        state,
        detail,
        action,
    );

    // 4 first (3 is done when 4 is seen): Karpenter consuming the new queue. After a rollback
    // nothing counts until the operator says Karpenter reads the new queue again (--resume):
    // until the helm command that points it back has run, Karpenter still deletes from it.
    let (since, counted_from) = match view.switch {
        Switch::Resumed(at) => (format!("since --resume at {}", rfc3339(at)), Some(at)),
        _ => (
            format!("in the last {} min", CONSUMING_WINDOW.as_secs() / 60),
            None,
        ),
    };
    let rolled_back = match view.switch {
        Switch::RolledBack(at) => Some(at),
        _ => None,
    };
    let counting = done_2 && !land.shadow() && rolled_back.is_none();
    let consumed = if counting {
        deleted_since(aws, &queue_name, counted_from).await
    } else {
        Ok(0.0)
    };
    let seen = matches!(consumed, Ok(n) if n > 0.0);
    let (state, detail, action) = if seen {
        (
            State::Done,
            "seen consuming it (step 4)".to_owned(),
            Action::Nothing,
        )
    } else if !done_2 {
        (State::Blocked, "after step 2".to_owned(), Action::Nothing)
    } else if land.shadow() {
        (
            State::Blocked,
            format!(
                "the router is in shadow mode and sends nothing to {queue_name}: Karpenter \
                 would see no interruption there"
            ),
            Action::Operator(format!(
                "switch the router to forward mode first: make deploy-base STACK_NAME={} \
                 PARAMS=RoutingMode=Forward (with your usual variables)",
                base.name
            )),
        )
    } else if let Some(at) = rolled_back {
        (
            State::Todo,
            format!(
                "rolled back at {}: Karpenter was to be pointed back at its old queue",
                rfc3339(at)
            ),
            Action::Operator(format!(
                "to resume, {}; then tell adopt it is done: routerctl adopt --cluster {cluster} \
                 --resume",
                helm_command(&queue_name)
            )),
        )
    } else if let Switch::Resumed(at) = view.switch {
        (
            State::Done,
            format!(
                "the operator resumed at {} (step 4 confirms it)",
                rfc3339(at)
            ),
            Action::Nothing,
        )
    } else {
        (
            State::Todo,
            "not visible from AWS: done when step 4 sees Karpenter consume it".to_owned(),
            Action::Operator(helm_command(&queue_name)),
        )
    };
    step(
        3,
        format!("Karpenter points at {queue_name}"),
        state,
        detail,
        action,
    );
    let (state, detail, action) = match (counting, consumed) {
        (false, _) => (State::Blocked, "after step 3".to_owned(), Action::Nothing),
        (true, Ok(n)) if n > 0.0 => (
            State::Done,
            format!("{n:.0} message(s) deleted from {queue_name} {since}"),
            Action::Nothing,
        ),
        (true, Ok(_)) => {
            let probe = view.probed.filter(|at| probe_pending(*at, counted_from));
            let detail = format!(
                "no message deleted from {queue_name} {since} (SQS reports to CloudWatch every \
                 minute){}",
                match probe {
                    Some(at) => format!("; probe sent at {}, awaiting its deletion", rfc3339(at)),
                    None => "; a probe through the router proves Karpenter reads it".to_owned(),
                }
            );
            let action = match (probe, view.nodes.first()) {
                (Some(_), _) => Action::Nothing,
                (None, Some(node)) => Action::Apply(Change::Probe { node: node.clone() }),
                (None, None) => Action::Operator(
                    "no running node to probe with: wait for an interruption event".into(),
                ),
            };
            (State::Waiting, detail, action)
        }
        (true, Err(e)) => (State::Blocked, e, Action::Nothing),
    };
    step(
        4,
        format!("Karpenter seen consuming {queue_name}"),
        state,
        detail,
        action,
    );

    // 5-7. The old set-up, retired only once Karpenter reads the new queue.
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
    let enabled: Vec<String> = old_rules
        .iter()
        .filter(|r| r.enabled)
        .map(|r| r.name.clone())
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
    } else if !entangled.is_empty() && seen {
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
    } else if !seen {
        (
            State::Blocked,
            format!(
                "{} rule(s) still feed {}: they stay until Karpenter is seen reading \
                 {queue_name} (disabling them first would leave it without events)",
                enabled.len(),
                setups[0].queue.name
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
        match owned_elsewhere(old_rules.iter().map(|r| &r.owner)) {
            Some(how) => (
                State::Todo,
                format!(
                    "{} disabled; {how}",
                    old_rules
                        .iter()
                        .map(|r| r.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Action::Operator(how.clone()),
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
    let names: Vec<&str> = setups.iter().map(|s| s.queue.name.as_str()).collect();
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
    } else if let Some(how) = setups.iter().find_map(|s| owned_elsewhere([&s.owner])) {
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
        format!("old queue {} deleted once empty", names.join(", ")),
        state,
        detail,
        action,
    );
    steps
}

/// How long a probe is waited for before `--apply` sends another: SQS reports deletions to
/// CloudWatch every minute, a few minutes late at worst.
pub const PROBE_PATIENCE: Duration = Duration::from_secs(5 * 60);

/// A probe sent within [`PROBE_PATIENCE`], and not before `counted_from` (the last resume), is
/// still awaited. Both times are tags in whole seconds: a probe in the resume's second is after
/// it (adopt sends a probe only once resumed).
fn probe_pending(sent: SystemTime, counted_from: Option<SystemTime>) -> bool {
    let recent = SystemTime::now()
        .duration_since(sent)
        .is_ok_and(|age| age < PROBE_PATIENCE);
    recent && counted_from.is_none_or(|from| sent >= from)
}

/// How long after a tenant queue's creation adopt counts on every router instance sending to
/// it: [`MISSING_QUEUE_RECHECK`], plus a margin for SQS's whole-second timestamp and clock skew.
pub const ROUTER_LEARNS: Duration = Duration::from_secs(MISSING_QUEUE_RECHECK.as_secs() + 3);

/// How long ago SQS created the queue (its CreatedTimestamp, whole seconds).
fn queue_age(queue: &crate::verify::queues::Queue) -> Option<Duration> {
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

/// Why adopt must not delete these itself, when a tool owns them.
fn owned_elsewhere<'a>(owners: impl IntoIterator<Item = &'a Owner>) -> Option<String> {
    let mut stacks: Vec<(String, Vec<String>)> = Vec::new();
    let mut terraform = false;
    for owner in owners {
        match owner {
            Owner::Stack { stack, logical } => match stacks.iter_mut().find(|(s, _)| s == stack) {
                Some((_, ids)) => ids.push(logical.clone()),
                None => stacks.push((stack.clone(), vec![logical.clone()])),
            },
            Owner::Unknown { tool_hint: Some(_) } => terraform = true,
            Owner::Unknown { tool_hint: None } => {}
        }
    }
    if let Some((stack, ids)) = stacks.first() {
        return Some(format!(
            "owned by stack {stack}: remove {} from its template and update it (adopt does not \
             delete what CloudFormation owns: the stack would re-create it, and Karpenter's \
             getting-started stack also holds Karpenter's IAM, so do not delete the stack)",
            ids.join(", ")
        ));
    }
    terraform.then(|| {
        "tagged as Terraform's: remove them from the Terraform configuration that made them \
         (adopt does not delete them: the next apply would re-create them)"
            .to_owned()
    })
}

/// The helm command that points an installed Karpenter at `queue`, keeping its chart version and
/// namespace (tools/karpenter_helm.sh prints the same for `make deploy-tenant`).
pub fn helm_command(queue: &str) -> String {
    format!(
        "point Karpenter at {queue}, keeping its chart version and namespace: \
         NS=$(helm list --all-namespaces --filter '^karpenter$' --output json | jq -r '.[0].namespace'); \
         VERSION=$(helm get metadata karpenter --namespace \"$NS\" --output json | jq -r .version); \
         helm upgrade karpenter oci://public.ecr.aws/karpenter/karpenter --namespace \"$NS\" \
         --version \"$VERSION\" --reuse-values --set settings.interruptionQueue={queue}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_tool_owns_is_left_to_that_tool() {
        let stack = |logical: &str| Owner::Stack {
            stack: "Karpenter-alpha".into(),
            logical: logical.into(),
        };
        let how = owned_elsewhere([&stack("SpotInterruptionRule"), &stack("RebalanceRule")])
            .expect("a stack owns them");
        assert!(how.contains("owned by stack Karpenter-alpha"), "{how}");
        assert!(how.contains("SpotInterruptionRule, RebalanceRule"), "{how}");
        assert!(how.contains("do not delete the stack"), "{how}");
        let terraform = Owner::Unknown {
            tool_hint: Some("Terraform".into()),
        };
        let how = owned_elsewhere([&terraform]).expect("Terraform owns it");
        assert!(how.contains("Terraform configuration"), "{how}");
        assert_eq!(owned_elsewhere([&Owner::Unknown { tool_hint: None }]), None);
    }

    #[test]
    fn a_probe_is_awaited_for_a_while_and_only_one_sent_since_the_resume() {
        let now = SystemTime::now();
        assert!(probe_pending(now - Duration::from_secs(60), None));
        assert!(!probe_pending(
            now - PROBE_PATIENCE - Duration::from_secs(1),
            None
        ));
        let resumed = now - Duration::from_secs(30);
        assert!(!probe_pending(now - Duration::from_secs(60), Some(resumed)));
        assert!(probe_pending(now - Duration::from_secs(10), Some(resumed)));
    }
}
