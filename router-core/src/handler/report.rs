//! Report: the log line and the metrics of each delivery and of each record's outcome, and the
//! interruption records of each finished record.
//!
//! One `forwarded` line per copy that reached a cluster (with its account, region, and how old
//! the event was), and one line per record that was ignored, dead-lettered or handed back. A
//! finished record also gives one interruption record per instance it names ([`interruptions`]).

use crate::{
    accounts::Place,
    event::{self, IgnoreReason, InstanceId, Interruption},
    insight::{InterruptionRecord, UNKNOWN},
    metrics::{Delivered, InvocationMetrics, LATE_AFTER_MS},
    resolve::Owner,
};

use super::{
    Record,
    outcome::{Cause, DeadLetterReason, Finished, Outcome},
    records::{Fate, Subject, join},
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
    metrics
        .interruptions
        .extend(interruptions(subject, outcome));
    let Subject {
        event_id,
        kind,
        instances,
        account,
        ..
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

/// The interruption records of a finished record, one per instance it names (one naming none
/// when it names none: a body that is not an event, or an event ignored before any lookup). A
/// record handed back gives none: it is counted when it is finished.
///
/// Each instance's outcome is its own: a copy that reached its cluster is `forwarded` (with its
/// delay), one its cluster's tenant stack did not take is `ignored` (`no-tenant-queue`,
/// `kind-declined`), an instance no cluster owns is `ignored` with the lookup's reason, and the
/// rest take the record's outcome.
pub(super) fn interruptions(subject: &Subject, outcome: &Outcome) -> Vec<InterruptionRecord> {
    let (outcome, reason) = match outcome {
        Outcome::Finished(Finished::Forwarded) => ("forwarded", None),
        Outcome::Finished(Finished::Ignored(reason)) => ("ignored", Some(reason.label())),
        Outcome::Finished(Finished::DeadLettered(reason)) => {
            ("dead-lettered", Some(reason.label()))
        }
        Outcome::Failed(_) => return Vec::new(),
    };
    let event_ms = subject.time.as_deref().and_then(event::rfc3339_unix_millis);
    let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let base = InterruptionRecord {
        outcome: outcome.to_owned(),
        reason: reason.map(str::to_owned),
        account: text(&subject.account),
        region: text(&subject.region),
        cluster: None,
        kind: text(subject.kind),
        instance: None,
        instance_type: UNKNOWN.to_owned(),
        zone: UNKNOWN.to_owned(),
        capacity_type: UNKNOWN.to_owned(),
        node_pool: UNKNOWN.to_owned(),
        event_id: text(&subject.event_id),
        event_time: subject.time.clone(),
        delay_ms: None,
    };
    if subject.ids.is_empty() {
        return vec![base];
    }
    subject
        .ids
        .iter()
        .map(|id| {
            let mut line = InterruptionRecord {
                instance: Some(id.as_str().to_owned()),
                ..base.clone()
            };
            let found = subject.found.get(id);
            if let Some(about) = found.map(|f| &f.about) {
                let known =
                    |v: &Option<std::sync::Arc<str>>| v.as_deref().unwrap_or(UNKNOWN).to_owned();
                line.instance_type = known(&about.instance_type);
                line.zone = known(&about.zone);
                line.node_pool = known(&about.node_pool);
                line.capacity_type = about.capacity.map_or(UNKNOWN, |c| c.label()).to_owned();
            }
            let owner = found.map(|f| &f.owner);
            if let Some(Owner::Cluster(cluster)) = owner {
                line.cluster = Some(cluster.to_string());
            }
            let ignored = |line: &mut InterruptionRecord, why: IgnoreReason| {
                line.outcome = "ignored".to_owned();
                line.reason = Some(why.label().to_owned());
            };
            match (subject.fates.get(id), owner) {
                (Some(Fate::Delivered { cluster, at_ms }), _) => {
                    line.outcome = "forwarded".to_owned();
                    line.reason = None;
                    line.cluster = Some(cluster.to_string());
                    line.delay_ms = event_ms.map(|t| (at_ms - t).max(0) as u64);
                }
                (Some(Fate::NotSent(why)), _) => ignored(&mut line, *why),
                (None, Some(Owner::NotOurs(why))) => ignored(&mut line, *why),
                (None, _) => {}
            }
            line
        })
        .collect()
}
