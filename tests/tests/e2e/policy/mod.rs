//! The security checks of `e2e_tests::policy` on the real templates, and on broken copies: every
//! check passes on `cloudformation/*.yaml`, and for every check there are copies broken the ways
//! a careless edit would break them, each failing exactly that check.
//!
//! The broken copies are in [`broken`], grouped as the checks are; [`consistency`] holds the
//! templates to each other and to the router; [`helpers`] tests the library's template readers.
//! This file holds the template loaders and editors the copies are made with, and the tests that
//! run every check.

use std::collections::BTreeSet;

use aws_model::stacks::{BASE_TEMPLATE, FIS_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE};
use e2e_tests::policy::{
    Check, Template, assumable_roles, dead_letter_queues, direct_queues, evaluate, execution_roles,
    ingest_queues, statements,
};
use serde_json::{Value, json};

mod broken;
mod consistency;
mod helpers;

use broken::broken_copies;

fn base() -> Template {
    Template::parse("base.yaml", BASE_TEMPLATE).unwrap()
}

fn tenant() -> Template {
    Template::parse("tenant.yaml", TENANT_TEMPLATE).unwrap()
}

fn fis() -> Template {
    Template::parse("fis.yaml", FIS_TEMPLATE).unwrap()
}

fn spoke() -> Template {
    Template::parse("spoke.yaml", SPOKE_TEMPLATE).unwrap()
}

/// The template text with `from` replaced by `to`; `from` must occur exactly once, so a
/// template edit cannot silently turn a mutation into a no-op.
fn edit(name: &str, text: &str, from: &str, to: &str) -> Template {
    assert_eq!(text.matches(from).count(), 1, "{from:?} in {name}");
    Template::parse(name, &text.replacen(from, to, 1)).unwrap()
}

/// The statement with `sid` anywhere in resource `id` (also inside an `Fn::If`).
fn statement<'a>(t: &'a mut Template, id: &str, sid: &str) -> &'a mut Value {
    fn find<'a>(v: &'a mut Value, sid: &str) -> Option<&'a mut Value> {
        if v.get("Sid").and_then(Value::as_str) == Some(sid) {
            return Some(v);
        }
        match v {
            Value::Object(map) => map.values_mut().find_map(|c| find(c, sid)),
            Value::Array(list) => list.iter_mut().find_map(|c| find(c, sid)),
            _ => None,
        }
    }
    let name = t.name.clone();
    find(t.resource_mut(id), sid).unwrap_or_else(|| panic!("{name}: no {id} statement {sid}"))
}

/// The statement list holding `sid` in resource `id`.
fn statement_list<'a>(t: &'a mut Template, id: &str, sid: &str) -> &'a mut Vec<Value> {
    fn find<'a>(v: &'a mut Value, sid: &str) -> Option<&'a mut Vec<Value>> {
        match v {
            Value::Object(map) => {
                let holds = map
                    .get("Statement")
                    .and_then(Value::as_array)
                    .is_some_and(|l| {
                        l.iter()
                            .any(|s| s.get("Sid").and_then(Value::as_str) == Some(sid))
                    });
                if holds {
                    return map.get_mut("Statement").and_then(Value::as_array_mut);
                }
                map.values_mut().find_map(|c| find(c, sid))
            }
            Value::Array(list) => list.iter_mut().find_map(|c| find(c, sid)),
            _ => None,
        }
    }
    let name = t.name.clone();
    find(t.resource_mut(id), sid).unwrap_or_else(|| panic!("{name}: no {id} statement {sid}"))
}

fn remove_statement(t: &mut Template, id: &str, sid: &str) {
    statement_list(t, id, sid).retain(|s| s["Sid"] != sid);
}

fn properties<'a>(t: &'a mut Template, id: &str) -> &'a mut serde_json::Map<String, Value> {
    t.resource_mut(id)["Properties"].as_object_mut().unwrap()
}

#[test]
fn the_real_templates_pass_every_check() {
    for t in [base(), tenant(), fis(), spoke()] {
        let violations = evaluate(&t);
        assert!(
            violations.is_empty(),
            "{}:\n{}",
            t.name,
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The checks find what they are about in the real templates, so a pass is not a vacuous one.
#[test]
fn the_checks_see_their_subjects() {
    let base = base();
    assert_eq!(execution_roles(&base), ["RouterRole"]);
    assert_eq!(ingest_queues(&base), ["DirectQueue", "IngestQueue"]);
    assert_eq!(direct_queues(&base), ["DirectQueue"]);
    assert_eq!(dead_letter_queues(&base), ["DeadLetterQueue"]);
    let router_sids: BTreeSet<String> = statements(&base)
        .iter()
        .filter(|s| s.holder == "RouterRole")
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    // AssumeSpokeRoles sits inside an Fn::If.
    for sid in [
        "ResolveInstanceTags",
        "ResolveInstanceTagsByArn",
        "SendToClusterQueues",
        "SendToDeadLetterQueue",
        "ConsumeIngestQueue",
        "NeverSendToIngestQueue",
        "AssumeSpokeRoles",
        "ReadTenantRecords",
    ] {
        assert!(router_sids.contains(sid), "{sid} not seen: {router_sids:?}");
    }
    // Both branches of the hub bus policy, the organisation's and the account list's.
    let bus_sids: Vec<String> = statements(&base)
        .iter()
        .filter(|s| s.holder == "HubEventBus")
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        bus_sids,
        [
            "AllowOrganizationToPutEvents",
            "AllowServedAccountsToPutEvents"
        ]
    );
    assert!(assumable_roles(&base).is_empty());

    let spoke = spoke();
    assert_eq!(assumable_roles(&spoke), ["SpokeRole"]);
    let spoke_allow: Vec<_> = statements(&spoke)
        .into_iter()
        .filter(|s| s.holder == "SpokeRole" && s.is_allow())
        .filter_map(|s| s.body["Sid"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        spoke_allow,
        [
            "OnlyTheHubRouter",
            "ResolveInstanceTags",
            "SendToClusterQueues",
            "ReadClusterQueueOwnership",
            "ReadDirectRoleId",
            "ReadTenantRecords",
            "UseTenantQueueKeysThroughSqs"
        ]
    );

    let tenant = tenant();
    let tenant_allow: Vec<_> = statements(&tenant)
        .into_iter()
        .filter(|s| s.holder == "InterruptionQueuePolicy" && s.is_allow())
        .collect();
    assert_eq!(tenant_allow.len(), 1);
    assert_eq!(tenant_allow[0].subjects, ["InterruptionQueue"]);
}

#[test]
fn every_broken_copy_fails_exactly_its_check() {
    let mut wrong = Vec::new();
    for b in broken_copies() {
        let violations = evaluate(&b.template);
        let failing: BTreeSet<Check> = violations.iter().map(|v| v.check).collect();
        let verdict = if failing == BTreeSet::from([b.check]) {
            "fails exactly"
        } else {
            wrong.push(b.what);
            "WRONG"
        };
        println!("{:<38} {verdict}: {}", b.check.name(), b.what);
        for v in &violations {
            println!("    {v}");
        }
    }
    assert!(
        wrong.is_empty(),
        "broken copies not caught as expected: {wrong:?}"
    );
}

/// A check no broken copy fails would be a check that cannot fail.
#[test]
fn every_check_has_a_broken_copy() {
    let covered: BTreeSet<Check> = broken_copies().iter().map(|b| b.check).collect();
    let all: BTreeSet<Check> = Check::ALL.into_iter().collect();
    assert_eq!(covered, all);
}

/// A customer KMS key instead of SSE-SQS is encryption too.
#[test]
fn a_kms_key_passes_for_sse() {
    let mut t = tenant();
    let props = t.resource_mut("InterruptionQueue")["Properties"]
        .as_object_mut()
        .unwrap();
    props.remove("SqsManagedSseEnabled");
    props.insert("KmsMasterKeyId".into(), json!("alias/interruption-router"));
    assert_eq!(evaluate(&t), []);
}
