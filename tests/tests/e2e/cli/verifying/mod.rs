//! `routerctl verify` against the deployed stacks: a clean deployment passes, and each deliberate
//! breakage is caught by name with its fix; a member account through its spoke stack.

use super::{Estate, routerctl_binary};
use anyhow::{Context, Result};
use aws_model::aws::Aws;
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::{INVOKE_BUDGET, World};
use local_aws::moto::env_for;
use routerctl::{demo::sandbox::Sandbox, verify};
use serde_json::Value;

/// Runs verify and asserts that exactly `failing` checks fail, each with a fix.
async fn verify_fails(
    estate: &Estate,
    clusters: &[&str],
    failing: &[&str],
) -> Result<verify::Report> {
    let options = verify::Options {
        stack: estate.sandbox.stack().to_owned(),
        clusters: clusters.iter().map(|c| c.to_string()).collect(),
        ..verify::Options::default()
    };
    // Boxed: verify's future is large, and the tests await it many times.
    let report = Box::pin(verify::run(estate.aws(), &options)).await;
    let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(failed, failing, "{}", report.render());
    for check in report.failures() {
        assert!(
            check.fix.as_deref().is_some_and(|f| !f.is_empty()),
            "{} has no fix",
            check.name
        );
    }
    Ok(report)
}

/// Deletes the sandbox's alarm whose name starts with `prefix` (`<stack>-<logical id>`).
async fn delete_alarm(aws: &Aws, prefix: &str) -> Result<()> {
    let alarms = aws
        .cloudwatch
        .describe_alarms()
        .alarm_name_prefix(prefix)
        .send()
        .await?;
    let alarm = alarms.metric_alarms()[0].alarm_name().unwrap().to_owned();
    aws.cloudwatch
        .delete_alarms()
        .alarm_names(&alarm)
        .send()
        .await?;
    Ok(())
}

/// Asserts that check `name`'s fix says `text`.
fn assert_fix(report: &verify::Report, name: &str, text: &str) {
    let fix = report.check(name).and_then(|c| c.fix.as_deref());
    assert!(
        fix.is_some_and(|f| f.contains(text)),
        "{name}'s fix should say {text:?}:\n{}",
        report.render()
    );
}

/// Asserts that `report`'s check `name` exists and its detail says `text`.
fn assert_detail(report: &verify::Report, name: &str, text: &str) {
    let check = report.check(name);
    assert!(
        check.is_some_and(|c| c.detail.contains(text)),
        "{name} should say {text:?}:\n{}",
        report.render()
    );
}

#[tokio::test]
async fn verify_passes_on_the_deployed_stacks_and_names_each_breakage() -> Result<()> {
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let sandbox = &estate.sandbox;

    let report = verify_fails(&estate, &[], &[]).await?;
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "stack",
        "rule:SpotInterruptionRule",
        "rule:RebalanceRecommendationRule",
        "rule:StateChangeRule",
        "rule:ScheduledChangeRule",
        "rule:CapacityReservationInterruptionRule",
        "ingest-queue",
        "ingest-queue:policy",
        "event-source-mapping",
        "dead-letter-queue",
        "dead-letter-queue:policy",
        "function",
        "function:environment",
        "router-role",
        "dashboard",
        "alarm:LateForwardsAlarm",
        // Found without --cluster: every queue the router's template names.
        "tenant:alpha:queue",
        "tenant:alpha:encryption",
        "tenant:alpha:queue-policy",
        "tenant:alpha:router-role",
        "tenant:beta:queue",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    let role_check = &report.check("router-role").unwrap().detail;
    for action in ["tag:GetResources", "sqs:ChangeMessageVisibility"] {
        assert!(role_check.contains(action), "{role_check}");
    }
    // One account served: no spoke roles to assume.
    assert!(
        !names.contains(&"router-role:assume-spoke-roles"),
        "{names:?}"
    );

    // A rule disabled by hand.
    let state_rule = sandbox.resource("StateChangeRule").await?;
    aws.events.disable_rule().name(&state_rule).send().await?;
    let report = verify_fails(&estate, &[], &["rule:StateChangeRule"]).await?;
    let check = report.check("rule:StateChangeRule").unwrap();
    assert!(check.detail.contains("is DISABLED"), "{}", check.detail);
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains(&format!("aws events enable-rule --name {state_rule}")),
        "{check:?}"
    );
    aws.events.enable_rule().name(&state_rule).send().await?;

    // A pattern narrowed to terminated only: stopping instances would never be drained.
    let original = aws.events.describe_rule().name(&state_rule).send().await?;
    let original = original.event_pattern().unwrap().to_owned();
    aws.events
        .put_rule()
        .name(&state_rule)
        .event_pattern(r#"{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["terminated"]}}"#)
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["rule:StateChangeRule"]).await?;
    assert_detail(
        &report,
        "rule:StateChangeRule",
        "differs from what the router handles",
    );
    aws.events
        .put_rule()
        .name(&state_rule)
        .event_pattern(original)
        .send()
        .await?;

    // A rule whose target was removed.
    let spot_rule = sandbox.resource("SpotInterruptionRule").await?;
    let targets = aws
        .events
        .list_targets_by_rule()
        .rule(&spot_rule)
        .send()
        .await?;
    let target = targets.targets()[0].clone();
    aws.events
        .remove_targets()
        .rule(&spot_rule)
        .ids(target.id())
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["rule:SpotInterruptionRule"]).await?;
    let check = report.check("rule:SpotInterruptionRule").unwrap();
    assert!(
        check.detail.contains("does not target the ingest queue"),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("aws events put-targets")
    );
    aws.events
        .put_targets()
        .rule(&spot_rule)
        .targets(target)
        .send()
        .await?;

    // The ingest queue's policy as it was before it denied other senders: any principal of the
    // account whose identity policy allows sqs:SendMessage could forge an interruption.
    let ingest = sandbox.ingest_queue_url().await?;
    let policy = queue_policy(aws, &ingest).await?;
    let mut undenied = policy.clone();
    undenied["Statement"]
        .as_array_mut()
        .unwrap()
        .retain(|s| s["Sid"] != "DenySendersOtherThanTheseRules");
    set_queue_policy(aws, &ingest, &undenied).await?;
    let report = verify_fails(&estate, &[], &["ingest-queue:policy"]).await?;
    assert_detail(
        &report,
        "ingest-queue:policy",
        "it does not deny other senders",
    );
    assert_fix(
        &report,
        "ingest-queue:policy",
        "DenySendersOtherThanTheseRules",
    );

    // ... and opened to every rule as well (no aws:SourceArn).
    let mut open = undenied.clone();
    open["Statement"][0]
        .as_object_mut()
        .unwrap()
        .remove("Condition");
    set_queue_policy(aws, &ingest, &open).await?;
    let report = verify_fails(&estate, &[], &["ingest-queue:policy"]).await?;
    assert_detail(
        &report,
        "ingest-queue:policy",
        "lets any EventBridge rule send",
    );
    set_queue_policy(aws, &ingest, &policy).await?;

    // The event source mapping without ReportBatchItemFailures.
    let mapping = aws
        .lambda
        .list_event_source_mappings()
        .function_name(sandbox.function_name()?)
        .send()
        .await?;
    let uuid = mapping.event_source_mappings()[0]
        .uuid()
        .unwrap()
        .to_owned();
    aws.lambda
        .update_event_source_mapping()
        .uuid(&uuid)
        .set_function_response_types(Some(vec![]))
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["event-source-mapping"]).await?;
    assert_detail(
        &report,
        "event-source-mapping",
        "lacks ReportBatchItemFailures",
    );
    aws.lambda
        .update_event_source_mapping()
        .uuid(&uuid)
        .function_response_types(
            aws_sdk_lambda::types::FunctionResponseType::ReportBatchItemFailures,
        )
        .send()
        .await?;

    // A QUEUE_NAME_TEMPLATE the router would refuse to start with: the router's own validation.
    let function = sandbox.function_name()?;
    let env: std::collections::HashMap<String, String> =
        sandbox.function_environment().await?.into_iter().collect();
    let mut broken = env.clone();
    broken.insert("QUEUE_NAME_TEMPLATE".into(), "karpenter-queue".into());
    set_environment(aws, function, broken).await?;
    let report = verify_fails(&estate, &[], &["function:environment"]).await?;
    let check = report.check("function:environment").unwrap();
    assert!(
        check
            .detail
            .contains(r#"QUEUE_NAME_TEMPLATE="karpenter-queue": it does not contain {cluster}"#),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("karpenter-{cluster}")
    );
    set_environment(aws, function, env).await?;

    // A tenant queue re-created (or edited) without encryption.
    let alpha = sandbox.queue_url("karpenter-alpha").await?;
    set_attribute(
        aws,
        &alpha,
        QueueAttributeName::SqsManagedSseEnabled,
        "false",
    )
    .await?;
    let report = verify_fails(&estate, &[], &["tenant:alpha:encryption"]).await?;
    assert!(
        report
            .check("tenant:alpha:encryption")
            .unwrap()
            .fix
            .as_deref()
            .unwrap()
            .contains("SqsManagedSseEnabled=true"),
        "{}",
        report.render()
    );
    set_attribute(
        aws,
        &alpha,
        QueueAttributeName::SqsManagedSseEnabled,
        "true",
    )
    .await?;

    // A tenant queue policy written for another router role: it denies the real one.
    let alpha_policy = queue_policy(aws, &alpha).await?;
    let stale = serde_json::to_string(&alpha_policy)?.replace(
        sandbox.router_role_arn()?,
        "arn:aws:iam::123456789012:role/old-router",
    );
    set_queue_policy(aws, &alpha, &serde_json::from_str(&stale)?).await?;
    let report = verify_fails(&estate, &[], &["tenant:alpha:queue-policy"]).await?;
    assert_detail(
        &report,
        "tenant:alpha:queue-policy",
        "DenySendersOtherThanRouter",
    );
    set_queue_policy(aws, &alpha, &alpha_policy).await?;

    // The role's send permission narrowed to beta's queue.
    let role = sandbox
        .router_role_arn()?
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let document = aws
        .iam
        .get_role_policy()
        .role_name(&role)
        .policy_name("interruption-router")
        .send()
        .await?
        .policy_document()
        .to_owned();
    let document = aws_model::policy::decode_iam_document(&document).map_err(anyhow::Error::msg)?;
    let narrowed = document.replace("karpenter-*", "karpenter-beta");
    assert_ne!(narrowed, document);
    put_role_policy(aws, &role, &narrowed).await?;
    let report = verify_fails(&estate, &[], &["tenant:alpha:router-role"]).await?;
    assert_detail(
        &report,
        "tenant:alpha:router-role",
        "may not sqs:GetQueueUrl (",
    );
    assert_detail(&report, "tenant:alpha:router-role", "sqs:ListQueueTags (");
    assert_detail(&report, "tenant:alpha:router-role", "on karpenter-alpha");
    put_role_policy(aws, &role, &document).await?;

    // The role without the Tagging API lookup path and without the hand-back of records.
    let narrowed = document
        .replace("\"tag:GetResources\"", "\"tag:GetTagKeys\"")
        .replace("\"sqs:ChangeMessageVisibility\"", "\"sqs:ListQueues\"");
    assert_ne!(narrowed, document);
    put_role_policy(aws, &role, &narrowed).await?;
    let report = verify_fails(&estate, &[], &["router-role"]).await?;
    let check = report.check("router-role").unwrap();
    assert!(
        check.detail.contains("may not tag:GetResources on *")
            && check
                .detail
                .contains("sqs:ChangeMessageVisibility on ir-ingest"),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("statements ResolveInstanceTagsByArn, ConsumeIngestQueue"),
        "{check:?}"
    );
    put_role_policy(aws, &role, &document).await?;

    // The late-forwards alarm deleted: nobody hears of interruptions forwarded too late.
    delete_alarm(aws, "ir-LateForwardsAlarm").await?;
    let report = verify_fails(&estate, &[], &["alarm:LateForwardsAlarm"]).await?;
    assert_detail(
        &report,
        "alarm:LateForwardsAlarm",
        "no alarm watches InterruptionRouter LateForwards",
    );
    assert_fix(
        &report,
        "alarm:LateForwardsAlarm",
        "aws cloudwatch put-metric-alarm --region us-east-1 --alarm-name ir-LateForwardsAlarm",
    );
    sandbox.create_alarm("LateForwardsAlarm").await?;

    // The dashboard deleted by hand.
    let dashboard = aws
        .cloudwatch
        .get_dashboard()
        .dashboard_name("ir")
        .send()
        .await?;
    aws.cloudwatch
        .delete_dashboards()
        .dashboard_names("ir")
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["dashboard"]).await?;
    assert_detail(&report, "dashboard", "dashboard ir does not exist");
    aws.cloudwatch
        .put_dashboard()
        .dashboard_name("ir")
        .dashboard_body(dashboard.dashboard_body().unwrap())
        .send()
        .await?;

    // A default-bus rule without `account`: every foreign event its bus receives would be
    // dead-lettered account-not-served and page (or arrive twice through the central bus).
    let spot_rule = sandbox.resource("SpotInterruptionRule").await?;
    let scoped = aws
        .events
        .describe_rule()
        .name(&spot_rule)
        .send()
        .await?
        .event_pattern()
        .unwrap()
        .to_owned();
    aws.events
        .put_rule()
        .name(&spot_rule)
        .event_pattern(
            r#"{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}"#,
        )
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["rule:SpotInterruptionRule"]).await?;
    assert_detail(
        &report,
        "rule:SpotInterruptionRule",
        "it matches every account's events",
    );
    assert_fix(
        &report,
        "rule:SpotInterruptionRule",
        r#""account":["123456789012"]"#,
    );
    aws.events
        .put_rule()
        .name(&spot_rule)
        .event_pattern(scoped)
        .send()
        .await?;

    // The metrics-missing alarm deleted: documents Lambda's log filter drops would leave every
    // router alarm silent, and nothing would say so.
    delete_alarm(aws, "ir-RouterMetricsMissingAlarm").await?;
    let report = verify_fails(&estate, &[], &["alarm:RouterMetricsMissingAlarm"]).await?;
    assert_detail(
        &report,
        "alarm:RouterMetricsMissingAlarm",
        "metric documents",
    );
    assert_fix(&report, "alarm:RouterMetricsMissingAlarm", "--metrics");
    sandbox.create_alarm("RouterMetricsMissingAlarm").await?;

    // Lambda counted invocations, and the log group holds only lines without metric documents
    // (a router build whose documents Lambda's filter dropped at LogLevel=WARN).
    let function = sandbox.function_name()?.to_owned();
    aws.cloudwatch
        .put_metric_data()
        .namespace("AWS/Lambda")
        .metric_data(
            aws_sdk_cloudwatch::types::MetricDatum::builder()
                .metric_name("Invocations")
                .dimensions(
                    aws_sdk_cloudwatch::types::Dimension::builder()
                        .name("FunctionName")
                        .value(&function)
                        .build(),
                )
                .value(3.0)
                .build(),
        )
        .send()
        .await?;
    sandbox
        .ship_logs(&[r#"{"level":"WARN","timestamp":"2026-11-23T00:00:00Z","fields":{"message":"failed, will be retried"}}"#.to_owned()])
        .await?;
    let report = verify_fails(&estate, &[], &["function:metrics"]).await?;
    assert_detail(&report, "function:metrics", "holds no metric document");
    // The router as built now, run at WARN under Lambda's filter: its documents reach the logs.
    let router = estate
        .world
        .start_router(&[("AWS_LAMBDA_LOG_LEVEL", "WARN")])
        .await?;
    router
        .invoke(e2e_tests::sqs_event(&[]).to_string(), INVOKE_BUDGET)
        .await;
    let kept = router.stdout_lines();
    assert!(
        kept.iter().any(|l| l.contains("CloudWatchMetrics")),
        "{kept:?}"
    );
    sandbox.ship_logs(&kept).await?;
    router.stop().await;
    verify_fails(&estate, &[], &[]).await?;

    // Karpenter's controller role lost its access to alpha's queue (its getting-started policy
    // names only the queue Karpenter created itself).
    let karpenter = routerctl::demo::sandbox::karpenter_role_name("alpha");
    let attached = aws
        .iam
        .list_attached_role_policies()
        .role_name(&karpenter)
        .send()
        .await?;
    let grants: Vec<String> = attached
        .attached_policies()
        .iter()
        .filter_map(|p| p.policy_arn().map(str::to_owned))
        .collect();
    assert_eq!(grants.len(), 1, "the tenant stack's grant: {grants:?}");
    aws.iam
        .detach_role_policy()
        .role_name(&karpenter)
        .policy_arn(&grants[0])
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["tenant:alpha:karpenter-role"]).await?;
    assert_detail(
        &report,
        "tenant:alpha:karpenter-role",
        "may not sqs:GetQueueUrl",
    );
    assert_fix(
        &report,
        "tenant:alpha:karpenter-role",
        &format!("KARPENTER_ROLE={karpenter}"),
    );
    aws.iam
        .attach_role_policy()
        .role_name(&karpenter)
        .policy_arn(&grants[0])
        .send()
        .await?;

    // All repaired.
    verify_fails(&estate, &[], &[]).await?;

    // A tenant queue deleted: only a named cluster can be missed.
    aws.sqs
        .delete_queue()
        .queue_url(sandbox.queue_url("karpenter-beta").await?)
        .send()
        .await?;
    let report = verify_fails(&estate, &["alpha", "beta"], &["tenant:beta:queue"]).await?;
    let check = report.check("tenant:beta:queue").unwrap();
    assert!(
        check.detail.contains("queue karpenter-beta does not exist"),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("make deploy-tenant CLUSTER=beta"),
        "{check:?}"
    );

    // A rule deleted outside CloudFormation: the stack still names it, DescribeRule finds none.
    let scheduled = sandbox.resource("ScheduledChangeRule").await?;
    let targets = aws
        .events
        .list_targets_by_rule()
        .rule(&scheduled)
        .send()
        .await?;
    let ids: Vec<String> = targets
        .targets()
        .iter()
        .map(|t| t.id().to_owned())
        .collect();
    aws.events
        .remove_targets()
        .rule(&scheduled)
        .set_ids(Some(ids))
        .send()
        .await?;
    aws.events.delete_rule().name(&scheduled).send().await?;
    let report = verify_fails(&estate, &[], &["rule:ScheduledChangeRule"]).await?;
    assert_detail(
        &report,
        "rule:ScheduledChangeRule",
        "does not exist (deleted outside CloudFormation)",
    );
    assert_fix(
        &report,
        "rule:ScheduledChangeRule",
        "re-create the rule as base.yaml defines it, or delete and re-deploy the stack",
    );

    // A stack name that is not deployed.
    let report = verify::run(
        aws,
        &verify::Options {
            stack: "nope".into(),
            ..verify::Options::default()
        },
    )
    .await;
    assert_eq!(report.failures().len(), 1);
    assert_eq!(report.failures()[0].name, "stack");
    assert!(
        report.failures()[0]
            .fix
            .as_deref()
            .unwrap()
            .contains("make deploy-base")
    );
    Ok(())
}

const MEMBER: &str = "111111111111";

/// A hub (base.yaml with its central bus serving MEMBER) and, in MEMBER, spoke.yaml and two
/// tenant stacks importing from it; verify reaches MEMBER by assuming its spoke role (moto hands
/// out the member's credentials without enforcing trust).
#[tokio::test]
async fn verify_checks_a_member_account_through_its_spoke_stack() -> Result<()> {
    let world = World::start().await?;
    let hub = Sandbox::deploy_hub(&world.moto, "ir", &["alpha"], &[MEMBER]).await?;
    let spoke = hub
        .deploy_spoke(&world.moto, MEMBER, &["prod", "web"])
        .await?;
    let options = verify::Options {
        stack: "ir".into(),
        account: Some(MEMBER.into()),
        ..verify::Options::default()
    };
    let verify_fails = async |options: &verify::Options, failing: &[&str]| {
        let report = Box::pin(verify::run(&hub.aws, options)).await;
        let failed: Vec<&str> = report.failures().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(failed, failing, "{}", report.render());
        for check in report.failures() {
            assert!(
                check.fix.as_deref().is_some_and(|f| !f.is_empty()),
                "{} has no fix",
                check.name
            );
        }
        report
    };

    let report = verify_fails(&options, &[]).await;
    let names: Vec<&str> = report.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "rule:HubStateChangeRule",
        "router-role:assume-spoke-roles",
        "spoke:111111111111:served",
        "spoke:111111111111:access",
        "spoke:111111111111:stack",
        "spoke:111111111111:rule:SpotInterruptionRule",
        "spoke:111111111111:rule:StateChangeRule",
        "spoke:111111111111:rule:CapacityReservationInterruptionRule",
        "spoke:111111111111:hub-bus-policy",
        "spoke:111111111111:role-trust",
        "spoke:111111111111:role-permissions",
        "spoke:111111111111:tenant:prod:encryption",
        "spoke:111111111111:tenant:prod:queue-policy",
        "spoke:111111111111:tenant:prod:spoke-role",
        "spoke:111111111111:tenant:web:queue-policy",
    ] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    assert!(
        report
            .render()
            .starts_with("verify ir in us-east-1, Queue mode, member account 111111111111"),
        "{}",
        report.render()
    );
    let spoke_aws = &spoke.aws;
    let spoke_role = spoke.role_arn()?.rsplit('/').next().unwrap().to_owned();
    let member = |check: &str| format!("spoke:{MEMBER}:{check}");

    // The router role's AssumeRole unscoped (the statement before it named the accounts): the
    // account gate would be the router's code alone.
    let router_role = hub
        .router_role_arn()?
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let scoped = hub
        .aws
        .iam
        .get_role_policy()
        .role_name(&router_role)
        .policy_name("interruption-router")
        .send()
        .await?
        .policy_document()
        .to_owned();
    let scoped = aws_model::policy::decode_iam_document(&scoped).map_err(anyhow::Error::msg)?;
    let mut unscoped: Value = serde_json::from_str(&scoped)?;
    for statement in unscoped["Statement"].as_array_mut().unwrap() {
        if statement["Sid"] == "AssumeSpokeRoles" {
            statement.as_object_mut().unwrap().remove("Condition");
        }
    }
    put_role_policy(&hub.aws, &router_role, &unscoped.to_string()).await?;
    let report = verify_fails(&options, &["router-role:assume-spoke-roles"]).await;
    let check = report.check("router-role:assume-spoke-roles").unwrap();
    assert!(
        check.detail.contains("an account it does not serve"),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("aws:ResourceAccount"),
        "{check:?}"
    );
    put_role_policy(&hub.aws, &router_role, &scoped).await?;

    // The spoke role's queue permission widened to sqs:*.
    let original = spoke_aws
        .iam
        .get_role_policy()
        .role_name(&spoke_role)
        .policy_name("interruption-router-spoke")
        .send()
        .await?
        .policy_document()
        .to_owned();
    let original = aws_model::policy::decode_iam_document(&original).map_err(anyhow::Error::msg)?;
    let mut widened = verify::spoke_role_policy("aws", MEMBER, "karpenter-");
    widened["Statement"][1]["Action"] = serde_json::json!("sqs:*");
    let put_spoke_policy = async |document: &str| {
        spoke_aws
            .iam
            .put_role_policy()
            .role_name(&spoke_role)
            .policy_name("interruption-router-spoke")
            .policy_document(document)
            .send()
            .await
    };
    put_spoke_policy(&widened.to_string()).await?;
    let report = verify_fails(&options, &[&member("role-permissions")]).await;
    let check = report.check(&member("role-permissions")).unwrap();
    assert!(
        check.detail.contains("may also sqs:ReceiveMessage")
            && check.detail.contains("sqs:PurgeQueue"),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("aws iam put-role-policy --role-name interruption-router-spoke"),
        "{check:?}"
    );
    put_spoke_policy(&original).await?;

    // A spoke rule disabled by hand.
    let rule = "interruption-router-state-change";
    spoke_aws.events.disable_rule().name(rule).send().await?;
    let report = verify_fails(&options, &[&member("rule:StateChangeRule")]).await;
    let check = report.check(&member("rule:StateChangeRule")).unwrap();
    assert!(check.detail.contains("is DISABLED"), "{}", check.detail);
    assert!(
        check.fix.as_deref().unwrap().contains(&format!(
            "aws events enable-rule --name {rule} --region us-east-1"
        )),
        "{check:?}"
    );
    spoke_aws.events.enable_rule().name(rule).send().await?;

    // The hub bus's policy no longer lists the member.
    let bus = hub.base.output("HubEventBusArn")?.to_owned();
    let put_bus_policy = async |policy: serde_json::Value| {
        hub.aws
            .events
            .put_permission()
            .event_bus_name("ir-hub")
            .policy(policy.to_string())
            .send()
            .await
    };
    put_bus_policy(verify::hub_bus_policy(&bus, "222222222222", None)).await?;
    let report = verify_fails(&options, &[&member("hub-bus-policy")]).await;
    let check = report.check(&member("hub-bus-policy")).unwrap();
    assert!(
        check
            .detail
            .contains("111111111111 may not events:PutEvents on ir-hub"),
        "{}",
        check.detail
    );
    assert!(
        check.fix.as_deref().unwrap().contains("ServedAccounts"),
        "{check:?}"
    );

    // An organisation-wide bus policy: undetermined without --org-id, a pass with it.
    put_bus_policy(verify::hub_bus_policy(&bus, "*", Some("o-abcd123456"))).await?;
    let report = verify_fails(&options, &[&member("hub-bus-policy")]).await;
    let check = report.check(&member("hub-bus-policy")).unwrap();
    assert!(check.detail.contains("undetermined"), "{}", check.detail);
    assert!(
        check.fix.as_deref().unwrap().contains("--org-id"),
        "{check:?}"
    );
    let with_org = verify::Options {
        org_id: Some("o-abcd123456".into()),
        ..options.clone()
    };
    verify_fails(&with_org, &[]).await;
    put_bus_policy(verify::hub_bus_policy(&bus, MEMBER, None)).await?;

    // The spoke role trusting the whole hub account instead of the router role.
    let router = hub.router_role_arn()?.to_owned();
    let open = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]});
    spoke_aws
        .iam
        .update_assume_role_policy()
        .role_name(&spoke_role)
        .policy_document(open.to_string())
        .send()
        .await?;
    let report = verify_fails(&options, &[&member("role-trust")]).await;
    let check = report.check(&member("role-trust")).unwrap();
    assert!(
        check.detail.contains("another role of the hub account"),
        "{}",
        check.detail
    );
    spoke_aws
        .iam
        .update_assume_role_policy()
        .role_name(&spoke_role)
        .policy_document(verify::spoke_trust_policy(&router).to_string())
        .send()
        .await?;

    // A tenant queue whose policy admits the hub's router role, not the spoke role.
    let prod = spoke_aws
        .sqs
        .get_queue_url()
        .queue_name("karpenter-prod")
        .send()
        .await?
        .queue_url()
        .unwrap()
        .to_owned();
    let prod_arn = format!("arn:aws:sqs:us-east-1:{MEMBER}:karpenter-prod");
    set_queue_policy(
        spoke_aws,
        &prod,
        &verify::tenant_queue_policy(&prod_arn, &router),
    )
    .await?;
    let report = verify_fails(&options, &[&member("tenant:prod:queue-policy")]).await;
    let check = report.check(&member("tenant:prod:queue-policy")).unwrap();
    assert!(
        check.detail.contains(
            "the spoke role arn:aws:iam::111111111111:role/interruption-router-spoke is denied"
        ),
        "{}",
        check.detail
    );
    assert!(
        check
            .fix
            .as_deref()
            .unwrap()
            .contains("BaseStackName empty"),
        "{check:?}"
    );
    set_queue_policy(
        spoke_aws,
        &prod,
        &verify::tenant_queue_policy(&prod_arn, spoke.role_arn()?),
    )
    .await?;

    // All repaired, and the binary says so, reaching the member account the same way.
    verify_fails(&options, &[]).await;
    let mut command = std::process::Command::new(routerctl_binary());
    command
        .env_clear()
        .envs(env_for(world.moto.endpoint()))
        .args(["verify", "--stack", "ir", "--account", MEMBER]);
    let out = tokio::task::spawn_blocking(move || command.output()).await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("  PASS  spoke:111111111111:role-permissions"),
        "{stdout}"
    );
    Ok(())
}

async fn queue_policy(aws: &Aws, url: &str) -> Result<Value> {
    let out = aws
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::Policy)
        .send()
        .await?;
    let text = out
        .attributes()
        .and_then(|a| a.get(&QueueAttributeName::Policy))
        .context("no policy")?;
    Ok(serde_json::from_str(text)?)
}

async fn set_queue_policy(aws: &Aws, url: &str, policy: &Value) -> Result<()> {
    set_attribute(aws, url, QueueAttributeName::Policy, &policy.to_string()).await
}

/// Sets one attribute. moto drops a queue's Policy on any SetQueueAttributes that does not carry
/// one (AWS keeps it), so the current policy is sent along.
async fn set_attribute(aws: &Aws, url: &str, name: QueueAttributeName, value: &str) -> Result<()> {
    let mut request = aws.sqs.set_queue_attributes().queue_url(url);
    if name != QueueAttributeName::Policy {
        request = request.attributes(
            QueueAttributeName::Policy,
            queue_policy(aws, url).await?.to_string(),
        );
    }
    request.attributes(name, value).send().await?;
    Ok(())
}

async fn set_environment(
    aws: &Aws,
    function: &str,
    variables: std::collections::HashMap<String, String>,
) -> Result<()> {
    aws.lambda
        .update_function_configuration()
        .function_name(function)
        .environment(
            aws_sdk_lambda::types::Environment::builder()
                .set_variables(Some(variables))
                .build(),
        )
        .send()
        .await?;
    Ok(())
}

async fn put_role_policy(aws: &Aws, role: &str, document: &str) -> Result<()> {
    aws.iam
        .put_role_policy()
        .role_name(role)
        .policy_name("interruption-router")
        .policy_document(document)
        .send()
        .await?;
    Ok(())
}
