//! The project's CloudFormation templates and a small deployer for them: what the demo and the
//! tests use to stand the real stacks up in the emulator (and what works against an account too).

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result, bail};
use aws_sdk_cloudformation::types::{self as cfn_types, Capability, Parameter, StackStatus};
use router_core::event::Kinds;

/// The templates, compiled in so the demo always deploys exactly what is in `cloudformation/`.
pub const BASE_TEMPLATE: &str = include_str!("../../cloudformation/base.yaml");
pub const TENANT_TEMPLATE: &str = include_str!("../../cloudformation/tenant.yaml");
pub const FIS_TEMPLATE: &str = include_str!("../../cloudformation/fis.yaml");
pub const SPOKE_TEMPLATE: &str = include_str!("../../cloudformation/spoke.yaml");
/// The deployer's least-privilege policy and CloudFormation's service role (deployed once per
/// account by an administrator).
pub const DEPLOYER_TEMPLATE: &str = include_str!("../../cloudformation/deployer.yaml");

/// The release a template belongs to: its `Release` mapping's `Version` (base.yaml's `Router`
/// entry, spoke.yaml's `Spoke`), which its `Version` output and version tags carry.
pub fn template_version(template: &str) -> Result<String> {
    let doc = crate::template::Template::parse("template", template)?.doc;
    let release = &doc["Mappings"]["Release"];
    ["Router", "Spoke"]
        .iter()
        .find_map(|entry| release[entry]["Version"].as_str())
        .map(str::to_owned)
        .context("no Release mapping with a Version")
}

/// Where base.yaml's function finds its code when `CodeS3Key` is empty: the release's zip for
/// `architecture`, `<CodePrefix>/bootstrap-<architecture>.zip` (what `make release` lays out).
pub fn release_code_key(architecture: &str) -> String {
    let doc = crate::template::Template::parse("base.yaml", BASE_TEMPLATE)
        .expect("base.yaml parses")
        .doc;
    let prefix = doc["Mappings"]["Release"]["Router"]["CodePrefix"]
        .as_str()
        .expect("base.yaml has Release.Router.CodePrefix");
    format!("{prefix}/bootstrap-{architecture}.zip")
}

/// The tenant stack `make deploy-tenant` deploys for `cluster` next to the base stack `base`:
/// `<base>-tenant-<cluster>`, with each `_` (which EKS allows in cluster names and CloudFormation
/// does not allow in stack names) written as `-`. The Makefile computes the same name.
pub fn tenant_stack_name(base: &str, cluster: &str) -> String {
    format!("{base}-tenant-{}", cluster.replace('_', "-"))
}

/// What a cluster's tenant stack takes from the base stack of its account and region, unless the
/// operator gives it: the alarm topic its unread-message alarm notifies, the locked-down setting
/// of its queue's key (`Create`), so a tenant in a locked-down account is locked down too, and
/// the `RouterName` whose exports it imports. In a member account (no base stack) a tenant takes
/// what the operator gives. `routerctl adopt` deploys tenants with
/// [`tenant_parameters`]; `make deploy-tenant` inherits the same list (its `TENANT_INHERITS`,
/// which a test holds equal to this one).
pub const TENANT_INHERITS: [&str; 3] = ["AlarmTopicArn", "KmsKey", "RouterName"];

/// The parameters of `cluster`'s tenant stack next to the base stack whose parameters are
/// `connecting`: the cluster, Karpenter's role, what [`TENANT_INHERITS`] names, where set,
/// `QueueName` when `<QueuePrefix><cluster>` passes SQS's 80 characters (the name the router
/// derives for the cluster: [`router_core::config::QueueNameTemplate::queue_name`]), and
/// `EventKinds` when the cluster takes fewer than all five kinds.
pub fn tenant_parameters(
    connecting: &BTreeMap<String, String>,
    cluster: &str,
    karpenter_role: &str,
    kinds: Kinds,
) -> Vec<(String, String)> {
    let mut parameters = vec![
        ("ClusterName".to_owned(), cluster.to_owned()),
        ("KarpenterRoleName".to_owned(), karpenter_role.to_owned()),
    ];
    if kinds != Kinds::ALL {
        parameters.push(("EventKinds".to_owned(), event_kinds(kinds)));
    }
    let prefix = connecting
        .get("QueuePrefix")
        .filter(|p| !p.is_empty())
        .map_or("karpenter-", String::as_str);
    let derived = router_core::config::QueueNameTemplate::parse(&format!("{prefix}{{cluster}}"))
        .ok()
        .and_then(|t| t.queue_name(cluster));
    if let Some(queue) = derived.filter(|q| *q != format!("{prefix}{cluster}")) {
        parameters.push(("QueueName".to_owned(), queue));
    }
    for key in TENANT_INHERITS {
        if let Some(value) = connecting.get(key).filter(|v| !v.is_empty()) {
            parameters.push((key.to_owned(), value.clone()));
        }
    }
    parameters
}

/// tenant.yaml's `EventKinds` value for `kinds`: their labels, comma-separated.
pub fn event_kinds(kinds: Kinds) -> String {
    kinds
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join(",")
}

/// Stack `name` as DescribeStacks answers it.
pub async fn describe(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
) -> Result<cfn_types::Stack> {
    cfn.describe_stacks()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("DescribeStacks {name}: {}", crate::aws::describe(&e)))?
        .stacks()
        .first()
        .cloned()
        .with_context(|| format!("no stack {name}"))
}

/// A created stack's outputs, by output key.
#[derive(Debug, Clone)]
pub struct Stack {
    pub name: String,
    pub outputs: BTreeMap<String, String>,
}

impl Stack {
    pub fn output(&self, key: &str) -> Result<&str> {
        self.outputs
            .get(key)
            .map(String::as_str)
            .with_context(|| format!("stack {} has no output {key}", self.name))
    }
}

/// A described stack's parameters, by key, as deployed.
pub fn parameters(stack: &cfn_types::Stack) -> BTreeMap<String, String> {
    stack
        .parameters()
        .iter()
        .filter_map(|p| {
            Some((
                p.parameter_key()?.to_owned(),
                p.parameter_value()?.to_owned(),
            ))
        })
        .collect()
}

fn parameter(key: &str, value: &str) -> Parameter {
    Parameter::builder()
        .parameter_key(key)
        .parameter_value(value)
        .build()
}

/// Creates a stack and waits until it is complete; a failure names the resources that failed.
pub async fn create(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    template: &str,
    parameters: &[(&str, &str)],
) -> Result<Stack> {
    create_as(cfn, name, Source::Body(template), parameters).await
}

/// Where CreateStack takes a template from: its text, or an S3 URL (a release's, as the README
/// deploys it: `https://<bucket>.s3.<region>.amazonaws.com/<prefix>/<version>/base.yaml`).
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    Body(&'a str),
    Url(&'a str),
}

/// [`create`] from either [`Source`].
pub async fn create_as(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    source: Source<'_>,
    parameters: &[(&str, &str)],
) -> Result<Stack> {
    let request = cfn.create_stack().stack_name(name);
    let request = match source {
        Source::Body(body) => request.template_body(body),
        Source::Url(url) => request.template_url(url),
    };
    request
        .set_parameters(Some(
            parameters.iter().map(|(k, v)| parameter(k, v)).collect(),
        ))
        .capabilities(Capability::CapabilityIam)
        .capabilities(Capability::CapabilityNamedIam)
        .send()
        .await
        .with_context(|| format!("CreateStack {name}"))?;
    wait(cfn, name, StackStatus::CreateComplete).await
}

/// Updates a stack to `template` with `parameters` (the others keep their deployed values: passed
/// as they are rather than with `UsePreviousValue`, which moto 5.2.5 fails on for a parameter that
/// took its default; no parameter here is NoEcho) and waits until the update is complete. A
/// deployed parameter the new template no longer declares is dropped, as `aws cloudformation
/// deploy` drops it (CloudFormation refuses parameters a template does not declare).
pub async fn update(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    template: &str,
    parameters: &[(&str, &str)],
) -> Result<Stack> {
    let described = describe(cfn, name).await?;
    let previous = self::parameters(&described);
    let declared = crate::template::Template::parse(name, template)?;
    let declared = &declared.doc["Parameters"];
    let mut all: Vec<Parameter> = parameters.iter().map(|(k, v)| parameter(k, v)).collect();
    for (key, value) in &previous {
        if declared.get(key).is_some() && !parameters.iter().any(|(k, _)| k == key) {
            all.push(parameter(key, value));
        }
    }
    let updated = cfn
        .update_stack()
        .stack_name(name)
        .template_body(template)
        .set_parameters(Some(all))
        .capabilities(Capability::CapabilityIam)
        .capabilities(Capability::CapabilityNamedIam)
        .send()
        .await;
    match updated {
        Ok(_) => wait(cfn, name, StackStatus::UpdateComplete).await,
        // What CloudFormation answers when template and parameters are unchanged.
        Err(e)
            if aws_sdk_cloudformation::error::ProvideErrorMetadata::message(&e)
                .is_some_and(|m| m.contains("No updates are to be performed")) =>
        {
            let status = described
                .stack_status()
                .cloned()
                .unwrap_or(StackStatus::UpdateComplete);
            wait(cfn, name, status).await
        }
        Err(e) => bail!("UpdateStack {name}: {}", crate::aws::describe(&e)),
    }
}

/// Deletes a stack (every resource it made) and waits until it is gone, as deleting a tenant
/// stack offboards its cluster.
pub async fn delete(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Result<()> {
    cfn.delete_stack()
        .stack_name(name)
        .send()
        .await
        .with_context(|| format!("DeleteStack {name}"))?;
    for _ in 0..600 {
        let status = match cfn.describe_stacks().stack_name(name).send().await {
            // CloudFormation describes a deleted stack by name no more.
            Err(e)
                if aws_sdk_cloudformation::error::ProvideErrorMetadata::message(&e)
                    .is_some_and(|m| m.contains("does not exist")) =>
            {
                return Ok(());
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("DescribeStacks {name}"))),
            Ok(out) => out.stacks().first().and_then(|s| s.stack_status()).cloned(),
        };
        match status {
            None | Some(StackStatus::DeleteComplete) => return Ok(()),
            Some(s) if s.as_str().ends_with("_IN_PROGRESS") => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            Some(s) => bail!("stack {name} is {} instead of deleted", s.as_str()),
        }
    }
    bail!("stack {name} was not deleted in time")
}

/// Waits for the stack to reach `done`; a failure names the resources that failed.
async fn wait(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    done: StackStatus,
) -> Result<Stack> {
    for _ in 0..600 {
        let described = cfn.describe_stacks().stack_name(name).send().await?;
        let stack = described
            .stacks()
            .first()
            .with_context(|| format!("stack {name} vanished"))?;
        match stack.stack_status() {
            Some(status) if *status == done => {
                let outputs = stack
                    .outputs()
                    .iter()
                    .filter_map(|o| {
                        Some((o.output_key()?.to_owned(), o.output_value()?.to_owned()))
                    })
                    .collect();
                return Ok(Stack {
                    name: name.to_owned(),
                    outputs,
                });
            }
            Some(status) if status.as_str().ends_with("_IN_PROGRESS") => {
                tokio::time::sleep(Duration::from_millis(200)).await
            }
            other => {
                let events = cfn.describe_stack_events().stack_name(name).send().await?;
                let reasons: Vec<String> = events
                    .stack_events()
                    .iter()
                    .filter(|e| {
                        e.resource_status()
                            .is_some_and(|s| s.as_str().ends_with("FAILED"))
                    })
                    .map(|e| {
                        format!(
                            "{}: {}",
                            e.logical_resource_id().unwrap_or("?"),
                            e.resource_status_reason().unwrap_or("?")
                        )
                    })
                    .collect();
                bail!("stack {name} ended {other:?}: {}", reasons.join("; "));
            }
        }
    }
    bail!("stack {name} did not finish within two minutes")
}
