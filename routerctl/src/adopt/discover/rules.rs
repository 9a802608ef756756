//! The default bus's rules that send Karpenter's kinds to SQS queues: each rule's pattern is
//! matched, as EventBridge would match it, against an event of each kind from this account and
//! region; a pattern with a filter the matcher does not read is reported, never guessed.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use router_core::event::Kind;
use serde_json::Value;

use super::{OldRule, owners::Owner};
use crate::cloud::moves::Moves;
use aws_model::{
    events::Origin,
    patterns::{Matched, matches},
    resources::missing,
};

/// An event of each of Karpenter's kinds, from this account and region, to match patterns with.
fn representatives(account: &str, region: &str) -> Vec<(Kind, Value)> {
    let origin = Origin {
        account: account.to_owned(),
        region: region.to_owned(),
    };
    let instance = "i-0123456789abcdef0";
    vec![
        (
            Kind::SpotInterruption,
            origin.spot_warning(instance, "probe").event,
        ),
        (
            Kind::RebalanceRecommendation,
            origin.rebalance(instance, "probe").event,
        ),
        (
            Kind::StateChange,
            origin.state_change(instance, "terminated", "probe").event,
        ),
        (
            Kind::ScheduledChange,
            origin
                .scheduled_change(&[instance.to_owned()], "probe")
                .event,
        ),
        (
            Kind::CapacityReservationInterruption,
            origin.capacity_reservation(instance, "probe").event,
        ),
    ]
}

/// The default bus's rules that select any of Karpenter's kinds, one entry per SQS target
/// (target queue ARN, rule), leaving out those targeting the router's own queues; and the rules
/// whose pattern could not be evaluated.
pub(super) async fn interruption_rules(
    site: &impl Moves,
    account: &str,
    region: &str,
    router_targets: &BTreeSet<String>,
) -> Result<(Vec<(String, OldRule)>, Vec<(String, String)>)> {
    let events = representatives(account, region);
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    let listed = site
        .default_bus_rules()
        .await
        .map_err(|e| anyhow::anyhow!("ListRules: {e}"))?;
    for rule in &listed {
        let (name, arn) = (rule.name.as_str(), rule.arn.as_str());
        let Some(pattern) = rule.event_pattern.as_deref() else {
            continue;
        };
        let Ok(pattern) = serde_json::from_str::<Value>(pattern) else {
            continue;
        };
        let mut kinds = Vec::new();
        for (kind, event) in &events {
            match matches(&pattern, event) {
                Matched::Yes => kinds.push(*kind),
                Matched::No => {}
                Matched::Unknown(why) => {
                    unreadable.push((name.to_owned(), why));
                    kinds.clear();
                    break;
                }
            }
        }
        if kinds.is_empty() {
            continue;
        }
        let targets = match site.targets(name, None).await {
            Ok(targets) => targets,
            // Deleted since ListRules (a colleague, its tool, another cluster's adopt): it routes
            // nothing any more.
            Err(e) if e.code == missing::RESOURCE => continue,
            Err(e) => anyhow::bail!("ListTargetsByRule {name}: {e}"),
        };
        let arns: Vec<&str> = targets.iter().map(|t| t.arn()).collect();
        for target in &targets {
            let queue = target.arn();
            if !queue.contains(":sqs:") || router_targets.contains(queue) {
                continue;
            }
            found.push((
                queue.to_owned(),
                OldRule {
                    name: name.to_owned(),
                    arn: arn.to_owned(),
                    enabled: rule.state.as_deref() != Some("DISABLED"),
                    kinds: kinds.clone(),
                    target_id: target.id.clone(),
                    other_targets: arns
                        .iter()
                        .filter(|a| **a != queue)
                        .map(|a| a.to_string())
                        .collect(),
                    owner: Owner::Unmarked,
                },
            ));
        }
    }
    Ok((found, unreadable))
}

pub(super) async fn rule_tags(site: &impl Moves, arn: &str) -> BTreeMap<String, String> {
    site.rule_tags(arn).await.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_representative_the_routers_patterns_select() {
        for (kind, event) in representatives("111111111111", "us-east-1") {
            assert!(matches(&kind.event_pattern(), &event).is_yes(), "{kind}");
            assert!(matches(&kind.event_pattern_in("111111111111"), &event).is_yes());
        }
    }
}
