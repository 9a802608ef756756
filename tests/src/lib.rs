//! Shared set-up for the end-to-end tests: a moto server with clusters of tagged instances and
//! their Karpenter queues, the router binary under a Lambda Runtime API, the shared event
//! fixtures with real instance ids substituted, and helpers that read queues the way Karpenter
//! does.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use local_aws::{
    function::{Function, router_binary},
    moto::MotoServer,
    proxy::AwsProxy,
    runtime_api::Invocation,
};
use serde_json::{Value, json};

pub use local_aws::{self, moto::karpenter_tags};

pub mod benchmarks;
pub mod fault_storm;
pub mod organisation;
pub mod policy;

/// Tags of a managed node group instance: a cluster, but not Karpenter's.
pub fn managed_nodegroup_tags(cluster: &str) -> Vec<(String, String)> {
    vec![
        ("eks:eks-cluster-name".into(), cluster.into()),
        ("eks:nodegroup-name".into(), "system".into()),
    ]
}

/// A moto server plus clients, and a proxy in front of it that the router talks through.
pub struct World {
    pub moto: MotoServer,
    pub proxy: AwsProxy,
    /// The emulator's default account and region, as the tests act in it.
    pub config: aws_config::SdkConfig,
    pub ec2: aws_sdk_ec2::Client,
    pub sqs: aws_sdk_sqs::Client,
}

impl World {
    pub async fn start() -> Result<Self> {
        let moto = MotoServer::start().await?;
        let proxy = AwsProxy::start(moto.endpoint()).await?;
        let config = moto.sdk_config().await;
        Ok(Self {
            ec2: aws_sdk_ec2::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            config,
            moto,
            proxy,
        })
    }

    /// Launches one instance with `tags`; returns its id.
    pub async fn launch(&self, tags: &[(String, String)]) -> Result<String> {
        self.launch_many(tags, 1)
            .await?
            .pop()
            .context("RunInstances returned no instance")
    }

    /// Launches `count` instances with `tags` (none: untagged) in one call; returns their ids.
    pub async fn launch_many(&self, tags: &[(String, String)], count: i32) -> Result<Vec<String>> {
        local_aws::moto::launch(&self.ec2, tags, count).await
    }

    pub async fn create_queue(&self, name: &str) -> Result<String> {
        let out = self
            .sqs
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .with_context(|| format!("CreateQueue {name}"))?;
        Ok(out.queue_url().context("no queue url")?.to_owned())
    }

    /// `cluster`'s tenant queue `karpenter-<cluster>`, tagged as tenant.yaml tags it, and its
    /// tenant record.
    pub async fn create_tenant_queue(&self, cluster: &str) -> Result<String> {
        local_aws::moto::create_tenant_queue(&self.config, cluster).await
    }

    /// Deletes a tenant as deleting its stack does: its queue and its tenant record.
    pub async fn delete_tenant(&self, queue_url: &str) -> Result<()> {
        local_aws::moto::delete_tenant(&self.config, queue_url).await
    }

    pub async fn queue_url(&self, name: &str) -> Result<String> {
        aws_clients::aws::queue_url(&self.sqs, name).await
    }

    pub async fn queue_arn(&self, queue_url: &str) -> Result<String> {
        self.sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await?
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .context("no QueueArn")
    }

    /// An ingest queue `interruption-router-ingest` as the base stack makes it: `visibility`
    /// timeout, redrive to `dlq_url` after `max_receive_count` receives. Returns its URL and ARN.
    pub async fn ingest_queue(
        &self,
        dlq_url: &str,
        visibility: Duration,
        max_receive_count: u32,
    ) -> Result<(String, String)> {
        let redrive = json!({
            "deadLetterTargetArn": self.queue_arn(dlq_url).await?,
            "maxReceiveCount": max_receive_count,
        })
        .to_string();
        let url = self
            .sqs
            .create_queue()
            .queue_name("interruption-router-ingest")
            .attributes(
                QueueAttributeName::VisibilityTimeout,
                visibility.as_secs().to_string(),
            )
            .attributes(QueueAttributeName::RedrivePolicy, redrive)
            .send()
            .await?
            .queue_url()
            .context("no queue url")?
            .to_owned();
        let arn = self.queue_arn(&url).await?;
        Ok((url, arn))
    }

    /// Receives and deletes every message in the queue, as Karpenter's poller does.
    pub async fn drain(&self, queue_url: &str) -> Result<Vec<Received>> {
        drain(&self.sqs, queue_url).await
    }

    /// The number of messages waiting in a queue.
    pub async fn depth(&self, queue_url: &str) -> Result<u64> {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await?;
        let n = out
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .cloned();
        Ok(n.unwrap_or_default().parse().unwrap_or_default())
    }

    /// The environment for a router process that talks to AWS through the proxy.
    pub fn router_env(&self, config: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env = local_aws::moto::env_for(&self.proxy.endpoint());
        env.extend(config.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }

    /// Starts the router binary configured with `config`, pointed at the proxy.
    pub async fn start_router(&self, config: &[(&str, &str)]) -> Result<Function> {
        Function::start_ready(&router_binary()?, &self.router_env(config)).await
    }

    /// The router exactly as a deployed stack configures `function` (its whole environment),
    /// talking to AWS through the proxy; and the function's timeout.
    pub async fn start_deployed_router(
        &self,
        lambda: &aws_sdk_lambda::Client,
        function: &str,
    ) -> Result<(Function, std::time::Duration)> {
        let config = lambda
            .get_function_configuration()
            .function_name(function)
            .send()
            .await?;
        let mut env = local_aws::moto::env_for(&self.proxy.endpoint());
        env.extend(
            config
                .environment()
                .and_then(|e| e.variables())
                .context("no environment")?
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let timeout = std::time::Duration::from_secs(config.timeout().unwrap_or(30) as u64);
        Ok((
            Function::start_ready(&router_binary()?, &env).await?,
            timeout,
        ))
    }
}

/// Sends `bodies` into the queue, ten to a SendMessageBatch.
pub async fn send_all(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    bodies: impl IntoIterator<Item = String>,
) -> Result<()> {
    let bodies: Vec<String> = bodies.into_iter().collect();
    for ten in bodies.chunks(10) {
        let entries = ten
            .iter()
            .enumerate()
            .map(|(n, body)| {
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(n.to_string())
                    .message_body(body)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        sqs.send_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .with_context(|| format!("SendMessageBatch into {queue_url}"))?;
    }
    Ok(())
}

/// Receives and deletes every message in the queue with `sqs` (a client of the queue's account),
/// as Karpenter's poller does.
pub async fn drain(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<Vec<Received>> {
    let mut received = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await?;
        if out.messages().is_empty() {
            return Ok(received);
        }
        let mut deletes = Vec::new();
        for (i, m) in out.messages().iter().enumerate() {
            let attributes = m
                .message_attributes()
                .map(|a| {
                    a.iter()
                        .map(|(k, v)| (k.clone(), v.string_value().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            let sent_ms = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                .and_then(|t| t.parse().ok())
                .unwrap_or_default();
            received.push(Received {
                body: m.body().unwrap_or_default().to_owned(),
                attributes,
                sent_ms,
            });
            deletes.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .set_receipt_handle(m.receipt_handle().map(str::to_owned))
                    .build()?,
            );
        }
        sqs.delete_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(deletes))
            .send()
            .await?;
    }
}

/// A message as a Karpenter poller would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub body: String,
    pub attributes: BTreeMap<String, String>,
    /// When it arrived in the queue (SentTimestamp), ms since the epoch.
    pub sent_ms: u64,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// The directory of the event fixtures (`fixtures/events`, real formats; see its README).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/events")
}

/// A fixture event as JSON.
pub fn fixture(name: &str) -> Value {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fixture event for `instance`, as this account and region's EventBridge would deliver it:
/// `detail.instance-id` and the instance ARN in `resources` are replaced, `account` and `region`
/// are the emulator's, and the event gets its own `id` so deliveries can be told apart.
pub fn ec2_event(name: &str, instance: &str, id: &str) -> Value {
    let mut event = fixture(name);
    event["id"] = json!(id);
    event["account"] = json!(local_aws::moto::ACCOUNT);
    event["region"] = json!(local_aws::moto::REGION);
    event["detail"]["instance-id"] = json!(instance);
    event["resources"] = json!([format!(
        "arn:aws:ec2:us-east-1:123456789012:instance/{instance}"
    )]);
    event
}

/// A Health EC2 scheduled change naming `entities` (bare ids or ARNs, as given).
pub fn health_event(entities: &[&str], id: &str) -> Value {
    let mut event = fixture("health-instance-retirement-arn-entity.json");
    event["id"] = json!(id);
    event["detail"]["affectedEntities"] = entities
        .iter()
        .map(|e| json!({"entityValue": e, "lastUpdatedTime": "Thu, 26 Jan 2026 19:01:55 GMT", "status": "PENDING"}))
        .collect();
    event
}

/// An SQS event (as an event source mapping delivers it) whose records carry `bodies`; record
/// `i` has message id `msg-<i>`.
pub fn sqs_event(bodies: &[String]) -> Value {
    let ids: Vec<(String, String)> = (0..bodies.len())
        .map(|i| (format!("msg-{i}"), format!("handle-{i}")))
        .collect();
    aws_model::esm::sqs_event(bodies.iter().zip(&ids).map(|(body, (id, handle))| {
        aws_model::esm::Record {
            message_id: id,
            receipt_handle: handle,
            body,
            attributes: [
                ("ApproximateReceiveCount", "1"),
                ("SentTimestamp", "1700000000000"),
                ("SenderId", "AIDAEXAMPLE"),
                ("ApproximateFirstReceiveTimestamp", "1700000000000"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
            md5_of_body: "",
            queue_arn: "arn:aws:sqs:us-east-1:123456789012:interruption-router-ingest",
            region: "us-east-1",
        }
    }))
}

/// The message ids named in an SQS batch response.
pub fn batch_item_failures(invocation: &Invocation) -> Vec<String> {
    let response = invocation
        .json()
        .unwrap_or_else(|| panic!("expected a response, got {invocation:?}"));
    response["batchItemFailures"]
        .as_array()
        .unwrap_or_else(|| panic!("not a batch response: {response}"))
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Hands `router` an SQS batch of `bodies` (message ids `msg-0`, `msg-1`, …), as the event source
/// mapping would, within [`INVOKE_BUDGET`], and returns the ids it handed back.
pub async fn invoke_batch(router: &Function, bodies: &[String]) -> Vec<String> {
    let response = router
        .invoke(sqs_event(bodies).to_string(), INVOKE_BUDGET)
        .await;
    batch_item_failures(&response)
}

/// [`invoke_batch`], asserting the router handled every record (its output is the message).
pub async fn assert_batch_handled(router: &Function, bodies: &[String]) {
    let handed_back = invoke_batch(router, bodies).await;
    assert_eq!(
        handed_back,
        Vec::<String>::new(),
        "records handed back; the router printed:\n{}",
        router.printed_lines().join("\n")
    );
}

/// AWS's resource provider schemas, as cfn-lint ships them in the project's `.venv` (installed by
/// `make tools`): `cfnlint/data/schemas`.
pub fn cfn_schemas() -> Result<PathBuf> {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/lib");
    let pythons = std::fs::read_dir(&lib).with_context(|| {
        format!(
            "{} not found: run `make tools` (cfn-lint carries AWS's resource schemas)",
            lib.display()
        )
    })?;
    for python in pythons.flatten() {
        let schemas = python.path().join("site-packages/cfnlint/data/schemas");
        if schemas.join("providers").is_dir() {
            return Ok(schemas);
        }
    }
    anyhow::bail!(
        "no cfnlint/data/schemas under {}: run `make tools`",
        lib.display()
    )
}

/// What of an update's replacements ([`aws_model::template::replacements::replacements`]) loses
/// state: every one but
///
/// * a CloudWatch dashboard's, whose body is the template's (replaced, it loses nothing but its
///   old name; base.yaml's is named `<stack>-<region>` since 0.2.0, because dashboards are global
///   to an account, and the CHANGELOG says so);
/// * spoke.yaml's forwarding role taking its name (`<SpokeRoleName>-forward-<region>`, which the
///   hub bus admits since the security review): a role holds no state, and CloudFormation makes
///   the new one and points the rules at it before it deletes the old (the CHANGELOG says to
///   update the spoke stacks before the base stack);
/// * tenant.yaml's Karpenter grant, a managed policy, replaced when its path (which names the
///   queue and key its document depends on) changes: it holds no state, and CloudFormation
///   attaches the new one before it detaches and deletes the old.
pub fn losing_state(replaced: Vec<String>) -> Vec<String> {
    replaced
        .into_iter()
        .filter(|r| !r.contains("(AWS::CloudWatch::Dashboard) is replaced"))
        .filter(|r| {
            !r.starts_with("ForwardToHubRole (AWS::IAM::Role) is replaced: RoleName changes")
        })
        .filter(|r| {
            !r.starts_with(
                "KarpenterQueueAccess (AWS::IAM::ManagedPolicy) is replaced: Path changes",
            )
        })
        .collect()
}

/// The templates as they were at commit 2a6d3c1, the last release before the in-place update
/// tests: what a deployed stack may still run (`tests/fixtures/templates-2a6d3c1`).
pub fn previous_template(name: &str) -> String {
    template_fixture("templates-2a6d3c1", name)
}

/// A template as it was before locked-down accounts (issue 21): what every stack deployed
/// until then runs (`tests/fixtures/templates-59db6f7`).
pub fn template_before_locked_down(name: &str) -> String {
    template_fixture("templates-59db6f7", name)
}

fn template_fixture(dir: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(dir)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Generous: the emulator is Python on a shared machine. Never an assertion about speed.
pub const INVOKE_BUDGET: Duration = Duration::from_secs(60);
