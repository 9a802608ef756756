//! Route: one batch of records, from classification to the last hand-back.
//!
//! [`Router::route`] is a list of steps, each taking the records in one state type and giving
//! them back in the next ([`super::records`]):
//!
//! 1. [`admit`](Router::admit): classify each record and admit its account into a place, and
//!    [`vouch`](Router::vouch) for the direct queue's records' senders;
//! 2. [`deliver`](Router::deliver): resolve owners and send copies, retrying what fails;
//! 3. settle: decide each routed record from its deliveries;
//! 4. [`give_up`](Router::give_up) and [`keep`](Router::keep): dead-letter permanent failures,
//!    and transient ones past their grace or on their last receive, with a reason;
//! 5. [`hand_back`](Router::hand_back): shorten the visibility of the records handed back.
//!
//! Step 2 is an event loop in which every lookup chunk and every send wave is a job of its own:
//! a record whose instances are known is sent as soon as they are, whatever else is still being
//! looked up or retried, and each failed job is retried on its own backoff while the
//! [`Budget`] allows. So records that succeed are never held back by ones that fail.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use futures_util::{StreamExt, future::BoxFuture, stream::FuturesUnordered};

use super::{
    Record, Router,
    outcome::{Cause, DeadLetterReason, Failure, Finished, Outcome, dead_letter_outcome},
    records::{
        Admitted, CopyRef, DeadLetter, Entry, Fate, Kept, Progress, Routing, Settled, Subject,
        dead_letter_message,
    },
    report,
};
use crate::{
    accounts::{Home, Place, Refused},
    aws::Aws,
    direct::Unchecked,
    event::{self, Classified, IgnoreReason},
    forward::{Delivery, ForwardStats, Message},
    metrics::InvocationMetrics,
    redeliver::{self, HandBack, HandBackStats},
    resolve::{Found, InstanceKey, LookupStats, ResolveError, Resolver},
    retry::{self, Budget, DENIAL_GRACE},
};

/// A job of the delivery loop, finished.
enum Done {
    Looked {
        answers: Vec<(InstanceKey, Result<Found, Arc<ResolveError>>)>,
        attempt: u32,
    },
    Sent {
        deliveries: Vec<(CopyRef, Delivery)>,
        attempt: u32,
    },
}

type Jobs<'a> = FuturesUnordered<BoxFuture<'a, Done>>;

impl<A: Aws> Router<A> {
    /// Routes a set of records and returns one outcome per record, in order.
    pub(super) async fn route(
        &self,
        records: &[Record<'_>],
        home: &Home,
        budget: Budget,
        metrics: &mut InvocationMetrics,
    ) -> Vec<Outcome> {
        metrics.received += records.len() as u64;
        let mut admitted = self.admit(records, home);
        self.vouch(&mut admitted, home).await;
        self.deliver(&mut admitted, &budget, metrics).await;
        let settled: Vec<Entry<'_, Settled>> = admitted
            .into_iter()
            .map(|e| e.next(Admitted::settle))
            .collect();
        let settled = self.give_up(settled);
        let kept = self.keep(settled, &home.place(), &budget, metrics).await;
        self.hand_back(&kept, &home.place(), &budget, metrics).await;
        kept.into_iter()
            .map(|entry| {
                let outcome = entry.state.outcome();
                report::record_outcome(entry.record, &entry.subject, &outcome, metrics);
                outcome
            })
            .collect()
    }

    /// Step 1: what each record is, and where it is routed.
    fn admit<'r>(&self, records: &'r [Record<'r>], home: &Home) -> Vec<Entry<'r, Admitted>> {
        records
            .iter()
            .map(|record| {
                let (subject, state) = match event::classify(record.body) {
                    Err(malformed) => (
                        Subject::default(),
                        Admitted::DeadLetter(DeadLetter::new(
                            DeadLetterReason::Malformed,
                            malformed.0,
                        )),
                    ),
                    Ok(Classified::Ignore { reason, kind }) => (
                        Subject {
                            kind: kind.map_or("", |k| k.label()),
                            ..Subject::default()
                        },
                        Admitted::Done(Finished::Ignored(reason)),
                    ),
                    Ok(Classified::Route(event)) => {
                        match self.accounts.admit(home, &event.origin) {
                            Ok(place) => (
                                Subject::of(&event, Some(&place)),
                                Admitted::Routing(Routing::new(Arc::new(event), place)),
                            ),
                            Err(refused @ Refused::NotServed { .. }) => (
                                Subject::of(&event, None),
                                Admitted::DeadLetter(DeadLetter::new(
                                    DeadLetterReason::AccountNotServed,
                                    refused.to_string(),
                                )),
                            ),
                            // Fail closed, and keep the record: the next receive may know.
                            Err(refused @ Refused::HomeUnknown) => (
                                Subject::of(&event, None),
                                Admitted::Failed(Failure::new(
                                    Cause::HomeUnknown,
                                    refused.to_string(),
                                )),
                            ),
                        }
                    }
                };
                Entry {
                    record,
                    subject,
                    state,
                }
            })
            .collect()
    }

    /// Step 1b: a record of the direct queue, or a replay of one of its dead letters, is routed
    /// only if its sender is the direct role of the account it names ([`crate::direct`]).
    async fn vouch(&self, entries: &mut [Entry<'_, Admitted>], home: &Home) {
        let Some(direct) = &self.direct else {
            return;
        };
        let direct_records: Vec<usize> = (0..entries.len())
            .filter(|&r| {
                matches!(entries[r].state, Admitted::Routing(_))
                    && direct.is_direct(entries[r].record.source_queue())
            })
            .collect();
        if direct_records.is_empty() {
            return;
        }
        let asked: Vec<(&Place, Option<&str>)> = direct_records
            .iter()
            .filter_map(|&r| match &entries[r].state {
                Admitted::Routing(routing) => Some((&routing.place, entries[r].record.sender_id)),
                _ => None,
            })
            .collect();
        let verdicts = direct.check(home, &asked).await;
        for (r, verdict) in direct_records.into_iter().zip(verdicts) {
            let entry = &mut entries[r];
            match verdict {
                Ok(Ok(())) => {}
                Ok(Err(foreign)) => {
                    entry.state = Admitted::DeadLetter(DeadLetter::new(
                        DeadLetterReason::ForeignSender,
                        foreign.to_string(),
                    ));
                }
                Err(unchecked) => {
                    let cause = match &unchecked {
                        Unchecked::Unreachable(_) => Cause::AccountUnreachable,
                        u if u.is_denial() => Cause::AccessDenied,
                        _ => Cause::SenderUnchecked,
                    };
                    entry.state = Admitted::Failed(Failure::new(cause, unchecked.to_string()));
                }
            }
        }
    }

    /// Step 2: owners from the cache at once, lookups for the rest (one job per chunk), and a
    /// send wave each time records become fully resolved. Failed jobs are retried with backoff
    /// while the budget allows; whatever is unfinished at `deliver_until` is left as it is.
    async fn deliver(
        &self,
        entries: &mut [Entry<'_, Admitted>],
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) {
        let mut waiting: BTreeMap<InstanceKey, Vec<usize>> = BTreeMap::new();
        for (r, entry) in entries.iter().enumerate() {
            if let Admitted::Routing(routing) = &entry.state {
                for key in routing.wanted() {
                    let records = waiting.entry(key).or_default();
                    if records.last() != Some(&r) {
                        records.push(r);
                    }
                }
            }
        }
        if waiting.is_empty() {
            return;
        }
        let lookups = LookupStats::default();
        let sends = ForwardStats::default();
        let (hits, misses) = self.resolver.cached(waiting.keys().cloned());
        metrics.cache_hits += hits.len() as u64;
        metrics.cache_misses += misses.len() as u64;
        answer(entries, &waiting, hits.into_iter().map(|(k, o)| (k, Ok(o))));

        let mut jobs: Jobs<'_> = FuturesUnordered::new();
        for chunk in Resolver::<A>::chunk(misses) {
            jobs.push(self.look_up(chunk, 0, Duration::ZERO, &lookups));
        }
        self.send_ready(entries, budget, &sends, &mut jobs);
        while let Ok(Some(done)) = tokio::time::timeout_at(budget.deliver_until, jobs.next()).await
        {
            match done {
                Done::Looked { answers, attempt } => {
                    let failed = answer(entries, &waiting, answers);
                    if !failed.is_empty()
                        && let Some(delay) = budget.retry_delay(attempt + 1, self.aws.jitter())
                    {
                        for chunk in Resolver::<A>::chunk(failed) {
                            metrics.retries += 1;
                            jobs.push(self.look_up(chunk, attempt + 1, delay, &lookups));
                        }
                    }
                    self.send_ready(entries, budget, &sends, &mut jobs);
                }
                Done::Sent {
                    deliveries,
                    attempt,
                } => {
                    let retry = self.record_deliveries(entries, deliveries, metrics);
                    if !retry.is_empty()
                        && let Some(delay) = budget.retry_delay(attempt + 1, self.aws.jitter())
                    {
                        metrics.retries += 1;
                        jobs.push(self.send(retry, attempt + 1, delay, budget, &sends));
                    }
                }
            }
        }
        // Jobs still running at the deadline are abandoned with their records unfinished.
        drop(jobs);
        // The records are delivered (or given up): now the sweeps this batch's misses decided on.
        self.resolver
            .sweep_pending(budget.deliver_until, &lookups)
            .await;
        metrics.describe_instances_calls += lookups
            .calls
            .describe_instances
            .load(std::sync::atomic::Ordering::Relaxed);
        metrics.get_resources_calls += lookups
            .calls
            .get_resources
            .load(std::sync::atomic::Ordering::Relaxed);
        metrics.hedged_lookups += lookups.hedged.into_inner();
        metrics.stale_answers += lookups.stale_answers.into_inner();
        metrics.sweeps += lookups.sweeps.into_inner();
        metrics.send_message_batch_calls += sends.send_message_batch_calls.get();
        metrics.get_queue_url_calls += sends.get_queue_url_calls.get();
        metrics.queue_ownership_calls += sends.queue_ownership_calls.get();
        metrics.tenant_record_calls += sends.tenant_record_calls.get();
    }

    /// A lookup job: one chunk of keys of one place, after `delay`.
    fn look_up<'a>(
        &'a self,
        chunk: Vec<InstanceKey>,
        attempt: u32,
        delay: Duration,
        stats: &'a LookupStats,
    ) -> BoxFuture<'a, Done> {
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let answers = self.resolver.look_up(&chunk, stats).await;
            Done::Looked { answers, attempt }
        })
    }

    /// Plans the copies of the records that just became fully resolved, and sends them as one
    /// job.
    fn send_ready<'a>(
        &'a self,
        entries: &mut [Entry<'_, Admitted>],
        budget: &Budget,
        stats: &'a ForwardStats,
        jobs: &mut Jobs<'a>,
    ) {
        let mut wave = Vec::new();
        for (r, entry) in entries.iter_mut().enumerate() {
            let Admitted::Routing(routing) = &mut entry.state else {
                continue;
            };
            match routing.plan(entry.record.body) {
                None => {}
                Some(Ok(_)) => {
                    if let Progress::Sending { copies, .. } = &routing.progress {
                        wave.extend(
                            copies
                                .iter()
                                .enumerate()
                                .map(|(c, copy)| (CopyRef { r, c }, copy.message.clone())),
                        );
                    }
                }
                // classify accepted this body, so this should not happen; refuse rather than leak.
                Some(Err(malformed)) => {
                    entry.state = Admitted::DeadLetter(DeadLetter::new(
                        DeadLetterReason::Malformed,
                        malformed.0,
                    ));
                }
            }
        }
        if !wave.is_empty() {
            jobs.push(self.send(wave, 0, Duration::ZERO, budget, stats));
        }
    }

    /// A send job: these copies, after `delay`, all batched together.
    fn send<'a>(
        &'a self,
        copies: Vec<(CopyRef, Message)>,
        attempt: u32,
        delay: Duration,
        budget: &Budget,
        stats: &'a ForwardStats,
    ) -> BoxFuture<'a, Done> {
        let deadline = budget.deliver_until;
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let (refs, messages): (Vec<CopyRef>, Vec<Message>) = copies.into_iter().unzip();
            let deliveries = self.forwarder.deliver(&messages, deadline, stats).await;
            Done::Sent {
                deliveries: refs.into_iter().zip(deliveries).collect(),
                attempt,
            }
        })
    }

    /// Stores a wave's deliveries, logs each copy that arrived, and returns the copies worth
    /// sending again.
    fn record_deliveries(
        &self,
        entries: &mut [Entry<'_, Admitted>],
        deliveries: Vec<(CopyRef, Delivery)>,
        metrics: &mut InvocationMetrics,
    ) -> Vec<(CopyRef, Message)> {
        let now = unix_millis(self.aws.now());
        let mut retry = Vec::new();
        for (at, delivery) in deliveries {
            let entry = &mut entries[at.r];
            let Admitted::Routing(routing) = &mut entry.state else {
                continue;
            };
            let Progress::Sending { copies, .. } = &mut routing.progress else {
                continue;
            };
            let copy = &mut copies[at.c];
            let label = routing.place.label(&copy.cluster);
            match &delivery {
                Delivery::Sent => {
                    report::forwarded(
                        &routing.event,
                        &copy.instances,
                        &routing.place,
                        &copy.cluster,
                        &label,
                        now,
                        metrics,
                    );
                    let fate = Fate::Delivered {
                        cluster: copy.cluster.clone(),
                        at_ms: now,
                    };
                    entry.subject.copy(&copy.instances, &fate);
                }
                Delivery::NoTenantQueue { .. } => {
                    *metrics.no_tenant_queue.entry(label).or_default() += 1;
                    let fate = Fate::NotSent(IgnoreReason::NoTenantQueue);
                    entry.subject.copy(&copy.instances, &fate);
                }
                Delivery::Declined { kind } => {
                    tracing::debug!(cluster = %label, %kind, "declined by the cluster's tenant stack (EventKinds)");
                    *metrics.declined.entry((label, kind.label())).or_default() += 1;
                    let fate = Fate::NotSent(IgnoreReason::KindDeclined);
                    entry.subject.copy(&copy.instances, &fate);
                }
                Delivery::Failed { .. } | Delivery::Unreachable(_) | Delivery::Denied(_) => {
                    retry.push((at, copy.message.clone()));
                }
                Delivery::QueueMissing { .. }
                | Delivery::Rejected { .. }
                | Delivery::Unfinished => {}
            }
            copy.delivery = delivery;
        }
        retry
    }

    /// Step 4a: failed records the router stops retrying become dead letters, with their
    /// failure's reason: denied ones past their grace, and records on their last receive
    /// (`MAX_RECEIVE_COUNT`).
    fn give_up<'r>(&self, settled: Vec<Entry<'r, Settled>>) -> Vec<Entry<'r, Settled>> {
        let now = unix_millis(self.aws.now());
        settled
            .into_iter()
            .map(|entry| {
                let record = entry.record;
                entry.next(|state| match state {
                    Settled::Failed(failure) if failure.cause != Cause::NotKept => {
                        match self.give_up_on(record, &failure, now) {
                            Some(dead) => Settled::DeadLetter(dead),
                            None => Settled::Failed(failure),
                        }
                    }
                    other => other,
                })
            })
            .collect()
    }

    fn give_up_on(
        &self,
        record: &Record<'_>,
        failure: &Failure,
        now_ms: i64,
    ) -> Option<DeadLetter> {
        let origin = record.origin?;
        let detail = if failure.cause == Cause::AccessDenied
            && denial_grace_over(origin.first_receive_ms, now_ms)
        {
            // A configuration error someone must fix: say what and where, at ERROR.
            tracing::error!(record = record.id, reason = "access-denied", %failure, "a cluster queue refuses the router");
            format!(
                "denied for more than {} s: {failure}",
                DENIAL_GRACE.as_secs()
            )
        } else {
            let max = self
                .max_receive_count
                .filter(|max| origin.receive_count >= *max)?;
            format!(
                "still failing on receive {} of {max}: {failure}",
                origin.receive_count
            )
        };
        Some(DeadLetter::new(failure.cause.dead_letter_reason(), detail))
    }

    /// Step 4b: the dead-letter queue takes what is bound for it. Without one, or when it does
    /// not confirm taking a record, the record is handed back instead (and SQS's redrive is the
    /// last resort).
    async fn keep<'r>(
        &self,
        settled: Vec<Entry<'r, Settled>>,
        home: &Place,
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) -> Vec<Entry<'r, Kept>> {
        // Each dead letter's message, by the record's position.
        let bound: Vec<(usize, Message)> = settled
            .iter()
            .enumerate()
            .filter_map(|(i, entry)| match &entry.state {
                Settled::DeadLetter(d) if self.forwarder.has_dead_letter_queue() => {
                    Some((i, dead_letter_message(entry.record, d, home)))
                }
                _ => None,
            })
            .collect();
        let mut deliveries: BTreeMap<usize, Delivery> = BTreeMap::new();
        if !bound.is_empty() {
            let (at, messages): (Vec<usize>, Vec<Message>) = bound.into_iter().unzip();
            let stats = ForwardStats::default();
            let sent = self
                .forwarder
                .deliver(&messages, budget.finish_by, &stats)
                .await;
            metrics.send_message_batch_calls += stats.send_message_batch_calls.get();
            deliveries.extend(at.into_iter().zip(sent));
        }
        settled
            .into_iter()
            .enumerate()
            .map(|(i, entry)| {
                entry.next(|state| match state {
                    Settled::Done(finished) => Kept::Done(finished),
                    Settled::Failed(failure) => Kept::Failed(failure),
                    Settled::DeadLetter(d) => match deliveries.remove(&i) {
                        Some(delivery) => match dead_letter_outcome(&delivery, d.reason) {
                            Outcome::Finished(finished) => Kept::Done(finished),
                            Outcome::Failed(failure) => Kept::Failed(failure),
                        },
                        None => Kept::Failed(Failure::new(
                            Cause::NotKept,
                            format!(
                                "{}: {} (no DEAD_LETTER_QUEUE_URL to keep it)",
                                d.reason, d.detail
                            ),
                        )),
                    },
                })
            })
            .collect()
    }

    /// Step 5: records handed back to the ingest queue come back after a short, growing delay
    /// instead of the queue's visibility timeout.
    async fn hand_back(
        &self,
        kept: &[Entry<'_, Kept>],
        home: &Place,
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) {
        let records: Vec<HandBack<'_>> = kept
            .iter()
            .filter(|e| matches!(e.state, Kept::Failed(_)))
            .filter_map(|e| e.record.origin)
            .map(|origin| HandBack {
                origin,
                delay: retry::redelivery_delay(origin.receive_count, self.aws.jitter()),
            })
            .collect();
        if records.is_empty() {
            return;
        }
        let mut stats = HandBackStats::default();
        let handing = redeliver::hand_back(&*self.aws, home, &records, &mut stats);
        if tokio::time::timeout_at(budget.finish_by, handing)
            .await
            .is_err()
        {
            stats.failed = records.len() as u64 - stats.changed;
        }
        metrics.change_visibility_calls += stats.calls;
        metrics.redelivery_delays_set += stats.changed;
        metrics.redelivery_delays_failed += stats.failed;
    }
}

/// Gives each waiting record the owners found (and its subject what was told of them); returns
/// the keys whose lookup failed.
fn answer(
    entries: &mut [Entry<'_, Admitted>],
    waiting: &BTreeMap<InstanceKey, Vec<usize>>,
    answers: impl IntoIterator<Item = (InstanceKey, Result<Found, Arc<ResolveError>>)>,
) -> Vec<InstanceKey> {
    let mut failed = Vec::new();
    for (key, result) in answers {
        for &r in waiting.get(&key).into_iter().flatten() {
            let entry = &mut entries[r];
            if let Admitted::Routing(routing) = &mut entry.state {
                routing.answer(&key.instance, &result);
                if let Ok(found) = &result {
                    entry
                        .subject
                        .found
                        .insert(key.instance.clone(), found.clone());
                }
            }
        }
        if result.is_err() {
            failed.push(key);
        }
    }
    failed
}

/// Whether a denied record has been retried long enough: [`DENIAL_GRACE`] since it was first
/// received. Without a first-receive time, it has.
fn denial_grace_over(first_receive_ms: Option<i64>, now_ms: i64) -> bool {
    first_receive_ms.is_none_or(|at| now_ms - at >= DENIAL_GRACE.as_millis() as i64)
}

pub(super) fn unix_millis(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
