//! EventBridge's default bus as AWS runs it, played from the rules the emulator holds: each event
//! goes to the SQS targets of every rule that is ENABLED as far as delivery goes and whose
//! pattern matches it, and to nothing else.
//!
//! moto 5.2.5 stores rules faithfully but also delivers to DISABLED ones, and drops the event's
//! `account` from what it delivers. `routerctl adopt` disables old rules to cut an old queue off,
//! so a test of it through moto's delivery would pass even if adopt disabled them too early.
//! This stand-in reads the rules (ListRules, ListTargetsByRule) and matches patterns with
//! [`aws_model::patterns`], EventBridge's matching. It reads them at most once every
//! [`LOOK_EVERY`], not on every event: a scene streams several events a second, and reading some
//! ten rules and their targets for each one kept the emulator busier than everything else in it.
//!
//! A rule's state change (EnableRule, DisableRule, a new or deleted rule) reaches delivery only
//! `delay` after the stand-in first sees it, so between `delay` and `delay` + [`LOOK_EVERY`] after
//! it was made: EventBridge says such changes "might not take effect immediately; allow a short
//! period of time" (API reference, EnableRule and DisableRule), so a command that counts on a rule
//! the moment it was changed misses events here as it would there. A target removed or added
//! reaches delivery within [`LOOK_EVERY`].
//!
//! A rule may also target another event bus (spoke.yaml's rules forward to the hub's central bus,
//! in another account and, for a member region without a hub, another region): the event goes on
//! to that bus's own stand-in ([`DefaultBus::forwarding_to`]), unchanged (EventBridge keeps its
//! account and region), whose rules deliver it in turn. Targets that transform the input, buses the
//! stand-in was not given, and targets other than SQS queues and buses are refused rather than
//! delivered differently from AWS.
//!
//! A rule may target a queue of another account (spoke.yaml's direct rules write the hub's direct
//! queue), as EventBridge's user guide describes it ("Sending events to an AWS service in another
//! account"): in the same region only, through the target's execution role (RoleArn) of the rule's
//! account, which EventBridge assumes as `events.amazonaws.com` for this rule (its trust policy
//! decides, with `aws:SourceArn` and `aws:SourceAccount`); the send is then the role's, judged by
//! the role's own policies and the queue's policy (and the queue's key, if it has one) as IAM
//! judges a cross-account request: both must allow it. What is refused is not delivered (AWS
//! counts a failed invocation, retries, and drops it or dead-letters it on the rule's queue). The
//! stand-in judges with aws-model's evaluator, since moto evaluates no policy; it sends as the
//! role, so SQS names the role's session as the message's SenderId ([`crate::moto`]'s fixes).
//! The queue's account's clients are given with [`DefaultBus::reaching`].

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use aws_sdk_eventbridge::types::{Rule, RuleState, Target};
use serde_json::Value;
use tokio::sync::Mutex;

use aws_clients::{
    aws::{Aws, bus_rules, describe},
    roles::load_role,
};
use aws_model::{
    access::{ResourcePolicy, authorize_role, role_through_sqs},
    arn::arn_account,
    arn::arn_name,
    patterns::{Matched, matches},
    policy::{Policy, Principal as PolicyPrincipal, Request, evaluate},
};
use aws_sdk_sqs::types::QueueAttributeName;

pub struct DefaultBus {
    aws: Aws,
    /// The bus's name; `None`: the account's default bus.
    bus: Option<String>,
    /// Buses its rules may target (by ARN), each played by its own stand-in.
    forwards: HashMap<String, Arc<DefaultBus>>,
    /// Clients of the accounts whose queues its rules may target, by account id.
    reaches: HashMap<String, Aws>,
    /// Clients acting as each execution role EventBridge assumed, by role ARN.
    assumed: Mutex<HashMap<String, Aws>>,
    /// Deliveries to another account refused, and why (AWS counts them as failed invocations).
    refused: Mutex<Vec<String>>,
    /// Queue ARN → URL.
    urls: Mutex<HashMap<String, String>>,
    delay: Duration,
    /// Per rule: whether delivery treats it as enabled, and a change on its way (the new state,
    /// and when the stand-in first saw it).
    states: Mutex<HashMap<String, RuleDelivery>>,
    /// The last ListRules, and when it was read.
    rules: Mutex<Option<(Instant, Vec<Rule>)>>,
    /// Per rule, its last ListTargetsByRule, and when it was read.
    targets: Mutex<HashMap<String, (Instant, Vec<Target>)>>,
}

/// How often the stand-in reads the rules and a rule's targets again.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct RuleDelivery {
    enabled: bool,
    pending: Option<(bool, Instant)>,
}

impl DefaultBus {
    /// A bus on which rule state changes take effect after `delay`. The rules that exist now
    /// take effect as they are.
    pub async fn new(aws: &Aws, delay: Duration) -> Result<Self> {
        Self::of(aws, None, delay).await
    }

    /// The event bus `name` of `aws`'s account and region (base.yaml's central bus), as
    /// [`DefaultBus::new`] plays the default one.
    pub async fn on_bus(aws: &Aws, name: &str, delay: Duration) -> Result<Self> {
        Self::of(aws, Some(name.to_owned()), delay).await
    }

    /// This bus, whose rules may also target queues of `owner`'s account `account`.
    pub fn reaching(mut self, account: &str, owner: &Aws) -> Self {
        self.reaches.insert(account.to_owned(), owner.clone());
        self
    }

    /// This bus, whose rules may also target the bus `arn`, played by `bus`.
    pub fn forwarding_to(mut self, arn: &str, bus: Arc<DefaultBus>) -> Self {
        self.forwards.insert(arn.to_owned(), bus);
        self
    }

    async fn of(aws: &Aws, bus: Option<String>, delay: Duration) -> Result<Self> {
        let states = bus_rules(aws, bus.as_deref())
            .await?
            .iter()
            .filter_map(|r| {
                let enabled = r.state() == Some(&RuleState::Enabled);
                Some((
                    r.name()?.to_owned(),
                    RuleDelivery {
                        enabled,
                        pending: None,
                    },
                ))
            })
            .collect();
        Ok(Self {
            aws: aws.clone(),
            bus,
            forwards: HashMap::new(),
            reaches: HashMap::new(),
            assumed: Mutex::default(),
            refused: Mutex::default(),
            urls: Mutex::default(),
            delay,
            states: Mutex::new(states),
            rules: Mutex::default(),
            targets: Mutex::default(),
        })
    }

    /// Whether delivery treats each rule as enabled now, given what ListRules says (a rule not
    /// listed is deleted): a change counts `delay` after it was first seen.
    async fn delivering(
        &self,
        rules: &[aws_sdk_eventbridge::types::Rule],
    ) -> HashMap<String, bool> {
        let now = Instant::now();
        let mut states = self.states.lock().await;
        let listed: HashMap<String, bool> = rules
            .iter()
            .filter_map(|r| Some((r.name()?.to_owned(), r.state() == Some(&RuleState::Enabled))))
            .collect();
        let names: Vec<String> = states.keys().chain(listed.keys()).cloned().collect();
        for name in names {
            let wanted = listed.get(&name).copied().unwrap_or(false);
            let seen = states.entry(name).or_insert(RuleDelivery {
                enabled: false,
                pending: None,
            });
            if wanted == seen.enabled {
                seen.pending = None;
                continue;
            }
            let since = match seen.pending {
                Some((target, since)) if target == wanted => since,
                _ => {
                    seen.pending = Some((wanted, now));
                    now
                }
            };
            if now.duration_since(since) >= self.delay {
                seen.enabled = wanted;
                seen.pending = None;
            }
        }
        states.iter().map(|(n, s)| (n.clone(), s.enabled)).collect()
    }

    /// Delivers `event` as the bus would; the queues (ARNs) it reached, one per matching rule
    /// target (through the buses it forwards to, theirs).
    pub async fn put(&self, event: &Value) -> Result<Vec<String>> {
        let mut delivered = Vec::new();
        let rules = self.rules().await?;
        let delivering = self.delivering(&rules).await;
        for rule in rules {
            let name = rule.name().unwrap_or_default();
            if !delivering.get(name).copied().unwrap_or(false) {
                continue;
            }
            let (Some(name), Some(pattern)) = (rule.name(), rule.event_pattern()) else {
                continue;
            };
            let pattern: Value = serde_json::from_str(pattern)
                .with_context(|| format!("rule {name}: pattern is not JSON"))?;
            match matches(&pattern, event) {
                Matched::Yes => {}
                Matched::No => continue,
                Matched::Unknown(why) => bail!("rule {name}: {why}"),
            }
            for target in self.targets(name).await? {
                if target.input().is_some()
                    || target.input_path().is_some()
                    || target.input_transformer().is_some()
                {
                    bail!("rule {name}: the stand-in does not transform input");
                }
                if target.arn().contains(":event-bus/") {
                    let Some(bus) = self.forwards.get(target.arn()) else {
                        bail!(
                            "rule {name}: the stand-in was given no bus {}",
                            target.arn()
                        );
                    };
                    delivered.extend(Box::pin(bus.put(event)).await?);
                    continue;
                }
                if !target.arn().contains(":sqs:") {
                    bail!("rule {name}: the stand-in delivers to SQS queues and buses only");
                }
                let rule_arn = rule.arn().unwrap_or_default();
                if arn_account(target.arn()) != arn_account(rule_arn) {
                    if self.deliver_across(name, rule_arn, &target, event).await? {
                        delivered.push(target.arn().to_owned());
                    }
                    continue;
                }
                if self.send(target.arn(), event).await? {
                    delivered.push(target.arn().to_owned());
                }
            }
        }
        Ok(delivered)
    }

    /// Delivers `event` to a queue of another account through the target's execution role, if
    /// EventBridge may assume it for this rule and IAM lets it send there; `false` if refused.
    async fn deliver_across(
        &self,
        name: &str,
        rule_arn: &str,
        target: &Target,
        event: &Value,
    ) -> Result<bool> {
        let queue = target.arn();
        let region = queue.split(':').nth(3).unwrap_or_default();
        if region != self.aws.region {
            bail!(
                "rule {name}: EventBridge delivers to another account's queue only in its own region ({}), not {queue}",
                self.aws.region
            );
        }
        let Some(role_arn) = target.role_arn() else {
            bail!("rule {name}: a target in another account needs an execution role (RoleArn)");
        };
        let owner_account = arn_account(queue).unwrap_or_default();
        let Some(owner) = self.reaches.get(owner_account) else {
            bail!("rule {name}: the stand-in was given no clients of account {owner_account}");
        };
        let rule_account = arn_account(rule_arn).unwrap_or_default();
        let role = load_role(&self.aws, role_arn)
            .await
            .map_err(|e| anyhow::anyhow!("rule {name}: {e}"))?;
        let trust = role
            .trust
            .as_ref()
            .map_err(|e| anyhow::anyhow!("rule {name}: {e}"))?;
        let assume = evaluate(
            std::slice::from_ref(trust),
            &Request {
                principal: PolicyPrincipal::Service("events.amazonaws.com"),
                action: "sts:AssumeRole",
                resource: role_arn,
                context: &[
                    ("aws:SourceArn", rule_arn),
                    ("aws:SourceAccount", rule_account),
                ],
            },
        );
        if !assume.is_allowed() {
            self.refuse(format!(
                "rule {name}: EventBridge may not assume {role_arn}: {assume}"
            ))
            .await;
            return Ok(false);
        }
        let Some(url) = self.url_in(owner, queue).await? else {
            return Ok(false);
        };
        let attributes = owner
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::Policy)
            .attribute_names(QueueAttributeName::KmsMasterKeyId)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GetQueueAttributes {queue}: {}", describe(&e)))?;
        let attribute = |n: QueueAttributeName| {
            attributes
                .attributes()
                .and_then(|a| a.get(&n))
                .cloned()
                .unwrap_or_default()
        };
        let policy = Policy::parse(
            format!("policy of {queue}"),
            &attribute(QueueAttributeName::Policy),
        )
        .unwrap_or_else(|_| Policy::parse("no policy", r#"{"Statement": []}"#).unwrap());
        let context = [
            ("aws:PrincipalArn", role_arn),
            ("aws:PrincipalAccount", rule_account),
            ("aws:SecureTransport", "true"),
        ];
        let send = authorize_role(
            &role.identity(),
            &policy,
            ResourcePolicy::Ordinary,
            owner_account,
            &Request {
                principal: PolicyPrincipal::Attached,
                action: "sqs:SendMessage",
                resource: queue,
                context: &context,
            },
        );
        if !send.is_allowed() {
            self.refuse(format!(
                "rule {name}: SQS refuses {role_arn} on {queue}: {send}"
            ))
            .await;
            return Ok(false);
        }
        let key = attribute(QueueAttributeName::KmsMasterKeyId);
        if !key.is_empty() && !key.starts_with("alias/aws/") {
            let described = owner
                .kms
                .get_key_policy()
                .key_id(&key)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("GetKeyPolicy {key}: {}", describe(&e)))?;
            let key_policy = Policy::parse(
                format!("policy of {key}"),
                described.policy().unwrap_or_default(),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let key_arn = if key.starts_with("arn:") {
                key.clone()
            } else {
                format!("arn:aws:kms:{region}:{owner_account}:key/{key}")
            };
            let use_key = role_through_sqs(
                &role.identity(),
                &key_arn,
                &key_policy,
                "kms:GenerateDataKey",
                region,
            );
            if !use_key.is_allowed() {
                self.refuse(format!(
                    "rule {name}: KMS refuses {role_arn} the key {key}: {use_key}"
                ))
                .await;
                return Ok(false);
            }
        }
        let as_role = {
            let mut assumed = self.assumed.lock().await;
            match assumed.get(role_arn) {
                Some(aws) => aws.clone(),
                None => {
                    let aws = self.aws.assume_role(role_arn, "events").await?;
                    assumed.insert(role_arn.to_owned(), aws.clone());
                    aws
                }
            }
        };
        as_role
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(event.to_string())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("SendMessage {queue} as {role_arn}: {}", describe(&e)))?;
        Ok(true)
    }

    async fn refuse(&self, why: String) {
        self.refused.lock().await.push(why);
    }

    /// The deliveries to another account's queue refused so far, each with what refused it.
    pub async fn refusals(&self) -> Vec<String> {
        self.refused.lock().await.clone()
    }

    /// The URL of `queue` in `owner`'s account, or `None` if it does not exist.
    async fn url_in(&self, owner: &Aws, queue: &str) -> Result<Option<String>> {
        if let Some(url) = self.urls.lock().await.get(queue) {
            return Ok(Some(url.clone()));
        }
        match owner
            .sqs
            .get_queue_url()
            .queue_name(arn_name(queue))
            .send()
            .await
        {
            Ok(out) => {
                let url = out.queue_url().unwrap_or_default().to_owned();
                self.urls.lock().await.insert(queue.to_owned(), url.clone());
                Ok(Some(url))
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist()) =>
            {
                Ok(None)
            }
            Err(e) => bail!("GetQueueUrl {queue}: {}", describe(&e)),
        }
    }

    /// The rules as last read, read again once [`LOOK_EVERY`] old.
    async fn rules(&self) -> Result<Vec<Rule>> {
        let mut last = self.rules.lock().await;
        if let Some((at, rules)) = last.as_ref()
            && at.elapsed() < LOOK_EVERY
        {
            return Ok(rules.clone());
        }
        let rules = bus_rules(&self.aws, self.bus.as_deref()).await?;
        *last = Some((Instant::now(), rules.clone()));
        Ok(rules)
    }

    /// `rule`'s targets as last read, read again once [`LOOK_EVERY`] old.
    async fn targets(&self, rule: &str) -> Result<Vec<Target>> {
        let mut known = self.targets.lock().await;
        if let Some((at, targets)) = known.get(rule)
            && at.elapsed() < LOOK_EVERY
        {
            return Ok(targets.clone());
        }
        let targets = self
            .aws
            .events
            .list_targets_by_rule()
            .rule(rule)
            .set_event_bus_name(self.bus.clone())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("ListTargetsByRule {rule}: {}", describe(&e)))?
            .targets()
            .to_vec();
        known.insert(rule.to_owned(), (Instant::now(), targets.clone()));
        Ok(targets)
    }

    /// Sends `event` to the queue; `false` when the queue no longer exists (EventBridge then
    /// retries and finally drops the event, or sends it to the rule's dead-letter queue).
    async fn send(&self, queue_arn: &str, event: &Value) -> Result<bool> {
        let url = {
            let mut urls = self.urls.lock().await;
            match urls.get(queue_arn) {
                Some(url) => url.clone(),
                None => {
                    let found = self
                        .aws
                        .sqs
                        .get_queue_url()
                        .queue_name(arn_name(queue_arn))
                        .send()
                        .await;
                    let url = match found {
                        Ok(out) => out.queue_url().unwrap_or_default().to_owned(),
                        Err(e)
                            if e.as_service_error()
                                .is_some_and(|s| s.is_queue_does_not_exist()) =>
                        {
                            return Ok(false);
                        }
                        Err(e) => bail!("GetQueueUrl {queue_arn}: {}", describe(&e)),
                    };
                    urls.insert(queue_arn.to_owned(), url.clone());
                    url
                }
            }
        };
        let sent = self
            .aws
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(event.to_string())
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_queue_does_not_exist()) =>
            {
                self.urls.lock().await.remove(queue_arn);
                Ok(false)
            }
            Err(e) => bail!("SendMessage {queue_arn}: {}", describe(&e)),
        }
    }
}
