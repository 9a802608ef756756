//! The templates agree with each other and with the router: the hub's and spoke's rules copy
//! base.yaml's patterns, every rule may deliver to its targets, the forwarding role trusts
//! exactly the spoke rules, and the alarms read the router's metrics namespace.

use std::collections::BTreeSet;

use e2e_tests::policy::{alternatives, items, statements};
use serde_json::{Value, json};

use super::{base, spoke};

/// The default-bus rules of base.yaml, whose patterns the router's kinds are checked against
/// (routerctl/src/verify/); the central bus's and spoke.yaml's copies must not drift from them.
const RULES: [&str; 5] = [
    "SpotInterruptionRule",
    "RebalanceRecommendationRule",
    "StateChangeRule",
    "ScheduledChangeRule",
    "CapacityReservationInterruptionRule",
];

#[test]
fn hub_and_spoke_rules_copy_the_base_patterns_exactly() {
    let base = base();
    let spoke = spoke();
    for id in RULES {
        let rule = &base.doc["Resources"][id]["Properties"];
        assert!(rule["EventPattern"].is_object(), "{id}");
        // On the default bus, the stack's own account's events only; the hub bus takes whatever
        // its policy admits.
        assert_eq!(
            rule["EventPattern"]["account"],
            json!([{"Ref": "AWS::AccountId"}]),
            "{id}"
        );
        let mut without_account = rule["EventPattern"].clone();
        without_account.as_object_mut().unwrap().remove("account");
        let hub = &base.doc["Resources"][format!("Hub{id}")]["Properties"];
        assert_eq!(hub["EventPattern"], without_account, "Hub{id}");
        assert_eq!(hub["Targets"], rule["Targets"], "Hub{id}: same targets");
        assert_eq!(
            spoke.doc["Resources"][id]["Properties"]["EventPattern"], rule["EventPattern"],
            "spoke.yaml {id}"
        );
    }
    assert_eq!(base.resources_of("AWS::Events::Rule").count(), 10);
    assert_eq!(spoke.resources_of("AWS::Events::Rule").count(), 5);
}

/// Each rule's target (and dead-letter queue) lets that rule deliver: the queue policy names the
/// rule in aws:SourceArn, or a Lambda permission does. A rule missing there drops its events.
#[test]
fn every_base_rule_may_deliver_to_its_targets() {
    let base = base();
    let all = statements(&base);
    let names_rule = |values: &Value, rule: &str| {
        items(values)
            .iter()
            .any(|v| **v == json!({"Fn::GetAtt": [rule, "Arn"]}))
    };
    for (rule, r) in base.resources_of("AWS::Events::Rule") {
        for target in items(&r["Properties"]["Targets"]) {
            for arn in [&target["Arn"], &target["DeadLetterConfig"]["Arn"]] {
                let id = arn["Fn::GetAtt"][0].as_str().expect("a GetAtt target");
                let admitted = all.iter().any(|s| {
                    s.is_allow()
                        && s.body["Principal"] == json!({"Service": "events.amazonaws.com"})
                        && (s.subjects.iter().any(|q| q == id)
                            || s.holder.ends_with("Permission")
                                && s.body["Resource"] == json!({"Ref": id}))
                        && s.condition("aws:SourceArn")
                            .iter()
                            .any(|(_, v)| names_rule(v, rule))
                });
                assert!(admitted, "{rule} -> {id}: no grant names the rule");
            }
        }
    }
}

/// The forwarding role's trust names exactly the five rules' ARNs, built from their names.
/// Each rule's one target forwards to the hub bus as ForwardToHubRole, or (HubDirectQueueArn)
/// writes the hub's direct queue as DirectRole; each role trusts exactly the five rules.
#[test]
fn the_forwarding_roles_trust_exactly_the_spoke_rules() {
    let spoke = spoke();
    let trusted_by = |role: &str| -> BTreeSet<String> {
        let trust = statements(&spoke)
            .into_iter()
            .find(|s| s.holder == role && s.body["Sid"] == "OnlyTheseRules")
            .unwrap_or_else(|| panic!("{role} has no OnlyTheseRules"));
        trust
            .condition("aws:SourceArn")
            .iter()
            .flat_map(|(_, v)| items(v))
            .map(|v| v["Fn::Sub"].as_str().unwrap().to_owned())
            .collect()
    };
    let rules: BTreeSet<String> = spoke
        .resources_of("AWS::Events::Rule")
        .map(|(id, r)| {
            let name = r["Properties"]["Name"]["Fn::Sub"].as_str().unwrap();
            let targets = &r["Properties"]["Targets"];
            assert_eq!(
                targets.as_array().map(Vec::len),
                Some(1),
                "{id}: one target"
            );
            let branches = &targets[0]["Fn::If"];
            assert_eq!(branches[0], "Direct", "{id}");
            assert_eq!(
                branches[1],
                json!({"Id": "hub", "Arn": {"Ref": "HubDirectQueueArn"},
                       "RoleArn": {"Fn::GetAtt": ["DirectRole", "Arn"]}}),
                "{id}"
            );
            assert_eq!(
                branches[2],
                json!({"Id": "hub", "Arn": {"Ref": "HubEventBusArn"},
                       "RoleArn": {"Fn::GetAtt": ["ForwardToHubRole", "Arn"]}}),
                "{id}"
            );
            format!(
                "arn:${{AWS::Partition}}:events:${{AWS::Region}}:${{AWS::AccountId}}:rule/{name}"
            )
        })
        .collect();
    assert_eq!(rules.len(), 5);
    assert_eq!(trusted_by("ForwardToHubRole"), rules);
    assert_eq!(trusted_by("DirectRole"), rules);
}

/// The alarms on the router's metrics and its METRICS_NAMESPACE read the same mapping.
#[test]
fn router_metric_alarms_use_the_function_namespace() {
    let base = base();
    let namespace = &base.doc["Resources"]["RouterFunction"]["Properties"]["Environment"]["Variables"]
        ["METRICS_NAMESPACE"];
    assert_eq!(
        *namespace,
        json!({"Fn::FindInMap": ["Metrics", "Router", "Namespace"]})
    );
    for id in ["LateForwardsAlarm", "AccountUnreachableAlarm"] {
        let alarm = &base.doc["Resources"][id]["Properties"];
        assert_eq!(alarm["Namespace"], *namespace, "{id}");
        assert_eq!(
            alternatives(&alarm["Dimensions"][0]["Value"]),
            [&json!({"Ref": "RouterFunction"})],
            "{id}"
        );
    }
}

/// The names a stack gives resources that are one per account, not per region (a CloudWatch
/// dashboard, an IAM role or managed policy), carry the region: a hub per region deploys base.yaml
/// under the same stack name in each, and CloudWatch or IAM would refuse the second region's.
/// The one exception is spoke.yaml's spoke role, one per account on purpose (CreateSpokeRole
/// says which region's stack makes it). moto keeps dashboards per region, so only this shows it.
#[test]
fn names_that_are_global_to_an_account_carry_the_region() {
    let global = [
        ("AWS::CloudWatch::Dashboard", "DashboardName"),
        ("AWS::IAM::Role", "RoleName"),
        ("AWS::IAM::ManagedPolicy", "ManagedPolicyName"),
    ];
    let mut checked = 0;
    for (file, template) in [
        ("base.yaml", base()),
        ("tenant.yaml", super::tenant()),
        ("spoke.yaml", spoke()),
        ("fis.yaml", super::fis()),
    ] {
        for (kind, property) in global {
            for (id, resource) in template.resources_of(kind) {
                let Some(name) = resource["Properties"].get(property) else {
                    continue;
                };
                if file == "spoke.yaml" && id == "SpokeRole" {
                    continue;
                }
                checked += 1;
                assert!(
                    name.to_string().contains("AWS::Region"),
                    "{file} {id}: {property} {name} is the same in every region"
                );
            }
        }
    }
    assert!(checked >= 1, "base.yaml's dashboard is named");
}
