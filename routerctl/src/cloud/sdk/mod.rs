//! The seam's traits over the AWS SDK ([`Cloud`] here; `experiments.rs`, `deliveries.rs`,
//! `moves.rs`, `queries.rs`):
//! one call per method (every page where a call pages), AWS's answer turned into the seam's plain
//! values, and its error into AWS's code and message. The only place routerctl meets the SDK;
//! the SDK's types are named in this file alone (`moves.rs`: adopt's).

mod deliveries;
mod experiments;
mod moves;
mod queries;

use std::{
    collections::{BTreeMap, HashMap},
    time::SystemTime,
};

use aws_call_error::call_error;
use aws_clients::aws::Aws;
use aws_sdk_cloudwatch::{
    primitives::DateTime,
    primitives::DateTime as CwDateTime,
    types::{Dimension, MetricAlarm, Statistic},
};
use aws_sdk_ec2::types::Filter;
use aws_sdk_fis::primitives::DateTime as FisDateTime;
use aws_sdk_lambda::{primitives::Blob, types::InvocationType};
use aws_sdk_sqs::{
    error::ProvideErrorMetadata,
    types::{
        ChangeMessageVisibilityBatchRequestEntry, Message as SqsMessage,
        MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
    },
};

use super::{
    Alarm, CallError, Cloud, Function, Key, Mapping, Message, Reach, ReadError, Role, Rule, Stack,
    Target, Watched, missing,
};

/// The same error under the code the seam names it by (a protocol's other spelling of it).
fn named(mut error: CallError, is: bool, code: &str) -> CallError {
    if is {
        error.code = code.to_owned();
    }
    error
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

fn function_of(dimensions: &[Dimension]) -> Option<String> {
    dimensions
        .iter()
        .find(|d| d.name() == Some("FunctionName"))
        .and_then(|d| d.value())
        .map(str::to_owned)
}

fn alarm(a: &MetricAlarm) -> Alarm {
    let metric = a.metric_name().map(|metric| Watched {
        namespace: a.namespace().unwrap_or_default().to_owned(),
        metric: metric.to_owned(),
        function: function_of(a.dimensions()),
        stat: None,
    });
    let metrics = a
        .metrics()
        .iter()
        .filter_map(|q| q.metric_stat())
        .filter_map(|s| {
            let m = s.metric()?;
            Some(Watched {
                namespace: m.namespace().unwrap_or_default().to_owned(),
                metric: m.metric_name().unwrap_or_default().to_owned(),
                function: function_of(m.dimensions()),
                stat: s.stat().map(str::to_owned),
            })
        })
        .collect();
    Alarm {
        name: a.alarm_name().unwrap_or_default().to_owned(),
        metric,
        metrics,
        actions_enabled: a.actions_enabled(),
        alarm_actions: a.alarm_actions().to_vec(),
        state: a.state_value().map(|s| s.as_str().to_owned()),
    }
}

impl Cloud for Aws {
    fn region(&self) -> &str {
        &self.region
    }

    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    async fn caller(&self) -> Result<(String, String), CallError> {
        let out = self
            .sts
            .get_caller_identity()
            .send()
            .await
            .map_err(call_error)?;
        Ok((
            out.account().unwrap_or_default().to_owned(),
            out.arn().unwrap_or_default().to_owned(),
        ))
    }

    async fn reach(&self, reach: Reach<'_>) -> Result<Self, CallError> {
        let reached = match reach {
            Reach::Assume { role_arn, session } => self.assume_role(role_arn, session).await,
            Reach::Profile(profile) => Aws::load_profile(profile, &self.region).await,
        };
        reached.map_err(|e| CallError::new("Unreachable", format!("{e:#}")))
    }

    async fn stack(&self, name: &str) -> Result<Stack, CallError> {
        let out = self
            .cfn
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .map_err(call_error)?;
        let stack = out.stacks().first().ok_or_else(|| {
            CallError::new(
                missing::STACK,
                format!("Stack with id {name} does not exist"),
            )
        })?;
        Ok(Stack {
            id: stack.stack_id().unwrap_or_default().to_owned(),
            name: stack.stack_name().unwrap_or(name).to_owned(),
            status: stack
                .stack_status()
                .map_or("unknown", |s| s.as_str())
                .to_owned(),
            outputs: stack
                .outputs()
                .iter()
                .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
                .collect(),
            parameters: aws_clients::stacks::parameters(stack),
        })
    }

    async fn stack_resources(&self, stack: &str) -> Result<BTreeMap<String, String>, CallError> {
        aws_clients::aws::read_stack_resources(&self.cfn, stack).await
    }

    async fn stack_of(&self, physical_id: &str) -> Result<Option<String>, CallError> {
        match self
            .cfn
            .describe_stack_resources()
            .physical_resource_id(physical_id)
            .send()
            .await
            .map_err(call_error)
        {
            Ok(out) => Ok(out
                .stack_resources()
                .first()
                .and_then(|r| r.stack_name())
                .map(str::to_owned)),
            Err(e) if e.is_missing_stack() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn queue_url(&self, name: &str) -> Result<String, CallError> {
        match self.sqs.get_queue_url().queue_name(name).send().await {
            Ok(out) => Ok(out.queue_url().unwrap_or_default().to_owned()),
            Err(e) => {
                let gone = e
                    .as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist());
                Err(named(call_error(e), gone, missing::QUEUE))
            }
        }
    }

    async fn queue_attributes(&self, url: &str) -> Result<HashMap<String, String>, CallError> {
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .attributes()
            .map(|a| {
                a.iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn queue_tags(&self, url: &str) -> Result<BTreeMap<String, String>, CallError> {
        let out = self
            .sqs
            .list_queue_tags()
            .queue_url(url)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .tags()
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    async fn queue_urls(&self, prefix: &str) -> Result<Vec<String>, CallError> {
        let mut urls = Vec::new();
        let mut pages = self
            .sqs
            .list_queues()
            .queue_name_prefix(prefix)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            urls.extend(page.map_err(call_error)?.queue_urls().iter().cloned());
        }
        Ok(urls)
    }

    async fn peek(&self, url: &str) -> Result<Vec<Message>, CallError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .wait_time_seconds(1)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .messages()
            .iter()
            .map(|m| Message {
                sent_ms: m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                    .and_then(|t| t.parse().ok()),
            })
            .collect())
    }

    async fn parameter(&self, name: &str) -> Result<String, CallError> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(out) => Ok(out
                .parameter()
                .and_then(|p| p.value())
                .unwrap_or_default()
                .to_owned()),
            Err(e) => Err(call_error(e)),
        }
    }

    async fn rule(&self, name: &str, bus: Option<&str>) -> Result<Rule, CallError> {
        let out = self
            .events
            .describe_rule()
            .name(name)
            .set_event_bus_name(bus.map(str::to_owned))
            .send()
            .await
            .map_err(call_error)?;
        Ok(Rule {
            arn: out.arn().map(str::to_owned),
            state: out.state().map(|s| s.as_str().to_owned()),
            event_pattern: out.event_pattern().map(str::to_owned),
            event_bus_name: out.event_bus_name().map(str::to_owned),
        })
    }

    async fn targets(&self, rule: &str, bus: Option<&str>) -> Result<Vec<Target>, CallError> {
        let out = self
            .events
            .list_targets_by_rule()
            .rule(rule)
            .set_event_bus_name(bus.map(str::to_owned))
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .targets()
            .iter()
            .map(|t| Target {
                id: t.id().to_owned(),
                arn: t.arn().to_owned(),
                role_arn: t.role_arn().map(str::to_owned),
                dead_letter_arn: t
                    .dead_letter_config()
                    .and_then(|d| d.arn())
                    .map(str::to_owned),
            })
            .collect())
    }

    async fn bus_policy(&self, bus: &str) -> Result<Option<String>, CallError> {
        let out = self
            .events
            .describe_event_bus()
            .name(bus)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out.policy().map(str::to_owned))
    }

    async fn function(&self, name: &str) -> Result<Function, CallError> {
        let f = self
            .lambda
            .get_function_configuration()
            .function_name(name)
            .send()
            .await
            .map_err(call_error)?;
        Ok(Function {
            name: f.function_name().unwrap_or(name).to_owned(),
            state: f.state().map(|s| s.as_str().to_owned()),
            state_reason: f.state_reason().map(str::to_owned),
            last_update_status: f.last_update_status().map(|s| s.as_str().to_owned()),
            last_update_status_reason: f.last_update_status_reason().map(str::to_owned),
            role: f.role().map(str::to_owned),
            timeout: f.timeout(),
            environment: f
                .environment()
                .and_then(|e| e.variables())
                .cloned()
                .unwrap_or_default(),
            log_group: f
                .logging_config()
                .and_then(|l| l.log_group())
                .map(str::to_owned),
        })
    }

    async fn mappings(&self, function: &str) -> Result<Vec<Mapping>, CallError> {
        let out = self
            .lambda
            .list_event_source_mappings()
            .function_name(function)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out
            .event_source_mappings()
            .iter()
            .map(|m| Mapping {
                uuid: m.uuid().unwrap_or_default().to_owned(),
                event_source_arn: m.event_source_arn().map(str::to_owned),
                state: m.state().map(str::to_owned),
                function_response_types: m
                    .function_response_types()
                    .iter()
                    .map(|t| t.as_str().to_owned())
                    .collect(),
            })
            .collect())
    }

    async fn role(&self, arn: &str) -> Result<Role, ReadError> {
        aws_clients::roles::load_role(self, arn).await
    }

    async fn key(&self, id: &str) -> Result<Key, ReadError> {
        aws_clients::kms::load_key(self, id).await
    }

    async fn alarms_named(&self, prefix: &str) -> Result<Vec<Alarm>, CallError> {
        let out = self
            .cloudwatch
            .describe_alarms()
            .alarm_name_prefix(prefix)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out.metric_alarms().iter().map(alarm).collect())
    }

    async fn alarms_for_metric(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
    ) -> Result<Vec<Alarm>, CallError> {
        let out = self
            .cloudwatch
            .describe_alarms_for_metric()
            .namespace(namespace)
            .metric_name(metric)
            .dimensions(
                Dimension::builder()
                    .name("FunctionName")
                    .value(function)
                    .build(),
            )
            .send()
            .await
            .map_err(call_error)?;
        Ok(out.metric_alarms().iter().map(alarm).collect())
    }

    async fn dashboard(&self, name: &str) -> Result<String, CallError> {
        match self
            .cloudwatch
            .get_dashboard()
            .dashboard_name(name)
            .send()
            .await
        {
            Ok(d) => Ok(d.dashboard_body().unwrap_or_default().to_owned()),
            Err(e) => {
                let gone = e.as_service_error().is_some_and(|s| {
                    s.is_dashboard_not_found_error() || s.code() == Some("ResourceNotFound")
                });
                Err(named(call_error(e), gone, missing::RESOURCE))
            }
        }
    }

    async fn metric_sum(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
        since: SystemTime,
        until: SystemTime,
    ) -> Result<f64, CallError> {
        let period = until
            .duration_since(since)
            .unwrap_or_default()
            .as_secs()
            .max(60) as i32;
        let out = self
            .cloudwatch
            .get_metric_statistics()
            .namespace(namespace)
            .metric_name(metric)
            .dimensions(
                Dimension::builder()
                    .name("FunctionName")
                    .value(function)
                    .build(),
            )
            .start_time(DateTime::from(since))
            .end_time(DateTime::from(until))
            .period(period)
            .statistics(Statistic::Sum)
            .send()
            .await
            .map_err(call_error)?;
        Ok(out.datapoints().iter().filter_map(|d| d.sum()).sum())
    }

    async fn log_matches(
        &self,
        group: &str,
        pattern: &str,
        since: SystemTime,
        until: SystemTime,
    ) -> Result<bool, CallError> {
        let out = self
            .logs
            .filter_log_events()
            .log_group_name(group)
            .start_time(millis(since))
            .end_time(millis(until))
            .filter_pattern(pattern)
            .limit(1)
            .send()
            .await
            .map_err(call_error)?;
        Ok(!out.events().is_empty())
    }

    async fn subscriptions(&self, topic: &str) -> Result<Vec<String>, CallError> {
        let mut found = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let out = self
                .sns
                .list_subscriptions_by_topic()
                .topic_arn(topic)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(call_error)?;
            found.extend(
                out.subscriptions()
                    .iter()
                    .filter_map(|s| s.subscription_arn().map(str::to_owned)),
            );
            match out.next_token() {
                Some(token) => next = Some(token.to_owned()),
                None => return Ok(found),
            }
        }
    }
}
