//! What the stacks create: the base stack with its tenant stacks (queues, tenant records, roles,
//! policies, rules, outputs, as the templates declare them).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use aws_model::stacks::TENANT_TEMPLATE;
use e2e_tests::World;
use local_aws::moto::{ACCOUNT, REGION};
use serde_json::{Value, json};

use super::{
    BASE, CLUSTERS, Clients, KARPENTER_ROLE, assert_no_inline_policy, attached_policy,
    deploy_queue_mode, expected_patterns, queue_attributes, queue_names, role_policy, rules,
    sqs_arn, statement,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stacks_create_what_the_templates_declare() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let (base, tenants) = deploy_queue_mode(&world, &aws).await?;
    let (ingest, dlq) = (format!("{BASE}-ingest"), format!("{BASE}-dlq"));

    // Queues: names, then each queue's settings.
    let expected: BTreeSet<String> = [ingest.as_str(), dlq.as_str()]
        .into_iter()
        .map(str::to_owned)
        .chain(CLUSTERS.iter().map(|c| format!("karpenter-{c}")))
        .collect();
    assert_eq!(queue_names(&world).await?, expected);
    for (cluster, tenant) in CLUSTERS.iter().zip(&tenants) {
        // alpha and beta did not pass QueuePrefix: their names prove the base's export was
        // imported (the tenant default is empty, which alone would name the queue "alpha").
        let name = format!("karpenter-{cluster}");
        assert_eq!(tenant.output("QueueName")?, name);
        assert_eq!(tenant.output("QueueArn")?, sqs_arn(&name));
        let a = queue_attributes(&world, &name).await?;
        assert_eq!(a["MessageRetentionPeriod"], "300", "{name}");
        assert_eq!(a["SqsManagedSseEnabled"], "true", "{name}");
        assert!(!a.contains_key("RedrivePolicy"), "{name}");
        // The tenant record beside it: what tells a lost queue from a cluster never onboarded.
        let record = interruption_router::tenancy::record_name(&name);
        assert_eq!(tenant.output("TenantRecordName")?, record);
        let parameter = aws_sdk_ssm::Client::new(&world.config)
            .get_parameter()
            .name(&record)
            .send()
            .await?;
        assert_eq!(
            parameter.parameter().and_then(|p| p.value()),
            Some(*cluster),
            "{record}"
        );
    }
    let a = queue_attributes(&world, &ingest).await?;
    assert_eq!(a["SqsManagedSseEnabled"], "true");
    assert_eq!(a["VisibilityTimeout"], "180");
    let redrive: Value = serde_json::from_str(&a["RedrivePolicy"])?;
    assert_eq!(redrive["deadLetterTargetArn"], sqs_arn(&dlq));
    // One value (base.yaml's Ingest mapping) for the queue and the function's MAX_RECEIVE_COUNT;
    // SQS takes it as a number or as text.
    assert_eq!(
        redrive["maxReceiveCount"].to_string().trim_matches('"'),
        "20"
    );
    let a = queue_attributes(&world, &dlq).await?;
    assert_eq!(a["SqsManagedSseEnabled"], "true");
    assert_eq!(a["MessageRetentionPeriod"], "1209600");

    // Rules: one per kind the router forwards, each into the ingest queue with the DLQ behind it.
    let rules = rules(&aws).await?;
    let patterns: BTreeSet<String> = rules.values().map(|(p, _)| p.to_string()).collect();
    assert_eq!(rules.len(), 5);
    assert_eq!(patterns, expected_patterns());
    for (name, (_, targets)) in &rules {
        assert_eq!(
            targets,
            &[json!({
                "Id": "ingest",
                "Arn": sqs_arn(&ingest),
                "DeadLetterArn": sqs_arn(&dlq),
                "MaximumRetryAttempts": 185,
                "MaximumEventAgeInSeconds": 3600,
            })],
            "{name}"
        );
    }

    // The function, its event source mapping and its role.
    let function = base.output("FunctionName")?;
    let config = aws
        .lambda
        .get_function_configuration()
        .function_name(function)
        .send()
        .await?;
    assert_eq!(
        config.runtime().map(|r| r.as_str()),
        Some("provided.al2023")
    );
    assert_eq!(config.handler(), Some("bootstrap"));
    assert_eq!(config.timeout(), Some(30));
    assert_eq!(config.memory_size(), Some(128));
    assert_eq!(config.role(), Some(base.output("RouterRoleArn")?));
    let env = config
        .environment()
        .and_then(|e| e.variables())
        .context("no environment")?;
    let env: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        env,
        BTreeMap::from([
            ("QUEUE_NAME_TEMPLATE", "karpenter-{cluster}"),
            (
                "CLUSTER_TAG_KEYS",
                "eks:eks-cluster-name,kubernetes.io/cluster/*,aws:eks:cluster-name"
            ),
            ("MANAGED_TAG_KEY", "karpenter.sh/nodepool"),
            ("DEAD_LETTER_QUEUE_URL", base.output("DeadLetterQueueUrl")?),
            ("CACHE_TTL_SECONDS", "3600"),
            ("NEGATIVE_CACHE_TTL_SECONDS", "60"),
            ("CACHE_MAX_ENTRIES", "100000"),
            ("METRICS_NAMESPACE", "InterruptionRouter"),
            ("SERVED_ACCOUNTS", ""),
            ("MAX_RECEIVE_COUNT", "20"),
            ("SPOKE_ROLE_NAME", "interruption-router-spoke"),
            ("ROUTER_ROLE_ARN", base.output("RouterRoleArn")?),
        ])
    );
    let mappings = aws
        .lambda
        .list_event_source_mappings()
        .function_name(function)
        .send()
        .await?;
    let [mapping] = mappings.event_source_mappings() else {
        panic!("expected one event source mapping: {mappings:?}");
    };
    assert_eq!(mapping.event_source_arn(), Some(sqs_arn(&ingest).as_str()));
    assert_eq!(mapping.batch_size(), Some(100));
    assert_eq!(mapping.maximum_batching_window_in_seconds(), Some(1));
    // What bounds AssumeRole and EC2 sweeps in a storm (docs/many-accounts.md).
    assert_eq!(
        mapping
            .scaling_config()
            .and_then(|c| c.maximum_concurrency()),
        Some(5)
    );
    let response_types: Vec<&str> = mapping
        .function_response_types()
        .iter()
        .map(|t| t.as_str())
        .collect();
    assert_eq!(response_types, ["ReportBatchItemFailures"]);

    let role = base.output("RouterRoleArn")?.rsplit('/').next().unwrap();
    let policy = role_policy(&aws, role, "interruption-router").await?;
    let resource = |sid: &str| statement(&policy, sid).map(|s| s["Resource"].clone());
    assert_eq!(
        resource("SendToClusterQueues"),
        Some(json!(format!("arn:aws:sqs:{REGION}:{ACCOUNT}:karpenter-*")))
    );
    assert_eq!(
        resource("SendToDeadLetterQueue"),
        Some(json!(sqs_arn(&dlq)))
    );
    assert_eq!(
        resource("ConsumeIngestQueue"),
        Some(json!(sqs_arn(&ingest)))
    );
    assert_eq!(
        resource("NeverSendToIngestQueue"),
        Some(json!(sqs_arn(&ingest)))
    );

    // Exports, and what the tenants made of them.
    let exports: BTreeMap<String, String> = aws
        .cfn
        .list_exports()
        .send()
        .await?
        .exports()
        .iter()
        .filter_map(|e| Some((e.name()?.to_owned(), e.value()?.to_owned())))
        .collect();
    let export = |name: &str| exports.get(&format!("{BASE}-{name}")).map(String::as_str);
    // 12 in AWS; moto also lists the conditional exports of the absent bus and direct queue
    // (HubEventBusArn, DirectQueueArn).
    assert_eq!(exports.len(), 14, "{exports:#?}");
    // The alarm topic it made, given none, under both names: tenant alarms notify it.
    let topic = base.output("AlarmTopicArn")?;
    assert!(
        topic.starts_with("arn:aws:sns:us-east-1:123456789012:"),
        "{topic}"
    );
    assert_eq!(export("AlarmTopicArn"), Some(topic));
    assert_eq!(
        exports
            .get("interruption-router:AlarmTopicArn")
            .map(String::as_str),
        Some(topic)
    );
    assert_eq!(export("RouterRoleArn"), Some(base.output("RouterRoleArn")?));
    // The region's exports tenants import by default, whatever the base stack is called.
    assert_eq!(
        exports
            .get("interruption-router:RouterRoleArn")
            .map(String::as_str),
        Some(base.output("RouterRoleArn")?)
    );
    assert_eq!(
        exports
            .get("interruption-router:QueuePrefix")
            .map(String::as_str),
        Some("karpenter-")
    );
    assert_eq!(export("FunctionName"), Some(function));
    assert_eq!(export("IngestQueueArn"), Some(sqs_arn(&ingest).as_str()));
    assert_eq!(export("DeadLetterQueueArn"), Some(sqs_arn(&dlq).as_str()));
    assert_eq!(export("QueuePrefix"), Some("karpenter-"));
    for url in ["IngestQueueUrl", "DeadLetterQueueUrl"] {
        let queue = export(url).context(url)?.rsplit('/').next().unwrap();
        assert!(queue == ingest || queue == dlq, "{url}: {queue}");
    }

    // beta's Karpenter role may consume beta's queue and nothing else, by a managed policy the
    // tenant stack attaches (no inline policy: tools that own a role's inline policies delete
    // foreign ones).
    let karpenter = attached_policy(&aws, KARPENTER_ROLE, "KarpenterQueueAccess").await?;
    assert_no_inline_policy(&aws, KARPENTER_ROLE).await?;
    assert_eq!(
        karpenter["Statement"],
        json!([{
            "Sid": "ConsumeInterruptionQueue",
            "Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
            "Resource": sqs_arn("karpenter-beta"),
        }])
    );

    // The saved Logs Insights queries (moto_fixes/ makes AWS::Logs::QueryDefinition): the three
    // `routerctl insights` runs, on the router's log group, named after the stack.
    let saved = aws_clients::aws::Aws::new(&world.config)?
        .logs
        .describe_query_definitions()
        .query_definition_name_prefix(format!("{BASE}/"))
        .send()
        .await?;
    let group = format!("/aws/lambda/{BASE}-router");
    let saved: BTreeMap<String, (String, Vec<String>)> = saved
        .query_definitions()
        .iter()
        .map(|d| {
            let name = d.name().unwrap_or_default().to_owned();
            let query = d.query_string().unwrap_or_default().to_owned();
            (name, (query, d.log_group_names().to_vec()))
        })
        .collect();
    assert_eq!(
        saved.len(),
        routerctl::insights::tally::QUERIES.len(),
        "{saved:?}"
    );
    for (name, query) in routerctl::insights::tally::QUERIES {
        let (saved_query, groups) = &saved[&format!("{BASE}/{name}")];
        assert!(
            routerctl::insights::tally::same_query(saved_query, query),
            "{name}: {saved_query}"
        );
        assert_eq!(groups, std::slice::from_ref(&group), "{name}");
    }

    // A tenant whose base stack does not exist fails on the prefix import instead of creating a
    // queue the router would never send to. (The role import sits in the queue policy, which moto
    // ignores without resolving it; tests/tests/e2e/policy/ checks that principal.)
    let orphan = aws_clients::stacks::create(
        &aws.cfn,
        "orphan-tenant",
        TENANT_TEMPLATE,
        &[("ClusterName", "delta"), ("BaseStackName", "no-such-base")],
    )
    .await
    .expect_err("a tenant without its base stack");
    assert!(
        format!("{orphan:?}").contains("No export named no-such-base-QueuePrefix"),
        "{orphan:?}"
    );
    assert!(
        !queue_names(&world)
            .await?
            .iter()
            .any(|q| q.contains("delta"))
    );
    Ok(())
}
