//! A small deployer: CreateStack, UpdateStack and DeleteStack, each waited on until it is done,
//! a failure naming the resources that failed; what the lab, the stand-ins and the tests deploy
//! the templates with ([`aws_model::stacks`] holds the templates themselves).

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result, bail};
use aws_sdk_cloudformation::types::{self as cfn_types, Capability, Parameter, StackStatus};

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
    let declared = aws_model::template::Template::parse(name, template)?;
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
