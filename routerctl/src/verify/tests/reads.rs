//! Resources deleted outside CloudFormation, and reads the operator may not make: each failing
//! the check that needs it, with what to do.

use super::{failed, hub, only, queue_name, says, verify};
use aws_world::World;

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

/// A tenant queue lets Karpenter's role alone receive (tenant.yaml's DenyReadersOtherThanKarpenter),
/// so verify's look is refused: the tenant stack's own alarm on the queue's oldest message then
/// says whether anyone reads it.
#[test]
fn a_tenant_queue_that_refuses_verifys_look_is_judged_by_its_age_alarm() {
    let world = hub::deployed();
    world.refuse("ReceiveMessage");
    let read = |world: &World| {
        verify(world)
            .checks
            .into_iter()
            .find(|c| c.name == "tenant:alpha:read")
            .expect("the read check")
    };
    let check = read(&world);
    assert!(check.passed, "{check:?}");
    says(
        &check,
        "only Karpenter's role may receive from karpenter-alpha",
        "",
    );
    says(&check, "QueueAgeAlarm", "");

    let age_alarm = |world: &World, state: &str| {
        world.site(|site| {
            for alarm in site
                .alarms
                .iter_mut()
                .filter(|a| a.name.contains("QueueAgeAlarm"))
            {
                alarm.state = Some(state.into());
            }
        })
    };
    age_alarm(&world, "ALARM");
    let check = only(&world, "tenant:alpha:read");
    assert!(!check.passed, "{check:?}");
    says(&check, "is in ALARM", "settings.interruptionQueue");

    age_alarm(&world, "OK");
    assert!(read(&world).passed);

    world.site(|site| site.alarms.retain(|a| !a.name.contains("QueueAgeAlarm")));
    let check = only(&world, "tenant:alpha:read");
    assert!(!check.passed, "{check:?}");
    says(
        &check,
        "no tenant stack's age alarm watches it",
        "make deploy-tenant",
    );
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

/// A stack with no topic its alarms notify: every alarm pages nobody.
#[test]
fn a_stack_without_an_alarm_topic() {
    let world = hub::deployed();
    world.site(|site| {
        let stack = &mut site.stacks.get_mut(hub::STACK).unwrap().stack;
        stack.outputs.remove("AlarmTopicArn");
        stack
            .parameters
            .insert("AlarmTopicArn".into(), String::new());
    });
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "alarm-topic")
        .unwrap();
    assert!(!check.passed, "{check:?}");
    says(check, "", "ALARM_TOPIC=<topic ARN>");
}

/// A function still Pending is not ready to run; a rule in a state other than ENABLED passes
/// nothing the router expects.
#[test]
fn a_pending_function_and_a_rule_in_another_state() {
    let world = hub::deployed();
    let name = hub::output(&world, "FunctionName");
    world.site(|site| {
        let f = site.functions.get_mut(&name).unwrap();
        f.state = Some("Pending".into());
        f.state_reason = Some("The function is being created.".into());
    });
    let check = only(&world, "function");
    says(&check, "is Pending: The function is being created.", "");

    let world = hub::deployed();
    let rule = hub::resource(&world, "RebalanceRecommendationRule");
    world.site(|site| {
        site.rules
            .get_mut(&("default".into(), rule))
            .unwrap()
            .0
            .state = Some("ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS".into());
    });
    let check = only(&world, "rule:RebalanceRecommendationRule");
    says(
        &check,
        "is ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS",
        "aws events enable-rule",
    );
}

/// The only mapping of the function reads another queue: nothing reads the ingest queue.
#[test]
fn a_mapping_that_reads_another_queue() {
    let world = hub::deployed();
    let function = hub::output(&world, "FunctionName");
    world.site(|site| {
        for m in site.mappings.get_mut(&function).unwrap() {
            m.event_source_arn = Some("arn:aws:sqs:us-east-1:123456789012:other".into());
        }
    });
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "nothing reads the queue",
        "--event-source-arn arn:aws:sqs:us-east-1:123456789012:ir-ingest",
    );
}

/// A tenant queue made by another tool (Terraform, CDK: docs/operating.md, "The tenant
/// contract") has no tenant stack whose alarm verify could find when the queue refuses its look:
/// an age alarm named `<queue>-QueueAgeAlarm` says whether anyone reads it.
#[test]
fn a_hand_made_tenant_queues_age_alarm_is_found_by_the_queues_name() {
    let world = hub::deployed();
    world.refuse("ReceiveMessage");
    world.site(|site| {
        for alarm in site
            .alarms
            .iter_mut()
            .filter(|a| a.name.contains("QueueAgeAlarm"))
        {
            alarm.name = "karpenter-alpha-QueueAgeAlarm".into();
            alarm.state = Some("ALARM".into());
        }
    });
    let check = only(&world, "tenant:alpha:read");
    says(
        &check,
        "karpenter-alpha-QueueAgeAlarm is in ALARM",
        "settings.interruptionQueue",
    );
    world.site(|site| site.alarms.retain(|a| !a.name.contains("QueueAgeAlarm")));
    let check = only(&world, "tenant:alpha:read");
    says(
        &check,
        "nor an alarm named karpenter-alpha-QueueAgeAlarm",
        "karpenter-alpha-QueueAgeAlarm",
    );
}
