//! verify on the model of AWS ([`crate::cloud::model`]): a hub deployed from this release's
//! templates passes every check, and each way an account breaks fails exactly the check that
//! guards it, with its fix. No emulator: each test runs in about a millisecond.

mod breakages;
mod function;
mod hub;
mod keys;
mod options;
mod queues;
mod reads;
mod roles;
mod spokes;

use super::{Options, Report, run};
use crate::{check::Check, cloud::model::World};

/// verify's report on `world` for the base stack `ir`, every cluster.
fn verify(world: &World) -> Report {
    verify_with(
        world,
        Options {
            stack: hub::STACK.into(),
            ..Options::default()
        },
    )
}

fn verify_with(world: &World, options: Options) -> Report {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(run(world, &options))
}

/// The one check that fails on `world`: asserted to be `name`, and returned.
fn only(world: &World, name: &str) -> Check {
    let report = verify(world);
    assert_eq!(failed(&report), [name], "{report:#?}");
    report
        .checks
        .into_iter()
        .find(|c| c.name == name)
        .expect("the failed check")
}

/// Asserts the check's finding and fix say what they must.
fn says(check: &Check, detail: &str, fix: &str) {
    assert!(
        check.detail.contains(detail),
        "{}: {}",
        check.name,
        check.detail
    );
    let given = check.fix.as_deref().unwrap_or_default();
    assert!(given.contains(fix), "{}'s fix: {given}", check.name);
}

/// The age a read check's finding gives its oldest message ("holds a message N s old"). The
/// world's clock runs on in verify's unpaused runtime, so a test asserts at least the age it set:
/// a loaded machine reads it a second or more older.
fn oldest_age(check: &Check) -> u64 {
    check
        .detail
        .split("holds a message ")
        .nth(1)
        .and_then(|rest| rest.split(" s old").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no age in: {}", check.detail))
}

/// Changes attribute `key` of queue `queue` (`None` removes it).
fn queue_attribute(world: &World, queue: &str, key: &str, value: Option<&str>) {
    world.site(|site| {
        let attributes = &mut site.queues.get_mut(queue).expect("the queue").attributes;
        match value {
            Some(v) => attributes.insert(key.to_owned(), v.to_owned()),
            None => attributes.remove(key),
        };
    });
}

/// The name of the queue the base stack's output `output` gives the ARN of.
fn queue_name(world: &World, output: &str) -> String {
    aws_model::arn::arn_name(&hub::output(world, output)).to_owned()
}

/// `document` without its statement `sid` (a policy edited by hand).
fn without_statement(document: &mut serde_json::Value, sid: &str) {
    if let Some(statements) = document["Statement"].as_array_mut() {
        statements.retain(|s| s["Sid"] != sid);
    }
}

/// The names of the checks that failed.
fn failed(report: &Report) -> Vec<&str> {
    report
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect()
}

#[test]
fn a_hub_deployed_from_the_templates_passes_every_check() {
    let world = hub::deployed();
    let report = verify(&world);
    assert_eq!(failed(&report), Vec::<&str>::new(), "{report:#?}");
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "stack",
        "version",
        "rule:SpotInterruptionRule",
        "ingest-queue",
        "event-source-mapping",
        "function:environment",
        "router-role",
        "dashboard",
        "alarm:LateForwardsAlarm",
        "function:metrics",
        "alarm-topic",
        "tenant:alpha:queue",
        "tenant:alpha:read",
        "tenant:alpha:karpenter-role",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} not checked: {names:?}"
        );
    }
}

/// A hub with its central bus serving two member accounts (with the direct queue), and one
/// whose queues are under the key the stack creates: every check passes, the key and direct
/// queue checks among them.
#[test]
fn hubs_with_a_central_bus_or_their_own_key_pass_every_check() {
    for (parameters, expected) in [
        (
            &[
                ("CentralBus", "Enabled"),
                ("ServedAccounts", "111111111111,222222222222"),
            ][..],
            &[
                "rule:HubSpotInterruptionRule",
                "direct-queue",
                "direct-queue:policy",
                "event-source-mapping:direct",
                "router-role:assume-spoke-roles",
                "alarm:AccountUnreachableAlarm",
            ][..],
        ),
        (
            &[("KmsKey", "Create")][..],
            &[
                "ingest-queue:key",
                "dead-letter-queue:key",
                "tenant:alpha:key",
            ][..],
        ),
    ] {
        let world = hub::deployed_with(parameters);
        let report = verify(&world);
        assert_eq!(
            failed(&report),
            Vec::<&str>::new(),
            "{parameters:?}: {report:#?}"
        );
        let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
        for name in expected {
            assert!(
                names.contains(name),
                "{parameters:?}: {name} not checked: {names:?}"
            );
        }
    }
}
