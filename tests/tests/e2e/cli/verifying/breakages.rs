//! `routerctl verify` through the SDK on the emulator's deployed stacks: what only AWS's answers
//! can show, the seam's SDK adapter reading them as the model of AWS does
//! (aws-world's model behind `routerctl::cloud`, on which every breakage of every check has its own unit test:
//! `routerctl/src/verify/tests/`). It passes on a clean deployment; each breakage kept here
//! reaches the adapter through an answer of its own (a missing rule, dashboard, queue, parameter
//! or stack, each with its service's error code; an inline and a managed role policy read from
//! IAM; single-metric and metric-math alarms; Lambda's invocation count and the log group's
//! documents as the real router writes them). One test, as each starts from the same deployment.

use anyhow::Result;
use e2e_tests::INVOKE_BUDGET;
use routerctl::verify;

use super::{assert_detail, assert_fix, delete_alarm, put_role_policy, verify_fails};
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
