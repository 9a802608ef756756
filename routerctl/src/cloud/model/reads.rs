//! [`Cloud`] on the model: what verify reads, answered from the world's state as AWS answers.

use std::{
    collections::{BTreeMap, HashMap},
    time::SystemTime,
};

use super::{World, millis, not_found, policy};
use crate::cloud::{
    Alarm, CallError, Cloud, Function, Key, Mapping, Message, Reach, ReadError, Role, Rule, Stack,
    Target, missing,
};
use aws_model::arn::arn_name_after_slash;

impl Cloud for World {
    fn region(&self) -> &str {
        World::region(self)
    }

    fn now(&self) -> SystemTime {
        self.clock()
    }

    async fn caller(&self) -> Result<(String, String), CallError> {
        self.gate("GetCallerIdentity")?;
        Ok((self.account().to_owned(), World::caller(self).to_owned()))
    }

    async fn reach(&self, reach: Reach<'_>) -> Result<Self, CallError> {
        match reach {
            Reach::Profile(name) => self.profiled(name),
            Reach::Assume { role_arn, session } => self.assume_role(role_arn, session),
        }
    }

    async fn stack(&self, name: &str) -> Result<Stack, CallError> {
        self.gate("DescribeStacks")?;
        self.read(|_, site| site.stacks.get(name).map(|s| s.stack.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::STACK,
                    format!("Stack with id {name} does not exist"),
                )
            })
    }

    async fn stack_resources(&self, stack: &str) -> Result<BTreeMap<String, String>, CallError> {
        self.gate("DescribeStackResources")?;
        self.read(|_, site| site.stacks.get(stack).map(|s| s.resources.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::STACK,
                    format!("Stack with id {stack} does not exist"),
                )
            })
    }

    async fn stack_of(&self, physical_id: &str) -> Result<Option<String>, CallError> {
        self.gate("DescribeStackResources")?;
        Ok(self.read(|_, site| {
            site.stacks
                .iter()
                .find(|(_, s)| s.resources.values().any(|p| p == physical_id))
                .map(|(name, _)| name.clone())
        }))
    }

    async fn queue_url(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetQueueUrl")?;
        self.read(|_, site| site.queues.get(name).map(|q| q.url.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::QUEUE,
                    "The specified queue does not exist for this wsdl version.",
                )
            })
    }

    async fn queue_attributes(&self, url: &str) -> Result<HashMap<String, String>, CallError> {
        self.gate("GetQueueAttributes")?;
        let now = self.now();
        self.with_queue(url, |queue| {
            let visible = queue.messages.visible(now);
            let mut attributes = queue.attributes.clone();
            for (name, count) in [
                ("ApproximateNumberOfMessages", visible),
                (
                    "ApproximateNumberOfMessagesNotVisible",
                    queue.messages.len() - visible,
                ),
                ("ApproximateNumberOfMessagesDelayed", 0),
            ] {
                attributes.insert(name.to_owned(), count.to_string());
            }
            attributes
        })
    }

    async fn queue_tags(&self, url: &str) -> Result<BTreeMap<String, String>, CallError> {
        self.gate("ListQueueTags")?;
        self.with_queue(url, |queue| queue.tags.clone())
    }

    async fn queue_urls(&self, prefix: &str) -> Result<Vec<String>, CallError> {
        self.gate("ListQueues")?;
        Ok(self.read(|_, site| {
            site.queues
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(_, q)| q.url.clone())
                .collect()
        }))
    }

    async fn peek(&self, url: &str) -> Result<Vec<Message>, CallError> {
        self.gate("ReceiveMessage")?;
        let received = self.sqs_receive(url, 0)?;
        Ok(received
            .iter()
            .map(|m| Message { sent_ms: m.sent_ms })
            .collect())
    }

    async fn parameter(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetParameter")?;
        self.read(|_, site| site.parameters.get(name).cloned())
            .ok_or_else(|| CallError::new(missing::PARAMETER, ""))
    }

    async fn rule(&self, name: &str, bus: Option<&str>) -> Result<Rule, CallError> {
        self.gate("DescribeRule")?;
        if name.contains('|') {
            return Err(CallError::new(
                "ValidationException",
                format!(
                    "1 validation error detected: Value '{name}' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+"
                ),
            ));
        }
        let key = (bus.unwrap_or("default").to_owned(), name.to_owned());
        self.read(|_, site| site.rules.get(&key).map(|(rule, _)| rule.clone()))
            .ok_or_else(|| not_found(&format!("Rule {name}")))
    }

    async fn targets(&self, rule: &str, bus: Option<&str>) -> Result<Vec<Target>, CallError> {
        self.gate("ListTargetsByRule")?;
        let key = (bus.unwrap_or("default").to_owned(), rule.to_owned());
        self.read(|_, site| site.rules.get(&key).map(|(_, targets)| targets.clone()))
            .ok_or_else(|| not_found(&format!("Rule {rule}")))
    }

    async fn bus_policy(&self, bus: &str) -> Result<Option<String>, CallError> {
        self.gate("DescribeEventBus")?;
        self.read(|_, site| site.buses.get(bus).cloned())
            .ok_or_else(|| not_found(&format!("Event bus {bus}")))
    }

    async fn function(&self, name: &str) -> Result<Function, CallError> {
        self.gate("GetFunctionConfiguration")?;
        self.read(|_, site| site.functions.get(name).cloned())
            .ok_or_else(|| not_found(&format!("Function not found: {name}")))
    }

    async fn mappings(&self, function: &str) -> Result<Vec<Mapping>, CallError> {
        self.gate("ListEventSourceMappings")?;
        Ok(self.read(|_, site| site.mappings.get(function).cloned().unwrap_or_default()))
    }

    async fn role(&self, arn: &str) -> Result<Role, ReadError> {
        let name = arn_name_after_slash(arn);
        self.gate("GetRole")
            .map_err(|e| ReadError::call(format!("GetRole {name}"), e))?;
        let state = self.lock();
        let role = state.roles.get(arn).ok_or_else(|| {
            ReadError::call(
                format!("GetRole {name}"),
                CallError::new(
                    missing::ROLE,
                    format!("The role with name {name} cannot be found."),
                ),
            )
        })?;
        let managed_policy = |arn: &str| {
            let doc = state.policies.get(arn).ok_or_else(|| {
                ReadError::call(
                    format!("GetPolicy {arn}"),
                    CallError::new(missing::ROLE, format!("Policy {arn} was not found.")),
                )
            })?;
            policy(
                &format!("managed policy {}", arn_name_after_slash(arn)),
                doc,
            )
            .map_err(ReadError::Unreadable)
        };
        let mut identity = Vec::new();
        for (policy_name, doc) in &role.inline {
            identity.push(
                policy(&format!("inline policy {policy_name}"), doc)
                    .map_err(ReadError::Unreadable)?,
            );
        }
        for managed in &role.managed {
            identity.push(managed_policy(managed)?);
        }
        let boundary = role.boundary.as_deref().map(managed_policy).transpose()?;
        Ok(Role::new(
            arn,
            identity,
            boundary,
            policy(&format!("trust policy of {name}"), &role.trust),
        ))
    }

    async fn key(&self, id: &str) -> Result<Key, ReadError> {
        self.gate("DescribeKey")
            .map_err(|e| ReadError::call(format!("DescribeKey {id}"), e))?;
        let state = self.lock();
        let key = state
            .keys
            .values()
            .find(|k| k.arn == id || k.arn.ends_with(&format!(":key/{id}")))
            .ok_or_else(|| {
                ReadError::call(
                    format!("DescribeKey {id}"),
                    CallError::new("NotFoundException", format!("Key '{id}' does not exist")),
                )
            })?;
        Ok(Key {
            arn: key.arn.clone(),
            aws_managed: key.aws_managed,
            disabled: (!key.enabled).then(|| "Disabled".to_owned()),
            policy: policy(&format!("key policy of {}", key.arn), &key.policy)
                .map_err(ReadError::Unreadable)?,
        })
    }

    async fn alarms_named(&self, prefix: &str) -> Result<Vec<Alarm>, CallError> {
        self.gate("DescribeAlarms")?;
        Ok(self.read(|_, site| {
            site.alarms
                .iter()
                .filter(|a| a.name.starts_with(prefix))
                .cloned()
                .collect()
        }))
    }

    async fn alarms_for_metric(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
    ) -> Result<Vec<Alarm>, CallError> {
        self.gate("DescribeAlarmsForMetric")?;
        Ok(self.read(|_, site| {
            site.alarms
                .iter()
                .filter(|a| {
                    a.metric.as_ref().is_some_and(|w| {
                        w.namespace == namespace
                            && w.metric == metric
                            && w.function.as_deref() == Some(function)
                    })
                })
                .cloned()
                .collect()
        }))
    }

    async fn dashboard(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetDashboard")?;
        self.read(|_, site| site.dashboards.get(name).cloned())
            .ok_or_else(|| not_found(&format!("Dashboard {name}")))
    }

    async fn metric_sum(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
        _since: SystemTime,
        _until: SystemTime,
    ) -> Result<f64, CallError> {
        self.gate("GetMetricStatistics")?;
        if (namespace, metric) != ("AWS/Lambda", "Invocations") {
            return Ok(0.0);
        }
        Ok(self.read(|_, site| site.invocations.get(function).copied().unwrap_or(0.0)))
    }

    async fn log_matches(
        &self,
        group: &str,
        pattern: &str,
        since: SystemTime,
        until: SystemTime,
    ) -> Result<bool, CallError> {
        self.gate("FilterLogEvents")?;
        Ok(!self
            .logged(group, pattern, millis(since), millis(until))?
            .is_empty())
    }

    async fn subscriptions(&self, topic: &str) -> Result<Vec<String>, CallError> {
        self.gate("ListSubscriptionsByTopic")?;
        Ok(self.read(|_, site| site.subscriptions.get(topic).cloned().unwrap_or_default()))
    }
}
