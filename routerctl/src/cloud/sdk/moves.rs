//! [`Moves`] over the SDK: CloudFormation (deploys through [`aws_model::stacks`], which waits as
//! CloudFormation's waiter does), EventBridge, SQS, IAM, CloudWatch.

use std::{collections::BTreeMap, time::SystemTime};

use aws_clients::aws::Aws;

use super::{
    ChangeMessageVisibilityBatchRequestEntry, CwDateTime, Dimension, MessageSystemAttributeName,
    SqsMessage, Statistic, call_error,
};
use crate::cloud::{
    CallError,
    moves::{DeployError, ListedRule, Moves, Received},
};

impl Moves for Aws {
    async fn create_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> Result<BTreeMap<String, String>, DeployError> {
        Ok(
            aws_clients::stacks::create(&self.cfn, name, template, parameters)
                .await?
                .outputs,
        )
    }

    async fn update_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> Result<(), DeployError> {
        aws_clients::stacks::update(&self.cfn, name, template, parameters).await?;
        Ok(())
    }

    async fn active_stacks(&self) -> Result<Vec<String>, CallError> {
        let mut found = Vec::new();
        let mut pages = self.cfn.list_stacks().into_paginator().send();
        while let Some(page) = pages.next().await {
            found.extend(
                page.map_err(call_error)?
                    .stack_summaries()
                    .iter()
                    .filter(|s| {
                        s.stack_status()
                            .is_some_and(|st| !st.as_str().starts_with("DELETE_COMPLETE"))
                    })
                    .filter_map(|s| s.stack_name().map(str::to_owned)),
            );
        }
        Ok(found)
    }

    async fn listed_resources(&self, stack: &str) -> Result<Vec<(String, String)>, CallError> {
        let mut found = Vec::new();
        let mut pages = self
            .cfn
            .list_stack_resources()
            .stack_name(stack)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            found.extend(
                page.map_err(call_error)?
                    .stack_resource_summaries()
                    .iter()
                    .filter_map(|r| {
                        Some((
                            r.logical_resource_id()?.to_owned(),
                            r.physical_resource_id()?.to_owned(),
                        ))
                    }),
            );
        }
        Ok(found)
    }

    async fn template_body(&self, stack: &str) -> Result<String, CallError> {
        let out = self
            .cfn
            .get_template()
            .stack_name(stack)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out.template_body().unwrap_or_default().to_owned())
    }

    async fn default_bus_rules(&self) -> Result<Vec<ListedRule>, CallError> {
        let mut found = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let out = self
                .events
                .list_rules()
                .set_next_token(next.take())
                .send()
                .await
                .map_err(call_error)?;
            found.extend(out.rules().iter().map(|r| ListedRule {
                name: r.name().unwrap_or_default().to_owned(),
                arn: r.arn().unwrap_or_default().to_owned(),
                state: r.state().map(|s| s.as_str().to_owned()),
                event_pattern: r.event_pattern().map(str::to_owned),
            }));
            match out.next_token() {
                Some(token) => next = Some(token.to_owned()),
                None => return Ok(found),
            }
        }
    }

    async fn rule_tags(&self, arn: &str) -> Result<BTreeMap<String, String>, CallError> {
        let out = self
            .events
            .list_tags_for_resource()
            .resource_arn(arn)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .tags()
            .iter()
            .map(|t| (t.key().to_owned(), t.value().to_owned()))
            .collect())
    }

    async fn enable_rule(&self, name: &str) -> Result<(), CallError> {
        self.events
            .enable_rule()
            .name(name)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn disable_rule(&self, name: &str) -> Result<(), CallError> {
        self.events
            .disable_rule()
            .name(name)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn remove_target(&self, rule: &str, id: &str) -> Result<(), CallError> {
        self.events
            .remove_targets()
            .rule(rule)
            .ids(id)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn delete_rule(&self, name: &str) -> Result<(), CallError> {
        self.events
            .delete_rule()
            .name(name)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn every_queue(&self) -> Result<Vec<String>, CallError> {
        let mut urls = Vec::new();
        let mut pages = self
            .sqs
            .list_queues()
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            urls.extend(page.map_err(call_error)?.queue_urls().iter().cloned());
        }
        Ok(urls)
    }

    async fn send_message(&self, url: &str, body: &str) -> Result<(), CallError> {
        self.sqs
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn receive(&self, url: &str, hide_secs: i32) -> Result<Vec<Received>, CallError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(hide_secs)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await
            .map_err(call_error)?;
        let attribute = |m: &SqsMessage, name: MessageSystemAttributeName| {
            m.attributes()?.get(&name)?.parse().ok()
        };
        Ok(out
            .messages()
            .iter()
            .map(|m| Received {
                message_id: m.message_id().unwrap_or_default().to_owned(),
                body: m.body().unwrap_or_default().to_owned(),
                receipt_handle: m.receipt_handle().unwrap_or_default().to_owned(),
                receive_count: attribute(m, MessageSystemAttributeName::ApproximateReceiveCount),
                sent_ms: attribute(m, MessageSystemAttributeName::SentTimestamp),
            })
            .collect())
    }

    async fn release(&self, url: &str, handles: &[String]) -> Result<(), CallError> {
        let entries = handles
            .iter()
            .enumerate()
            .filter_map(|(n, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(n.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            })
            .collect();
        self.sqs
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn delete_message(&self, url: &str, handle: &str) -> Result<(), CallError> {
        self.sqs
            .delete_message()
            .queue_url(url)
            .receipt_handle(handle)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn delete_queue(&self, url: &str) -> Result<(), CallError> {
        self.sqs
            .delete_queue()
            .queue_url(url)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn tag_queue(&self, url: &str, key: &str, value: &str) -> Result<(), CallError> {
        self.sqs
            .tag_queue()
            .queue_url(url)
            .tags(key, value)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn untag_queue(&self, url: &str, key: &str) -> Result<(), CallError> {
        self.sqs
            .untag_queue()
            .queue_url(url)
            .tag_keys(key)
            .send()
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn role_names(&self) -> Result<Vec<String>, CallError> {
        let mut names = Vec::new();
        let mut pages = self.iam.list_roles().into_paginator().send();
        while let Some(page) = pages.next().await {
            names.extend(
                page.map_err(call_error)?
                    .roles()
                    .iter()
                    .map(|r| r.role_name().to_owned()),
            );
        }
        Ok(names)
    }

    async fn queue_metric(
        &self,
        queue: &str,
        metric: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<Vec<(u64, f64)>, CallError> {
        let out = self
            .cloudwatch
            .get_metric_statistics()
            .namespace("AWS/SQS")
            .metric_name(metric)
            .dimensions(Dimension::builder().name("QueueName").value(queue).build())
            .start_time(CwDateTime::from(from))
            .end_time(CwDateTime::from(to))
            .period(60)
            .statistics(Statistic::Sum)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .datapoints()
            .iter()
            .filter_map(|d| Some((u64::try_from(d.timestamp()?.secs()).ok()?, d.sum()?)))
            .collect())
    }
}
