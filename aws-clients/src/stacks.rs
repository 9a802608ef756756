//! A small deployer: CreateStack, UpdateStack and DeleteStack, each waited on until it is done,
//! a failure naming the resources that failed ([`DeployError`]); what routerctl adopt, the lab,
//! the stand-ins and the tests deploy the templates with ([`aws_model::stacks`] holds the
//! templates themselves).
//!
//! The wait polls DescribeStacks as `aws cloudformation wait stack-*-complete` does, but sooner:
//! from 200 ms (the emulator finishes a stack at once), doubling to 5 s, for up to an hour (the
//! CLI waiter's 120 polls of 30 s), since a stack of a KMS key or many alarms takes minutes in AWS.

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result};
use aws_call_error::call_error;
pub use aws_model::resources::DeployError;
use aws_sdk_cloudformation::types::{self as cfn_types, Capability, Parameter, StackStatus};
use tokio::time::Instant;

/// How long a deployment is waited for.
const PATIENCE: Duration = Duration::from_secs(60 * 60);
/// The first poll's delay, and the longest.
const FIRST_POLL: Duration = Duration::from_millis(200);
const LONGEST_POLL: Duration = Duration::from_secs(5);

/// Stack `name` as DescribeStacks answers it.
pub async fn describe(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
) -> Result<cfn_types::Stack> {
    Ok(described(cfn, name).await?)
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
) -> Result<Stack, DeployError> {
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
) -> Result<Stack, DeployError> {
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
        .map_err(|e| DeployError::call(format!("CreateStack {name}"), call_error(e)))?;
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
) -> Result<Stack, DeployError> {
    let described = described(cfn, name).await?;
    let previous = self::parameters(&described);
    let declared = aws_model::template::Template::parse(name, template)
        .map_err(|e| DeployError::Template(format!("{e:#}")))?;
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
        .await
        .map_err(call_error);
    match updated {
        Ok(_) => wait(cfn, name, StackStatus::UpdateComplete).await,
        // What CloudFormation answers when template and parameters are unchanged.
        Err(e) if e.message.contains("No updates are to be performed") => {
            let status = described
                .stack_status()
                .cloned()
                .unwrap_or(StackStatus::UpdateComplete);
            wait(cfn, name, status).await
        }
        Err(e) => Err(DeployError::call(format!("UpdateStack {name}"), e)),
    }
}

/// Deletes a stack (every resource it made) and waits until it is gone, as deleting a tenant
/// stack offboards its cluster.
pub async fn delete(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Result<(), DeployError> {
    cfn.delete_stack()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| DeployError::call(format!("DeleteStack {name}"), call_error(e)))?;
    let mut polls = Polls::new();
    loop {
        let status = match cfn.describe_stacks().stack_name(name).send().await {
            // CloudFormation describes a deleted stack by name no more.
            Err(e) => {
                let e = call_error(e);
                if e.is_missing_stack() {
                    return Ok(());
                }
                return Err(DeployError::call(format!("DescribeStacks {name}"), e));
            }
            Ok(out) => out.stacks().first().and_then(|s| s.stack_status()).cloned(),
        };
        match status {
            None | Some(StackStatus::DeleteComplete) => return Ok(()),
            Some(s) if s.as_str().ends_with("_IN_PROGRESS") => polls.next(name, s.as_str()).await?,
            Some(s) => {
                return Err(DeployError::Failed {
                    stack: name.to_owned(),
                    status: s.as_str().to_owned(),
                    reasons: failed_resources(cfn, name).await,
                });
            }
        }
    }
}

/// Stack `name` as DescribeStacks answers it.
async fn described(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
) -> Result<cfn_types::Stack, DeployError> {
    let call = || format!("DescribeStacks {name}");
    let out = cfn
        .describe_stacks()
        .stack_name(name)
        .send()
        .await
        .map_err(|e| DeployError::call(call(), call_error(e)))?;
    out.stacks().first().cloned().ok_or_else(|| {
        DeployError::call(
            call(),
            aws_call_error::CallError::new(
                aws_call_error::missing::STACK,
                format!("Stack with id {name} does not exist"),
            ),
        )
    })
}

/// The delays between polls of a deployment under way.
struct Polls {
    started: Instant,
    next: Duration,
}

impl Polls {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            next: FIRST_POLL,
        }
    }

    /// Sleeps until the next poll, or says the stack, still `status`, was waited for too long.
    async fn next(&mut self, stack: &str, status: &str) -> Result<(), DeployError> {
        let waited = self.started.elapsed();
        if waited >= PATIENCE {
            return Err(DeployError::Unfinished {
                stack: stack.to_owned(),
                status: status.to_owned(),
                waited_secs: waited.as_secs(),
            });
        }
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(LONGEST_POLL);
        Ok(())
    }
}

/// Each resource whose deployment failed, and CloudFormation's reason; what could not be read is
/// said instead.
async fn failed_resources(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Vec<String> {
    let events = match cfn.describe_stack_events().stack_name(name).send().await {
        Ok(events) => events,
        Err(e) => return vec![format!("DescribeStackEvents {name}: {}", call_error(e))],
    };
    events
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
        .collect()
}

/// Waits for the stack to reach `done`; a failure names the resources that failed.
async fn wait(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    done: StackStatus,
) -> Result<Stack, DeployError> {
    let mut polls = Polls::new();
    loop {
        let stack = described(cfn, name).await?;
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
                polls.next(name, status.as_str()).await?
            }
            other => {
                return Err(DeployError::Failed {
                    stack: name.to_owned(),
                    status: other.map_or("of no status", |s| s.as_str()).to_owned(),
                    reasons: failed_resources(cfn, name).await,
                });
            }
        }
    }
}
