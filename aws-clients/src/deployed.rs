//! A deployed stack as CloudFormation resolved it: the template it was deployed from
//! (GetTemplate), rendered ([`aws_model::template`]) with the stack's own parameters, the exports of its account and region, and the physical ids
//! and ARNs of what it made. So a document the stack defines (a queue's policy, a bus's policy)
//! is read from the template itself, exactly as that deployment resolves it, rather than written
//! out again by whoever needs it.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow};
use serde_json::Value;

use aws_model::template::{Stage, Template};

use crate::{
    aws::{Aws, describe},
    stacks,
};

/// A template and the stage its deployment fixed.
pub struct Rendered {
    pub template: Template,
    pub stage: Stage,
}

impl Rendered {
    /// Reads stack `name` back: the template it was deployed from, its parameters, the region's
    /// exports, and for each resource its `Ref` and the attributes policies name (`Arn`, and a
    /// queue's `QueueName`).
    pub async fn of(aws: &Aws, name: &str) -> Result<Self> {
        let template = aws
            .cfn
            .get_template()
            .stack_name(name)
            .send()
            .await
            .map_err(|e| anyhow!("GetTemplate {name}: {}", describe(&e)))?
            .template_body()
            .with_context(|| format!("stack {name} has no template body"))?
            .to_owned();
        let stack = stacks::describe(&aws.cfn, name).await?;
        let account = stack
            .stack_id()
            .and_then(aws_model::arn::arn_account)
            .with_context(|| format!("stack {name} has no account in its id"))?;
        let mut stage = Stage::new(name, account, &aws.region);
        stage.parameters = stacks::parameters(&stack);
        stage.exports = exports(aws).await?;
        let resources = aws
            .cfn
            .describe_stack_resources()
            .stack_name(name)
            .send()
            .await
            .map_err(|e| anyhow!("DescribeStackResources {name}: {}", describe(&e)))?;
        // A rule's physical id is its name, whichever bus it is on.
        let buses: Vec<String> = aws
            .events
            .list_event_buses()
            .send()
            .await
            .map_err(|e| anyhow!("ListEventBuses: {}", describe(&e)))?
            .event_buses()
            .iter()
            .filter_map(|b| b.name().map(str::to_owned))
            .collect();
        for r in resources.stack_resources() {
            let (Some(logical), Some(physical), Some(ty)) = (
                r.logical_resource_id(),
                r.physical_resource_id(),
                r.resource_type(),
            ) else {
                continue;
            };
            let mut known = BTreeMap::from([("Ref".to_owned(), physical.to_owned())]);
            known.extend(attributes(aws, ty, physical, &buses).await?);
            stage.resources.insert(logical.to_owned(), known);
        }
        Ok(Self {
            template: Template::parse(name, &template)?,
            stage,
        })
    }

    /// One resource property as this deployment resolves it (`Null` where absent, or where a
    /// condition leaves the resource out).
    pub fn property(&self, logical: &str, path: &[&str]) -> Result<Value> {
        self.template.deploy(&self.stage)?.property(logical, path)
    }
}

/// The attributes of a made resource that the templates' documents name.
async fn attributes(
    aws: &Aws,
    ty: &str,
    physical: &str,
    buses: &[String],
) -> Result<Vec<(String, String)>> {
    Ok(match ty {
        "AWS::SQS::Queue" => {
            let out = aws
                .sqs
                .get_queue_attributes()
                .queue_url(physical)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .send()
                .await
                .map_err(|e| anyhow!("GetQueueAttributes {physical}: {}", describe(&e)))?;
            let arn = out
                .attributes()
                .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
                .cloned()
                .with_context(|| format!("{physical} has no QueueArn"))?;
            let queue_name = aws_model::arn::arn_name(&arn).to_owned();
            vec![("Arn".into(), arn), ("QueueName".into(), queue_name)]
        }
        "AWS::Events::Rule" => {
            // A rule on another bus than the default is named with its bus.
            let name = physical.rsplit('|').next().unwrap_or(physical);
            let mut arn = None;
            for bus in buses {
                if let Ok(rule) = aws
                    .events
                    .describe_rule()
                    .name(name)
                    .event_bus_name(bus)
                    .send()
                    .await
                {
                    arn = rule.arn().map(str::to_owned);
                    break;
                }
            }
            let arn = arn.with_context(|| format!("no rule {name} on the stack's buses"))?;
            vec![("Arn".into(), arn)]
        }
        "AWS::IAM::Role" => {
            let out = aws
                .iam
                .get_role()
                .role_name(physical)
                .send()
                .await
                .map_err(|e| anyhow!("GetRole {physical}: {}", describe(&e)))?;
            let arn = out.role().map(|r| r.arn().to_owned()).unwrap_or_default();
            vec![("Arn".into(), arn)]
        }
        "AWS::Events::EventBus" => {
            let out = aws
                .events
                .describe_event_bus()
                .name(physical)
                .send()
                .await
                .map_err(|e| anyhow!("DescribeEventBus {physical}: {}", describe(&e)))?;
            let arn = out.arn().unwrap_or_default().to_owned();
            vec![("Arn".into(), arn), ("Name".into(), physical.to_owned())]
        }
        _ => Vec::new(),
    })
}

/// Every export of the account and region (`Fn::ImportValue`).
async fn exports(aws: &Aws) -> Result<BTreeMap<String, String>> {
    let mut exports = BTreeMap::new();
    let mut next: Option<String> = None;
    loop {
        let out = aws
            .cfn
            .list_exports()
            .set_next_token(next)
            .send()
            .await
            .map_err(|e| anyhow!("ListExports: {}", describe(&e)))?;
        for export in out.exports() {
            if let (Some(name), Some(value)) = (export.name(), export.value()) {
                exports.insert(name.to_owned(), value.to_owned());
            }
        }
        match out.next_token() {
            Some(token) => next = Some(token.to_owned()),
            None => return Ok(exports),
        }
    }
}
