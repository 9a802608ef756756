//! Handler: one invocation, from payload to response.
//!
//! The last step of the data path ties the others together. A payload is an SQS event whose
//! records carry EventBridge events (the rules fill the ingest queue, an event source mapping
//! drains it). Each record is:
//!
//! 1. classified ([`crate::event`]) — malformed, ignored, or an interruption naming instances —
//!    and admitted into the place its account and region name ([`crate::accounts`]);
//! 2. resolved ([`crate::resolve`]) and forwarded ([`crate::forward`]) — one copy per owning
//!    cluster, sent as soon as its owners are known; failed lookups and sends are retried inside
//!    the invocation while its [`Budget`] allows ([`crate::retry`]);
//! 3. dead-lettered if it failed permanently (malformed, account not served, queue lost, refused
//!    by SQS) or is still failing past its grace or on its last receive, when
//!    `DEAD_LETTER_QUEUE_URL` is set;
//! 4. otherwise, if still failing, handed back: named in `batchItemFailures` with its visibility
//!    shortened so it returns in seconds ([`crate::redeliver`]).
//!
//! Each record ends in exactly one [`Outcome`] ([`outcome`]); the steps are in `route`, the
//! states a record goes through in `records`, the log lines and per-record metrics in
//! `report`. Everything the handler does to the world goes through [`crate::aws::Aws`], so
//! `tests/` proves its decisions against a fake in paused time.

pub mod outcome;
mod records;
mod report;
mod route;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use serde_json::{Value, value::RawValue};
use tokio::time::Instant;

pub use self::outcome::{Cause, DeadLetterReason, Failure, Finished, Outcome};
pub use self::records::{INVOKED, SENDER_ATTRIBUTE, SOURCE_ATTRIBUTE};
pub use crate::retry::Budget;
use crate::{
    accounts::{Accounts, Home},
    aws::Aws,
    config::Config,
    direct::Direct,
    forward::Forwarder,
    logging::Level,
    metrics::InvocationMetrics,
    redeliver::SqsOrigin,
    resolve::Resolver,
};

/// Time kept back from the invocation deadline to write the response and metrics: a tenth of the
/// remaining time, within these bounds.
const MIN_MARGIN: Duration = Duration::from_millis(100);
const MAX_MARGIN: Duration = Duration::from_secs(1);

/// The router: built once per execution environment in `main`, borrowed by every invocation.
pub struct Router<A> {
    aws: Arc<A>,
    accounts: Arc<Accounts<A>>,
    /// The check of the direct queue's records, when there is one (`DIRECT_QUEUE_ARN`).
    direct: Option<Direct<A>>,
    resolver: Resolver<A>,
    forwarder: Forwarder<A>,
    home_region: Arc<str>,
    /// The ingest queue's `maxReceiveCount` (`MAX_RECEIVE_COUNT`): the receive on which a record
    /// still failing is dead-lettered with its reason. `None`: no receive is the last.
    max_receive_count: Option<u32>,
    metrics_namespace: String,
    /// The level the EMF documents carry, so Lambda's log filter keeps them ([`crate::logging`]).
    metrics_level: Level,
    function_name: String,
    cold_start: AtomicBool,
}

/// One invocation as the Lambda runtime describes it.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    pub request_id: &'a str,
    /// The invoked function's ARN: it names the function's own account.
    pub function_arn: &'a str,
    /// When the invocation must have answered, ms since the epoch.
    pub deadline_ms: u64,
}

/// What one invocation answered, and what it measured.
#[derive(Debug)]
pub struct Answered {
    pub response: Result<Value, HandlerError>,
    pub metrics: InvocationMetrics,
}

/// Why an invocation as a whole failed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A payload the router cannot answer per record.
    #[error("unsupported payload: {0}")]
    Unsupported(String),
}

impl HandlerError {
    /// The `errorType` Lambda reports for the invocation.
    pub fn error_type(&self) -> &'static str {
        match self {
            HandlerError::Unsupported(_) => "InterruptionRouter.UnsupportedPayload",
        }
    }
}

/// One unit of work: an SQS record.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The SQS message id.
    pub id: &'a str,
    pub body: &'a str,
    /// Where the record came from (what a hand-back needs); `None` when the event source mapping
    /// did not say (no queue ARN or receipt handle): it is then handed back by name only.
    pub origin: Option<SqsOrigin<'a>>,
    /// Who sent it (SQS's `SenderId`), which a record of the direct queue is judged by.
    pub sender_id: Option<&'a str>,
    /// A record handed to the function directly (no event source mapping) that replays a dead
    /// letter: the queue that dead letter came from (its `source` message attribute, which the
    /// router writes on every dead letter). A replay of the direct queue's gets the direct
    /// queue's sender check, with the dead letter's `sender` as its `SenderId`.
    pub replay_of: Option<&'a str>,
}

impl Record<'_> {
    /// The queue the record came from: the mapping's, or for a replay the dead letter's.
    pub fn source_queue(&self) -> Option<&str> {
        self.origin.map(|o| o.queue_arn).or(self.replay_of)
    }
}

impl<A: Aws> Router<A> {
    /// The router of a function in `home_region`, acting through `aws`.
    pub fn new(config: &Config, aws: Arc<A>, home_region: &str, function_name: String) -> Self {
        let accounts = Arc::new(Accounts::new(
            aws.clone(),
            config.served.clone(),
            config.spoke_role(),
        ));
        let direct = config.direct_queue_arn.clone().map(|arn| {
            Direct::new(
                aws.clone(),
                accounts.clone(),
                arn,
                config.direct_role_name(home_region),
            )
        });
        Self {
            direct,
            resolver: Resolver::new(
                aws.clone(),
                accounts.clone(),
                config.tags.clone(),
                &config.cache,
                config.lookup,
            ),
            forwarder: Forwarder::new(
                aws.clone(),
                accounts.clone(),
                config.queue_names.clone(),
                config.dead_letter_queue_url.clone(),
                config.router_role_arn.clone(),
                &config.cache,
            ),
            aws,
            accounts,
            home_region: Arc::from(home_region),
            max_receive_count: config.max_receive_count,
            metrics_namespace: config.metrics_namespace.clone(),
            metrics_level: Level::Info,
            function_name,
            cold_start: AtomicBool::new(true),
        }
    }

    /// The level of the EMF documents: the lowest level Lambda's log filter keeps.
    pub fn with_metrics_level(mut self, level: Level) -> Self {
        self.metrics_level = level;
        self
    }

    /// AssumeRole calls this execution environment has made.
    pub fn assume_role_calls(&self) -> u64 {
        self.accounts.assume_role_calls()
    }

    /// The Lambda handler: answers the invocation and prints its EMF documents and interruption
    /// records (the Lambda's bootstrap hands it each event the runtime receives).
    pub async fn handle(
        &self,
        payload: &RawValue,
        invocation: Invocation<'_>,
    ) -> Result<Value, HandlerError> {
        // Boxed: the whole pipeline's future is deep enough to overflow the compiler's type-layout
        // limit when nested inside the runtime's.
        let answered = Box::pin(self.invoke(payload, invocation)).await;
        for line in self.printed(&answered) {
            println!("{line}");
        }
        answered.response
    }

    /// What [`Router::handle`] prints of an invocation: its EMF documents, then one line per
    /// interruption record ([`crate::insight`]), each at the level the metrics carry so that
    /// Lambda's log filter keeps them all. What Lambda sends to the function's log group.
    pub fn printed(&self, answered: &Answered) -> Vec<String> {
        let now = route::unix_millis(self.aws.now()) as u64;
        let mut lines = answered.metrics.to_emf(
            &self.metrics_namespace,
            &self.function_name,
            now,
            self.metrics_level,
        );
        lines.extend(
            answered
                .metrics
                .interruptions
                .iter()
                .map(|r| r.to_line(now, self.metrics_level)),
        );
        lines
    }

    /// One invocation: the response and the metrics, printed by [`Router::handle`] (and read as
    /// they are by the simulation).
    pub async fn invoke(&self, payload: &RawValue, invocation: Invocation<'_>) -> Answered {
        let mut metrics = InvocationMetrics {
            cold_start: self.cold_start.swap(false, Ordering::Relaxed),
            ..Default::default()
        };
        let assumed_before = self.accounts.assume_role_calls();
        let response = self.answer(payload, invocation, &mut metrics).await;
        metrics.assume_role_calls = self.accounts.assume_role_calls() - assumed_before;
        Answered { response, metrics }
    }

    async fn answer(
        &self,
        payload: &RawValue,
        invocation: Invocation<'_>,
        metrics: &mut InvocationMetrics,
    ) -> Result<Value, HandlerError> {
        let sqs: SqsEvent = serde_json::from_str(payload.get()).map_err(|e| {
            HandlerError::Unsupported(format!(
                "the router reads SQS event source mappings (an SQS event with Records), and this is not one: {e}"
            ))
        })?;
        let records = sqs
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| sqs_record(i, r))
            .collect::<Result<Vec<_>, _>>()?;
        let home = Home::new(invocation.function_arn, &self.home_region);
        let now = Instant::now();
        let budget = Budget::new(
            now,
            work_deadline(invocation.deadline_ms, self.aws.now(), now),
        );
        let outcomes = self.route(&records, &home, budget, metrics).await;
        let mut response = SqsBatchResponse::default();
        for (record, outcome) in records.iter().zip(&outcomes) {
            if matches!(outcome, Outcome::Failed(_)) {
                response.add_failure(record.id);
            }
        }
        let mut answer = serde_json::to_value(response).expect("SqsBatchResponse serialises");
        // Records that did not come from an event source mapping (no eventSourceARN: an
        // operator's invoke, `routerctl simulate` or adopt's probe) get each record's outcome
        // too: "not handed back" alone cannot tell forwarded from ignored. A mapping's answer
        // stays exactly the partial-batch response it expects.
        if sqs.records.iter().all(|r| r.event_source_arn.is_none()) {
            let each: serde_json::Map<String, Value> = records
                .iter()
                .zip(&outcomes)
                .map(|(r, o)| (r.id.to_owned(), Value::from(o.label())))
                .collect();
            answer["outcomes"] = Value::Object(each);
        }
        Ok(answer)
    }
}

/// SQS record `i` as a [`Record`]: its message id (what a hand-back names), its body, and where
/// it came from (queue, receipt handle, receive count), which a hand-back needs to shorten its
/// visibility.
fn sqs_record(i: usize, r: &SqsMessage) -> Result<Record<'_>, HandlerError> {
    if r.event_source.as_deref().is_some_and(|s| s != "aws:sqs") {
        return Err(HandlerError::Unsupported(format!(
            "record {i} comes from {:?}; the router reads SQS event source mappings",
            r.event_source.as_deref().unwrap_or_default()
        )));
    }
    let id = r.message_id.as_deref().ok_or_else(|| {
        HandlerError::Unsupported(format!(
            "SQS record {i} has no messageId, so it could not be retried alone"
        ))
    })?;
    let origin = match (r.event_source_arn.as_deref(), r.receipt_handle.as_deref()) {
        (Some(queue_arn), Some(receipt_handle)) => Some(SqsOrigin {
            queue_arn,
            receipt_handle,
            receive_count: r
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
            first_receive_ms: r
                .attributes
                .get("ApproximateFirstReceiveTimestamp")
                .and_then(|n| n.parse().ok()),
        }),
        _ => None,
    };
    let replay_of = match origin {
        Some(_) => None,
        None => r
            .message_attributes
            .get(records::SOURCE_ATTRIBUTE)
            .and_then(|a| a.string_value.as_deref()),
    };
    Ok(Record {
        id,
        body: r.body.as_deref().unwrap_or_default(),
        origin,
        sender_id: r.attributes.get("SenderId").map(String::as_str),
        replay_of,
    })
}

/// When everything must be done: the invocation deadline (`deadline_ms` since the epoch, read
/// against the wall clock `wall`) less a margin for the response, on tokio's clock from `now`.
pub fn work_deadline(deadline_ms: u64, wall: SystemTime, now: Instant) -> Instant {
    let since_epoch = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    let remaining = Duration::from_millis(deadline_ms).saturating_sub(since_epoch);
    let margin = (remaining / 10).clamp(MIN_MARGIN, MAX_MARGIN);
    now + remaining.saturating_sub(margin)
}
