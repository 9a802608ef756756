//! Resources deleted outside CloudFormation, and reads the operator may not make: each failing
//! the check that needs it, with what to do.

use super::{failed, hub, only, queue_name, says, verify};

#[test]
fn a_queue_deleted_outside_cloudformation() {
    for (output, check) in [
        ("IngestQueueArn", "ingest-queue"),
        ("DeadLetterQueueArn", "dead-letter-queue"),
    ] {
        let world = hub::deployed();
        let queue = queue_name(&world, output);
        world.site(|site| site.queues.remove(&queue));
        let report = verify(&world);
        let failed = failed(&report);
        assert!(failed.contains(&check), "{output}: {failed:?}");
        let found = report.checks.iter().find(|c| c.name == check).unwrap();
        says(found, "does not exist in us-east-1", "base.yaml defines it");
    }
}

#[test]
fn a_function_deleted_outside_cloudformation() {
    let world = hub::deployed();
    let name = hub::output(&world, "FunctionName");
    world.site(|site| site.functions.remove(&name));
    let report = verify(&world);
    let failed = failed(&report);
    assert!(failed.contains(&"function"), "{failed:?}");
    let found = report.checks.iter().find(|c| c.name == "function").unwrap();
    says(
        found,
        "ResourceNotFoundException",
        "re-deploy the base stack ir",
    );
}

#[test]
fn a_stack_without_an_output_the_checks_find_things_by() {
    let world = hub::deployed();
    world.site(|site| {
        site.stacks
            .get_mut(hub::STACK)
            .unwrap()
            .stack
            .outputs
            .remove("DeadLetterQueueArn")
    });
    let report = verify(&world);
    assert!(failed(&report).contains(&"stack"), "{report:#?}");
    let found = report.checks.iter().find(|c| c.name == "stack").unwrap();
    says(
        found,
        "output DeadLetterQueueArn is missing",
        "cloudformation/base.yaml",
    );
}

/// A rule moved to another bus: EC2 and Health send to the default bus only.
#[test]
fn a_rule_on_another_bus() {
    let world = hub::deployed();
    let name = hub::resource(&world, "StateChangeRule");
    world.site(|site| {
        let (rule, _) = site.rules.get_mut(&("default".into(), name)).unwrap();
        rule.event_bus_name = Some("elsewhere".into());
    });
    let check = only(&world, "rule:StateChangeRule");
    says(
        &check,
        "is on event bus elsewhere; EC2 and Health send to the default bus",
        "default event bus",
    );
}

#[test]
fn each_refused_read_fails_its_check_with_the_permission_it_needs() {
    for (api, check, permission) in [
        (
            "ListEventSourceMappings",
            "event-source-mapping",
            "lambda:ListEventSourceMappings",
        ),
        ("ReceiveMessage", "tenant:alpha:read", "sqs:ReceiveMessage"),
        ("ListQueueTags", "tenant:alpha:queue", "sqs:ListQueueTags"),
        (
            "DescribeAlarms",
            "alarm:LateForwardsAlarm",
            "cloudwatch:DescribeAlarms",
        ),
        (
            "GetMetricStatistics",
            "function:metrics",
            "cloudwatch:GetMetricStatistics",
        ),
        (
            "FilterLogEvents",
            "function:metrics",
            "logs:FilterLogEvents",
        ),
    ] {
        let world = hub::deployed();
        world.refuse(api);
        let report = verify(&world);
        let found = report.checks.iter().find(|c| c.name == check).unwrap();
        assert!(!found.passed, "{api}: {found:?}");
        says(found, "AccessDenied", permission);
    }
}

#[test]
fn a_refused_tenant_record_read_is_not_a_missing_record() {
    let world = hub::deployed();
    world.refuse("GetParameter");
    let report = verify(&world);
    let found = report
        .checks
        .iter()
        .find(|c| c.name == "tenant:alpha:record")
        .unwrap();
    assert!(!found.passed);
    says(
        found,
        "GetParameter /interruption-router/tenant-queues/karpenter-alpha: AccessDenied",
        "",
    );
    assert!(
        !found.detail.contains("no tenant record"),
        "{}",
        found.detail
    );
}
