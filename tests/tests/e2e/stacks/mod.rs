//! The real templates deployed through moto's CloudFormation: what the stacks create, in both
//! ingest modes, and the router binary, configured from the deployed function's environment,
//! routing events published through EventBridge into the queues the tenant stacks made.
//!
//! moto ignores SQS::QueuePolicy, FIS::ExperimentTemplate, CloudWatch::Alarm,
//! Lambda::EventInvokeConfig and LoggingConfig, and never evaluates IAM: those are covered by
//! tests/tests/policy.rs, cfn-lint and checkov, not here.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use anyhow::{Context, Result};
use aws_model::{
    events::{Origin, Synthetic},
    stacks::{self, BASE_TEMPLATE, Stack, TENANT_TEMPLATE},
};
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use interruption_router::event::Kind;
use local_aws::{
    esm::{EventSourceMapping, Stop},
    function::{Function, router_binary},
    moto::{ACCOUNT, REGION, env_for},
};
use serde_json::{Value, json};

const BASE: &str = "interruption-router";
const CLUSTERS: [&str; 3] = ["alpha", "beta", "gamma"];
const KARPENTER_ROLE: &str = "karpenter-controller-beta";

struct Clients {
    cfn: aws_sdk_cloudformation::Client,
    lambda: aws_sdk_lambda::Client,
    events: aws_sdk_eventbridge::Client,
    iam: aws_sdk_iam::Client,
}

impl Clients {
    async fn of(world: &World) -> Self {
        let config = world.moto.sdk_config().await;
        Self {
            cfn: aws_sdk_cloudformation::Client::new(&config),
            lambda: aws_sdk_lambda::Client::new(&config),
            events: aws_sdk_eventbridge::Client::new(&config),
            iam: aws_sdk_iam::Client::new(&config),
        }
    }
}

/// The function's code where base.yaml's `CodeS3Bucket=artifacts` points (the router itself runs
/// as a local process).
async fn upload_code(world: &World) -> Result<()> {
    world
        .moto
        .put_object(
            "artifacts",
            "bootstrap.zip",
            b"the router runs as a local process",
        )
        .await
}

/// The base stack in Queue mode and one tenant stack per cluster, as `make deploy-base` and
/// `make deploy-tenant` deploy them: alpha and beta import the role and prefix from the base
/// stack (beta also grants its Karpenter role), gamma passes both explicitly.
async fn deploy_queue_mode(world: &World, aws: &Clients) -> Result<(Stack, Vec<Stack>)> {
    upload_code(world).await?;
    let base = stacks::create(
        &aws.cfn,
        BASE,
        BASE_TEMPLATE,
        &[("CodeS3Bucket", "artifacts"), ("IngestMode", "Queue")],
    )
    .await?;
    routerctl::demo::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    let router_role = base.output("RouterRoleArn")?.to_owned();
    let mut tenants = Vec::new();
    for cluster in CLUSTERS {
        let mut params = vec![("ClusterName", cluster)];
        match cluster {
            "beta" => params.push(("KarpenterRoleName", KARPENTER_ROLE)),
            "gamma" => params.extend([
                ("QueuePrefix", "karpenter-"),
                ("RouterRoleArn", router_role.as_str()),
            ]),
            _ => {}
        }
        tenants.push(
            stacks::create(
                &aws.cfn,
                &format!("{BASE}-tenant-{cluster}"),
                TENANT_TEMPLATE,
                &params,
            )
            .await?,
        );
    }
    Ok((base, tenants))
}

async fn queue_attributes(world: &World, name: &str) -> Result<BTreeMap<String, String>> {
    let url = world.queue_url(name).await?;
    let out = world
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await?;
    Ok(out
        .attributes()
        .context("no attributes")?
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
        .collect())
}

async fn queue_names(world: &World) -> Result<BTreeSet<String>> {
    let out = world.sqs.list_queues().send().await?;
    Ok(out
        .queue_urls()
        .iter()
        .filter_map(|u| u.rsplit('/').next().map(str::to_owned))
        .collect())
}

/// Each rule of the default bus: its pattern and its targets as JSON.
async fn rules(aws: &Clients) -> Result<BTreeMap<String, (Value, Vec<Value>)>> {
    let mut out = BTreeMap::new();
    for rule in aws.events.list_rules().send().await?.rules() {
        let name = rule.name().context("rule without a name")?;
        let pattern: Value = serde_json::from_str(rule.event_pattern().unwrap_or("null"))?;
        let targets = aws
            .events
            .list_targets_by_rule()
            .rule(name)
            .send()
            .await?
            .targets()
            .iter()
            .map(|t| {
                json!({
                    "Id": t.id(),
                    "Arn": t.arn(),
                    "DeadLetterArn": t.dead_letter_config().and_then(|d| d.arn()),
                    "MaximumRetryAttempts": t.retry_policy().and_then(|r| r.maximum_retry_attempts()),
                    "MaximumEventAgeInSeconds": t.retry_policy().and_then(|r| r.maximum_event_age_in_seconds()),
                })
            })
            .collect();
        out.insert(name.to_owned(), (pattern, targets));
    }
    Ok(out)
}

/// The pattern each default-bus rule must have: exactly what the router forwards, from this
/// account only (`Kind::event_pattern_in`), so noise is dropped by EventBridge rather than paid
/// for as invocations.
fn expected_patterns() -> BTreeSet<String> {
    Kind::ALL
        .into_iter()
        .map(|kind| kind.event_pattern_in(ACCOUNT).to_string())
        .collect()
}

/// An inline role policy as JSON. IAM returns documents URL-encoded; moto 5.2.5 stores the
/// inline policies of a CloudFormation role as a Python literal (single quotes, `None` where the
/// template had `AWS::NoValue`), which is read here as the JSON it stands for.
async fn role_policy(aws: &Clients, role: &str, policy: &str) -> Result<Value> {
    let out = aws
        .iam
        .get_role_policy()
        .role_name(role)
        .policy_name(policy)
        .send()
        .await
        .with_context(|| format!("GetRolePolicy {role} {policy}"))?;
    let text = percent_decode(out.policy_document());
    serde_json::from_str(&text).or_else(|_| {
        let json = text
            .replace('\'', "\"")
            .replace("None", "null")
            .replace("True", "true")
            .replace("False", "false");
        serde_json::from_str(&json).with_context(|| format!("policy document {text}"))
    })
}

/// The document of the one customer-managed policy attached to `role` whose name contains `name`.
async fn attached_policy(aws: &Clients, role: &str, name: &str) -> Result<Value> {
    let attached = aws
        .iam
        .list_attached_role_policies()
        .role_name(role)
        .send()
        .await?;
    let found: Vec<_> = attached
        .attached_policies()
        .iter()
        .filter(|p| p.policy_name().is_some_and(|n| n.contains(name)))
        .collect();
    let [policy] = found.as_slice() else {
        anyhow::bail!(
            "{role} has {} attached policies named *{name}*",
            found.len()
        );
    };
    let arn = policy.policy_arn().context("no ARN")?;
    let version = aws
        .iam
        .get_policy()
        .policy_arn(arn)
        .send()
        .await?
        .policy()
        .and_then(|p| p.default_version_id().map(str::to_owned))
        .context("no default version")?;
    let document = aws
        .iam
        .get_policy_version()
        .policy_arn(arn)
        .version_id(version)
        .send()
        .await?;
    let text = percent_decode(
        document
            .policy_version()
            .and_then(|v| v.document())
            .context("no document")?,
    );
    Ok(serde_json::from_str(&text)?)
}

/// A role no stack writes an inline policy on (tools that own a role's inline policies delete
/// foreign ones).
async fn assert_no_inline_policy(aws: &Clients, role: &str) -> Result<()> {
    let inline = aws.iam.list_role_policies().role_name(role).send().await?;
    assert_eq!(inline.policy_names(), Vec::<String>::new(), "{role}");
    Ok(())
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn statement<'a>(policy: &'a Value, sid: &str) -> Option<&'a Value> {
    policy["Statement"]
        .as_array()?
        .iter()
        .find(|s| s["Sid"] == sid)
}

fn sqs_arn(name: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{name}")
}

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
    // ignores without resolving it; tests/tests/policy.rs checks that principal.)
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

/// The ingest body of the Health event, cut down to what `cluster`'s copy must be: its own
/// instances in `affectedEntities` and `resources`, everything else as it arrived.
fn health_copy(ingest_body: &Value, instances: &[&str]) -> Value {
    let mut copy = ingest_body.clone();
    let keep = |v: &Value| instances.contains(&v.as_str().unwrap_or_default());
    let entities: Vec<Value> = copy["detail"]["affectedEntities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| keep(&e["entityValue"]))
        .cloned()
        .collect();
    copy["detail"]["affectedEntities"] = Value::Array(entities);
    copy["resources"] = json!(instances);
    copy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_router_routes_eventbridge_events_into_the_tenant_queues() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let (base, _) = deploy_queue_mode(&world, &aws).await?;

    let a = [
        world.launch(&karpenter_tags("alpha")).await?,
        world.launch(&karpenter_tags("alpha")).await?,
    ];
    let b = world.launch(&karpenter_tags("beta")).await?;
    let g = world.launch(&karpenter_tags("gamma")).await?;
    let managed = world.launch(&managed_nodegroup_tags("alpha")).await?;
    let untagged = world.launch(&[]).await?;

    // The router exactly as the stack configures the function, talking to AWS through the proxy.
    let function = base.output("FunctionName")?;
    let config = aws
        .lambda
        .get_function_configuration()
        .function_name(function)
        .send()
        .await?;
    let mut env = env_for(&world.proxy.endpoint());
    env.extend(
        config
            .environment()
            .and_then(|e| e.variables())
            .context("no environment")?
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    let router = Function::start_ready(&router_binary()?, &env).await?;
    // Before anything reaches the ingest queue: moto's own mapping would receive the messages
    // and fail to invoke (no Docker), counting them towards the DLQ redrive.
    let esm = EventSourceMapping::take_over(
        &aws.lambda,
        &world.sqs,
        function,
        Duration::from_secs(config.timeout().unwrap_or(30) as u64),
    )
    .await?;

    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let health = origin.scheduled_change(&[a[0].clone(), b.clone(), untagged.clone()], "retire");
    let routed: Vec<(Synthetic, &str)> = vec![
        (origin.spot_warning(&a[0], "spot-a0"), "alpha"),
        (
            origin.state_change(&a[1], "terminated", "terminated-a1"),
            "alpha",
        ),
        (origin.rebalance(&b, "rebalance-b"), "beta"),
        (origin.state_change(&g, "stopping", "stopping-g"), "gamma"),
        (origin.capacity_reservation(&g, "capacity-g"), "gamma"),
    ];
    // Reach the ingest queue, and the router ignores them: not Karpenter's instances.
    let ignored = [
        origin.spot_warning(&managed, "spot-managed-nodegroup"),
        origin.spot_warning(&untagged, "spot-untagged"),
    ];
    // Dropped by the rules' patterns: never reach the ingest queue.
    let mut health_issue = origin.scheduled_change(std::slice::from_ref(&a[1]), "issue");
    health_issue.event["detail"]["eventTypeCategory"] = json!("issue");
    let mut health_rds = origin.scheduled_change(std::slice::from_ref(&a[1]), "rds");
    health_rds.event["detail"]["service"] = json!("RDS");
    let filtered = [
        origin.state_change(&a[0], "running", "running-a0"),
        origin.state_change(&a[0], "pending", "pending-a0"),
        health_issue,
        health_rds,
    ];

    let all: Vec<&Synthetic> = routed
        .iter()
        .map(|(e, _)| e)
        .chain([&health])
        .chain(&ignored)
        .chain(&filtered)
        .collect();
    for chunk in all.chunks(10) {
        let out = aws
            .events
            .put_events()
            .set_entries(Some(chunk.iter().map(|e| e.put_events_entry()).collect()))
            .send()
            .await?;
        assert_eq!(out.failed_entry_count(), 0, "{out:?}");
    }

    // moto delivers to the rule targets inside PutEvents: everything is queued by now.
    let drained = esm
        .drain(
            &world.sqs,
            &router,
            Stop {
                handled: None,
                idle: Duration::from_secs(3),
            },
            |_| {},
        )
        .await?;
    let reached = routed.len() + 1 + ignored.len();
    assert_eq!(
        drained.records, reached as u64,
        "the rules let noise through"
    );
    assert_eq!(drained.handled, reached as u64);
    assert_eq!(drained.retried, 0);

    // What each cluster's queue holds, exactly. Single-instance events are forwarded byte for
    // byte; the Health event is split.
    let ingest_bodies: Vec<&String> = drained.arrivals.keys().collect();
    let ingest_body_of = |s: &Synthetic| -> Value {
        let found: Vec<Value> = ingest_bodies
            .iter()
            .filter_map(|b| serde_json::from_str::<Value>(b).ok())
            .filter(|v| v["detail"] == s.event["detail"])
            .collect();
        assert_eq!(found.len(), 1, "{} in the ingest queue", s.id);
        found[0].clone()
    };
    let mut expected: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (event, cluster) in &routed {
        expected
            .entry(cluster)
            .or_default()
            .push(ingest_body_of(event));
    }
    let health_in = ingest_body_of(&health);
    expected
        .entry("alpha")
        .or_default()
        .push(health_copy(&health_in, &[&a[0]]));
    expected
        .entry("beta")
        .or_default()
        .push(health_copy(&health_in, &[&b]));

    for cluster in CLUSTERS {
        let url = world.queue_url(&format!("karpenter-{cluster}")).await?;
        let received = world.drain(&url).await?;
        for r in received.iter().filter(|r| r.json()["source"] == "aws.ec2") {
            assert!(
                drained.arrivals.contains_key(&r.body),
                "{cluster}: not forwarded verbatim: {}",
                r.body
            );
        }
        let mut got: Vec<String> = received.iter().map(|r| r.json().to_string()).collect();
        let mut want: Vec<String> = expected[cluster].iter().map(Value::to_string).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{cluster}'s queue");
    }
    let dlq = world.queue_url(&format!("{BASE}-dlq")).await?;
    assert_eq!(world.drain(&dlq).await?, []);
    assert_eq!(world.depth(&esm.queue_url).await?, 0);
    router.stop().await;
    Ok(())
}

/// The stage of each deployment the update tests start from.
pub(super) fn update_scenarios() -> Vec<(&'static str, &'static str, Stage)> {
    use aws_model::template::Stage;
    let base = || Stage::new(BASE, ACCOUNT, REGION).parameter("CodeS3Bucket", "artifacts");
    let tenant = |cluster: &str| {
        Stage::new(&stacks::tenant_stack_name(BASE, cluster), ACCOUNT, REGION)
            .parameter("ClusterName", cluster)
            .export(
                &format!("{BASE}-RouterRoleArn"),
                "arn:aws:iam::123456789012:role/router",
            )
            .export(&format!("{BASE}-QueuePrefix"), "karpenter-")
            // What the base stack exports now, for tenant stacks that name no stack.
            .export(
                "interruption-router:RouterRoleArn",
                "arn:aws:iam::123456789012:role/router",
            )
            .export("interruption-router:QueuePrefix", "karpenter-")
    };
    vec![
        ("base.yaml", "Queue mode", base()),
        (
            "base.yaml",
            "Direct mode",
            base().parameter("IngestMode", "Direct"),
        ),
        (
            "base.yaml",
            "hub of two accounts",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "111111111111,222222222222"),
        ),
        (
            "base.yaml",
            "hub of an organisation",
            base()
                .parameter("CentralBus", "Enabled")
                .parameter("ServedAccounts", "*")
                .parameter("OrganizationId", "o-abcd123456"),
        ),
        ("tenant.yaml", "importing", tenant("alpha")),
        (
            "tenant.yaml",
            "with Karpenter's role",
            tenant("beta").parameter("KarpenterRoleName", KARPENTER_ROLE),
        ),
        (
            "spoke.yaml",
            "creating the spoke role",
            Stage::new("interruption-router-spoke", "111111111111", REGION)
                .parameter(
                    "HubEventBusArn",
                    "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
                )
                .parameter("RouterRoleArn", "arn:aws:iam::123456789012:role/router"),
        ),
    ]
}

use aws_model::template::{ResourceSchemas, Stage, Template, replacements};

#[test]
fn updating_deployed_stacks_to_these_templates_replaces_and_deletes_nothing() -> Result<()> {
    // CloudFormation replaces a resource when a property its type's schema lists as create-only
    // changes (a replaced queue loses its messages, a replaced role its ARN in every policy that
    // names it); moto applies updates its own way, so this reads AWS's schemas.
    let schemas = ResourceSchemas::load(&e2e_tests::cfn_schemas()?, REGION)?;
    let current = |name: &str| match name {
        "base.yaml" => BASE_TEMPLATE,
        "tenant.yaml" => TENANT_TEMPLATE,
        _ => stacks::SPOKE_TEMPLATE,
    };
    for (name, scenario, stage) in update_scenarios() {
        let old = Template::parse(name, &e2e_tests::previous_template(name))?;
        let new = Template::parse(name, current(name))?;
        let before = old.deploy(&stage)?;
        // An update keeps every parameter the stack was deployed with (`aws cloudformation
        // deploy` passes UsePreviousValue for those it is not given), defaults included; only a
        // parameter new to the template takes its new default.
        let mut kept = stage.clone();
        for (key, value) in &before.parameters {
            if new.doc["Parameters"].get(key).is_some() {
                kept.parameters.entry(key.clone()).or_insert(value.clone());
            }
        }
        let after = new.deploy(&kept)?;
        let replaced = replacements(&before, &after, &schemas)?;
        // One deletion is the point of the update: Karpenter's grant moves from an inline policy
        // (which shares 10,240 characters per role with the controller's own, and which tools
        // that own a role's inline policies delete) to a managed policy attached to the role.
        // CloudFormation creates the new resource in the update and deletes the old one in the
        // cleanup that follows, so the role never lacks the grant.
        let granted =
            name == "tenant.yaml" && before.properties("KarpenterQueueAccessPolicy")?.is_some();
        let expected: Vec<String> = if granted {
            vec!["KarpenterQueueAccessPolicy (AWS::IAM::Policy) is deleted".to_owned()]
        } else {
            Vec::new()
        };
        assert_eq!(
            replaced,
            expected,
            "{name} ({scenario}): the update would lose state:\n{}",
            replaced.join("\n")
        );
        if granted {
            let old_grant = before
                .properties("KarpenterQueueAccessPolicy")?
                .context("the inline grant")?;
            let new_grant = after
                .properties("KarpenterQueueAccess")?
                .context("the managed grant")?;
            assert_eq!(new_grant["Roles"], old_grant["Roles"], "{scenario}");
            assert_eq!(
                new_grant["PolicyDocument"]["Statement"], old_grant["PolicyDocument"]["Statement"],
                "{scenario}"
            );
        }
    }
    // The analysis does see a replacement: renaming a queue replaces it.
    let old = Template::parse("tenant.yaml", TENANT_TEMPLATE)?;
    let renamed = Template::parse(
        "tenant.yaml",
        &TENANT_TEMPLATE.replace(
            "\"${Prefix}${ClusterName}\"",
            "\"${Prefix}${ClusterName}-v2\"",
        ),
    )?;
    let stage = update_scenarios().remove(4).2;
    let replaced = replacements(&old.deploy(&stage)?, &renamed.deploy(&stage)?, &schemas)?;
    assert_eq!(replaced.len(), 1, "{replaced:?}");
    assert!(replaced[0].starts_with("InterruptionQueue (AWS::SQS::Queue) is replaced: QueueName"));
    Ok(())
}

#[tokio::test]
async fn a_deployed_base_and_tenant_stack_update_in_place_and_keep_their_messages() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    upload_code(&world).await?;
    let base = stacks::create(
        &aws.cfn,
        BASE,
        &e2e_tests::previous_template("base.yaml"),
        &[("CodeS3Bucket", "artifacts"), ("IngestMode", "Queue")],
    )
    .await?;
    routerctl::demo::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
    let tenant = stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(BASE, "alpha"),
        &e2e_tests::previous_template("tenant.yaml"),
        &[
            ("ClusterName", "alpha"),
            ("KarpenterRoleName", KARPENTER_ROLE),
        ],
    )
    .await?;
    // What is in flight when the update runs: an event waiting in the ingest queue, and one in
    // the cluster's queue that Karpenter has not read yet.
    let ingest = world.queue_url(&format!("{BASE}-ingest")).await?;
    let alpha = world.queue_url("karpenter-alpha").await?;
    for url in [&ingest, &alpha] {
        world
            .sqs
            .send_message()
            .queue_url(url)
            .message_body("in flight")
            .send()
            .await?;
    }
    let physical = async |stack: &str| aws_model::aws::stack_resources(&aws.cfn, stack).await;
    let (base_before, tenant_before) = (physical(&base.name).await?, physical(&tenant.name).await?);

    stacks::update(&aws.cfn, &base.name, BASE_TEMPLATE, &[]).await?;
    let in_flight = world.drain(&alpha).await?;
    assert_eq!(in_flight.len(), 1, "karpenter-alpha kept its message");
    routed_by_the_updated_base_into_an_untagged_tenant_queue(&world, &aws, &base, &alpha).await?;
    stacks::update(&aws.cfn, &tenant.name, TENANT_TEMPLATE, &[]).await?;
    // Karpenter's grant moved from an inline policy to a managed one attached to its role.
    attached_policy(&aws, KARPENTER_ROLE, "KarpenterQueueAccess").await?;
    assert_no_inline_policy(&aws, KARPENTER_ROLE).await?;

    let (base_after, tenant_after) = (physical(&base.name).await?, physical(&tenant.name).await?);
    // Queues, roles, the function, its log group and the event source mapping stay what they
    // were. (moto deletes and re-creates a rule whose pattern changes, which AWS updates in
    // place; the schema test above covers rules as AWS treats them.)
    for logical in [
        "IngestQueue",
        "DeadLetterQueue",
        "RouterRole",
        "RouterFunction",
        "IngestEventSourceMapping",
    ] {
        assert_eq!(
            base_before.get(logical),
            base_after.get(logical),
            "{logical}"
        );
        assert!(base_after.contains_key(logical), "{logical}");
    }
    // moto forgets the log group's physical id on any update of it (it implements no log group
    // update) but keeps the group: ask CloudWatch Logs.
    let logs = aws_model::aws::Aws::new(&world.moto.sdk_config().await)?.logs;
    let group = &base_before["RouterLogGroup"];
    let groups = logs
        .describe_log_groups()
        .log_group_name_prefix(group)
        .send()
        .await?;
    assert_eq!(groups.log_groups().len(), 1, "{group} still exists");
    assert_eq!(
        tenant_before.get("InterruptionQueue"),
        tenant_after.get("InterruptionQueue")
    );
    let received = world.drain(&ingest).await?;
    assert_eq!(received.len(), 1, "the ingest queue kept its message");
    // The updated deployment is the new one: the default-bus rules match this account only.
    let patterns: BTreeSet<String> = rules(&aws)
        .await?
        .into_values()
        .map(|(pattern, _)| pattern.to_string())
        .collect();
    assert_eq!(patterns, expected_patterns());
    Ok(())
}

/// Upgrading only the base stack silences no tenant queue made before the tenant tag: the router
/// knows it by its policy (it admits the router alone), and writes it.
async fn routed_by_the_updated_base_into_an_untagged_tenant_queue(
    world: &World,
    aws: &Clients,
    base: &Stack,
    queue_url: &str,
) -> Result<()> {
    let tags = world
        .sqs
        .list_queue_tags()
        .queue_url(queue_url)
        .send()
        .await?;
    assert!(
        tags.tags().is_none_or(|t| t.is_empty()),
        "the old tenant stack tagged nothing: {tags:?}"
    );
    // moto skips AWS::SQS::QueuePolicy: the policy the old tenant stack gave the queue.
    let arn = world.queue_arn(queue_url).await?;
    let router_role = base.output("RouterRoleArn")?;
    world
        .sqs
        .set_queue_attributes()
        .queue_url(queue_url)
        .attributes(
            QueueAttributeName::Policy,
            routerctl::verify::tenant_queue_policy(&arn, router_role).to_string(),
        )
        .send()
        .await?;
    let config = aws
        .lambda
        .get_function_configuration()
        .function_name(base.output("FunctionName")?)
        .send()
        .await?;
    let env: Vec<(String, String)> = config
        .environment()
        .and_then(|e| e.variables())
        .context("no environment")?
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        env.iter()
            .any(|(k, v)| k == "ROUTER_ROLE_ARN" && v == router_role)
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let router = world.start_router(&env).await?;
    let node = world.launch(&karpenter_tags("alpha")).await?;
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let answer = router
        .invoke(
            origin.spot_warning(&node, "after-the-base-update").body(),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(
        answer.json().map(|v| v["outcome"].clone()),
        Some(json!("forwarded")),
        "{answer:?}"
    );
    let received = world.drain(queue_url).await?;
    assert_eq!(
        received.len(),
        1,
        "the router wrote the untagged tenant queue"
    );
    router.stop().await;
    Ok(())
}

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
