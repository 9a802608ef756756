//! `routerctl verify` on the home account's deployed stacks: it passes on a clean deployment, and
//! each deliberate breakage, made one at a time and then undone, is caught by name with its fix.
//! One test, as each breakage starts from the same deployment.

use anyhow::Result;
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::INVOKE_BUDGET;
use routerctl::verify;

use super::{
    assert_detail, assert_fix, delete_alarm, put_role_policy, queue_policy, set_attribute,
    set_environment, set_queue_policy, verify_fails,
};
use crate::cli::Estate;

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
    assert_detail(&report, "rule:StateChangeRule", "is DISABLED");
    assert_fix(
        &report,
        "rule:StateChangeRule",
        &format!("aws events enable-rule --name {state_rule}"),
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
    assert_detail(
        &report,
        "rule:SpotInterruptionRule",
        "does not target the ingest queue",
    );
    assert_fix(
        &report,
        "rule:SpotInterruptionRule",
        "aws events put-targets",
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
    assert_detail(
        &report,
        "function:environment",
        r#"QUEUE_NAME_TEMPLATE="karpenter-queue": it does not contain {cluster}"#,
    );
    assert_fix(&report, "function:environment", "karpenter-{cluster}");
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
    assert_fix(
        &report,
        "tenant:alpha:encryption",
        "SqsManagedSseEnabled=true",
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
    // verify with the role's inline policy edited, expecting exactly `failing`; then the policy
    // goes back.
    let with_role_edited = async |edited: String, failing: &[&str]| {
        assert_ne!(edited, document, "the edit changes the policy");
        put_role_policy(aws, &role, &edited).await?;
        let report = verify_fails(&estate, &[], failing).await;
        put_role_policy(aws, &role, &document).await?;
        report
    };
    let report = with_role_edited(
        document.replace("karpenter-*", "karpenter-beta"),
        &["tenant:alpha:router-role"],
    )
    .await?;
    assert_detail(
        &report,
        "tenant:alpha:router-role",
        "may not sqs:GetQueueUrl (",
    );
    assert_detail(&report, "tenant:alpha:router-role", "sqs:ListQueueTags (");
    assert_detail(&report, "tenant:alpha:router-role", "on karpenter-alpha");

    // The role without the Tagging API lookup path and without the hand-back of records.
    let narrowed = document
        .replace("\"tag:GetResources\"", "\"tag:GetTagKeys\"")
        .replace("\"sqs:ChangeMessageVisibility\"", "\"sqs:ListQueues\"");
    let report = with_role_edited(narrowed, &["router-role"]).await?;
    assert_detail(&report, "router-role", "may not tag:GetResources on *");
    assert_detail(
        &report,
        "router-role",
        "sqs:ChangeMessageVisibility on ir-ingest",
    );
    assert_fix(
        &report,
        "router-role",
        "statements ResolveInstanceTagsByArn, ConsumeIngestQueue",
    );

    // The role widened to every SQS action on the cluster queues: it could read and purge them,
    // judged as a member's spoke role is.
    let widened = document.replace("\"sqs:ListQueueTags\"", "\"sqs:*\"");
    let report = with_role_edited(widened, &["router-role"]).await?;
    assert_detail(
        &report,
        "router-role",
        "may also sqs:ReceiveMessage on karpenter-",
    );
    assert_detail(&report, "router-role", "sqs:PurgeQueue");
    assert_fix(&report, "router-role", "list-attached-role-policies");

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

    // The dashboard deleted by hand (named <stack>-<region>: dashboards are global).
    let name = "ir-us-east-1";
    let dashboard = aws
        .cloudwatch
        .get_dashboard()
        .dashboard_name(name)
        .send()
        .await?;
    aws.cloudwatch
        .delete_dashboards()
        .dashboard_names(name)
        .send()
        .await?;
    let report = verify_fails(&estate, &[], &["dashboard"]).await?;
    assert_detail(
        &report,
        "dashboard",
        "dashboard ir-us-east-1 does not exist",
    );
    aws.cloudwatch
        .put_dashboard()
        .dashboard_name(name)
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
    let karpenter = lab::sandbox::karpenter_role_name("alpha");
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

    // alpha's tenant record deleted by hand: a queue deleted later would page nobody.
    let record = interruption_router::tenancy::record_name("karpenter-alpha");
    aws.ssm.delete_parameter().name(&record).send().await?;
    let report = verify_fails(&estate, &[], &["tenant:alpha:record"]).await?;
    assert_detail(&report, "tenant:alpha:record", "pages nobody");
    assert_fix(&report, "tenant:alpha:record", "TenantRecord");
    aws.ssm
        .put_parameter()
        .name(&record)
        .value("alpha")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await?;

    // All repaired.
    verify_fails(&estate, &[], &[]).await?;

    // The kinds a tenant takes, as its stack tags its queue (EventKinds), are shown; a tag that
    // names no kind fails with the fix (the router then sends every kind).
    let beta = sandbox.queue_url("karpenter-beta").await?;
    let kinds = |value: &str| {
        aws.sqs
            .tag_queue()
            .queue_url(&beta)
            .tags(interruption_router::tenancy::KINDS_TAG, value)
            .send()
    };
    kinds("spot-interruption state-change").await?;
    let report = verify_fails(&estate, &[], &[]).await?;
    assert_detail(
        &report,
        "tenant:beta:queue",
        "takes spot-interruption state-change; declines rebalance-recommendation \
         capacity-reservation-interruption scheduled-change (EventKinds)",
    );
    assert_detail(&report, "tenant:alpha:queue", "takes every event kind");
    kinds("health").await?;
    let report = verify_fails(&estate, &[], &["tenant:beta:queue"]).await?;
    assert_detail(
        &report,
        "tenant:beta:queue",
        "the router sends it every kind",
    );
    assert_fix(&report, "tenant:beta:queue", "EventKinds=");
    kinds(&interruption_router::event::Kinds::ALL.to_string()).await?;

    // A tenant queue deleted: only a named cluster can be missed.
    aws.sqs
        .delete_queue()
        .queue_url(sandbox.queue_url("karpenter-beta").await?)
        .send()
        .await?;
    let report = verify_fails(&estate, &["alpha", "beta"], &["tenant:beta:queue"]).await?;
    assert_detail(
        &report,
        "tenant:beta:queue",
        "does not exist in us-east-1, while its tenant record stands",
    );
    assert_fix(
        &report,
        "tenant:beta:queue",
        "make deploy-tenant CLUSTER=beta",
    );

    // A rule deleted outside CloudFormation: the stack still names it, DescribeRule finds none.
    let scheduled = sandbox.resource("ScheduledChangeRule").await?;
    lab::sandbox::delete_rule(&aws.events, &scheduled).await?;
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
