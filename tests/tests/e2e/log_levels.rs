//! The router under Lambda's log-level filter: at every `LogLevel` base.yaml allows, every EMF
//! metric document and interruption record reaches CloudWatch Logs, and the level still decides
//! which of the router's own lines do.
//!
//! Lambda runs the function with `AWS_LAMBDA_LOG_FORMAT=JSON` and `AWS_LAMBDA_LOG_LEVEL=<level>`
//! and drops every line below that level, reading a line without a valid `level` and `timestamp`
//! as INFO (Lambda developer guide, "Log-level filtering"). The local function applies that rule
//! to what the binary prints (`local_aws::lambda_logs`); moto has no such filter.

use anyhow::{Context, Result};
use aws_model::stacks::BASE_TEMPLATE;
use e2e_tests::{World, assert_batch_handled, ec2_event, karpenter_tags, policy::Template};
use interruption_router::logging::Level;

/// The values base.yaml's `LogLevel` parameter allows (it becomes `ApplicationLogLevel`).
fn allowed_log_levels() -> Result<Vec<String>> {
    let base = Template::parse("base.yaml", BASE_TEMPLATE)?;
    let allowed = base.doc["Parameters"]["LogLevel"]["AllowedValues"]
        .as_array()
        .context("LogLevel has AllowedValues")?;
    Ok(allowed
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect())
}

#[tokio::test]
async fn metric_documents_and_records_survive_every_log_level_the_stack_allows() -> Result<()> {
    let levels = allowed_log_levels()?;
    assert!(
        levels.iter().any(|l| l == "WARN") && levels.iter().any(|l| l == "FATAL"),
        "the stack allows quiet levels: {levels:?}"
    );
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    let dlq = world.create_queue("router-dlq").await?;
    let node = world.launch(&karpenter_tags("alpha")).await?;

    for level in &levels {
        let threshold = Level::parse(level).context("a Lambda log level")?;
        let router = world
            .start_router(&[
                ("DEAD_LETTER_QUEUE_URL", dlq.as_str()),
                ("AWS_LAMBDA_LOG_LEVEL", level.as_str()),
            ])
            .await?;
        // One record forwarded (an INFO line), one dead-lettered as malformed (a WARN line).
        let bodies = vec![
            ec2_event(
                "spot-interruption-warning.json",
                &node,
                &format!("spot-{level}"),
            )
            .to_string(),
            r#"{"detail-type":"EC2 Spot Instance Interruption Warning","source":5}"#.to_owned(),
        ];
        assert_batch_handled(&router, &bodies).await;

        let documents = router.emf_documents();
        assert_eq!(
            documents.len(),
            1,
            "at {level}, Lambda must keep the invocation's EMF document; it printed:\n{}",
            router.printed_lines().join("\n")
        );
        assert_eq!(documents[0]["Received"], 2, "{level}");
        assert_eq!(documents[0]["DeadLettered.malformed"], 1, "{level}");

        // The interruption records are data too, kept at every level: the forwarded warning's
        // with what DescribeInstances said of its node (moto launches an On-Demand m5.large in
        // the region's first zone), the malformed one's with its reason.
        let records = router.interruption_records();
        let seen: Vec<[&str; 6]> = records
            .iter()
            .map(|r| {
                [
                    "outcome",
                    "reason",
                    "instance_type",
                    "zone",
                    "capacity_type",
                    "node_pool",
                ]
                .map(|f| r[f].as_str().unwrap_or("-"))
            })
            .collect();
        assert_eq!(
            seen,
            [
                [
                    "forwarded",
                    "-",
                    "m5.large",
                    "us-east-1a",
                    "on-demand",
                    "default"
                ],
                [
                    "dead-lettered",
                    "malformed",
                    "unknown",
                    "unknown",
                    "unknown",
                    "unknown"
                ],
            ],
            "{level}: {records:#?}"
        );
        assert_eq!(
            records[0]["level"],
            threshold.max(Level::Info).as_str(),
            "{level}"
        );
        assert_eq!(records[0]["instance"], node.as_str(), "{level}");

        // The level still sets the router's own verbosity.
        let logs = router.log_records();
        let has = |outcome: &str| logs.iter().any(|l| l["fields"]["outcome"] == outcome);
        assert_eq!(
            has("forwarded"),
            threshold <= Level::Info,
            "{level}: {logs:#?}"
        );
        assert_eq!(
            has("dead-lettered"),
            threshold <= Level::Warn,
            "{level}: {logs:#?}"
        );
        router.stop().await;
        world.drain(&alpha).await?;
        world.drain(&dlq).await?;
    }
    Ok(())
}
