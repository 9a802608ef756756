//! The function, its role and its alarms on a hub that serves other accounts, and the options an
//! operator passes (`--cluster`, `--karpenter-role`), each broken alone.

use super::{
    failed, hub, only, queue_attribute, queue_name, says, verify, verify_with, without_statement,
};
use crate::{cloud::model::World, verify::Options};

const SERVING: [(&str, &str); 2] = [
    ("CentralBus", "Enabled"),
    ("ServedAccounts", "111111111111"),
];

fn function(world: &World, change: impl FnOnce(&mut crate::cloud::Function)) {
    let name = hub::output(world, "FunctionName");
    world.site(|site| change(site.functions.get_mut(&name).expect("the function")));
}

#[test]
fn a_function_whose_last_update_failed() {
    let world = hub::deployed();
    function(&world, |f| {
        f.last_update_status = Some("Failed".into());
        f.last_update_status_reason = Some("EniLimitExceeded".into());
    });
    let check = only(&world, "function");
    says(
        &check,
        "its last update Failed: EniLimitExceeded",
        "update the stack again",
    );
}

/// Dead letters sent elsewhere than the stack's DLQ: the DLQ's alarms and replay see none.
#[test]
fn a_function_that_dead_letters_elsewhere() {
    let world = hub::deployed();
    function(&world, |f| {
        f.environment.insert(
            "DEAD_LETTER_QUEUE_URL".into(),
            "https://sqs.us-east-1.amazonaws.com/123456789012/elsewhere".into(),
        );
    });
    let check = only(&world, "function:environment");
    says(
        &check,
        "not the stack's DLQ",
        "update the stack's parameters",
    );
}

/// A hub serving other accounts whose router role lost the statement that assumes their spoke
/// roles: every member's events fail.
#[test]
fn a_router_role_that_may_not_assume_the_spoke_roles() {
    let world = hub::deployed_with(&SERVING);
    let arn = hub::output(&world, "RouterRoleArn");
    world.edit(|state, _, _| {
        for (_, document) in &mut state.roles.get_mut(&arn).unwrap().inline {
            without_statement(document, "AssumeSpokeRoles");
        }
    });
    let report = verify(&world);
    let failed = failed(&report);
    assert!(
        failed.contains(&"router-role:assume-spoke-roles"),
        "{failed:?}"
    );
}

/// The alarm that pages when a member account cannot be reached, deleted on a serving hub.
#[test]
fn a_serving_hub_without_its_unreachable_account_alarm() {
    let world = hub::deployed_with(&SERVING);
    world.site(|site| {
        site.alarms
            .retain(|a| !a.name.contains("AccountUnreachableAlarm"))
    });
    let check = only(&world, "alarm:AccountUnreachableAlarm");
    says(
        &check,
        "no alarm watches",
        "aws cloudwatch put-metric-alarm",
    );
}

/// `--karpenter-role` naming a role that does not exist.
#[test]
fn a_karpenter_role_given_that_does_not_exist() {
    let world = hub::deployed();
    let report = verify_with(
        &world,
        Options {
            stack: hub::STACK.into(),
            karpenter_roles: vec![(hub::CLUSTER.into(), "NoSuchRole".into())],
            ..Options::default()
        },
    );
    assert_eq!(
        failed(&report),
        ["tenant:alpha:karpenter-role"],
        "{report:#?}"
    );
    let check = report.checks.iter().find(|c| !c.passed).unwrap();
    says(check, "NoSuchEntity", "");
}

/// `--cluster` naming a cluster that has no queue and never had a tenant record.
#[test]
fn a_named_cluster_that_was_never_onboarded() {
    let world = hub::deployed();
    let report = verify_with(
        &world,
        Options {
            stack: hub::STACK.into(),
            clusters: vec!["gamma".into()],
            ..Options::default()
        },
    );
    assert_eq!(failed(&report), ["tenant:gamma:queue"], "{report:#?}");
    let check = report.checks.iter().find(|c| !c.passed).unwrap();
    says(check, "karpenter-gamma", "make deploy-tenant CLUSTER=gamma");
}

/// A queue under the AWS-managed key: EventBridge cannot deliver to it (its policy admits no
/// service principal).
#[test]
fn an_ingest_queue_under_the_aws_managed_key() {
    let world = hub::deployed();
    let ingest = queue_name(&world, "IngestQueueArn");
    queue_attribute(&world, &ingest, "KmsMasterKeyId", Some("alias/aws/sqs"));
    queue_attribute(&world, &ingest, "SqsManagedSseEnabled", Some("false"));
    let check = only(&world, "ingest-queue:key");
    says(&check, "AWS-managed key alias/aws/sqs", "KMS_KEY=Create");
}

/// The hub's role may assume the spoke roles it needs, as base.yaml grants it, whatever the hub
/// serves: its own account's other regions (a central bus, no list), a list, or an
/// organisation (named so); a hub that serves only its own region has no such check.
#[test]
fn the_spoke_roles_the_router_role_may_assume_as_base_yaml_grants_them() {
    let assume = |parameters: &[(&str, &str)]| {
        let report = verify(&hub::deployed_with(parameters));
        let check = report.check("router-role:assume-spoke-roles").cloned();
        (failed(&report).join(", "), check)
    };
    for parameters in [
        &[("CentralBus", "Enabled")][..],
        &SERVING[..],
        &[
            ("SpokeRoleName", "platform-spoke"),
            ("SpokeRolePath", "/platform/"),
            SERVING[0],
            SERVING[1],
        ][..],
    ] {
        let (failed, check) = assume(parameters);
        let check = check.unwrap_or_else(|| panic!("{parameters:?}: no check"));
        assert!(check.passed, "{parameters:?}: {check:?} ({failed})");
    }
    let (_, organisation) = assume(&[
        ("CentralBus", "Enabled"),
        ("ServedAccounts", "*"),
        ("OrganizationId", "o-abcd123456"),
    ]);
    let organisation = organisation.expect("an organisation's hub is checked");
    assert!(
        organisation
            .detail
            .contains("in the organisation's accounts (e.g."),
        "{organisation:?}"
    );
    let (_, alone) = assume(&[]);
    assert!(alone.is_none(), "{alone:?}");
}
