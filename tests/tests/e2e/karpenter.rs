//! Drift from Karpenter: the router's kinds, the rules the base and spoke stacks make, and the
//! kinds a tenant may choose, held against the parsers of the Karpenter version the project pins
//! (`tests/fixtures/karpenter/`, written from that version's source: each parser's version,
//! source and detail-type, the fields it reads instance ids from, and what it accepts). A kind
//! Karpenter adds, or a filter it changes, fails here until the router handles it. No emulator.

use std::collections::BTreeSet;

use aws_model::{
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Stage, Template},
};
use interruption_router::event::{Classified, IgnoreReason, Kind, classify};
use serde_json::{Value, json};

const PINNED: &str = include_str!("../../fixtures/karpenter/interruption-parsers-v1.14.0.json");

struct Parser {
    source: String,
    detail_type: String,
    instance_ids: String,
    accepts: Vec<(String, Vec<String>)>,
}

fn parsers() -> Vec<Parser> {
    let pinned: Value = serde_json::from_str(PINNED).unwrap();
    pinned["parsers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["version"], "0", "{p}");
            Parser {
                source: p["source"].as_str().unwrap().to_owned(),
                detail_type: p["detail_type"].as_str().unwrap().to_owned(),
                instance_ids: p["instance_ids"].as_str().unwrap().to_owned(),
                accepts: p["accepts"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(field, values)| {
                        let values = values.as_array().unwrap().iter();
                        let values = values.map(|v| v.as_str().unwrap().to_owned()).collect();
                        (field.clone(), values)
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The router's kind for a parser, or the failure that names what to do.
fn kind_of(parser: &Parser) -> Kind {
    Kind::ALL
        .into_iter()
        .find(|k| k.source() == parser.source && k.detail_type() == parser.detail_type)
        .unwrap_or_else(|| {
            panic!(
                "Karpenter parses ({}, {}) and the router has no kind for it: add it to \
                 event::Kind, the base and spoke stacks' rules and tenant.yaml's EventKinds",
                parser.source, parser.detail_type
            )
        })
}

#[test]
fn the_routers_kinds_are_exactly_karpenters_parsers() {
    let parsers = parsers();
    let covered: BTreeSet<Kind> = parsers.iter().map(kind_of).collect();
    assert_eq!(covered.len(), parsers.len(), "one kind per parser");
    let unparsed: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| !covered.contains(k))
        .collect();
    assert!(
        unparsed.is_empty(),
        "Karpenter parses no {unparsed:?} any more: the router would forward what it drops"
    );
}

/// An event of the parser's kind naming `instance` where Karpenter reads it, with `overrides`
/// (dotted `detail.` fields) on top of the values it accepts.
fn event(parser: &Parser, instance: &str, overrides: &[(&str, &str)]) -> String {
    let mut detail = json!({});
    match parser.instance_ids.as_str() {
        "detail.instance-id" => detail["instance-id"] = json!(instance),
        "detail.affectedEntities[].entityValue" => {
            detail["affectedEntities"] = json!([{ "entityValue": instance }])
        }
        other => panic!("Karpenter reads instance ids from {other}: teach the router to"),
    }
    for (field, values) in &parser.accepts {
        let key = field.strip_prefix("detail.").expect("a detail field");
        detail[key] = json!(values[0]);
    }
    for (field, value) in overrides {
        detail[field.strip_prefix("detail.").unwrap()] = json!(value);
    }
    json!({
        "version": "0", "id": "e", "detail-type": parser.detail_type, "source": parser.source,
        "account": "123456789012", "time": "2026-11-26T12:00:00Z", "region": "us-east-1",
        "resources": [], "detail": detail,
    })
    .to_string()
}

#[test]
fn the_router_reads_the_fields_karpenter_reads_and_accepts_what_it_accepts() {
    let instance = "i-0123456789abcdef0";
    for parser in parsers() {
        let kind = kind_of(&parser);
        match classify(&event(&parser, instance, &[])) {
            Ok(Classified::Route(i)) => {
                assert_eq!(i.kind, kind);
                assert_eq!(
                    i.instances.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
                    [instance],
                    "{kind}: the instance Karpenter reads from {}",
                    parser.instance_ids
                );
            }
            other => panic!("{kind}: an event Karpenter acts on was {other:?}"),
        }
        // Each accepted value is accepted; another is not (Karpenter deletes it unread).
        for (field, values) in &parser.accepts {
            for value in values {
                assert!(
                    matches!(
                        classify(&event(&parser, instance, &[(field, value)])),
                        Ok(Classified::Route(_))
                    ),
                    "{kind}: {field}={value} is what Karpenter acts on"
                );
            }
            let other = classify(&event(&parser, instance, &[(field, "something-else")]));
            assert!(
                matches!(other, Ok(Classified::Ignore { .. })),
                "{kind}: {field}=something-else is deleted unread by Karpenter: {other:?}"
            );
        }
        let mut wrong_version: Value =
            serde_json::from_str(&event(&parser, instance, &[])).unwrap();
        wrong_version["version"] = json!("1");
        assert_eq!(
            classify(&wrong_version.to_string()),
            Ok(Classified::Ignore {
                reason: IgnoreReason::UnsupportedVersion,
                kind: Some(kind)
            })
        );
    }
}

/// The filter a parser applies, as an EventBridge pattern's `detail`.
fn pattern_of(parser: &Parser) -> Value {
    let mut pattern = json!({"source": [parser.source], "detail-type": [parser.detail_type]});
    for (field, values) in &parser.accepts {
        pattern["detail"][field.strip_prefix("detail.").unwrap()] = json!(values);
    }
    pattern
}

#[test]
fn the_stacks_rules_deliver_exactly_what_karpenter_parses() {
    // Compared as JSON values: a pattern's key order means nothing.
    let expected: Vec<Value> = parsers().iter().map(pattern_of).collect();
    let base = Template::parse("base.yaml", BASE_TEMPLATE).unwrap();
    let base_stage = Stage::new("interruption-router", "123456789012", "us-east-1")
        .parameter("CodeS3Bucket", "artifacts");
    let spoke = Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap();
    let spoke_stage = Stage::new("interruption-router-spoke", "222222222222", "eu-west-1")
        .parameter(
            "RouterRoleArn",
            "arn:aws:iam::123456789012:role/interruption-router-function",
        )
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:us-east-1:123456789012:event-bus/interruption-router",
        );
    for (template, stage) in [(&base, &base_stage), (&spoke, &spoke_stage)] {
        let deployed = template.deploy(stage).unwrap();
        let mut delivered: Vec<Value> = Vec::new();
        for (id, _) in template.resources_of("AWS::Events::Rule") {
            let mut pattern = deployed.property(id, &["EventPattern"]).unwrap();
            if pattern.is_null() {
                continue; // a rule its conditions leave out
            }
            // Which account's events a rule takes is the router's business, not Karpenter's.
            pattern.as_object_mut().unwrap().remove("account");
            assert!(
                expected.contains(&pattern),
                "{}: rule {id} delivers {pattern}, which no Karpenter parser takes as it is",
                template.name
            );
            if !delivered.contains(&pattern) {
                delivered.push(pattern);
            }
        }
        let missing: Vec<&Value> = expected.iter().filter(|p| !delivered.contains(p)).collect();
        assert!(
            missing.is_empty(),
            "{}: no rule delivers {missing:?}, which Karpenter parses",
            template.name
        );
    }
}

#[test]
fn a_tenant_may_choose_among_exactly_the_routers_kinds() {
    let tenant = Template::parse("tenant.yaml", TENANT_TEMPLATE).unwrap();
    let labels: Vec<String> = Kind::ALL.iter().map(|k| k.label().to_owned()).collect();
    let default: Vec<String> = tenant.doc["Parameters"]["EventKinds"]["Default"]
        .as_str()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    assert_eq!(default, labels, "EventKinds defaults to every kind");
    let allowed: Vec<String> = tenant.doc["Rules"]["EventKindsAreKnown"]["Assertions"][0]["Assert"]
        ["Fn::EachMemberIn"][1]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        allowed, labels,
        "EventKinds may name every kind and no other"
    );
}
