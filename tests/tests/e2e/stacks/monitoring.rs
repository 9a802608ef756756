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
    // Given none, the topic of the stack that connects the region (base.yaml's or spoke.yaml's,
    // which create one when given none): an alarm without actions would page nobody.
    let connecting = "arn:aws:sns:us-east-1:123456789012:interruption-router-AlarmTopic-X";
    let imported = stage(None).export("interruption-router:AlarmTopicArn", connecting);
    let alarm = tenant.deploy(&imported)?;
    let alarm = alarm.properties("QueueAgeAlarm")?.context("the alarm")?;
    assert_eq!(alarm["AlarmActions"], json!([connecting]));
    assert_eq!(alarm["OKActions"], json!([connecting]));
    // Without that export the stack does not deploy (CloudFormation: "No export named").
    let unexported = stage(None);
    assert!(
        tenant
            .deploy(&unexported)
            .and_then(|d| d.properties("QueueAgeAlarm"))
            .is_err()
    );
    Ok(())
}

/// Every alarm of base.yaml and the alarm topic spoke.yaml exports notify someone: the topic
/// given, or the one the stack creates when given none (and outputs, for `routerctl verify` and
/// the subscription).
#[test]
fn every_alarm_notifies_the_given_topic_or_the_one_the_stack_creates() -> Result<()> {
    let base = Template::parse("base.yaml", BASE_TEMPLATE)?;
    let stage = || Stage::new(BASE, ACCOUNT, REGION).parameter("CodeS3Bucket", "artifacts");
    let given = "arn:aws:sns:us-east-1:123456789012:platform-pager";
    for (stage, topic) in [
        (stage(), None),
        (stage().parameter("AlarmTopicArn", given), Some(given)),
    ] {
        let deployed = base.deploy(&stage)?;
        let created = deployed.properties("AlarmTopic")?.is_some();
        assert_eq!(created, topic.is_none(), "AlarmTopic created: {created}");
        let want = match topic {
            Some(topic) => topic.to_owned(),
            None => text(deployed.resolve(&json!({"Ref": "AlarmTopic"}))?),
        };
        let alarms: Vec<&str> = base
            .resources_of("AWS::CloudWatch::Alarm")
            .map(|(id, _)| id)
            .collect();
        assert!(alarms.len() >= 8, "{alarms:?}");
        for id in alarms {
            let Some(alarm) = deployed.properties(id)? else {
                continue;
            };
            assert_eq!(alarm["AlarmActions"], json!([want]), "{id}");
            assert_eq!(alarm["OKActions"], json!([want]), "{id}");
        }
        for output in ["AlarmTopicArn", "RegionAlarmTopicArn"] {
            assert_eq!(deployed.output(output)?.as_ref(), Some(&want), "{output}");
        }
    }
    let spoke = Template::parse("spoke.yaml", stacks::SPOKE_TEMPLATE)?;
    let member = Stage::new("interruption-router-spoke", "111111111111", REGION)
        .parameter(
            "HubEventBusArn",
            "arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        )
        .parameter("RouterRoleArn", "arn:aws:iam::123456789012:role/router");
    let deployed = spoke.deploy(&member)?;
    assert!(deployed.properties("AlarmTopic")?.is_some());
    assert_eq!(
        deployed.output("RegionAlarmTopicArn")?,
        Some(text(deployed.resolve(&json!({"Ref": "AlarmTopic"}))?))
    );
    Ok(())
}

fn text(value: Option<Value>) -> String {
    match value {
        Some(Value::String(s)) => s,
        other => panic!("not a string: {other:?}"),
    }
}
