//! Handler: one invocation, from payload to response.
//!
//! The last step of the data path ties the others together. A payload is either one EventBridge
//! event (a rule targets the function) or an SQS event whose records carry EventBridge events (a
//! rule fills a central queue, an event source mapping drains it). Either way each record is:
//!
//! 1. classified ([`crate::event`]) — malformed, ignored, or an interruption naming instances —
//!    and checked against the accounts the router serves ([`crate::accounts`]);
//! 2. resolved ([`crate::resolve`]) and forwarded ([`crate::forward`]) — one copy per owning
//!    cluster, sent as soon as its owners are known; failed lookups and sends are retried inside
//!    the invocation while its [`Budget`] allows;
//! 3. dead-lettered if it failed permanently (malformed, account not served, queue missing,
//!    refused by SQS) or is still failing on its last receive, when `DEAD_LETTER_QUEUE_URL` is set;
//! 4. otherwise, if still failing, handed back: named in `batchItemFailures` with its visibility
//!    shortened so it returns in seconds ([`crate::redeliver`]), or, for a direct invocation, as
//!    an invocation error (Lambda's async retries, then its on-failure destination).
//!
//! Each record ends in exactly one [`Outcome`] ([`outcome`]); the steps are in [`route`], the
//! log lines and per-record metrics in [`report`].

pub mod outcome;
mod records;
mod report;
pub mod route;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::time::Instant;

pub use self::{
    outcome::{Cause, DeadLetterReason, Failure, Outcome},
    route::{BATCH_RETRY_WINDOW, Budget, Mode},
};
use crate::{
    accounts::Accounts,
    config::Config,
    forward::Forwarder,
    logging::Level,
    metrics::InvocationMetrics,
    redeliver::{Redeliver, SqsOrigin},
    resolve::Resolver,
};

/// Time kept back from the invocation deadline to write the response and metrics: a tenth of the
/// remaining time, within these bounds.
const MIN_MARGIN: Duration = Duration::from_millis(100);
const MAX_MARGIN: Duration = Duration::from_secs(1);

/// The router: built once per process in `main`, borrowed by every invocation.
pub struct Router {
    accounts: Arc<Accounts>,
    resolver: Resolver,
    forwarder: Forwarder,
    redeliver: Redeliver,
    metrics_namespace: String,
    /// The level the EMF documents carry, so Lambda's log filter keeps them ([`crate::logging`]).
    metrics_level: Level,
    function_name: String,
    cold_start: AtomicBool,
}

/// Why an invocation as a whole failed.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// A payload with `Records` that the router cannot answer per record.
    #[error("unsupported payload: {0}")]
    Unsupported(String),
    /// A direct invocation whose event was not routed; Lambda retries it, then sends it to the
    /// function's on-failure destination.
    #[error("event not routed, Lambda will retry it: {0}")]
    NotRouted(String),
}

impl From<HandlerError> for Diagnostic {
    fn from(error: HandlerError) -> Self {
        let error_type = match error {
            HandlerError::Unsupported(_) => "InterruptionRouter.UnsupportedPayload",
            HandlerError::NotRouted(_) => "InterruptionRouter.NotRouted",
        };
        Diagnostic {
            error_type: error_type.into(),
            error_message: error.to_string(),
        }
    }
}

/// One unit of work: an SQS record, or the single event of a direct invocation.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The SQS message id, or the request id of a direct invocation.
    pub id: &'a str,
    pub body: &'a str,
    /// Where an SQS record came from (what a hand-back needs); `None` for a direct invocation.
    pub origin: Option<SqsOrigin<'a>>,
}

impl Router {
    pub fn new(config: &Config, accounts: Arc<Accounts>, function_name: String) -> Self {
        Self {
            resolver: Resolver::new(
                accounts.clone(),
                config.tags.clone(),
                &config.cache,
                config.lookup,
            ),
            forwarder: Forwarder::new(
                accounts.clone(),
                config.queue_names.clone(),
                config.dead_letter_queue_url.clone(),
                config.router_role_arn.clone(),
                &config.cache,
            ),
            redeliver: Redeliver::new(accounts.home().sqs.clone()),
            accounts,
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

    /// The Lambda handler: accepts both invocation shapes and prints the EMF documents.
    pub async fn handle(&self, event: LambdaEvent<Box<RawValue>>) -> Result<Value, HandlerError> {
        self.accounts
            .learn_home_account(&event.context.invoked_function_arn);
        let finish_by = work_deadline(event.context.deadline, SystemTime::now());
        let mut metrics = InvocationMetrics {
            cold_start: self.cold_start.swap(false, Ordering::Relaxed),
            ..Default::default()
        };
        let assumed_before = self.accounts.assume_role_calls();
        // Boxed: the whole pipeline's future is deep enough to overflow the compiler's type-layout
        // limit when nested inside the runtime's.
        let result = Box::pin(self.handle_payload(
            &event.payload,
            &event.context.request_id,
            finish_by,
            &mut metrics,
        ))
        .await;
        metrics.assume_role_calls = self.accounts.assume_role_calls() - assumed_before;
        for document in metrics.to_emf(
            &self.metrics_namespace,
            &self.function_name,
            unix_millis(SystemTime::now()) as u64,
            self.metrics_level,
        ) {
            println!("{document}");
        }
        result
    }

    async fn handle_payload(
        &self,
        payload: &RawValue,
        request_id: &str,
        finish_by: Instant,
        metrics: &mut InvocationMetrics,
    ) -> Result<Value, HandlerError> {
        match sqs_records(payload)? {
            Some(sqs) => {
                let records = sqs
                    .records
                    .iter()
                    .enumerate()
                    .map(|(i, r)| sqs_record(i, r))
                    .collect::<Result<Vec<_>, _>>()?;
                let budget = Budget::new(finish_by, Mode::Batch);
                let outcomes = self.route(&records, budget, metrics).await;
                let mut response = SqsBatchResponse::default();
                for (record, outcome) in records.iter().zip(&outcomes) {
                    if matches!(outcome, Outcome::Failed(_)) {
                        response.add_failure(record.id);
                    }
                }
                Ok(serde_json::to_value(response).expect("SqsBatchResponse serialises"))
            }
            None => {
                let record = Record {
                    id: request_id,
                    body: payload.get(),
                    origin: None,
                };
                let budget = Budget::new(finish_by, Mode::Direct);
                match self.route(&[record], budget, metrics).await.remove(0) {
                    Outcome::Failed(why) => Err(HandlerError::NotRouted(why.to_string())),
                    outcome => Ok(json!({ "outcome": outcome.label() })),
                }
            }
        }
    }
}

/// SQS record `i` as a [`Record`]: its message id (what a hand-back names), its body, and where
/// it came from (queue, receipt handle, receive count), which a hand-back needs to shorten its
/// visibility.
fn sqs_record(i: usize, r: &SqsMessage) -> Result<Record<'_>, HandlerError> {
    if r.event_source.as_deref().is_some_and(|s| s != "aws:sqs") {
        return Err(HandlerError::Unsupported(format!(
            "record {i} comes from {:?}; the router reads SQS event source mappings and direct EventBridge events",
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
    Ok(Record {
        id,
        body: r.body.as_deref().unwrap_or_default(),
        origin,
    })
}

/// `Some(records)` when the payload is an SQS event (it has `Records`), `None` for a direct event.
fn sqs_records(payload: &RawValue) -> Result<Option<SqsEvent>, HandlerError> {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(rename = "Records", borrow, default)]
        records: Option<&'a RawValue>,
    }
    match serde_json::from_str::<Probe<'_>>(payload.get()) {
        Ok(Probe { records: Some(_) }) => {
            serde_json::from_str(payload.get()).map(Some).map_err(|e| {
                HandlerError::Unsupported(format!(
                    "the payload has Records but is not an SQS event: {e}"
                ))
            })
        }
        // Not an object with Records: a direct event, malformed or not; classify decides.
        _ => Ok(None),
    }
}

/// When everything must be done: the invocation deadline less a margin for the response.
fn work_deadline(deadline_ms: u64, now: SystemTime) -> Instant {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let remaining = Duration::from_millis(deadline_ms).saturating_sub(since_epoch);
    let margin = (remaining / 10).clamp(MIN_MARGIN, MAX_MARGIN);
    Instant::now() + remaining.saturating_sub(margin)
}

fn unix_millis(t: SystemTime) -> i64 {
    records::unix_millis(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_keeps_a_tenth_back_within_bounds() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let at = |remaining_ms: u64| {
            let before = Instant::now();
            let d = work_deadline(1_000_000_000 + remaining_ms, now);
            d.saturating_duration_since(before)
        };
        let near = |budget: Duration, wanted: Duration| {
            budget.abs_diff(wanted) < Duration::from_millis(50)
        };
        let budget = at(30_000);
        assert!(
            near(budget, Duration::from_secs(29)),
            "30 s left keeps 1 s back: {budget:?}"
        );
        let budget = at(2_000);
        assert!(
            near(budget, Duration::from_millis(1_800)),
            "2 s left keeps 200 ms back: {budget:?}"
        );
        assert!(
            near(at(50), Duration::ZERO),
            "less than the minimum margin left: start nothing"
        );
        assert!(
            work_deadline(0, now) <= Instant::now(),
            "a deadline in the past leaves no time"
        );
    }

    #[test]
    fn payload_shape_is_told_apart_by_records() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let sqs = raw(r#"{"Records":[{"messageId":"m1","body":"{}","eventSource":"aws:sqs"}]}"#);
        assert_eq!(sqs_records(&sqs).unwrap().unwrap().records.len(), 1);
        assert!(
            sqs_records(&raw(r#"{"source":"aws.ec2","detail-type":"x"}"#))
                .unwrap()
                .is_none()
        );
        assert!(sqs_records(&raw("[1,2]")).unwrap().is_none());
        assert!(matches!(
            sqs_records(&raw(r#"{"Records":"nope"}"#)),
            Err(HandlerError::Unsupported(_))
        ));
    }
}
