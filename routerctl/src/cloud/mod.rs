//! The operator's seam: everything `routerctl verify` reads of AWS, as one trait shaped by what
//! verify asks (a stack, a queue, a rule and its targets, a function and its mappings, a role, a
//! key, alarms, metrics), answered in plain values.
//!
//! ```text
//!   verify (stack ▸ rules ▸ queues ▸ function ▸ keys ▸ monitoring ▸ tenants ▸ spokes)
//!      │ judges what it read; every judgement a pure function with its unit test
//!   ───┴──────────────────────────────────────────────────────────── Cloud (this trait)
//!      sdk/: the AWS SDK (routerctl's only SDK code)  ·  model/: the same questions answered
//!              by aws-world's model of AWS, whose stacks are deployed from this release's templates
//! ```
//!
//! A call answers as AWS answers: the value, or AWS's error code and message ([`CallError`],
//! the router's own), so the code reading the answers (which is all of verify's judgement) runs
//! unchanged against `model::World`, and a test breaks one thing in the world and sees exactly
//! that check fail with its fix. The SDK adapter makes each call once; a call that pages reads
//! every page.
//!
//! adopt, fis, simulate and insights ask more, each through a trait of its own over this one
//! ([`moves::Moves`], [`experiments::Experiments`], [`deliveries::Deliveries`],
//! [`queries::LogQueries`]). The values the
//! calls answer with are aws-model's ([`aws_model::resources`]), which the model speaks too.

pub mod deliveries;
pub mod experiments;
#[cfg(test)]
pub mod model;
pub mod moves;
pub mod queries;
mod sdk;

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    time::SystemTime,
};

pub use aws_model::{
    kms::Key,
    resources::{
        Alarm, Function, Mapping, Message, ReadError, Rule, Stack, Target, Watched, missing,
    },
    roles::Role,
};
pub use router_core::aws::CallError;

/// What verify asks of the operator when a role could not be read: the permissions to read it,
/// or, for a document IAM returned that cannot be parsed, a look at it.
pub fn role_fix(error: &ReadError) -> &'static str {
    match error {
        ReadError::Call { .. } => {
            "run verify with a principal allowed iam:GetRole, iam:ListRolePolicies, \
             iam:GetRolePolicy, iam:ListAttachedRolePolicies, iam:GetPolicy and \
             iam:GetPolicyVersion"
        }
        ReadError::Unreadable(_) => {
            "IAM returned a policy document verify cannot read: check it with aws iam \
             get-role-policy / get-policy-version"
        }
    }
}

/// How to act in another account: assume a role there, or use a named profile's credentials.
#[derive(Debug, Clone, Copy)]
pub enum Reach<'a> {
    Assume { role_arn: &'a str, session: &'a str },
    Profile(&'a str),
}

/// What `routerctl verify` reads of one account and region (see the module documentation).
pub trait Cloud: Sized + Sync {
    /// The region every call is made in.
    fn region(&self) -> &str;
    /// The wall clock (the age of a message, the window of a metric).
    fn now(&self) -> SystemTime;

    /// STS GetCallerIdentity: the account and ARN acting.
    fn caller(&self) -> impl Future<Output = Result<(String, String), CallError>>;
    /// The same reads in another account (same region), reached as `reach` says.
    fn reach(&self, reach: Reach<'_>) -> impl Future<Output = Result<Self, CallError>>;

    /// CloudFormation DescribeStacks of one stack.
    fn stack(&self, name: &str) -> impl Future<Output = Result<Stack, CallError>>;
    /// CloudFormation DescribeStackResources: logical id → physical id.
    fn stack_resources(
        &self,
        stack: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, CallError>>;
    /// CloudFormation DescribeStackResources by physical id: the stack that made it, or none
    /// (CloudFormation's `ValidationError`, "Stack for <id> does not exist").
    fn stack_of(
        &self,
        physical_id: &str,
    ) -> impl Future<Output = Result<Option<String>, CallError>>;

    /// SQS GetQueueUrl.
    fn queue_url(&self, name: &str) -> impl Future<Output = Result<String, CallError>>;
    /// SQS GetQueueAttributes, `All`.
    fn queue_attributes(
        &self,
        url: &str,
    ) -> impl Future<Output = Result<HashMap<String, String>, CallError>>;
    /// SQS ListQueueTags.
    fn queue_tags(
        &self,
        url: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, CallError>>;
    /// SQS ListQueues with a name prefix, every page: the queues' URLs.
    fn queue_urls(&self, prefix: &str) -> impl Future<Output = Result<Vec<String>, CallError>>;
    /// SQS ReceiveMessage of up to 10 messages that hides nothing (visibility 0, 1-s wait).
    fn peek(&self, url: &str) -> impl Future<Output = Result<Vec<Message>, CallError>>;

    /// SSM GetParameter: the value.
    fn parameter(&self, name: &str) -> impl Future<Output = Result<String, CallError>>;

    /// EventBridge DescribeRule on `bus` (`None`: the default bus).
    fn rule(&self, name: &str, bus: Option<&str>) -> impl Future<Output = Result<Rule, CallError>>;
    /// EventBridge ListTargetsByRule.
    fn targets(
        &self,
        rule: &str,
        bus: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Target>, CallError>>;
    /// EventBridge DescribeEventBus: the bus's resource policy, if it has one.
    fn bus_policy(&self, bus: &str) -> impl Future<Output = Result<Option<String>, CallError>>;

    /// Lambda GetFunctionConfiguration.
    fn function(&self, name: &str) -> impl Future<Output = Result<Function, CallError>>;
    /// Lambda ListEventSourceMappings of a function.
    fn mappings(&self, function: &str) -> impl Future<Output = Result<Vec<Mapping>, CallError>>;

    /// A role's identity policies, permissions boundary and trust policy, from IAM.
    fn role(&self, arn: &str) -> impl Future<Output = Result<Role, ReadError>>;
    /// KMS DescribeKey and GetKeyPolicy; the error names the call that failed.
    fn key(&self, id: &str) -> impl Future<Output = Result<Key, ReadError>>;

    /// CloudWatch DescribeAlarms with a name prefix (metric alarms).
    fn alarms_named(&self, prefix: &str) -> impl Future<Output = Result<Vec<Alarm>, CallError>>;
    /// CloudWatch DescribeAlarmsForMetric of a function's metric.
    fn alarms_for_metric(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
    ) -> impl Future<Output = Result<Vec<Alarm>, CallError>>;
    /// CloudWatch GetDashboard: the body.
    fn dashboard(&self, name: &str) -> impl Future<Output = Result<String, CallError>>;
    /// CloudWatch GetMetricStatistics: the Sum of a function's metric over one period from
    /// `since` to `until`.
    fn metric_sum(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
        since: SystemTime,
        until: SystemTime,
    ) -> impl Future<Output = Result<f64, CallError>>;
    /// CloudWatch Logs FilterLogEvents: whether an event between `since` and `until` matches.
    fn log_matches(
        &self,
        group: &str,
        pattern: &str,
        since: SystemTime,
        until: SystemTime,
    ) -> impl Future<Output = Result<bool, CallError>>;

    /// SNS ListSubscriptionsByTopic, every page: each subscription's ARN (or
    /// `PendingConfirmation`).
    fn subscriptions(&self, topic: &str) -> impl Future<Output = Result<Vec<String>, CallError>>;
}
