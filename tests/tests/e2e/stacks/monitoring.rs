//! What the operators watch: the dashboard's body is valid JSON with each cluster queue's age,
//! and tenant.yaml's alarm pages the platform team when a queue's oldest message nears the spot
//! warning's two minutes.

use anyhow::{Context, Result};
use aws_model::{
    stacks::{self, BASE_TEMPLATE, TENANT_TEMPLATE},
    template::{Stage, Template},
};
use local_aws::moto::{ACCOUNT, REGION};
use serde_json::{Value, json};

use super::BASE;

#[test]
fn the_dashboard_is_valid_json_and_shows_each_cluster_queues_age() -> Result<()> {
    let base = Template::parse("base.yaml", BASE_TEMPLATE)?;
    let stage = Stage::new(BASE, ACCOUNT, REGION).parameter("CodeS3Bucket", "artifacts");
    let deployment = base.deploy(&stage)?;
    let body = deployment.property("RouterDashboard", &["DashboardBody"])?;
    let dashboard: Value = serde_json::from_str(body.as_str().context("a string")?)
        .with_context(|| format!("the dashboard body is not JSON: {body}"))?;
    let widgets = dashboard["widgets"].as_array().context("widgets")?;
    let expression = |id: &str| {
        widgets
            .iter()
            .flat_map(|w| w["properties"]["metrics"].as_array().into_iter().flatten())
            .find_map(|m| {
                let m = &m[0];
                (m["id"] == id).then(|| m["expression"].as_str().unwrap_or_default().to_owned())
            })
    };
    assert_eq!(
        expression("tenantage").as_deref(),
        Some(
            "SEARCH('{AWS/SQS,QueueName} MetricName=\"ApproximateAgeOfOldestMessage\" \
             QueueName=karpenter-', 'Maximum', 60)"
        ),
        "{body}"
    );
    assert!(
        expression("notonboarded").is_some_and(|e| e.contains("MetricName=NoTenantQueue")),
        "{body}"
    );
    // The per-cluster series the router emits for declined kinds (`Declined.<cluster>.<kind>`).
    assert!(
        expression("declined").is_some_and(|e| e.contains("MetricName=Declined NOT")),
        "{body}"
    );
    Ok(())
}

/// Every cluster's queue is watched: tenant.yaml's alarm pages the platform team's topic when a
/// message in the queue reaches 60 s (inside a spot warning's two minutes), and stays quiet when
/// the queue is idle (no datapoints).
#[test]
fn a_tenant_queue_nobody_reads_pages_the_platform_teams_topic() -> Result<()> {
    let tenant = Template::parse("tenant.yaml", TENANT_TEMPLATE)?;
    let topic = "arn:aws:sns:us-east-1:123456789012:platform-pager";
    let stage = |topic: Option<&str>| {
        let stage = Stage::new(&stacks::tenant_stack_name(BASE, "alpha"), ACCOUNT, REGION)
            .parameter("ClusterName", "alpha")
            .export(
                "interruption-router:RouterRoleArn",
                "arn:aws:iam::123456789012:role/router",
            )
            .export("interruption-router:QueuePrefix", "karpenter-");
        match topic {
            Some(topic) => stage.parameter("AlarmTopicArn", topic),
            None => stage,
        }
    };
    let paging = stage(Some(topic));
    let deployed = tenant.deploy(&paging)?;
    let alarm = deployed.properties("QueueAgeAlarm")?.context("the alarm")?;
    assert_eq!(alarm["Namespace"], "AWS/SQS");
    assert_eq!(alarm["MetricName"], "ApproximateAgeOfOldestMessage");
    assert_eq!(
        alarm["Dimensions"],
        json!([{"Name": "QueueName", "Value": "karpenter-alpha"}])
    );
    assert_eq!(alarm["Statistic"], "Maximum");
    assert_eq!(alarm["Threshold"], json!(60));
    assert_eq!(alarm["ComparisonOperator"], "GreaterThanOrEqualToThreshold");
    assert_eq!(alarm["TreatMissingData"], "notBreaching");
    assert_eq!(alarm["AlarmActions"], json!([topic]));
    assert_eq!(alarm["OKActions"], json!([topic]));
    let quiet = stage(None);
    let silent = tenant.deploy(&quiet)?;
    let alarm = silent.properties("QueueAgeAlarm")?.context("the alarm")?;
    assert!(alarm.get("AlarmActions").is_none(), "{alarm}");
    Ok(())
}
