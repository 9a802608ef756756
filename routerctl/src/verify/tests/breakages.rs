//! One defect at a time in the hub's account, as it happens there (a rule disabled by hand, a
//! policy edited, a mapping deleted, a subscription never confirmed), each failing exactly the
//! check that guards it, with the fix that puts it back.

use serde_json::Value;

use super::{failed, hub, only, says, verify};
use crate::cloud::model::World;

/// The rule `logical` of the base stack on the default bus, to change.
fn rule(
    world: &World,
    logical: &str,
    change: impl FnOnce(&mut crate::cloud::Rule, &mut Vec<crate::cloud::Target>),
) {
    let name = hub::resource(world, logical);
    world.site(|site| {
        let (rule, targets) = site
            .rules
            .get_mut(&("default".to_owned(), name))
            .expect("the rule");
        change(rule, targets);
    });
}

#[test]
fn a_stack_still_updating() {
    let world = hub::deployed();
    world.site(|site| {
        site.stacks.get_mut(hub::STACK).unwrap().stack.status = "UPDATE_IN_PROGRESS".into();
    });
    let check = only(&world, "stack");
    says(
        &check,
        "ir is UPDATE_IN_PROGRESS",
        "wait for the operation to finish",
    );
}

#[test]
fn a_stack_from_another_release() {
    let world = hub::deployed();
    world.site(|site| {
        let outputs = &mut site.stacks.get_mut(hub::STACK).unwrap().stack.outputs;
        outputs.insert("Version".into(), "0.1.9".into());
    });
    let check = only(&world, "version");
    says(
        &check,
        "deployed from release 0.1.9",
        "or check it with routerctl 0.1.9",
    );
}

#[test]
fn a_rule_disabled_by_hand() {
    let world = hub::deployed();
    rule(&world, "StateChangeRule", |rule, _| {
        rule.state = Some("DISABLED".into())
    });
    let check = only(&world, "rule:StateChangeRule");
    says(
        &check,
        "is DISABLED: its events never reach the router",
        "aws events enable-rule --name ir-StateChangeRule-GENERATED --region us-east-1",
    );
}

/// Without its `account` field, a default-bus rule matches every account's events the bus
/// receives.
#[test]
fn a_rule_pattern_widened_to_every_account() {
    let world = hub::deployed();
    rule(&world, "SpotInterruptionRule", |rule, _| {
        let mut pattern: Value =
            serde_json::from_str(rule.event_pattern.as_deref().unwrap()).unwrap();
        pattern.as_object_mut().unwrap().remove("account");
        rule.event_pattern = Some(pattern.to_string());
    });
    let check = only(&world, "rule:SpotInterruptionRule");
    says(
        &check,
        "without `account` it matches every account's events",
        "aws events put-rule --name ir-SpotInterruptionRule-GENERATED",
    );
}

#[test]
fn a_rule_without_its_dead_letter_queue() {
    let world = hub::deployed();
    rule(&world, "ScheduledChangeRule", |_, targets| {
        targets[0].dead_letter_arn = None
    });
    let check = only(&world, "rule:ScheduledChangeRule");
    says(
        &check,
        "its target has dead-letter queue None",
        "DeadLetterConfig={Arn=arn:aws:sqs:us-east-1:123456789012:",
    );
}

#[test]
fn a_rule_whose_target_was_removed() {
    let world = hub::deployed();
    rule(&world, "RebalanceRecommendationRule", |_, targets| {
        targets.clear()
    });
    let check = only(&world, "rule:RebalanceRecommendationRule");
    says(
        &check,
        "does not target the ingest queue",
        "aws events put-targets --rule ir-RebalanceRecommendationRule-GENERATED",
    );
}

#[test]
fn a_rule_deleted_outside_cloudformation() {
    let world = hub::deployed();
    let name = hub::resource(&world, "CapacityReservationInterruptionRule");
    world.site(|site| site.rules.remove(&("default".to_owned(), name)));
    let check = only(&world, "rule:CapacityReservationInterruptionRule");
    says(
        &check,
        "does not exist (deleted outside CloudFormation)",
        "re-create the rule as base.yaml defines it",
    );
}

/// A rule on the central bus is found by its name, not by CloudFormation's `<bus>|<rule>`
/// physical id, which DescribeRule refuses.
#[test]
fn a_central_bus_rule_disabled_by_hand() {
    let (world, bus) = central_rule("HubStateChangeRule", |rule| {
        rule.state = Some("DISABLED".into())
    });
    let check = only(&world, "rule:HubStateChangeRule");
    says(&check, "is DISABLED", &format!("--event-bus-name {bus}"));
}

/// A hub with its central bus, `change` made to its rule `logical` there: the world, and the bus.
fn central_rule(logical: &str, change: impl FnOnce(&mut crate::cloud::Rule)) -> (World, String) {
    let world = hub::deployed_with(&[
        ("CentralBus", "Enabled"),
        ("ServedAccounts", "111111111111"),
    ]);
    let physical = hub::resource(&world, logical);
    let (bus, name) = physical
        .split_once('|')
        .expect("a custom bus rule's physical id");
    world.site(|site| {
        let (rule, _) = site
            .rules
            .get_mut(&(bus.to_owned(), name.to_owned()))
            .unwrap();
        change(rule);
    });
    (world, bus.to_owned())
}

fn function(world: &World, change: impl FnOnce(&mut crate::cloud::Function)) {
    let name = hub::output(world, "FunctionName");
    world.site(|site| change(site.functions.get_mut(&name).expect("the function")));
}

#[test]
fn a_function_that_failed_or_runs_as_another_role() {
    let world = hub::deployed();
    function(&world, |f| {
        f.state = Some("Failed".into());
        f.state_reason = Some("The role defined for the function cannot be assumed".into());
    });
    let check = only(&world, "function");
    says(
        &check,
        "is Failed: The role defined for the function cannot be assumed",
        "re-deploy the base stack",
    );

    let world = hub::deployed();
    function(&world, |f| {
        f.role = Some("arn:aws:iam::123456789012:role/other".into())
    });
    let check = only(&world, "function");
    says(
        &check,
        "not the stack's RouterRoleArn",
        "uses RouterRole again",
    );
}

/// The environment is judged by the router's own parser: the failure names the variable.
#[test]
fn a_function_environment_the_router_would_refuse_or_sending_elsewhere() {
    let world = hub::deployed();
    function(&world, |f| {
        f.environment
            .insert("QUEUE_NAME_TEMPLATE".into(), "no-placeholder".into());
    });
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "function:environment")
        .unwrap();
    assert!(!check.passed);
    says(
        check,
        "QUEUE_NAME_TEMPLATE=",
        "update the stack's parameters",
    );

    let world = hub::deployed();
    function(&world, |f| {
        f.environment
            .insert("QUEUE_NAME_TEMPLATE".into(), "other-{cluster}".into());
    });
    let report = verify(&world);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "function:environment")
        .unwrap();
    says(
        check,
        "sends to other-<cluster> but the role may only send to the stack's QueuePrefix karpenter-*",
        "update the stack's parameters",
    );
}

#[test]
fn a_router_role_without_its_policy() {
    let world = hub::deployed();
    let arn = hub::output(&world, "RouterRoleArn");
    world.edit(|state, _, _| state.roles.get_mut(&arn).unwrap().inline.clear());
    let report = verify(&world);
    let failed = failed(&report);
    assert!(failed.contains(&"router-role"), "{failed:?}");
    // The tenant's checks judge the same role's sends, and say so too.
    assert!(
        failed
            .iter()
            .all(|f| *f == "router-role" || f.starts_with("tenant:alpha:")),
        "{failed:?}"
    );
}

#[test]
fn a_dashboard_deleted_or_edited() {
    let world = hub::deployed();
    let name = hub::output(&world, "DashboardName");
    world.site(|site| site.dashboards.remove(&name));
    let check = only(&world, "dashboard");
    says(
        &check,
        "does not exist (deleted outside CloudFormation)",
        "aws cloudwatch put-dashboard",
    );

    let world = hub::deployed();
    world.site(|site| {
        site.dashboards
            .insert(name.clone(), "{\"widgets\": []}".into())
    });
    let check = only(&world, "dashboard");
    says(
        &check,
        "its widgets do not chart the router's metrics",
        "RouterDashboard",
    );

    // Charting the router's namespace, but another function's metrics.
    let world = hub::deployed();
    let function = hub::output(&world, "FunctionName");
    world.site(|site| {
        let body = site
            .dashboards
            .get_mut(&name)
            .expect("the stack's dashboard");
        *body = body.replace(&function, "another-function");
    });
    let check = only(&world, "dashboard");
    says(
        &check,
        "its widgets do not chart the router's metrics",
        "RouterDashboard",
    );
}

/// The hub, with the alarm whose name contains `name` edited by hand.
fn with_alarm(name: &str, edit: impl FnOnce(&mut aws_model::resources::Alarm)) -> World {
    let world = hub::deployed();
    world.site(|site| {
        edit(
            site.alarms
                .iter_mut()
                .find(|a| a.name.contains(name))
                .expect("the stack's alarm"),
        )
    });
    world
}

#[test]
fn an_alarm_deleted_or_silenced() {
    let world = hub::deployed();
    world.site(|site| {
        site.alarms
            .retain(|a| !a.name.contains("AccessDeniedAlarm"))
    });
    let check = only(&world, "alarm:AccessDeniedAlarm");
    says(
        &check,
        "no alarm watches",
        "aws cloudwatch put-metric-alarm --region us-east-1 --alarm-name ir-AccessDeniedAlarm",
    );

    let world = with_alarm("LateForwardsAlarm", |alarm| {
        alarm.actions_enabled = Some(false)
    });
    let check = only(&world, "alarm:LateForwardsAlarm");
    says(
        &check,
        "(its actions are disabled): it pages nobody",
        "aws cloudwatch enable-alarm-actions",
    );

    // Edited to watch another metric: it stands, and watches nothing the router counts.
    let world = with_alarm("LateForwardsAlarm", |alarm| {
        alarm.metric.as_mut().expect("a metric").metric = "Received".into();
    });
    let check = only(&world, "alarm:LateForwardsAlarm");
    says(&check, "InterruptionRouter Received of", "put-metric-alarm");

    // What each standing alarm watches, said on its PASS line.
    let report = verify(&hub::deployed());
    let function = hub::output(&hub::deployed(), "FunctionName");
    let watches = |name: &str| report.check(name).expect(name).detail.clone();
    assert!(
        watches("alarm:LateForwardsAlarm").contains(&format!(
            "watches InterruptionRouter LateForwards of {function}"
        )),
        "{report:#?}"
    );
    assert!(
        watches("alarm:RouterMetricsMissingAlarm").contains(&format!(
            "watches {function}'s metric documents (InterruptionRouter Received, SampleCount) \
             against its AWS/Lambda Invocations"
        )),
        "{report:#?}"
    );

    // The metrics-missing alarm without its documents' metric: it compares nothing.
    let world = with_alarm("RouterMetricsMissingAlarm", |alarm| {
        alarm.metrics.retain(|w| w.namespace == "AWS/Lambda");
    });
    let check = only(&world, "alarm:RouterMetricsMissingAlarm");
    says(&check, "AWS/Lambda", "put-metric-alarm");
}

/// Invocations without metric documents: every router metric is blind.
#[test]
fn metric_documents_that_never_reach_the_log_group() {
    let world = hub::deployed();
    let group = hub::resource(&world, "RouterLogGroup");
    world.site(|site| site.logs.insert(group, Vec::new()));
    // A line without a document (a build whose documents Lambda's filter dropped).
    world.log(
        &hub::resource(&world, "RouterLogGroup"),
        r#"{"level":"WARN","fields":{"message":"failed, will be retried"}}"#,
    );
    let check = only(&world, "function:metrics");
    says(&check, "120 invocations", "LOG_LEVEL=INFO");
    // One invocation is enough to expect its documents.
    let function = hub::output(&world, "FunctionName");
    world.site(|site| site.invocations.insert(function, 1.0));
    let check = only(&world, "function:metrics");
    says(&check, "1 invocations", "LOG_LEVEL=INFO");
    // No invocations, no documents expected.
    world.site(|site| site.invocations.clear());
    assert_eq!(failed(&verify(&world)), Vec::<&str>::new());
}

#[test]
fn an_alarm_topic_nobody_confirmed() {
    let world = hub::deployed();
    let topic = hub::output(&world, "AlarmTopicArn");
    world.site(|site| {
        site.subscriptions
            .insert(topic.clone(), vec!["PendingConfirmation".into()]);
    });
    let check = only(&world, "alarm-topic");
    says(&check, "1 waiting for confirmation", "aws sns subscribe");
}

/// A read the operator may not make fails the checks that need it, each saying which
/// permission it needs, and nothing else.
#[test]
fn a_refused_read_names_the_permission() {
    let world = hub::deployed();
    world.refuse("ListTargetsByRule");
    let report = verify(&world);
    let failed = failed(&report);
    assert_eq!(failed.len(), 5, "{failed:?}");
    for check in report.checks.iter().filter(|c| !c.passed) {
        assert!(check.name.starts_with("rule:"), "{}", check.name);
        says(
            check,
            "AccessDenied",
            "run verify with events:ListTargetsByRule",
        );
    }

    let world = hub::deployed();
    world.refuse("ListSubscriptionsByTopic");
    let check = only(&world, "alarm-topic");
    says(&check, "AccessDenied", "sns:ListSubscriptionsByTopic");
}

/// A central-bus rule has no `account` in its pattern by design (it carries every member's
/// events): a pattern that differs there is said to differ, never to match every account's.
#[test]
fn a_central_bus_rule_whose_pattern_differs_is_not_said_to_match_every_account() {
    let (world, _) = central_rule("HubStateChangeRule", |rule| {
        let mut pattern: Value =
            serde_json::from_str(rule.event_pattern.as_deref().unwrap()).unwrap();
        pattern["detail"] = serde_json::json!({"state": ["terminated"]});
        rule.event_pattern = Some(pattern.to_string());
    });
    let check = only(&world, "rule:HubStateChangeRule");
    assert!(
        !check.detail.contains("without `account`"),
        "{}",
        check.detail
    );
}

/// A rule whose target dead-letters into a queue that is not the stack's DLQ: what EventBridge
/// gives up on goes where nobody looks.
#[test]
fn a_rule_whose_target_dead_letters_elsewhere() {
    let world = hub::deployed();
    let elsewhere = "arn:aws:sqs:us-east-1:123456789012:elsewhere";
    rule(&world, "ScheduledChangeRule", |_, targets| {
        targets[0].dead_letter_arn = Some(elsewhere.into())
    });
    let check = only(&world, "rule:ScheduledChangeRule");
    says(
        &check,
        &format!("its target has dead-letter queue Some(\"{elsewhere}\"), not the stack's DLQ"),
        "DeadLetterConfig={Arn=arn:aws:sqs:us-east-1:123456789012:",
    );
}
