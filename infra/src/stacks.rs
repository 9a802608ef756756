//! The project's CloudFormation templates and a small deployer for them: what the demo and the
//! tests use to stand the real stacks up in the emulator (and what works against an account too).

use std::{collections::BTreeMap, time::Duration};

use anyhow::{Context, Result, bail};
use aws_sdk_cloudformation::types::{Capability, Parameter, StackStatus};

/// The templates, compiled in so the demo always deploys exactly what is in `cloudformation/`.
pub const BASE_TEMPLATE: &str = include_str!("../../cloudformation/base.yaml");
pub const TENANT_TEMPLATE: &str = include_str!("../../cloudformation/tenant.yaml");
pub const FIS_TEMPLATE: &str = include_str!("../../cloudformation/fis.yaml");
pub const SPOKE_TEMPLATE: &str = include_str!("../../cloudformation/spoke.yaml");

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

/// Creates a stack and waits until it is complete; a failure names the resources that failed.
pub async fn create(
    cfn: &aws_sdk_cloudformation::Client,
    name: &str,
    template: &str,
    parameters: &[(&str, &str)],
) -> Result<Stack> {
    let parameters = parameters
        .iter()
        .map(|(k, v)| {
            Parameter::builder()
                .parameter_key(*k)
                .parameter_value(*v)
                .build()
        })
        .collect();
    cfn.create_stack()
        .stack_name(name)
        .template_body(template)
        .set_parameters(Some(parameters))
        .capabilities(Capability::CapabilityIam)
        .capabilities(Capability::CapabilityNamedIam)
        .send()
        .await
        .with_context(|| format!("CreateStack {name}"))?;
    for _ in 0..600 {
        let described = cfn.describe_stacks().stack_name(name).send().await?;
        let stack = described
            .stacks()
            .first()
            .with_context(|| format!("stack {name} vanished"))?;
        match stack.stack_status() {
            Some(StackStatus::CreateComplete) => {
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
