//! What a test makes in the world by hand, outside any stack (an instance, a queue, a rule, a
//! function's answers, an experiment template, a log line), and the model's reads of log groups
//! and rule states the services' adapters answer from.

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use super::{Responder, World, missing, not_found, uuid_like};
use crate::{
    CallError, Capacity, Described, ExperimentTemplate, Invoked, LogEvent, ModelInstance, Rule,
    Target,
};

/// How long after a minute ends the model's CloudWatch has SQS's datapoint of it: the one figure
/// the emulator's stand-in plays too (`lab`'s `Scene::metric_delay`).
pub use aws_model::timing::SQS_METRIC_LAG as METRIC_LAG;

/// How long after EnableRule or DisableRule the model's EventBridge still delivers by the rule's
/// old state: the one figure the emulator's stand-in plays too (`lab`'s `Scene::rule_delay`).
pub use aws_model::timing::RULE_CHANGE_DELAY;

/// Milliseconds since the epoch.
pub fn millis(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

/// FilterLogEvents' quoted term (or a bare word): the text a message must contain.
fn term(pattern: &str) -> &str {
    pattern.trim().trim_matches('"')
}

impl World {
    /// The events of log group `group` between `from` and `to` (ms) whose message holds
    /// `pattern`'s term.
    pub fn logged(
        &self,
        group: &str,
        pattern: &str,
        from: i64,
        to: i64,
    ) -> Result<Vec<LogEvent>, CallError> {
        self.read(|_, site| {
            let events = site.logs.get(group).ok_or_else(|| {
                CallError::new(missing::RESOURCE, "The specified log group does not exist.")
            })?;
            Ok(events
                .iter()
                .filter(|(at, message)| (from..=to).contains(at) && message.contains(term(pattern)))
                .cloned()
                .collect())
        })
    }

    /// A line written to log group `group` now.
    pub fn log(&self, group: &str, message: &str) {
        let at = millis(self.clock());
        self.site(|site| {
            site.logs
                .entry(group.to_owned())
                .or_default()
                .push((at, message.to_owned()))
        });
    }

    /// An EC2 instance of this account and region, in `state`, with these tags: an On-Demand
    /// m5.large in the region's first zone, as the emulator launches one by default.
    pub fn instance(&self, id: &str, state: &str, tags: &[(&str, &str)]) {
        let described = Described {
            instance_type: "m5.large".into(),
            zone: format!("{}a", self.region()),
            capacity: Capacity::OnDemand,
        };
        self.instance_described(id, state, tags, described);
    }

    /// An EC2 instance as [`World::instance`] makes it, of the type, in the zone and bought as
    /// `described` says.
    pub fn instance_described(
        &self,
        id: &str,
        state: &str,
        tags: &[(&str, &str)],
        described: Described,
    ) {
        let tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let instance = ModelInstance {
            state: state.to_owned(),
            tags,
            described,
        };
        self.site(|site| site.instances.insert(id.to_owned(), instance));
    }

    /// A queue made by hand (not by a stack), with these attributes: its URL.
    pub fn create_queue(&self, name: &str, attributes: &[(&str, &str)]) -> String {
        let url = format!(
            "https://sqs.{}.amazonaws.com/{}/{name}",
            self.region(),
            self.account()
        );
        let arn = format!("arn:aws:sqs:{}:{}:{name}", self.region(), self.account());
        let created = (millis(self.clock()) / 1000).to_string();
        let mut queue = super::ModelQueue {
            url: url.clone(),
            ..Default::default()
        };
        for (key, value) in [
            ("QueueArn", arn.as_str()),
            ("CreatedTimestamp", created.as_str()),
            ("VisibilityTimeout", "30"),
            ("MessageRetentionPeriod", "345600"),
            ("SqsManagedSseEnabled", "true"),
        ]
        .into_iter()
        .chain(attributes.iter().copied())
        {
            queue.attributes.insert(key.to_owned(), value.to_owned());
        }
        self.site(|site| site.queues.insert(name.to_owned(), queue));
        url
    }

    /// A rule made by hand on the default bus, enabled, with `pattern` and these targets
    /// (id, ARN).
    pub fn put_rule(&self, name: &str, pattern: &serde_json::Value, targets: &[(&str, &str)]) {
        let arn = format!(
            "arn:aws:events:{}:{}:rule/{name}",
            self.region(),
            self.account()
        );
        let rule = Rule {
            arn: Some(arn),
            state: Some("ENABLED".into()),
            event_pattern: Some(pattern.to_string()),
            event_bus_name: Some("default".into()),
        };
        let targets = targets
            .iter()
            .map(|(id, arn)| Target {
                id: id.to_string(),
                arn: arn.to_string(),
                role_arn: None,
                dead_letter_arn: None,
            })
            .collect();
        self.site(|site| {
            site.rules
                .insert(("default".into(), name.to_owned()), (rule, targets))
        });
    }

    /// A message put into queue `queue` by a principal its policy admits (the router's role
    /// delivering to a tenant queue); `false` when there is no such queue.
    pub fn deliver(&self, queue: &str, body: &str) -> bool {
        let now = self.clock();
        self.site(|site| {
            let Some(q) = site.queues.get_mut(queue) else {
                return false;
            };
            let id = uuid_like(&format!("{queue}{}{body}", q.messages.len()));
            q.messages.send(super::ModelMessage::new(id, body), now);
            true
        })
    }

    /// Function `name` answers every synchronous invocation with `answer(payload)`.
    pub fn function(&self, name: &str, answer: impl Fn(&str) -> Invoked + Send + Sync + 'static) {
        self.function_async(name, move |payload| {
            let answered = answer(&payload);
            Box::pin(async move { answered })
        });
    }

    /// Function `name` answers every synchronous invocation with what `answer(payload)` comes to
    /// (a handler that calls AWS in turn: [`crate::router::run_router`]).
    pub fn function_async(
        &self,
        name: &str,
        answer: impl Fn(String) -> futures_util::future::BoxFuture<'static, Invoked>
        + Send
        + Sync
        + 'static,
    ) {
        let key = (self.account.clone(), self.region.clone(), name.to_owned());
        self.lock()
            .functions
            .insert(key, Responder(Arc::new(answer)));
    }

    /// What function `function` (its name, or its ARN) of this view's account and region answers
    /// invocations with, if a test made it answer.
    pub fn responder(&self, function: &str) -> Option<Responder> {
        let name = function
            .strip_prefix("arn:")
            .and_then(|arn| arn.rsplit(":function:").next())
            .map_or(function, |rest| rest.split(':').next().unwrap_or(rest));
        let key = (self.account.clone(), self.region.clone(), name.to_owned());
        self.lock().functions.get(&key).cloned()
    }

    /// An experiment template of FIS with these tags.
    pub fn put_experiment_template(
        &self,
        id: &str,
        tags: &[(&str, &str)],
        template: ExperimentTemplate,
    ) {
        let tags = tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.site(|site| {
            site.experiment_templates
                .insert(id.to_owned(), (tags, template))
        });
    }
}

impl World {
    /// ENABLE or DISABLE a rule of the default bus.
    /// EventBridge delivers by the new state [`RULE_CHANGE_DELAY`] later.
    pub fn set_rule_state(&self, name: &str, state: &str) -> Result<(), CallError> {
        let key = ("default".to_owned(), name.to_owned());
        let applies = self.clock() + RULE_CHANGE_DELAY;
        self.site(|site| {
            let (rule, _) = site
                .rules
                .get_mut(&key)
                .ok_or_else(|| not_found(&format!("Rule {name}")))?;
            let before = rule.state.replace(state.to_owned());
            if before.as_deref() != Some(state) {
                site.rule_lag.insert(key, (applies, before));
            }
            Ok(())
        })
    }
}
