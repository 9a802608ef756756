//! The real templates deployed through moto's CloudFormation: what the stacks create
//! ([`created`]), the router binary, configured from the deployed function's
//! environment, routing events published through EventBridge into the queues the tenant stacks
//! made ([`routing`]), each cluster taking only the event kinds its tenant stack chose ([`kinds`]), a cluster name as long as EKS allows ([`long_names`]), updates in place from
//! the last release ([`updates`]), and the dashboard and
//! alarms ([`monitoring`]). This file holds what they share: the deployment and the readers of
//! what moto made.
//!
//! moto ignores SQS::QueuePolicy, FIS::ExperimentTemplate, CloudWatch::Alarm and the
//! function's LoggingConfig, and never evaluates IAM: those are covered by
//! tests/tests/e2e/policy/, cfn-lint and checkov, not here. (Logs::QueryDefinition it has
//! neither, either: moto_fixes/ makes it, and [`created`] reads the definitions back.)

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use aws_clients::events::PutEvents as _;
use std::time::Duration;

use aws_clients::stacks::Stack;
use aws_model::{
    events::Synthetic,
    stacks::{self, BASE_TEMPLATE, TENANT_TEMPLATE},
};
use aws_sdk_sqs::types::QueueAttributeName;
use e2e_tests::World;
use interruption_router::event::Kind;
use local_aws::moto::{ACCOUNT, REGION};
use local_aws::{
    esm::{Drained, EventSourceMapping, Stop},
    function::Function,
};
use serde_json::{Value, json};

mod created;
mod environments;
mod kinds;
mod long_names;
mod monitoring;
mod routing;
mod updates;

/// Shared with `locked_down::updates`, which starts from the same deployments.
pub(crate) use updates::update_scenarios;

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

/// The function's code where base.yaml's `CodeS3Bucket=artifacts` points with `CodeS3Key` empty
/// (the release's zip), and where earlier templates' default `bootstrap.zip` did (the router
/// itself runs as a local process).
async fn upload_code(world: &World) -> Result<()> {
    for key in [
        stacks::release_code_key("arm64"),
        "bootstrap.zip".to_owned(),
    ] {
        world
            .moto
            .put_object("artifacts", &key, b"the router runs as a local process")
            .await?;
    }
    Ok(())
}

/// The base stack from `template` (today's, or a previous release's), its code uploaded first.
async fn deploy_base(world: &World, aws: &Clients, template: &str) -> Result<Stack> {
    upload_code(world).await?;
    Ok(
        aws_clients::stacks::create(&aws.cfn, BASE, template, &[("CodeS3Bucket", "artifacts")])
            .await?,
    )
}

/// The router exactly as the deployed stack configures its function (talking to AWS through the
/// proxy), and the event source mapping taken over from moto before anything reaches the ingest
/// queue: moto's own mapping would receive the messages and fail to invoke (no Docker), counting
/// them towards the DLQ redrive.
async fn start_deployed(
    world: &World,
    aws: &Clients,
    base: &Stack,
) -> Result<(Function, EventSourceMapping)> {
    let function = base.output("FunctionName")?;
    let (router, timeout) = world.start_deployed_router(&aws.lambda, function).await?;
    let esm = EventSourceMapping::take_over(&aws.lambda, &world.sqs, function, timeout).await?;
    Ok((router, esm))
}

/// Events from moto's account and region.
fn home_origin() -> aws_model::events::Origin {
    aws_model::events::Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    }
}

/// Publishes `events` through EventBridge (moto delivers to the rules' targets inside PutEvents)
/// and has `router` take what reached the ingest queue until it has been idle for 3 s.
async fn publish_and_drain(
    world: &World,
    aws: &Clients,
    esm: &EventSourceMapping,
    router: &Function,
    events: &[&Synthetic],
) -> Result<Drained> {
    for chunk in events.chunks(10) {
        let out = aws
            .events
            .put_events()
            .set_entries(Some(chunk.iter().map(|e| e.put_events_entry()).collect()))
            .send()
            .await?;
        assert_eq!(out.failed_entry_count(), 0, "{out:?}");
    }
    esm.drain(
        &world.sqs,
        router,
        Stop {
            handled: None,
            idle: Duration::from_secs(3),
        },
        |_| {},
    )
    .await
}

/// The base stack in Queue mode and one tenant stack per cluster, as `make deploy-base` and
/// `make deploy-tenant` deploy them: alpha and beta import the role and prefix from the base
/// stack (beta also grants its Karpenter role), gamma passes both explicitly.
async fn deploy_queue_mode(world: &World, aws: &Clients) -> Result<(Stack, Vec<Stack>)> {
    let base = deploy_base(world, aws, BASE_TEMPLATE).await?;
    lab::sandbox::create_karpenter_role(&aws.iam, KARPENTER_ROLE).await?;
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
            aws_clients::stacks::create(
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
