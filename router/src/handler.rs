//! Handler: one invocation, from payload to response.
//!
//! The last step of the data path ties the others together. A payload is either one EventBridge
//! event (a rule targets the function) or an SQS event whose records carry EventBridge events (a
//! rule fills a central queue, an event source mapping drains it). Either way each record is:
//!
//! 1. classified ([`crate::event`]) — malformed, ignored, or an interruption naming instances;
//! 2. resolved ([`crate::resolve`]) — all instances of the invocation in one batched lookup;
//! 3. forwarded ([`crate::forward`]) — one message per owning cluster, all queues at once;
//! 4. dead-lettered if it failed permanently (malformed, queue missing, refused by SQS) and
//!    `DEAD_LETTER_QUEUE_URL` is set.
//!
//! Each record ends in exactly one [`Outcome`]. Only [`Outcome::Failed`] records are handed back:
//! named in `batchItemFailures` (the event source mapping redelivers just those), or, for a direct
//! invocation, as an invocation error (Lambda's async retries, then its on-failure destination).
//! Work not finished shortly before the invocation deadline counts as failed, so a timeout never
//! leaves records half-acknowledged.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde::Deserialize;
use serde_json::{Value, json, value::RawValue};
use tokio::time::Instant;

use crate::{
    config::Config,
    event::{self, Classified, IgnoreReason, Interruption, Kind, Malformed},
    forward::{Delivery, Destination, ForwardStats, Forwarder, Message},
    metrics::InvocationMetrics,
    resolve::{InstanceKey, Owner, Resolution, Resolver},
};

/// Time kept back from the invocation deadline to write the response and metrics: a tenth of the
/// remaining time, within these bounds.
const MIN_MARGIN: Duration = Duration::from_millis(100);
const MAX_MARGIN: Duration = Duration::from_secs(1);
/// Longest `detail` attribute put on a dead-lettered message.
const MAX_DETAIL: usize = 1024;

/// The router: built once per process in `main`, borrowed by every invocation.
pub struct Router {
    resolver: Resolver,
    forwarder: Forwarder,
    metrics_namespace: String,
    function_name: String,
    cold_start: AtomicBool,
}

/// How one record ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Delivered to every owning cluster's queue.
    Forwarded,
    /// Well formed, but nothing to deliver.
    Ignored(IgnoreReason),
    /// Failed permanently; the original payload is in the dead-letter queue with this reason.
    DeadLettered(DeadLetterReason),
    /// Not done; hand it back for a retry.
    Failed(String),
}

/// The `reason` attribute on a dead-lettered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterReason {
    Malformed,
    QueueMissing,
    Rejected,
}

impl DeadLetterReason {
    pub fn label(self) -> &'static str {
        match self {
            DeadLetterReason::Malformed => "malformed",
            DeadLetterReason::QueueMissing => "queue-missing",
            DeadLetterReason::Rejected => "rejected",
        }
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
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
}

/// Per-record state between the steps.
enum Plan {
    Decided(Outcome),
    /// Malformed: straight to the dead-letter queue.
    DeadLetter(Malformed),
    /// Messages `messages[range]` carry this interruption to its clusters.
    Forward {
        interruption: Interruption,
        messages: std::ops::Range<usize>,
        unresolved: Option<String>,
        ignored: Option<IgnoreReason>,
    },
}

impl Router {
    pub fn new(
        config: &Config,
        ec2: aws_sdk_ec2::Client,
        sqs: aws_sdk_sqs::Client,
        function_name: String,
    ) -> Self {
        Self {
            resolver: Resolver::new(ec2, config.tags.clone(), &config.cache),
            forwarder: Forwarder::new(
                sqs,
                config.queue_names.clone(),
                config.dead_letter_queue_url.clone(),
                &config.cache,
            ),
            metrics_namespace: config.metrics_namespace.clone(),
            function_name,
            cold_start: AtomicBool::new(true),
        }
    }

    /// The Lambda handler: accepts both invocation shapes and prints one EMF document.
    pub async fn handle(&self, event: LambdaEvent<Box<RawValue>>) -> Result<Value, HandlerError> {
        let deadline = work_deadline(event.context.deadline, SystemTime::now());
        let mut metrics = InvocationMetrics {
            cold_start: self.cold_start.swap(false, Ordering::Relaxed),
            ..Default::default()
        };
        let result = self
            .handle_payload(
                &event.payload,
                &event.context.request_id,
                deadline,
                &mut metrics,
            )
            .await;
        println!(
            "{}",
            metrics.to_emf(
                &self.metrics_namespace,
                &self.function_name,
                unix_millis(SystemTime::now()) as u64
            )
        );
        result
    }

    async fn handle_payload(
        &self,
        payload: &RawValue,
        request_id: &str,
        deadline: Instant,
        metrics: &mut InvocationMetrics,
    ) -> Result<Value, HandlerError> {
        match sqs_records(payload)? {
            Some(sqs) => {
                let records = sqs
                    .records
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        if r.event_source.as_deref().is_some_and(|s| s != "aws:sqs") {
                            return Err(HandlerError::Unsupported(format!(
                                "record {i} comes from {:?}; the router reads SQS event source mappings and direct EventBridge events",
                                r.event_source.as_deref().unwrap_or_default()
                            )));
                        }
                        let id = r.message_id.as_deref().ok_or_else(|| {
                            HandlerError::Unsupported(format!("SQS record {i} has no messageId, so it could not be retried alone"))
                        })?;
                        Ok(Record { id, body: r.body.as_deref().unwrap_or_default() })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let outcomes = self.route(&records, deadline, metrics).await;
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
                };
                match self.route(&[record], deadline, metrics).await.remove(0) {
                    Outcome::Failed(why) => Err(HandlerError::NotRouted(why)),
                    outcome => Ok(json!({ "outcome": outcome_label(&outcome) })),
                }
            }
        }
    }

    /// Routes a set of records and returns one outcome per record, in order.
    pub async fn route(
        &self,
        records: &[Record<'_>],
        deadline: Instant,
        metrics: &mut InvocationMetrics,
    ) -> Vec<Outcome> {
        metrics.received += records.len() as u64;
        let classified: Vec<Result<Classified, Malformed>> =
            records.iter().map(|r| event::classify(r.body)).collect();

        // Resolve every instance of every record in one go.
        let keys = classified.iter().flat_map(|c| match c {
            Ok(Classified::Route(i)) => i
                .instances
                .iter()
                .map(|id| InstanceKey {
                    scope: i.scope.clone(),
                    instance: id.clone(),
                })
                .collect(),
            _ => Vec::new(),
        });
        let resolution =
            tokio::time::timeout_at(deadline, self.resolver.resolve(keys.collect::<Vec<_>>()))
                .await
                .ok();
        if let Some(r) = &resolution {
            metrics.cache_hits += r.cache_hits;
            metrics.cache_misses += r.cache_misses;
            metrics.describe_instances_calls += r.describe_calls;
        }

        // Plan each record's messages.
        let mut messages = Vec::new();
        let plans: Vec<Plan> = classified
            .into_iter()
            .zip(records)
            .map(|(c, record)| match c {
                Err(malformed) => Plan::DeadLetter(malformed),
                Ok(Classified::Ignore { reason, .. }) => Plan::Decided(Outcome::Ignored(reason)),
                Ok(Classified::Route(interruption)) => plan_forward(
                    interruption,
                    record.body,
                    resolution.as_ref(),
                    &mut messages,
                ),
            })
            .collect();

        // Round one: the clusters' queues (and malformed records to the dead-letter queue).
        let dead_letter = |record: &Record<'_>,
                           reason: DeadLetterReason,
                           detail: &str,
                           extra: Option<(&'static str, String)>| {
            let mut attributes = vec![
                ("reason", reason.label().to_owned()),
                ("detail", truncate(detail, MAX_DETAIL).to_owned()),
            ];
            attributes.extend(extra);
            Message {
                destination: Destination::DeadLetter,
                body: record.body.to_owned(),
                attributes,
            }
        };
        let has_dlq = self.forwarder.has_dead_letter_queue();
        let mut round_one_dlq = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            if let (Plan::DeadLetter(malformed), true) = (plan, has_dlq) {
                round_one_dlq.insert(i, (messages.len(), DeadLetterReason::Malformed));
                messages.push(dead_letter(
                    &records[i],
                    DeadLetterReason::Malformed,
                    &malformed.0,
                    None,
                ));
            }
        }
        let stats = ForwardStats::default();
        let deliveries = self.forwarder.deliver(&messages, deadline, &stats).await;

        // Decide each record; permanent failures of round one go to the dead-letter queue in round two.
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(records.len());
        let mut second = Vec::new();
        let mut round_two = BTreeMap::new();
        for (i, plan) in plans.iter().enumerate() {
            let record = &records[i];
            let outcome = match plan {
                Plan::Decided(outcome) => outcome.clone(),
                Plan::DeadLetter(malformed) => match round_one_dlq.get(&i) {
                    Some(&(m, reason)) => dead_letter_outcome(&deliveries[m], reason),
                    None => Outcome::Failed(format!(
                        "{malformed} (no DEAD_LETTER_QUEUE_URL to keep it)"
                    )),
                },
                Plan::Forward {
                    interruption,
                    messages: range,
                    unresolved,
                    ignored,
                } => {
                    log_deliveries(
                        interruption,
                        &messages[range.clone()],
                        &deliveries[range.clone()],
                        metrics,
                    );
                    match forward_outcome(
                        &messages[range.clone()],
                        &deliveries[range.clone()],
                        unresolved.as_deref(),
                        *ignored,
                    ) {
                        Ok(outcome) => outcome,
                        Err((reason, detail, clusters)) if has_dlq => {
                            round_two.insert(i, (second.len(), reason));
                            second.push(dead_letter(
                                record,
                                reason,
                                &detail,
                                Some(("clusters", clusters)),
                            ));
                            // Until round two says otherwise: a record is acknowledged only once
                            // its dead-letter copy is confirmed.
                            Outcome::Failed(format!("{reason}: {detail}; dead-letter send pending"))
                        }
                        Err((reason, detail, _)) => Outcome::Failed(format!(
                            "{reason}: {detail} (no DEAD_LETTER_QUEUE_URL to keep it)"
                        )),
                    }
                }
            };
            outcomes.push(outcome);
        }
        let second_deliveries = if second.is_empty() {
            Vec::new()
        } else {
            self.forwarder.deliver(&second, deadline, &stats).await
        };
        for (i, (m, reason)) in round_two {
            outcomes[i] = dead_letter_outcome(&second_deliveries[m], reason);
        }
        metrics.send_message_batch_calls += stats.send_message_batch_calls.into_inner();
        metrics.get_queue_url_calls += stats.get_queue_url_calls.into_inner();

        for ((record, plan), outcome) in records.iter().zip(&plans).zip(&outcomes) {
            record_outcome(record, plan, outcome, metrics);
        }
        outcomes
    }
}

/// Finds each instance's owner and writes one message per owning cluster.
fn plan_forward(
    interruption: Interruption,
    body: &str,
    resolution: Option<&Resolution>,
    messages: &mut Vec<Message>,
) -> Plan {
    let mut by_cluster: BTreeMap<Arc<str>, Vec<event::InstanceId>> = BTreeMap::new();
    let mut unresolved = None;
    let mut ignored = None;
    for id in &interruption.instances {
        let key = InstanceKey {
            scope: interruption.scope.clone(),
            instance: id.clone(),
        };
        match resolution.map(|r| r.owners.get(&key)) {
            Some(Some(Ok(Owner::Cluster(cluster)))) => by_cluster
                .entry(cluster.clone())
                .or_default()
                .push(id.clone()),
            Some(Some(Ok(Owner::NotOurs(reason)))) => {
                ignored.get_or_insert(*reason);
            }
            Some(Some(Err(e))) => unresolved = Some(e.to_string()),
            Some(None) | None => {
                unresolved = Some("deadline reached before the instance lookup finished".into())
            }
        }
    }
    let start = messages.len();
    for (cluster, ids) in by_cluster {
        let body = match interruption.kind {
            Kind::ScheduledChange => match event::health_body_for(body, &ids) {
                Ok(body) => body,
                // classify accepted this body, so this cannot happen; refuse rather than leak.
                Err(malformed) => {
                    messages.truncate(start);
                    return Plan::DeadLetter(malformed);
                }
            },
            _ => body.to_owned(),
        };
        let destination = Destination::Cluster {
            scope: interruption.scope.clone(),
            cluster,
        };
        messages.push(Message {
            destination,
            body,
            attributes: Vec::new(),
        });
    }
    Plan::Forward {
        interruption,
        messages: start..messages.len(),
        unresolved,
        ignored,
    }
}

/// The outcome of a forwarded record, or the permanent failure to dead-letter
/// (reason, detail, clusters affected).
fn forward_outcome(
    messages: &[Message],
    deliveries: &[Delivery],
    unresolved: Option<&str>,
    ignored: Option<IgnoreReason>,
) -> Result<Outcome, (DeadLetterReason, String, String)> {
    let mut permanent: Option<(DeadLetterReason, String)> = None;
    let mut clusters = Vec::new();
    for (message, delivery) in messages.iter().zip(deliveries) {
        let cluster = match &message.destination {
            Destination::Cluster { cluster, .. } => cluster.to_string(),
            Destination::DeadLetter => String::new(),
        };
        match delivery {
            Delivery::Sent => {}
            Delivery::Failed { error } => {
                return Ok(Outcome::Failed(format!("sending to {cluster}: {error}")));
            }
            Delivery::Unfinished => {
                return Ok(Outcome::Failed(format!(
                    "deadline reached before sending to {cluster}"
                )));
            }
            Delivery::QueueMissing { queue } => {
                permanent.get_or_insert((
                    DeadLetterReason::QueueMissing,
                    format!("queue {queue} of cluster {cluster} does not exist"),
                ));
                clusters.push(cluster);
            }
            Delivery::Rejected { code, message } => {
                permanent.get_or_insert((
                    DeadLetterReason::Rejected,
                    format!("SQS refused the message for {cluster}: {code}: {message}"),
                ));
                clusters.push(cluster);
            }
        }
    }
    // A lookup failure is transient: retry the record, even if its other clusters got their copy.
    if let Some(error) = unresolved {
        return Ok(Outcome::Failed(error.to_owned()));
    }
    match permanent {
        Some((reason, detail)) => Err((reason, detail, clusters.join(","))),
        None if messages.is_empty() => Ok(Outcome::Ignored(
            ignored.unwrap_or(IgnoreReason::UnknownInstance),
        )),
        None => Ok(Outcome::Forwarded),
    }
}

fn dead_letter_outcome(delivery: &Delivery, reason: DeadLetterReason) -> Outcome {
    match delivery {
        Delivery::Sent => Outcome::DeadLettered(reason),
        other => Outcome::Failed(format!(
            "{reason}, and the dead-letter queue did not take it: {other:?}"
        )),
    }
}

/// Logs each delivery of a forwarded record and counts the messages that reached a cluster.
fn log_deliveries(
    interruption: &Interruption,
    messages: &[Message],
    deliveries: &[Delivery],
    metrics: &mut InvocationMetrics,
) {
    let now = unix_millis(SystemTime::now());
    let age_ms = interruption
        .time
        .as_deref()
        .and_then(event::rfc3339_unix_millis)
        .map(|t| (now - t).max(0) as u64);
    for (message, delivery) in messages.iter().zip(deliveries) {
        let Destination::Cluster { cluster, .. } = &message.destination else {
            continue;
        };
        if *delivery == Delivery::Sent {
            *metrics.forwarded.entry(cluster.clone()).or_default() += 1;
            if let Some(age) = age_ms {
                metrics.oldest_event_age_ms =
                    Some(metrics.oldest_event_age_ms.map_or(age, |a| a.max(age)));
            }
            tracing::info!(
                event_id = interruption.id.as_deref().unwrap_or_default(),
                kind = %interruption.kind,
                instances = %join(&interruption.instances),
                cluster = %cluster,
                age_ms,
                outcome = "forwarded",
                "forwarded"
            );
        }
    }
}

fn record_outcome(
    record: &Record<'_>,
    plan: &Plan,
    outcome: &Outcome,
    metrics: &mut InvocationMetrics,
) {
    let (event_id, kind, instances) = match plan {
        Plan::Forward { interruption, .. } => (
            interruption.id.as_deref().unwrap_or_default(),
            interruption.kind.label(),
            join(&interruption.instances),
        ),
        _ => ("", "", String::new()),
    };
    match outcome {
        Outcome::Forwarded => {}
        Outcome::Ignored(reason) => {
            *metrics.ignored.entry(reason.label()).or_default() += 1;
            tracing::info!(record = record.id, event_id, kind, instances, outcome = "ignored", reason = %reason, "ignored");
        }
        Outcome::DeadLettered(reason) => {
            *metrics.dead_lettered.entry(reason.label()).or_default() += 1;
            let detail = match plan {
                Plan::DeadLetter(malformed) => malformed.0.as_str(),
                _ => "",
            };
            tracing::warn!(record = record.id, event_id, kind, instances, outcome = "dead-lettered", reason = %reason, detail, "dead-lettered");
        }
        Outcome::Failed(error) => {
            metrics.failed += 1;
            tracing::warn!(record = record.id, event_id, kind, instances, outcome = "failed", error = %error, "failed, will be retried");
        }
    }
}

fn outcome_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Forwarded => "forwarded",
        Outcome::Ignored(_) => "ignored",
        Outcome::DeadLettered(_) => "dead-lettered",
        Outcome::Failed(_) => "failed",
    }
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

/// When to stop starting work: the invocation deadline less a margin for the response.
fn work_deadline(deadline_ms: u64, now: SystemTime) -> Instant {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let remaining = Duration::from_millis(deadline_ms).saturating_sub(since_epoch);
    let margin = (remaining / 10).clamp(MIN_MARGIN, MAX_MARGIN);
    Instant::now() + remaining.saturating_sub(margin)
}

fn unix_millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn join(ids: &[event::InstanceId]) -> String {
    ids.iter()
        .map(event::InstanceId::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
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

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }

    #[test]
    fn a_record_is_forwarded_only_when_every_copy_was_sent() {
        let m = |c: &str| Message {
            destination: Destination::Cluster {
                scope: Default::default(),
                cluster: Arc::from(c),
            },
            body: "{}".into(),
            attributes: vec![],
        };
        let two = [m("a"), m("b")];
        assert_eq!(
            forward_outcome(&two, &[Delivery::Sent, Delivery::Sent], None, None),
            Ok(Outcome::Forwarded)
        );
        assert!(matches!(
            forward_outcome(&two, &[Delivery::Sent, Delivery::Unfinished], None, None),
            Ok(Outcome::Failed(_))
        ));
        assert!(matches!(
            forward_outcome(
                &two,
                &[Delivery::Sent, Delivery::Sent],
                Some("throttled"),
                None
            ),
            Ok(Outcome::Failed(_))
        ));
        let missing = Delivery::QueueMissing {
            queue: "karpenter-b".into(),
        };
        match forward_outcome(&two, &[Delivery::Sent, missing.clone()], None, None) {
            Err((DeadLetterReason::QueueMissing, detail, clusters)) => {
                assert!(detail.contains("karpenter-b"), "{detail}");
                assert_eq!(clusters, "b");
            }
            other => panic!("{other:?}"),
        }
        // Transient beats permanent: retry first, dead-letter only once nothing else can help.
        assert!(matches!(
            forward_outcome(
                &two,
                &[
                    Delivery::Failed {
                        error: "503".into()
                    },
                    missing
                ],
                None,
                None
            ),
            Ok(Outcome::Failed(_))
        ));
        assert_eq!(
            forward_outcome(&[], &[], None, Some(IgnoreReason::UnmanagedInstance)),
            Ok(Outcome::Ignored(IgnoreReason::UnmanagedInstance))
        );
    }
}
