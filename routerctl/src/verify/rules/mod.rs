//! `rule:<name>` (and `spoke:<account>:rule:<name>`): a stack's five rules on the default bus (and,
//! with the base stack's central bus, their five copies there) exist, are ENABLED, carry exactly
//! the pattern the router handles (from its own [`Kind`] list, compared as EventBridge reads
//! patterns; on a default bus only the rule's own account's events, [`Kind::event_pattern_in`]),
//! and deliver where their stack sends them. One check for every site ([`RuleSite`]): the base
//! stack's rules deliver to the ingest queue with the DLQ as dead-letter config (`ingest.rs`); a
//! member account's spoke stack rules forward to the hub's bus as a role EventBridge may assume
//! for that rule and that may put events there (`forward.rs`).

mod forward;
mod ingest;

use crate::deployment::{Base, Role};
use std::collections::{BTreeMap, HashMap};

pub(crate) use self::forward::{DirectQueue, HubBus};
use self::ingest::Delivery;
use router_core::event::Kind;
use serde_json::Value;

use super::report::Check;
use crate::{
    check::{self, Expect},
    cloud::{Cloud, Rule, Target, missing},
};

/// The base stack's rules, by logical id, and the kind each must pass.
pub const RULES: [(&str, Kind); 5] = [
    ("SpotInterruptionRule", Kind::SpotInterruption),
    ("RebalanceRecommendationRule", Kind::RebalanceRecommendation),
    ("StateChangeRule", Kind::StateChange),
    ("ScheduledChangeRule", Kind::ScheduledChange),
    (
        "CapacityReservationInterruptionRule",
        Kind::CapacityReservationInterruption,
    ),
];

/// Their copies on the central bus (CentralBus=Enabled), by logical id.
pub const HUB_RULES: [(&str, Kind); 5] = [
    ("HubSpotInterruptionRule", Kind::SpotInterruption),
    (
        "HubRebalanceRecommendationRule",
        Kind::RebalanceRecommendation,
    ),
    ("HubStateChangeRule", Kind::StateChange),
    ("HubScheduledChangeRule", Kind::ScheduledChange),
    (
        "HubCapacityReservationInterruptionRule",
        Kind::CapacityReservationInterruption,
    ),
];

/// Where a stack's rules are checked, and where they must deliver.
pub(crate) struct RuleSite<'a> {
    pub account: &'a str,
    pub region: &'a str,
    pub partition: &'a str,
    /// The stack's resources, logical id → physical id.
    pub resources: &'a BTreeMap<String, String>,
    /// Check names start with this: "" at the hub, `spoke:<account>:` in a member.
    pub prefix: String,
    /// How the report names the stack ("the stack", "the spoke stack …"), and the fix for one
    /// without a rule.
    pub stack: String,
    pub update: String,
    /// The fix for a rule deleted outside CloudFormation.
    pub recreate: String,
    pub delivers: Delivers<'a>,
}

/// Where a site's rules deliver.
pub(crate) enum Delivers<'a> {
    /// The base stack's: to the ingest queue (`queue`, its ARN when known), with the stack's DLQ.
    Ingest {
        queue: Option<&'a str>,
        dlq: Option<&'a str>,
    },
    /// A spoke stack's: to the hub's bus.
    HubBus(HubBus<'a>),
}

/// What the rule checks found: each existing rule's ARN by logical id, which the queue and
/// function policies must admit, and the roles the forwarding rules' targets use.
#[derive(Default)]
pub(crate) struct Found {
    pub arns: BTreeMap<String, String>,
    pub forwarders: Vec<String>,
}

/// Checks every rule of the base stack (with its central bus, their copies there too).
pub(super) async fn check(aws: &impl Cloud, base: &Base, checks: &mut Vec<Check>) -> Found {
    let hub_bus = base.hub_bus_arn().map(bus_name);
    let site = RuleSite {
        account: &base.account,
        region: aws.region(),
        partition: &base.partition,
        resources: &base.resources,
        prefix: String::new(),
        stack: "the stack".to_owned(),
        update: "update the stack with this project's cloudformation/base.yaml".to_owned(),
        recreate: format!(
            "CloudFormation does not re-create deleted resources on its own: re-create the rule \
             as base.yaml defines it, or delete and re-deploy the stack {}",
            base.name
        ),
        delivers: Delivers::Ingest {
            queue: base.output("IngestQueueArn"),
            dlq: base.output("DeadLetterQueueArn"),
        },
    };
    let rules = RULES.iter().map(|(logical, kind)| (*logical, *kind, None));
    let hub_rules = HUB_RULES
        .iter()
        .filter(|_| hub_bus.is_some())
        .map(|(logical, kind)| (*logical, *kind, hub_bus));
    check_site(aws, &site, rules.chain(hub_rules), checks).await
}

/// Checks `rules` (logical id, the kind it must pass, its bus: `None` for the default bus) at
/// `site`.
pub(crate) async fn check_site<'b>(
    aws: &impl Cloud,
    site: &RuleSite<'_>,
    rules: impl Iterator<Item = (&'b str, Kind, Option<&'b str>)>,
    checks: &mut Vec<Check>,
) -> Found {
    let mut found = Found::default();
    // A role several rules' targets share is read once.
    let mut roles: HashMap<String, Result<Role, String>> = HashMap::new();
    for (logical, kind, bus) in rules {
        let (check, arn, forwarder) = check_rule(aws, site, logical, kind, bus, &mut roles).await;
        checks.push(check);
        if let Some(arn) = arn {
            found.arns.insert(logical.to_owned(), arn);
        }
        if let Some(role) = forwarder.filter(|r| !found.forwarders.contains(r)) {
            found.forwarders.push(role);
        }
    }
    found
}

/// A rule's name from its physical id: CloudFormation names a rule on a custom event bus
/// `<bus>|<rule>` (its `Ref`), which DescribeRule refuses as a name; a default-bus rule's id is
/// its name.
pub(crate) fn rule_name(physical: &str) -> &str {
    physical.rsplit_once('|').map_or(physical, |(_, name)| name)
}

/// The name of an event bus from its ARN (`…:event-bus/<name>`).
pub(super) fn bus_name(arn: &str) -> &str {
    arn.split_once(":event-bus/").map_or(arn, |(_, name)| name)
}

/// Arrays in an event pattern are sets: order does not matter.
fn normalized(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(normalized).collect();
            items.sort_by_key(|v| v.to_string());
            Value::Array(items)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// ` --event-bus-name <bus>` for a rule on a bus other than the default one.
fn bus_arg(bus: Option<&str>) -> String {
    bus.map(|b| format!(" --event-bus-name {b}"))
        .unwrap_or_default()
}

/// Where a rule check looks: the stack's resource `logical`, then the rule itself. What it could
/// not find is the check's row that ends it, with the fix for a stack that lacks the resource
/// (`update`) or a rule deleted outside CloudFormation (`recreate`).
async fn find_rule<'a>(
    aws: &impl Cloud,
    resources: &'a BTreeMap<String, String>,
    logical: &str,
    bus: Option<&str>,
    (missing, update): (String, &str),
    recreate: String,
) -> Result<(&'a str, Rule), Expect> {
    let Some(physical) = resources.get(logical) else {
        return Err(Expect::problem(missing, update).ending());
    };
    let name = rule_name(physical);
    let described = describe_rule(aws, name, bus).await;
    match described {
        Ok(rule) => Ok((name, rule)),
        Err(_) => Err(Expect::lookup(&described, recreate)),
    }
}

/// DescribeRule; a problem text on failure (a deleted rule says so).
async fn describe_rule(aws: &impl Cloud, name: &str, bus: Option<&str>) -> Result<Rule, String> {
    aws.rule(name, bus).await.map_err(|e| {
        if e.code == missing::RESOURCE {
            format!("rule {name} does not exist (deleted outside CloudFormation)")
        } else {
            format!("DescribeRule {name}: {e}")
        }
    })
}

/// The rows saying the rule is ENABLED, on `bus` (`None`: the default bus, where EC2 and Health
/// send) and matches exactly what the router handles for `kind`.
fn state_bus_and_pattern(
    rule: &Rule,
    name: &str,
    kind: Kind,
    bus: Option<&str>,
    region: &str,
) -> [Expect; 3] {
    let state = rule.state.as_deref();
    let on = rule.event_bus_name.as_deref().unwrap_or("default");
    let on_bus = match bus {
        None => Expect::quietly(on == "default").otherwise(
            format!("{name} is on event bus {on}; EC2 and Health send to the default bus"),
            "re-create the rule on the default event bus, as the template does",
        ),
        Some(expected) => Expect::quietly(on == expected).otherwise(
            format!("{name} is on event bus {on}, not the central bus {expected}"),
            format!("re-create the rule on event bus {expected}, as base.yaml does"),
        ),
    };
    // On a default bus, the rule's own account only: a default bus can also receive other
    // accounts' events (EventBridge: "rules with an account field do not match any events sent
    // from other accounts").
    let own_account = rule.arn.as_deref().and_then(aws_model::arn::arn_account);
    let expected = match (bus, own_account) {
        (None, Some(account)) => kind.event_pattern_in(account),
        _ => kind.event_pattern(),
    };
    let found: Option<Value> = rule
        .event_pattern
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok());
    let every_account = bus.is_none() && found.as_ref().is_some_and(|p| p.get("account").is_none());
    let consequence = if every_account {
        " (without `account` it matches every account's events the default bus receives: each \
         foreign interruption is dead-lettered account-not-served and pages, or arrives twice \
         through the central bus)"
    } else {
        ""
    };
    [
        Expect::that(state == Some("ENABLED"), format!("{name} ENABLED")).otherwise(
            format!(
                "{name} is {}: its events never reach the router",
                state.unwrap_or("in no state")
            ),
            format!(
                "aws events enable-rule --name {name} --region {region}{}",
                bus_arg(bus)
            ),
        ),
        on_bus,
        Expect::that(
            found.as_ref().map(normalized) == Some(normalized(&expected)),
            "pattern as the router expects",
        )
        .otherwise(
            format!(
                "pattern {} differs from what the router handles: {expected}{consequence}",
                rule.event_pattern.as_deref().unwrap_or("(none)")
            ),
            format!(
                "aws events put-rule --name {name} --region {region}{} --state ENABLED --event-pattern '{expected}'",
                bus_arg(bus)
            ),
        ),
    ]
}

/// One rule: where it is, its state, bus and pattern, then where it delivers; the check, the
/// rule's ARN when it exists, and the role a forwarding rule's target uses.
async fn check_rule(
    aws: &impl Cloud,
    site: &RuleSite<'_>,
    logical: &str,
    kind: Kind,
    bus: Option<&str>,
    roles: &mut HashMap<String, Result<Role, String>>,
) -> (Check, Option<String>, Option<String>) {
    let check_name = format!("{}rule:{logical}", site.prefix);
    let region = site.region;
    // Where: the rule, then its targets.
    let found = find_rule(
        aws,
        site.resources,
        logical,
        bus,
        (format!("{} has no {logical}", site.stack), &site.update),
        site.recreate.clone(),
    )
    .await;
    let (name, rule) = match found {
        Ok(found) => found,
        Err(row) => return (check::evaluate(check_name, [row]), None, None),
    };
    let arn = rule.arn.clone().unwrap_or_else(|| {
        let path = bus.map(|b| format!("{b}/")).unwrap_or_default();
        format!(
            "arn:{}:events:{region}:{}:rule/{path}{name}",
            site.partition, site.account
        )
    });
    let listed = aws
        .targets(name, bus)
        .await
        .map_err(|e| format!("ListTargetsByRule {name}: {e}"));

    // Expect → what was found → the fix.
    let mut rows = state_bus_and_pattern(&rule, name, kind, bus, region).to_vec();
    rows.push(Expect::lookup(
        &listed,
        "run verify with events:ListTargetsByRule",
    ));
    let mut forwarder = None;
    if let Ok(listed) = &listed {
        let targets: &[Target] = listed;
        match &site.delivers {
            Delivers::Ingest { queue, dlq } => rows.push(
                Delivery {
                    rule: name,
                    bus,
                    target: *queue,
                    dlq: *dlq,
                    region,
                }
                .judge(targets),
            ),
            Delivers::HubBus(hub) => {
                let (judged, role) = hub.judge(aws, name, &arn, targets, roles).await;
                rows.extend(judged);
                forwarder = role;
            }
        }
    }
    (check::evaluate(check_name, rows), Some(arn), forwarder)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn patterns_compare_as_eventbridge_reads_them() {
        // Order inside a list does not matter to EventBridge.
        let shuffled = json!({"detail-type": ["EC2 Instance State-change Notification"],
            "source": ["aws.ec2"], "detail": {"state": ["terminated", "stopping", "shutting-down", "stopped"]}});
        assert_eq!(
            normalized(&shuffled),
            normalized(&Kind::StateChange.event_pattern())
        );
        let narrower = json!({"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
            "detail": {"state": ["terminated"]}});
        assert_ne!(
            normalized(&narrower),
            normalized(&Kind::StateChange.event_pattern())
        );
    }

    #[test]
    fn every_rule_pattern_is_in_the_compiled_in_template() {
        // base.yaml writes each pattern in flow style; the router's kinds must all appear there,
        // for the default bus's rules and the central bus's copies alike.
        for (logical, kind) in RULES.into_iter().chain(HUB_RULES) {
            let section = aws_model::stacks::BASE_TEMPLATE
                .split(&format!("  {logical}:\n"))
                .nth(1)
                .unwrap_or_else(|| panic!("{logical} not in base.yaml"));
            assert!(
                section.contains(&format!("detail-type: [{}]", kind.detail_type())),
                "{logical}"
            );
            assert!(
                section.contains(&format!("source: [{}]", kind.source())),
                "{logical}"
            );
        }
    }

    #[test]
    fn a_rule_is_judged_by_its_state_bus_and_pattern() {
        let arn = "arn:aws:events:us-east-1:123456789012:rule/ir-StateChangeRule-X";
        let pattern = Kind::StateChange
            .event_pattern_in("123456789012")
            .to_string();
        let rule = |state: &str, bus: &str, pattern: &str| Rule {
            arn: Some(arn.to_owned()),
            state: Some(state.to_owned()),
            event_bus_name: Some(bus.to_owned()),
            event_pattern: Some(pattern.to_owned()),
        };
        let judged = |rule: &Rule| {
            check::evaluate(
                "rule:StateChangeRule",
                state_bus_and_pattern(rule, "r", Kind::StateChange, None, "us-east-1"),
            )
        };
        let good = judged(&rule("ENABLED", "default", &pattern));
        assert!(good.passed, "{good:?}");
        assert_eq!(good.detail, "r ENABLED; pattern as the router expects");

        let every_account = Kind::StateChange.event_pattern().to_string();
        let bad = judged(&rule("DISABLED", "other", &every_account));
        assert!(!bad.passed);
        assert!(
            bad.detail.starts_with(
                "r is DISABLED: its events never reach the router; r is on event bus other; \
                 EC2 and Health send to the default bus; pattern "
            ),
            "{}",
            bad.detail
        );
        assert!(
            bad.detail
                .contains("(without `account` it matches every account's events"),
            "{}",
            bad.detail
        );
        assert!(
            bad.fix
                .unwrap()
                .starts_with("aws events enable-rule --name r --region us-east-1; then re-create")
        );
    }

    /// CloudFormation's physical id of a rule on a custom bus is `<bus>|<rule>`; DescribeRule
    /// takes the rule's own name.
    #[test]
    fn rule_names_come_from_their_physical_ids() {
        assert_eq!(
            rule_name("ir-hub|ir-HubStateChangeRule-X"),
            "ir-HubStateChangeRule-X"
        );
        assert_eq!(rule_name("ir-StateChangeRule-X"), "ir-StateChangeRule-X");
    }

    #[test]
    fn bus_names_come_from_their_arns() {
        assert_eq!(
            bus_name("arn:aws:events:us-east-1:123456789012:event-bus/ir-hub"),
            "ir-hub"
        );
        assert_eq!(bus_name("ir-hub"), "ir-hub");
    }
}
