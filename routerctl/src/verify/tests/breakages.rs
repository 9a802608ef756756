//! One defect at a time in the hub's account, as it happens there (a rule disabled by hand, a
//! policy edited, a mapping deleted, a subscription never confirmed), each failing exactly the
//! check that guards it, with the fix that puts it back.

use std::time::Duration;

use serde_json::{Value, json};

use super::{failed, hub, verify};
use crate::{check::Check, cloud::model::World};

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

fn queue_name(world: &World, output: &str) -> String {
    aws_model::aws::arn_name(&hub::output(world, output)).to_owned()
}

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
    let world = hub::deployed_with(&[
        ("CentralBus", "Enabled"),
        ("ServedAccounts", "111111111111"),
    ]);
    let physical = hub::resource(&world, "HubStateChangeRule");
    let (bus, name) = physical
        .split_once('|')
        .expect("a custom bus rule's physical id");
    world.site(|site| {
        let (rule, _) = site
            .rules
            .get_mut(&(bus.to_owned(), name.to_owned()))
            .unwrap();
        rule.state = Some("DISABLED".into());
    });
    let check = only(&world, "rule:HubStateChangeRule");
    says(&check, "is DISABLED", &format!("--event-bus-name {bus}"));
}

#[test]
fn an_ingest_queue_whose_visibility_is_below_the_functions_timeout() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "VisibilityTimeout",
        Some("30"),
    );
    let check = only(&world, "ingest-queue");
    says(
        &check,
        "visibility timeout 30 s against the function timeout 30 s",
        "VisibilityTimeout=180",
    );
}

#[test]
fn an_ingest_queue_without_its_redrive() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "RedrivePolicy",
        None,
    );
    let check = only(&world, "ingest-queue");
    says(
        &check,
        "redrive target is None, not the stack's DLQ",
        "deadLetterTargetArn",
    );
}

#[test]
fn an_unencrypted_dead_letter_queue() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "DeadLetterQueueArn"),
        "SqsManagedSseEnabled",
        Some("false"),
    );
    let check = only(&world, "dead-letter-queue");
    says(
        &check,
        "is not encrypted at rest",
        "SqsManagedSseEnabled=true",
    );
}

#[test]
fn an_ingest_queue_without_its_policy() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &queue_name(&world, "IngestQueueArn"),
        "Policy",
        None,
    );
    let check = only(&world, "ingest-queue:policy");
    says(
        &check,
        "has no queue policy: EventBridge cannot deliver to it",
        "aws sqs set-queue-attributes",
    );
}

/// A statement without `aws:SourceArn` lets any rule anywhere inject events.
#[test]
fn a_dead_letter_queue_policy_open_to_every_rule() {
    let world = hub::deployed();
    let dlq = queue_name(&world, "DeadLetterQueueArn");
    let arn = hub::output(&world, "DeadLetterQueueArn");
    let open = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage", "Resource": arn}]});
    queue_attribute(&world, &dlq, "Policy", Some(&open.to_string()));
    let check = only(&world, "dead-letter-queue:policy");
    says(
        &check,
        "no aws:SourceArn condition",
        "aws sqs set-queue-attributes",
    );
}

fn mapping(world: &World, change: impl FnOnce(&mut Vec<crate::cloud::Mapping>)) {
    let function = hub::output(world, "FunctionName");
    world.site(|site| change(site.mappings.get_mut(&function).expect("the mappings")));
}

#[test]
fn an_event_source_mapping_disabled_or_without_partial_failures_or_deleted() {
    let world = hub::deployed();
    mapping(&world, |m| m[0].state = Some("Disabled".into()));
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "is Disabled",
        "aws lambda update-event-source-mapping --region us-east-1 --uuid",
    );

    let world = hub::deployed();
    mapping(&world, |m| m[0].function_response_types.clear());
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "lacks ReportBatchItemFailures",
        "--function-response-types ReportBatchItemFailures",
    );

    let world = hub::deployed();
    mapping(&world, Vec::clear);
    let check = only(&world, "event-source-mapping");
    says(
        &check,
        "nothing reads the queue",
        "aws lambda create-event-source-mapping",
    );
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

    let world = hub::deployed();
    world.site(|site| {
        let alarm = site
            .alarms
            .iter_mut()
            .find(|a| a.name.contains("LateForwardsAlarm"))
            .unwrap();
        alarm.actions_enabled = Some(false);
    });
    let check = only(&world, "alarm:LateForwardsAlarm");
    says(
        &check,
        "(its actions are disabled): it pages nobody",
        "aws cloudwatch enable-alarm-actions",
    );
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

/// A message older than a minute: nobody reads the queue (Karpenter deletes what it reads
/// within seconds). Younger, someone may still.
#[test]
fn a_tenant_queue_nobody_reads() {
    let world = hub::deployed();
    hub::unread(&world, Duration::from_secs(20));
    assert_eq!(failed(&verify(&world)), Vec::<&str>::new());
    world.advance(Duration::from_secs(50));
    let check = only(&world, "tenant:alpha:read");
    says(
        &check,
        "holds a message 70 s old: nobody reads it",
        "settings.interruptionQueue in cluster alpha",
    );
}

#[test]
fn a_tenant_record_deleted() {
    let world = hub::deployed();
    world.site(|site| site.parameters.clear());
    let check = only(&world, "tenant:alpha:record");
    says(
        &check,
        "no tenant record /interruption-router/tenant-queues/karpenter-alpha",
        "make deploy-tenant CLUSTER=alpha",
    );
}

#[test]
fn a_tenant_queue_unencrypted() {
    let world = hub::deployed();
    queue_attribute(
        &world,
        &hub::tenant_queue(),
        "SqsManagedSseEnabled",
        Some("false"),
    );
    let check = only(&world, "tenant:alpha:encryption");
    says(
        &check,
        "is not encrypted at rest",
        "SqsManagedSseEnabled=true",
    );
}

/// A tenant queue whose policy lost its Deny: it still admits the router, but any principal of
/// the account allowed sqs:SendMessage by its own policies can write a fake interruption.
#[test]
fn a_tenant_queue_policy_that_denies_nobody() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    let mut policy: Value =
        world.site(|site| serde_json::from_str(&site.queues[&queue].attributes["Policy"]).unwrap());
    policy["Statement"]
        .as_array_mut()
        .unwrap()
        .retain(|s| s["Effect"] == "Allow");
    queue_attribute(&world, &queue, "Policy", Some(&policy.to_string()));
    let check = only(&world, "tenant:alpha:queue-policy");
    says(
        &check,
        "other principals in the account are not denied",
        "aws sqs set-queue-attributes",
    );
}

/// Karpenter's role loses the tenant stack's grant: its controller gets AccessDenied.
#[test]
fn a_karpenter_role_without_the_tenant_stacks_grant() {
    let world = hub::deployed();
    let role = format!("arn:aws:iam::{}:role/{}", hub::ACCOUNT, hub::KARPENTER_ROLE);
    world.edit(|state, _, _| state.roles.get_mut(&role).unwrap().managed.clear());
    let check = only(&world, "tenant:alpha:karpenter-role");
    says(&check, hub::KARPENTER_ROLE, "");
}

/// A queue of the cluster's name that is not the tenant stack's (no tenant tag, no policy
/// admitting the router alone): the router does not write it.
#[test]
fn a_look_alike_queue_is_not_onboarded() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| {
        let q = site.queues.get_mut(&queue).unwrap();
        q.tags.clear();
        q.attributes.remove("Policy");
    });
    let report = verify(&world);
    let failed = failed(&report);
    assert!(failed.contains(&"tenant:alpha:queue"), "{failed:?}");
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "tenant:alpha:queue")
        .unwrap();
    says(
        check,
        "the tenant stack did not make it",
        "routerctl adopt --cluster alpha",
    );
}

#[test]
fn no_cluster_onboarded() {
    let world = hub::deployed();
    let queue = hub::tenant_queue();
    world.site(|site| site.queues.remove(&queue));
    let check = only(&world, "tenants");
    says(&check, "karpenter-", "make deploy-tenant");
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
