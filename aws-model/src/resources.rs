//! AWS's resources as the operator's tools read them: plain values, one per answer AWS gives
//! (a stack, a rule and its targets, a function and its mappings, alarms, FIS templates and
//! experiments, instances, messages), and the error codes AWS answers a missing resource with.
//!
//! Defined here, beside the templates and policies, because two parties speak them: routerctl's
//! seam (`routerctl::cloud`, whose SDK adapter fills them from AWS's answers) and the model of AWS
//! (`aws-world`), which answers the same questions from its own state.

use std::collections::{BTreeMap, HashMap};

use router_core::aws::CallError;
/// Codes AWS answers for what does not exist, by API (spelled once, in router-core).
pub use router_core::aws::missing;

/// Why a resource read in several calls (a role and its policies, a key and its policy) was not
/// read: the call that failed and AWS's answer, or an answer that came back unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// `call` (the operation and what it named, `GetRole alpha-karpenter`) failed.
    #[error("{call}: {error}")]
    Call { call: String, error: CallError },
    /// AWS answered with something that cannot be read (a policy document that does not parse,
    /// a field it always sends missing).
    #[error("{0}")]
    Unreadable(String),
}

impl ReadError {
    pub fn call(call: impl Into<String>, error: CallError) -> Self {
        Self::Call {
            call: call.into(),
            error,
        }
    }

    /// AWS's error code, when a call failed.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Call { error, .. } => Some(&error.code),
            Self::Unreadable(_) => None,
        }
    }
}

/// Why a stack was not deployed: a call CloudFormation refused, or a deployment that ended in
/// another state than the one asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeployError {
    /// `call` (`CreateStack tenant-alpha`) failed.
    #[error("{call}: {error}")]
    Call { call: String, error: CallError },
    /// The stack ended `status` (`ROLLBACK_COMPLETE`, …): each failed resource and its reason.
    #[error("stack {stack} ended {status}: {}", reasons.join("; "))]
    Failed {
        stack: String,
        status: String,
        reasons: Vec<String>,
    },
    /// The stack was still `status` (an `_IN_PROGRESS` one) when the deployer stopped waiting.
    #[error("stack {stack} was still {status} after {waited_secs} s")]
    Unfinished {
        stack: String,
        status: String,
        waited_secs: u64,
    },
    /// The template given cannot be read (its parameters are what an update keeps).
    #[error("{0}")]
    Template(String),
}

impl DeployError {
    pub fn call(call: impl Into<String>, error: CallError) -> Self {
        Self::Call {
            call: call.into(),
            error,
        }
    }
}

/// A stack as DescribeStacks answers it.
#[derive(Debug, Clone, Default)]
pub struct Stack {
    pub id: String,
    pub name: String,
    pub status: String,
    pub outputs: BTreeMap<String, String>,
    pub parameters: BTreeMap<String, String>,
}

/// A rule as DescribeRule answers it.
#[derive(Debug, Clone, Default)]
pub struct Rule {
    pub arn: Option<String>,
    /// `ENABLED`, `DISABLED`, `ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS`.
    pub state: Option<String>,
    pub event_pattern: Option<String>,
    pub event_bus_name: Option<String>,
}

/// A rule's target as ListTargetsByRule answers it.
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub id: String,
    pub arn: String,
    pub role_arn: Option<String>,
    /// Its dead-letter queue's ARN (DeadLetterConfig).
    pub dead_letter_arn: Option<String>,
}

impl Target {
    pub fn arn(&self) -> &str {
        &self.arn
    }

    pub fn role_arn(&self) -> Option<&str> {
        self.role_arn.as_deref()
    }
}

/// A function as GetFunctionConfiguration answers it.
#[derive(Debug, Clone, Default)]
pub struct Function {
    pub name: String,
    pub state: Option<String>,
    pub state_reason: Option<String>,
    pub last_update_status: Option<String>,
    pub last_update_status_reason: Option<String>,
    pub role: Option<String>,
    pub timeout: Option<i32>,
    pub environment: HashMap<String, String>,
    /// The log group its logs go to (`LoggingConfig.LogGroup`).
    pub log_group: Option<String>,
}

/// An event source mapping as ListEventSourceMappings answers it.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    pub uuid: String,
    pub event_source_arn: Option<String>,
    pub state: Option<String>,
    pub function_response_types: Vec<String>,
}

/// A message a peek received: when it was sent (its `SentTimestamp`, ms since the epoch).
#[derive(Debug, Clone, Default)]
pub struct Message {
    pub sent_ms: Option<u64>,
}

/// One metric an alarm watches: namespace, metric name, its `FunctionName` dimension, statistic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watched {
    pub namespace: String,
    pub metric: String,
    pub function: Option<String>,
    pub stat: Option<String>,
}

/// A metric alarm as DescribeAlarms answers it.
#[derive(Debug, Clone, Default)]
pub struct Alarm {
    pub name: String,
    /// A single-metric alarm's metric (its `stat` empty).
    pub metric: Option<Watched>,
    /// A metric-math alarm's metric queries.
    pub metrics: Vec<Watched>,
    pub actions_enabled: Option<bool>,
    pub alarm_actions: Vec<String>,
    /// Its state (`OK`, `ALARM` or `INSUFFICIENT_DATA`), when known.
    pub state: Option<String>,
}

// FIS and CloudWatch Logs (what `routerctl fis` reads).

/// An experiment template as ListExperimentTemplates summarises it.
#[derive(Debug, Clone, Default)]
pub struct TemplateSummary {
    pub id: String,
    pub tags: BTreeMap<String, String>,
}

/// One target of a template as GetExperimentTemplate answers it.
#[derive(Debug, Clone, Default)]
pub struct TemplateTarget {
    pub name: String,
    pub resource_type: String,
    pub resource_tags: BTreeMap<String, String>,
    /// It names its resources by ARN.
    pub by_arn: bool,
}

/// An experiment template as GetExperimentTemplate answers it.
#[derive(Debug, Clone, Default)]
pub struct ExperimentTemplate {
    pub targets: Vec<TemplateTarget>,
    /// Its CloudWatch Logs log group's ARN, when it logs.
    pub log_group_arn: Option<String>,
    /// The `durationBeforeInterruption` of each spot-interruption action (ISO 8601).
    pub spot_notices: Vec<String>,
}

/// An experiment as GetExperiment answers it (times in ms since the epoch).
#[derive(Debug, Clone, Default)]
pub struct ExperimentState {
    pub template_id: String,
    /// `pending`, `initiating`, `running`, `completed`, `stopping`, `stopped`, `failed`,
    /// `cancelled`.
    pub status: Option<String>,
    pub reason: Option<String>,
    pub creation_ms: Option<i64>,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
}

/// One log event: its timestamp (ms) and message.
pub type LogEvent = (i64, String);

// EC2, SQS's sends and Lambda's invocations (what `routerctl simulate` reads and sends).

/// An instance as DescribeInstances answers it: its id, its reservation's owner, its tags.
#[derive(Debug, Clone, Default)]
pub struct Instance {
    pub id: String,
    pub owner: String,
    pub tags: Vec<(String, String)>,
}

/// One SendMessageBatch entry's result, as SQS lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Stored, with its message id.
    Sent(String),
    /// Refused: SQS's code and message, and whether the entry itself is wrong (`SenderFault`).
    Failed {
        code: String,
        message: String,
        sender_fault: bool,
    },
}

/// A synchronous invocation's answer.
#[derive(Debug, Clone, Default)]
pub struct Invoked {
    /// `Unhandled` when the function failed the invocation.
    pub function_error: Option<String>,
    pub payload: Vec<u8>,
}

// EventBridge's rule lists and SQS's receives (what `routerctl adopt` reads).

/// A rule as ListRules answers it.
#[derive(Debug, Clone, Default)]
pub struct ListedRule {
    pub name: String,
    pub arn: String,
    pub state: Option<String>,
    pub event_pattern: Option<String>,
}

/// A message a look received, hidden for its look.
#[derive(Debug, Clone, Default)]
pub struct Received {
    pub message_id: String,
    pub body: String,
    pub receipt_handle: String,
    pub receive_count: Option<u64>,
    pub sent_ms: Option<u64>,
}
