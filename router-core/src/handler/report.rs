//! Report: the log line and the metrics of each delivery and of each record's outcome.
//!
//! One `forwarded` line per copy that reached a cluster (with its account, region, and how old
//! the event was), and one line per record that was ignored, dead-lettered or handed back.

use crate::{
    accounts::Place,
    event::{self, InstanceId, Interruption},
    metrics::{Delivered, InvocationMetrics, LATE_AFTER_MS},
};

use super::{
    Record,
    outcome::{Cause, DeadLetterReason, Finished, Outcome},
    records::{Subject, join},
};

/// A copy of `event` naming `instances` (the cluster's own) reached `cluster`'s queue at `now`
/// (ms since the epoch).
pub(super) fn forwarded(
    event: &Interruption,
    instances: &[InstanceId],
    place: &Place,
    cluster: &str,
    label: &str,
    now: i64,
    metrics: &mut InvocationMetrics,
) {
    *metrics.forwarded.entry(label.to_owned()).or_default() += 1;
    let age_ms = event
        .time
        .as_deref()
        .and_then(event::rfc3339_unix_millis)
        .map(|t| (now - t).max(0) as u64);
    if let Some(age) = age_ms {
        metrics.forward_ages_ms.push(age);
        if age > LATE_AFTER_MS {
            metrics.late_forwards += 1;
        }
    }
    metrics.deliveries.push(Delivered {
        cluster: label.to_owned(),
        event_id: event.id.as_deref().unwrap_or_default().to_owned(),
        instances: join(instances),
        age_ms,
        kind: event.kind.label(),
    });
    tracing::info!(
        event_id = event.id.as_deref().unwrap_or_default(),
        kind = %event.kind,
        instances = %join(instances),
        account = %place.scope.account,
        region = %place.scope.region,
        cluster = %cluster,
        age_ms,
        outcome = "forwarded",
        "forwarded"
    );
}

/// Logs and counts a record's outcome (forwarded records were logged per copy already).
pub(super) fn record_outcome(
    record: &Record<'_>,
    subject: &Subject,
    outcome: &Outcome,
    metrics: &mut InvocationMetrics,
) {
    let Subject {
        event_id,
        kind,
        instances,
        account,
    } = subject;
    let receive_count = record.origin.map(|o| o.receive_count);
    match outcome {
        Outcome::Finished(Finished::Forwarded) => {}
        Outcome::Finished(Finished::Ignored(reason)) => {
            *metrics.ignored.entry(reason.label()).or_default() += 1;
            tracing::info!(record = record.id, event_id, kind, instances, account, outcome = "ignored", reason = %reason, "ignored");
        }
        Outcome::Finished(Finished::DeadLettered(reason)) => {
            *metrics.dead_lettered.entry(reason.label()).or_default() += 1;
            match reason {
                DeadLetterReason::AccountUnreachable => metrics.account_unreachable += 1,
                DeadLetterReason::AccessDenied => metrics.access_denied += 1,
                _ => {}
            }
            tracing::warn!(record = record.id, event_id, kind, instances, account, outcome = "dead-lettered", reason = %reason, "dead-lettered");
        }
        Outcome::Failed(failure) => {
            metrics.failed += 1;
            if failure.cause == Cause::AccountUnreachable {
                metrics.account_unreachable += 1;
            }
            tracing::warn!(record = record.id, event_id, kind, instances, account, receive_count, outcome = "failed", error = %failure, "failed, will be retried");
        }
    }
}
