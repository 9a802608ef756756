//! Steps 1-4: the tenant queue deployed, Karpenter's role allowed to read it (and no other
//! cluster's), Karpenter pointed at it, and seen reading it ([`super::super::evidence`]).

use crate::deployment::Queue;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use router_core::forward::MISSING_QUEUE_RECHECK;

use super::{Action, Change, Facts, Judged, Proven, State};
use crate::cloud::Cloud;
use crate::{
    adopt::{
        connect::Place,
        discover::{Landscape, Owner, Tool},
        evidence::{
            QUIET_WINDOW,
            counts::{self, Counted, Window},
        },
    },
    verify::tenants::{self, Sender, Site, check_karpenter_role, check_tenant_policy},
};
use aws_model::events::rfc3339;

/// Step 1: the tenant stack, and its queue admitting the router.
pub(super) fn tenant_stack(f: &Facts<'_>) -> Judged {
    let &Facts {
        land,
        view,
        cluster,
        base,
        ref queue_name,
        ref tenant_stack,
        ref name_role,
        ..
    } = f;
    let connection = &land.connection;
    let tenant_ok = view.tenant.as_ref().map(|queue| {
        let sender = Sender {
            label: match connection.place {
                Place::Hub => "router",
                Place::Spoke(_) => "spoke role",
            },
            role_arn: connection.sender.as_deref().unwrap_or_default(),
            account: &connection.account,
            partition: &base.partition,
            wrong_role_fix: String::new(),
        };
        let check = check_tenant_policy(queue, &sender, &land.region, "tenant", "");
        (check.passed, check.detail)
    });
    let age = view.tenant.as_ref().and_then(|q| queue_age(q, f.now));
    match (&tenant_ok, &view.controller, &view.name_taken) {
        (None, _, Some((queue, why))) => name_taken(land, cluster, queue, why),
        (Some((true, _)), _, _) if age.is_some_and(|age| age < ROUTER_LEARNS) => (
            State::Waiting {
                until: age.map(|age| f.now + (ROUTER_LEARNS - age)),
            },
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
            match terraform(f) {
                Some(tool) => format!(
                    "no queue {queue_name}. {tool} made the old set-up: to keep the tenant stack \
                     in Terraform too, apply the router's terraform/modules/tenant \
                     (karpenter_role_name = the role Karpenter runs as, e.g. \
                     module.karpenter.iam_role_name) instead of --apply; it deploys the same \
                     stack, {tenant_stack}, and adopt reads it the same"
                ),
                None => format!("no queue {queue_name}"),
            },
            Action::Apply(Change::DeployTenant {
                stack: tenant_stack.clone(),
                karpenter_role: role.clone(),
                kinds: super::tenant_kinds(&f.old_rules),
            }),
        ),
        (None, None, None) => (
            State::Blocked,
            format!("no queue {queue_name}, and Karpenter's controller role is not known"),
            Action::Operator(name_role.clone()),
        ),
    }
}

/// Step 2: Karpenter may read it, and no other cluster's Karpenter may: a helm command run in that
/// cluster's kube-context would point its Karpenter here, and it would take this cluster's
/// interruptions (and the probe, which would then prove nothing).
pub(super) async fn karpenter_may_read(site: &impl Cloud, f: &Facts<'_>, done_1: bool) -> Judged {
    let &Facts {
        land,
        view,
        cluster,
        base,
        ref queue_name,
        ref tenant_stack,
        ref name_role,
        ..
    } = f;
    match (&view.tenant, done_1) {
        (Some(queue), true) => {
            let tenant_site = match &land.connection.place {
                Place::Hub => Site::hub(base, site.region()),
                Place::Spoke(spoke_stack) => Site {
                    base: &base.name,
                    account: &land.connection.account,
                    region: &land.connection.region,
                    partition: &base.partition,
                    place: tenants::Place::Member { spoke_stack },
                    sender: land.connection.sender.as_deref(),
                    queue_prefix: Some(land.queue_names.prefix()),
                    serves_others: false,
                },
            };
            let check = check_karpenter_role(
                site,
                &tenant_site,
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
    }
}

/// Step 3: Karpenter pointed at the new queue: the operator's helm command, then `--apply` starts a
/// round of evidence.
pub(super) fn karpenter_pointed(f: &Facts<'_>, done_2: bool) -> Judged {
    let &Facts {
        view,
        rolled_back,
        evidenced,
        round,
        expired,
        ..
    } = f;
    if !done_2 {
        (State::Blocked, "after step 2".to_owned(), Action::Nothing)
    } else if evidenced || round.is_some() {
        (State::Done, "step 4 checks it".to_owned(), Action::Nothing)
    } else {
        let mut detail = "run the helm command below (routerctl never edits a cluster), then \
                          --apply, which checks it (step 4)"
            .to_owned();
        if let Some(tool) = terraform(f) {
            detail = format!(
                "{detail}. {tool} made the old set-up: where Terraform's helm_release installs \
                 Karpenter, set settings.interruptionQueue = \"{}\" in its values and apply \
                 instead of the helm command (its next apply would revert a helm upgrade); keep \
                 it off the karpenter module's queue_name output, which step 6 empties",
                f.queue_name
            );
        }
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
    }
}

/// The Terraform tool that made the cluster's old set-up, if one did: its owner then writes the
/// tenant stack and the helm values in Terraform, not adopt and helm.
fn terraform(f: &Facts<'_>) -> Option<Tool> {
    f.old_rules
        .iter()
        .map(|r| &r.owner)
        .chain(f.setups.iter().map(|s| &s.owner))
        .find_map(|owner| match owner {
            Owner::Tool { tool, .. } if tool.is_terraform() => Some(*tool),
            _ => None,
        })
}

/// Step 4's title: the new queue read, and nothing reading the old ones.
pub(super) fn seen_title(f: &Facts<'_>) -> String {
    let Facts {
        queue_name,
        old_names,
        ..
    } = f;
    format!(
        "Karpenter seen reading {queue_name}{}",
        if old_names.is_empty() {
            String::new()
        } else {
            format!(", nothing reading {}", old_names.join(", "))
        }
    )
}

/// Step 4: Karpenter seen reading the new queue: the round's probe taken from it, no sentinel from
/// an old one.
pub(super) fn karpenter_seen(f: &Facts<'_>, evidence: Proven) -> Judged {
    let &Facts {
        view,
        evidenced,
        round,
        ref queue_name,
        ref old_names,
        ..
    } = f;
    match (evidenced, round) {
        (true, _) => (
            State::Done,
            match (evidence, view.verified) {
                (Proven::Recorded, Some(at)) => format!(
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
        (false, Some(round)) => match round.window() {
            None if !round.ripe(f.now) => (
                State::Waiting {
                    until: Some(round.ripe_at()),
                },
                format!(
                    "probe and sentinel sent {} s ago: --apply reads them once {} s old",
                    round.age(f.now).as_secs(),
                    QUIET_WINDOW.as_secs()
                ),
                Action::Nothing,
            ),
            None => (
                State::Todo,
                format!(
                    "probe {} and the sentinels are {} s old: --apply reads them, and if the \
                     probe was taken from {queue_name} and no sentinel from {}, disables the old \
                     rules (step 5) in the same run",
                    round.probe,
                    round.age(f.now).as_secs(),
                    if old_names.is_empty() {
                        "an old queue".to_owned()
                    } else {
                        old_names.join(", ")
                    }
                ),
                Action::Apply(Change::ReadRound),
            ),
            Some(window) => counts_awaited(f, &window),
        },
        (false, None) => (State::Blocked, "after step 3".to_owned(), Action::Nothing),
    }
}

/// Step 4 for a round whose look met a backlog: SQS's counts of the old queues decide, once their
/// window has ended and CloudWatch has every minute of it (or adopt has waited long enough to
/// say it cannot tell).
fn counts_awaited(f: &Facts<'_>, window: &Window) -> Judged {
    let olds = f.old_names.join(", ");
    let now = f.now;
    if now < window.closes() {
        return (
            State::Waiting {
                until: Some(window.closes()),
            },
            format!(
                "the look met a backlog it could not search: SQS's own counts of {olds} decide, \
                 over {}; the last of those minutes ends at {}",
                window.describe(),
                rfc3339(window.closes())
            ),
            Action::Nothing,
        );
    }
    let missing: Vec<String> = f
        .counted
        .iter()
        .filter_map(|(queue, counted)| match counted {
            Some(Counted::Incomplete { missing }) => Some(format!(
                "{queue} ({} UTC)",
                missing
                    .iter()
                    .map(|m| counts::clock(*m))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => None,
        })
        .collect();
    let read = f
        .counted
        .iter()
        .any(|(_, c)| matches!(c, Some(Counted::Read { .. })));
    if !read && !missing.is_empty() && now < window.gives_up() {
        return (
            // CloudWatch's minutes come when they come: adopt cannot time them.
            State::Waiting { until: None },
            format!(
                "CloudWatch does not have SQS's counts of {} yet (each minute comes minutes after \
                 it ends); adopt waits for them until {}",
                missing.join(", "),
                rfc3339(window.gives_up())
            ),
            Action::Nothing,
        );
    }
    (
        State::Todo,
        format!(
            "SQS's counts of {olds} over {} can be read: --apply reads them, and if nothing \
             received or deleted a message of {olds}, disables the old rules (step 5) in the \
             same run",
            window.describe()
        ),
        Action::Apply(Change::ReadRound),
    )
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
pub(crate) fn other_readers(land: &Landscape, cluster: &str, queue: &Queue) -> Vec<String> {
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
fn queue_age(queue: &Queue, now: SystemTime) -> Option<Duration> {
    // Whole seconds in AWS; the emulator writes a fraction.
    let created: f64 = queue.attributes.get("CreatedTimestamp")?.parse().ok()?;
    now.duration_since(UNIX_EPOCH + Duration::from_secs_f64(created.max(0.0)))
        .ok()
        .or(Some(Duration::ZERO))
}
