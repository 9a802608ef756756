//! What the stacks create: the base stack in Queue mode with its tenant stacks (queues, roles,
//! policies, rules, outputs, as the templates declare them), and in Direct mode, where each rule
//! invokes the function under a permission of its own.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use aws_model::stacks::{self, BASE_TEMPLATE, TENANT_TEMPLATE};
use e2e_tests::World;
use local_aws::moto::{ACCOUNT, REGION};
use serde_json::{Value, json};

use super::{
    BASE, CLUSTERS, Clients, KARPENTER_ROLE, assert_no_inline_policy, attached_policy,
    deploy_queue_mode, expected_patterns, queue_attributes, queue_names, role_policy, rules,
    sqs_arn, statement, upload_code,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_stacks_create_what_the_templates_declare() -> Result<()> {
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
    }
    let a = queue_attributes(&world, &ingest).await?;
    assert_eq!(a["SqsManagedSseEnabled"], "true");
    assert_eq!(a["VisibilityTimeout"], "180");
    let redrive: Value = serde_json::from_str(&a["RedrivePolicy"])?;
    assert_eq!(
        redrive,
        json!({"deadLetterTargetArn": sqs_arn(&dlq), "maxReceiveCount": 20})
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
    // 10 in AWS; moto also lists the conditional HubEventBusArn export of the absent bus.
    assert_eq!(exports.len(), 11, "{exports:#?}");
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

    // A tenant whose base stack does not exist fails on the prefix import instead of creating a
    // queue the router would never send to. (The role import sits in the queue policy, which moto
    // ignores without resolving it; tests/tests/e2e/policy/ checks that principal.)
    let orphan = stacks::create(
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

/// moto builds every output, even one whose Condition is false, so base.yaml's Queue-only
/// outputs fail a Direct-mode stack ("GetAtt references undefined resource IngestQueue"); real
/// CloudFormation omits them. They, and only they, are cut from the text sent to moto.
fn without_queue_mode_outputs(template: &str) -> String {
    let outputs = template.find("\nOutputs:\n").expect("an Outputs section") + 1;
    let (head, tail) = template.split_at(outputs);
    let mut kept = String::from(head);
    let mut cut = Vec::new();
    // "Outputs:" and then one block per output, each starting at two spaces of indentation.
    let mut blocks: Vec<String> = Vec::new();
    for line in tail.split_inclusive('\n') {
        let starts_output = line.starts_with("  ") && !line.starts_with("   ");
        if starts_output || blocks.is_empty() {
            blocks.push(String::new());
        }
        blocks.last_mut().unwrap().push_str(line);
    }
    for block in blocks {
        if block.contains("\n    Condition: QueueMode\n") {
            cut.push(block.trim_start().split(':').next().unwrap().to_owned());
        } else {
            kept.push_str(&block);
        }
    }
    assert_eq!(cut, ["IngestQueueUrl", "IngestQueueArn"]);
    kept
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_rules_invoke_the_function_with_a_permission_each() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    upload_code(&world).await?;
    let base = stacks::create(
        &aws.cfn,
        BASE,
        &without_queue_mode_outputs(BASE_TEMPLATE),
        &[("CodeS3Bucket", "artifacts"), ("IngestMode", "Direct")],
    )
    .await?;
    let dlq = format!("{BASE}-dlq");
    assert_eq!(queue_names(&world).await?, BTreeSet::from([dlq.clone()]));
    assert!(!base.outputs.contains_key("IngestQueueUrl"));

    let function = base.output("FunctionName")?;
    let function_arn = format!("arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}");
    let mappings = aws
        .lambda
        .list_event_source_mappings()
        .function_name(function)
        .send()
        .await?;
    assert!(mappings.event_source_mappings().is_empty(), "{mappings:?}");

    let rules = rules(&aws).await?;
    let patterns: BTreeSet<String> = rules.values().map(|(p, _)| p.to_string()).collect();
    assert_eq!(patterns, expected_patterns());
    let mut rule_arns = BTreeSet::new();
    for (name, (_, targets)) in &rules {
        assert_eq!(
            targets,
            &[json!({
                "Id": "router",
                "Arn": function_arn,
                "DeadLetterArn": sqs_arn(&dlq),
                "MaximumRetryAttempts": 185,
                "MaximumEventAgeInSeconds": 3600,
            })],
            "{name}"
        );
        rule_arns.insert(format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}"));
    }

    // One permission per rule, pinned to that rule and this account.
    let policy: Value = serde_json::from_str(
        aws.lambda
            .get_policy()
            .function_name(function)
            .send()
            .await?
            .policy()
            .context("no resource policy")?,
    )?;
    let statements = policy["Statement"].as_array().context("no statements")?;
    let mut pinned_to = BTreeSet::new();
    for s in statements {
        assert_eq!(s["Effect"], "Allow");
        assert_eq!(s["Action"], "lambda:InvokeFunction");
        assert_eq!(s["Principal"], json!({"Service": "events.amazonaws.com"}));
        assert_eq!(s["Resource"], function_arn);
        assert_eq!(s["Condition"]["StringEquals"]["AWS:SourceAccount"], ACCOUNT);
        pinned_to.insert(
            s["Condition"]["ArnLike"]["AWS:SourceArn"]
                .as_str()
                .context("no SourceArn")?
                .to_owned(),
        );
    }
    assert_eq!(statements.len(), 5);
    assert_eq!(pinned_to, rule_arns);

    // Without an ingest queue the role may consume nothing.
    let role = base.output("RouterRoleArn")?.rsplit('/').next().unwrap();
    let role_policy = role_policy(&aws, role, "interruption-router").await?;
    let sids: BTreeSet<&str> = role_policy["Statement"]
        .as_array()
        .context("no statements")?
        .iter()
        .filter_map(|s| s["Sid"].as_str())
        .collect();
    assert_eq!(
        sids,
        BTreeSet::from([
            "ResolveInstanceTags",
            "ResolveInstanceTagsByArn",
            "SendToClusterQueues",
            "ReadClusterQueueOwnership",
            "SendToDeadLetterQueue",
            "WriteOwnLogs"
        ])
    );
    Ok(())
}
