//! EventBridge's part of the model: an event put on an account's default bus goes to every
//! ENABLED rule there whose pattern matches it (aws-model's matcher; a rule enabled or disabled
//! less than [`crate::RULE_CHANGE_DELAY`] ago still by its state before), and each rule delivers it
//! to its SQS targets, the event itself as the message body, where the queue's policy admits
//! EventBridge for that rule (`aws:SourceArn`); a refused delivery is lost to the queue, as
//! EventBridge drops it to the rule's dead-letter queue after its retries.

use serde_json::Value;

use super::{World, policy};
use aws_model::{
    arn::arn_name,
    patterns::{Matched, matches},
    policy::{Principal, Request, evaluate},
};

impl World {
    /// Puts `event` on this account's default bus: the queues it was delivered to, by name.
    pub fn publish(&self, event: &Value) -> Vec<String> {
        let now = self.clock();
        let deliveries: Vec<(String, String)> = self.read(|_, site| {
            site.rules
                .iter()
                .filter(|(key, (rule, _))| {
                    // A state changed moments ago is not yet what EventBridge delivers by.
                    let state = match site.rule_lag.get(*key) {
                        Some((applies, before)) if now < *applies => before.as_deref(),
                        _ => rule.state.as_deref(),
                    };
                    key.0 == "default" && state == Some("ENABLED")
                })
                .filter(|(_, (rule, _))| {
                    let pattern = rule
                        .event_pattern
                        .as_deref()
                        .and_then(|p| serde_json::from_str::<Value>(p).ok());
                    pattern.is_some_and(|p| matches!(matches(&p, event), Matched::Yes))
                })
                .flat_map(|(_, (rule, targets))| {
                    let arn = rule.arn.clone().unwrap_or_default();
                    targets
                        .iter()
                        .filter(|t| t.arn.contains(":sqs:"))
                        .map(move |t| (arn.clone(), t.arn.clone()))
                })
                .collect()
        });
        let body = event.to_string();
        let mut delivered = Vec::new();
        for (rule, queue_arn) in deliveries {
            let queue = arn_name(&queue_arn).to_owned();
            if self.admits_rule(&queue, &queue_arn, &rule) && self.deliver(&queue, &body) {
                delivered.push(queue);
            }
        }
        delivered
    }

    /// Whether queue `queue`'s policy lets EventBridge send for rule `rule` (no policy: only
    /// the queue's own account's principals may send, and EventBridge is not one).
    fn admits_rule(&self, queue: &str, queue_arn: &str, rule: &str) -> bool {
        let text = self.read(|_, site| {
            site.queues
                .get(queue)
                .and_then(|q| q.attributes.get("Policy").cloned())
        });
        let Some(text) = text else {
            return false;
        };
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        let Ok(queue_policy) = policy("queue policy", &parsed) else {
            return false;
        };
        let account = self.account().to_owned();
        let context = [
            ("aws:SourceArn", rule),
            ("aws:SourceAccount", account.as_str()),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(&queue_policy),
            &Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "sqs:SendMessage",
                resource: queue_arn,
                context: &context,
            },
        )
        .is_allowed()
    }
}
