//! Steps 5-7: the old set-up retired, only on step 4's evidence: its rules disabled, then deleted,
//! then its queue deleted once empty; by adopt only what no tool made and the operator says they
//! made by hand, else the exact instruction for whoever owns it.

use super::{Action, Change, Facts, Judged, State};
use crate::adopt::{
    Options,
    discover::{Landscape, Owner, Tool},
};

/// Step 5: the old rules disabled: by the `--apply` that read step 4's evidence, and only then;
/// never while a queue is shared or a rule feeds something else too.
pub(super) fn old_rules_disabled(f: &Facts<'_>, done_4: bool) -> Judged {
    let Facts {
        setups,
        enabled,
        old_names,
        old_rules,
        ..
    } = f;
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
    if !shared.is_empty() {
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
    }
}

/// Step 6: the old rules deleted.
pub(super) fn old_rules_deleted(f: &Facts<'_>, done_5: bool) -> Judged {
    let &Facts {
        land,
        cluster,
        options,
        ref setups,
        ref old_rules,
        ..
    } = f;
    if old_rules.is_empty() {
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
    }
}

/// Step 7: each old queue in turn, deleted once empty; the step is done when none is left (and then
/// reads as "-").
pub(super) fn old_queue_deleted(f: &Facts<'_>, done_6: bool) -> Judged {
    let &Facts {
        land,
        cluster,
        options,
        ref queue_name,
        ref setups,
        ..
    } = f;
    let first = setups[0];
    if !done_6 {
        (State::Blocked, "after step 6".to_owned(), Action::Nothing)
    } else if let Some(full) = setups.iter().find(|s| s.depth() > 0) {
        (
            // Until a purge, or the messages' retention, empties it: no one instant.
            State::Waiting { until: None },
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
    }
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
    let mut tools: Vec<(Tool, String)> = Vec::new();
    let mut unmarked = false;
    for owner in owners {
        match owner {
            Owner::Stack { stack, logical } => match stacks.iter_mut().find(|(s, _)| s == stack) {
                Some((_, ids)) => ids.push(logical.clone()),
                None => stacks.push((stack.clone(), vec![logical.clone()])),
            },
            Owner::Tool { tool, marks } => {
                let line = format!("{tool} ({marks})");
                if !tools.iter().any(|(_, l)| *l == line) {
                    tools.push((*tool, line));
                }
            }
            Owner::Unmarked => unmarked = true,
        }
    }
    if let Some((stack, ids)) = stacks.first() {
        let what = if step == 6 { "rules" } else { "old queue" };
        return Some(format!(
            "stack {stack} owns the {what} ({}): update it with its template edited, not by \
             hand (it would re-create them): {} --stack-template \
             > {stack}.yaml (its template without them{}), then aws cloudformation deploy \
             --region {} --stack-name {stack} --template-file {stack}.yaml --capabilities \
             CAPABILITY_IAM CAPABILITY_NAMED_IAM (it keeps the parameters). Do not delete the \
             stack: Karpenter's getting-started stack also holds Karpenter's IAM",
            ids.join(", "),
            options.command(cluster),
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
        let tenant = land.queue_names.queue_name(cluster).unwrap_or_default();
        let made_by = tools
            .iter()
            .map(|(_, line)| line.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        return Some(match tools[0].0 {
            // One variable gates the module's queue, its rules and its controller policy's
            // statement on that queue; its queue_name output turns null with them.
            Tool::TerraformEksKarpenter => format!(
                "made by {made_by}: set enable_spot_termination = false on that module and \
                 apply: that one apply deletes its queue, its rules and its controller policy's \
                 statement on its queue (the role stays; the router's tenant stack grants it \
                 {tenant}). The messages left in its queue are copies of what {tenant} \
                 received. First check that nothing still reads the module's queue_name \
                 output: the helm_release's settings.interruptionQueue must name {tenant} \
                 (your tenant module's queue_name output), or that apply leaves Karpenter \
                 with none. adopt deletes no tool's resources: its next apply would re-create \
                 them"
            ),
            Tool::EksBlueprints => format!(
                "made by {made_by}: set karpenter_enable_spot_termination = false and apply: it \
                 removes the addon's queue and rules. Keep Karpenter's settings.interruptionQueue \
                 on {tenant} in the addon's values. adopt deletes no tool's resources: its next \
                 apply would re-create them"
            ),
            _ => format!(
                "made by {made_by}: remove them from that configuration and apply it (adopt \
                 deletes no tool's resources: its next apply would re-create them)"
            ),
        });
    }
    (unmarked && !options.delete_hand_made).then(|| {
        format!(
            "no tool's mark on them (no stack; no Terraform, Pulumi, Crossplane or ACK tag or \
             name): if you made them by hand, {} --apply --delete-hand-made deletes them; \
             if a tool made them, remove them there",
            options.command(cluster)
        )
    })
}
