//! What `routerctl adopt` asks of AWS beyond what verify reads and simulate sends: the account's
//! old set-ups (rules and their tags, queues, stacks and what they made, Karpenter's roles), the
//! round of evidence (a sentinel sent, a look through a queue, SQS's own counts), and the moves
//! themselves (a tenant stack deployed or updated, rules disabled, enabled or deleted, a queue
//! deleted). Each answers as AWS does; a deploy waits for its stack as CloudFormation's waiter
//! does.

use std::{collections::BTreeMap, future::Future, time::SystemTime};

pub use aws_model::resources::{DeployError, ListedRule, Received};

use super::{CallError, deliveries::Deliveries};

/// What `routerctl adopt` reads and changes (see the module documentation).
pub trait Moves: Deliveries {
    /// CloudFormation CreateStack of `template` with `parameters`, waited for: its outputs.
    fn create_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> impl Future<Output = Result<BTreeMap<String, String>, DeployError>>;
    /// CloudFormation UpdateStack with `template`, these parameters changed and the others kept,
    /// waited for.
    fn update_stack(
        &self,
        name: &str,
        template: &str,
        parameters: &[(&str, &str)],
    ) -> impl Future<Output = Result<(), DeployError>>;
    /// CloudFormation ListStacks, every page: the stacks not deleted.
    fn active_stacks(&self) -> impl Future<Output = Result<Vec<String>, CallError>>;
    /// CloudFormation ListStackResources, every page: (logical id, physical id).
    fn listed_resources(
        &self,
        stack: &str,
    ) -> impl Future<Output = Result<Vec<(String, String)>, CallError>>;
    /// CloudFormation GetTemplate: the body.
    fn template_body(&self, stack: &str) -> impl Future<Output = Result<String, CallError>>;

    /// EventBridge ListRules on the default bus, every page.
    fn default_bus_rules(&self) -> impl Future<Output = Result<Vec<ListedRule>, CallError>>;
    /// EventBridge ListTagsForResource of a rule.
    fn rule_tags(
        &self,
        arn: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, CallError>>;
    /// EventBridge EnableRule (default bus).
    fn enable_rule(&self, name: &str) -> impl Future<Output = Result<(), CallError>>;
    /// EventBridge DisableRule (default bus).
    fn disable_rule(&self, name: &str) -> impl Future<Output = Result<(), CallError>>;
    /// EventBridge RemoveTargets of one target (default bus).
    fn remove_target(&self, rule: &str, id: &str) -> impl Future<Output = Result<(), CallError>>;
    /// EventBridge DeleteRule (default bus).
    fn delete_rule(&self, name: &str) -> impl Future<Output = Result<(), CallError>>;

    /// SQS ListQueues without a prefix, every page.
    fn every_queue(&self) -> impl Future<Output = Result<Vec<String>, CallError>>;
    /// SQS SendMessage.
    fn send_message(&self, url: &str, body: &str) -> impl Future<Output = Result<(), CallError>>;
    /// SQS ReceiveMessage of up to 10 messages, hidden `hide_secs`, with their receive counts
    /// and send times (a 1-s wait: long polling asks every server).
    fn receive(
        &self,
        url: &str,
        hide_secs: i32,
    ) -> impl Future<Output = Result<Vec<Received>, CallError>>;
    /// SQS ChangeMessageVisibilityBatch to 0 of up to 10 receipt handles.
    fn release(&self, url: &str, handles: &[String])
    -> impl Future<Output = Result<(), CallError>>;
    /// SQS DeleteMessage.
    fn delete_message(
        &self,
        url: &str,
        handle: &str,
    ) -> impl Future<Output = Result<(), CallError>>;
    /// SQS DeleteQueue.
    fn delete_queue(&self, url: &str) -> impl Future<Output = Result<(), CallError>>;
    /// SQS TagQueue with one tag.
    fn tag_queue(
        &self,
        url: &str,
        key: &str,
        value: &str,
    ) -> impl Future<Output = Result<(), CallError>>;
    /// SQS UntagQueue of one key.
    fn untag_queue(&self, url: &str, key: &str) -> impl Future<Output = Result<(), CallError>>;

    /// IAM ListRoles, every page: the roles' names.
    fn role_names(&self) -> impl Future<Output = Result<Vec<String>, CallError>>;

    /// CloudWatch GetMetricStatistics of an AWS/SQS metric of queue `queue`, Sum per minute from
    /// `from` to `to`: (the minute's start in s since the epoch, its sum).
    fn queue_metric(
        &self,
        queue: &str,
        metric: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> impl Future<Output = Result<Vec<(u64, f64)>, CallError>>;
}
