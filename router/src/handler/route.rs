//! Route: one batch of records, from classification to the last hand-back.
//!
//! [`Router::route`] is a list of steps:
//!
//! 1. [`admit`](Router::admit): classify each record and check its account is served;
//! 2. [`deliver`](Router::deliver): resolve owners and send copies, retrying what fails;
//! 3. [`settle`]: decide each record from its deliveries;
//! 4. [`keep`](Router::keep): dead-letter permanent failures, and transient ones on their
//!    last receive, with a reason;
//! 5. [`hand_back`](Router::hand_back): shorten the visibility of the records handed back.
//!
//! Step 2 is an event loop in which every lookup chunk and every send wave is a job of its own:
//! a record whose instances are known is sent as soon as they are, whatever else is still being
//! looked up or retried, and each failed job is retried on its own backoff while the [`Budget`]
//! allows. So records that succeed are never held back by ones that fail.

use std::{
    sync::{Arc, atomic::Ordering},
    time::{Duration, SystemTime},
};

use futures_util::{StreamExt, future::BoxFuture, stream::FuturesUnordered};
use tokio::time::Instant;

use super::{
    Record, Router,
    outcome::{Cause, DeadLetterReason, Failure, Outcome, dead_letter_outcome},
    records::{
        DeadLetter, Entry, Routing, State, answer, dead_letter_message, keys_by_record,
        plan_copies, settle, unix_millis,
    },
    report,
};
use crate::{
    accounts::Refused,
    event::{self, Classified, Interruption},
    forward::{Delivery, Destination, ForwardStats, Message},
    metrics::InvocationMetrics,
    redeliver::{HandBack, HandBackStats},
    resolve::{InstanceKey, LookupStats, Owner, ResolveError, Resolver},
    retry,
};

/// How long an SQS batch retries inside its invocation before handing records back: about four
/// backoff steps, enough to ride out a brownout. Past that, a record handed back with a short
/// visibility returns as soon as another retry here would, and the invocation ends, so its
/// execution environment takes the next batch instead of idling on one failing destination.
pub const BATCH_RETRY_WINDOW: Duration = Duration::from_secs(4);
/// Longest time kept back from delivering for the dead-letter and hand-back steps.
const MAX_RESERVE: Duration = Duration::from_secs(2);
/// How long a record SQS refuses as not allowed is retried before it is dead-lettered
/// `access-denied`, counted from when it was first received (or, for a direct invocation, from the
/// event's time). A denial is a configuration error, but right after a deploy it can be
/// propagation: SQS says attribute changes (the queue policy among them) take up to 60 seconds to
/// propagate (SetQueueAttributes API reference), and IAM changes are eventually consistent too.
/// Within it the record is handed back with the usual short visibility, so it returns in seconds.
pub const DENIAL_GRACE: Duration = Duration::from_secs(60);
/// Longest wait for the ingest queue's redrive policy in one invocation.
const MAX_POLICY_READ: Duration = Duration::from_secs(1);

/// How the records came, which decides how long retrying inside the invocation is worth it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An SQS batch: a record handed back returns in seconds ([`crate::redeliver`]).
    Batch,
    /// A direct invocation: a failure waits for Lambda's async retry, a minute or more later,
    /// so the whole invocation is spent retrying first.
    Direct,
}

/// When each step of an invocation must be done.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// No retry is scheduled to start after this.
    pub retry_until: Instant,
    /// No lookup or send runs past this; what is left is for the dead-letter queue and hand-backs.
    pub deliver_until: Instant,
    /// Everything is done by this.
    pub finish_by: Instant,
}

impl Budget {
    /// The budget of an invocation that must answer by `finish_by`.
    pub fn new(finish_by: Instant, mode: Mode) -> Self {
        let now = Instant::now();
        let reserve = (finish_by.saturating_duration_since(now) / 5).min(MAX_RESERVE);
        let deliver_until = finish_by - reserve;
        let retry_until = match mode {
            Mode::Batch => deliver_until.min(now + BATCH_RETRY_WINDOW),
            Mode::Direct => deliver_until,
        };
        Self {
            retry_until,
            deliver_until,
            finish_by,
        }
    }

    /// The wait before retry number `attempt` of a job, if the retry would still start in time.
    fn retry_delay(&self, attempt: u32) -> Option<Duration> {
        let delay = retry::backoff(attempt, retry::jitter());
        (Instant::now() + delay < self.retry_until).then_some(delay)
    }
}

/// A job of the delivery loop, finished.
enum Done {
    Looked {
        answers: Vec<(InstanceKey, Result<Owner, Arc<ResolveError>>)>,
        attempt: u32,
    },
    Sent {
        copies: Vec<(usize, usize)>,
        deliveries: Vec<Delivery>,
        attempt: u32,
    },
}

impl Router {
    /// Routes a set of records and returns one outcome per record, in order.
    pub async fn route(
        &self,
        records: &[Record<'_>],
        budget: Budget,
        metrics: &mut InvocationMetrics,
    ) -> Vec<Outcome> {
        metrics.received += records.len() as u64;
        let mut entries = self.admit(records);
        self.deliver(&mut entries, &budget, metrics).await;
        settle(&mut entries);
        self.keep(&mut entries, &budget, metrics).await;
        self.hand_back(&mut entries, &budget, metrics).await;
        entries
            .into_iter()
            .map(|entry| {
                let State::Decided(outcome) = entry.state else {
                    unreachable!("keep decides every record");
                };
                report::record_outcome(
                    entry.record,
                    entry.interruption.as_ref(),
                    &outcome,
                    metrics,
                );
                outcome
            })
            .collect()
    }

    /// Step 1: what each record is, and whether its account is served. An event's missing
    /// account and region are the function's own.
    fn admit<'r>(&self, records: &'r [Record<'r>]) -> Vec<Entry<'r>> {
        records
            .iter()
            .map(|record| {
                let (interruption, state) = match event::classify(record.body) {
                    Err(malformed) => (
                        None,
                        State::DeadLetter(DeadLetter {
                            reason: DeadLetterReason::Malformed,
                            detail: malformed.0,
                            clusters: None,
                        }),
                    ),
                    Ok(Classified::Ignore { reason, .. }) => {
                        (None, State::Decided(Outcome::Ignored(reason)))
                    }
                    Ok(Classified::Route(mut interruption)) => {
                        interruption.scope = self.accounts.complete(&interruption.scope);
                        let state = match self.accounts.admit(&interruption.scope) {
                            Ok(()) => State::Routing(Routing::default()),
                            Err(refused @ Refused::NotServed { .. }) => {
                                State::DeadLetter(DeadLetter {
                                    reason: DeadLetterReason::AccountNotServed,
                                    detail: refused.to_string(),
                                    clusters: None,
                                })
                            }
                            // Fail closed, and keep the record: the next receive may know.
                            Err(refused @ Refused::HomeUnknown) => State::Decided(Outcome::Failed(
                                Failure::new(Cause::HomeUnknown, refused.to_string()),
                            )),
                        };
                        (Some(interruption), state)
                    }
                };
                Entry {
                    record,
                    interruption,
                    state,
                }
            })
            .collect()
    }

    /// Step 2: owners from the cache at once, lookups for the rest (one job per chunk), and a
    /// send wave each time records become fully resolved. Failed jobs are retried with backoff
    /// while the budget allows; whatever is unfinished at `deliver_until` is left as it is.
    async fn deliver(
        &self,
        entries: &mut [Entry<'_>],
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) {
        let waiting = keys_by_record(entries);
        if waiting.is_empty() {
            return;
        }
        let lookups = LookupStats::default();
        let sends = ForwardStats::default();
        let (hits, misses) = self.resolver.cached(waiting.keys().cloned()).await;
        metrics.cache_hits += hits.len() as u64;
        metrics.cache_misses += misses.len() as u64;
        answer(entries, &waiting, hits.into_iter().map(|(k, o)| (k, Ok(o))));

        let mut jobs: FuturesUnordered<BoxFuture<'_, Done>> = FuturesUnordered::new();
        for chunk in Resolver::chunk(misses) {
            jobs.push(self.look_up(chunk, 0, Duration::ZERO, &lookups));
        }
        if let Some(job) = self.send_ready(entries, budget, &sends) {
            jobs.push(job);
        }
        while let Ok(Some(done)) = tokio::time::timeout_at(budget.deliver_until, jobs.next()).await
        {
            match done {
                Done::Looked { answers, attempt } => {
                    let failed = answer(entries, &waiting, answers);
                    if !failed.is_empty()
                        && let Some(delay) = budget.retry_delay(attempt + 1)
                    {
                        for chunk in Resolver::chunk(failed) {
                            metrics.retries += 1;
                            jobs.push(self.look_up(chunk, attempt + 1, delay, &lookups));
                        }
                    }
                    if let Some(job) = self.send_ready(entries, budget, &sends) {
                        jobs.push(job);
                    }
                }
                Done::Sent {
                    copies,
                    deliveries,
                    attempt,
                } => {
                    let retry = self.record_deliveries(entries, copies, deliveries, metrics);
                    if !retry.is_empty()
                        && let Some(delay) = budget.retry_delay(attempt + 1)
                    {
                        metrics.retries += 1;
                        jobs.push(self.send(entries, retry, attempt + 1, delay, budget, &sends));
                    }
                }
            }
        }
        // Jobs still running at the deadline are abandoned with their records unfinished.
        drop(jobs);
        metrics.describe_instances_calls +=
            lookups.calls.describe_instances.load(Ordering::Relaxed);
        metrics.get_resources_calls += lookups.calls.get_resources.load(Ordering::Relaxed);
        metrics.hedged_lookups += lookups.hedged.into_inner();
        metrics.stale_answers += lookups.stale_answers.into_inner();
        metrics.send_message_batch_calls += sends.send_message_batch_calls.into_inner();
        metrics.get_queue_url_calls += sends.get_queue_url_calls.into_inner();
        metrics.queue_ownership_calls += sends.queue_ownership_calls.into_inner();
    }

    /// A lookup job: one chunk of keys of one scope, after `delay`.
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

    /// A send job for the records that just became fully resolved, if any.
    fn send_ready<'a>(
        &'a self,
        entries: &mut [Entry<'_>],
        budget: &Budget,
        stats: &'a ForwardStats,
    ) -> Option<BoxFuture<'a, Done>> {
        let mut wave = Vec::new();
        for (r, entry) in entries.iter_mut().enumerate() {
            let (State::Routing(routing), Some(interruption)) =
                (&mut entry.state, entry.interruption.as_ref())
            else {
                continue;
            };
            if routing.planned
                || !interruption
                    .instances
                    .iter()
                    .all(|id| routing.owners.contains_key(id))
            {
                continue;
            }
            match plan_copies(interruption, entry.record.body, routing) {
                Ok(()) => wave.extend((0..routing.copies.len()).map(|c| (r, c))),
                // classify accepted this body, so this cannot happen; refuse rather than leak.
                Err(malformed) => {
                    entry.state = State::DeadLetter(DeadLetter {
                        reason: DeadLetterReason::Malformed,
                        detail: malformed.0,
                        clusters: None,
                    })
                }
            }
        }
        (!wave.is_empty()).then(|| self.send(entries, wave, 0, Duration::ZERO, budget, stats))
    }

    /// A send job: these copies, after `delay`, all batched together.
    fn send<'a>(
        &'a self,
        entries: &[Entry<'_>],
        copies: Vec<(usize, usize)>,
        attempt: u32,
        delay: Duration,
        budget: &Budget,
        stats: &'a ForwardStats,
    ) -> BoxFuture<'a, Done> {
        let messages: Vec<Message> = copies
            .iter()
            .map(|&(r, c)| match &entries[r].state {
                State::Routing(routing) => routing.copies[c].clone(),
                _ => unreachable!("only routing records have copies"),
            })
            .collect();
        let deadline = budget.deliver_until;
        Box::pin(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let deliveries = self.forwarder.deliver(&messages, deadline, stats).await;
            Done::Sent {
                copies,
                deliveries,
                attempt,
            }
        })
    }

    /// Stores a wave's deliveries, logs each copy that arrived, and returns the copies worth
    /// sending again.
    fn record_deliveries(
        &self,
        entries: &mut [Entry<'_>],
        copies: Vec<(usize, usize)>,
        deliveries: Vec<Delivery>,
        metrics: &mut InvocationMetrics,
    ) -> Vec<(usize, usize)> {
        let now = unix_millis(SystemTime::now());
        let mut retry = Vec::new();
        for ((r, c), delivery) in copies.into_iter().zip(deliveries) {
            let entry = &mut entries[r];
            let State::Routing(routing) = &mut entry.state else {
                continue;
            };
            if let (Some(interruption), Destination::Cluster { scope, cluster }) =
                (&entry.interruption, &routing.copies[c].destination)
            {
                match &delivery {
                    Delivery::Sent => {
                        let label = self.cluster_label(scope, cluster);
                        report::forwarded(interruption, scope, cluster, &label, now, metrics);
                    }
                    Delivery::NoTenantQueue { .. } => {
                        let label = self.cluster_label(scope, cluster);
                        *metrics.no_tenant_queue.entry(label).or_default() += 1;
                    }
                    _ => {}
                }
            }
            if matches!(
                delivery,
                Delivery::Failed { .. } | Delivery::Unreachable(_) | Delivery::Denied(_)
            ) {
                retry.push((r, c));
            }
            routing.deliveries[c] = delivery;
        }
        retry
    }

    /// How a cluster is named in metrics: by name in the function's own account and region,
    /// `<account>.<region>.<name>` elsewhere (a name can repeat across accounts).
    fn cluster_label(&self, scope: &event::Scope, cluster: &str) -> String {
        let home_account = self.accounts.home_account();
        let home = scope.region.as_deref() == Some(self.accounts.home_region())
            && (home_account.is_none() || scope.account.as_deref() == home_account);
        if home {
            cluster.to_owned()
        } else {
            format!(
                "{}.{}.{cluster}",
                scope.account.as_deref().unwrap_or("-"),
                scope.region.as_deref().unwrap_or("-")
            )
        }
    }

    /// Step 4: the dead-letter queue takes what failed for good, with a reason, and what the
    /// router gives up on: a record still failing on its last receive (SQS would otherwise move it
    /// there without one) and a denied one past its [`DENIAL_GRACE`].
    async fn keep(
        &self,
        entries: &mut [Entry<'_>],
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) {
        if !self.forwarder.has_dead_letter_queue() {
            for entry in entries.iter_mut() {
                if let State::DeadLetter(d) = &entry.state {
                    let detail = format!(
                        "{}: {} (no DEAD_LETTER_QUEUE_URL to keep it)",
                        d.reason, d.detail
                    );
                    entry.state =
                        State::Decided(Outcome::Failed(Failure::new(Cause::NotKept, detail)));
                }
            }
            return;
        }
        self.give_up(entries, budget).await;
        let mut messages = Vec::new();
        let mut owners = Vec::new();
        for (r, entry) in entries.iter().enumerate() {
            if let State::DeadLetter(d) = &entry.state {
                owners.push((r, d.reason));
                messages.push(dead_letter_message(entry.record, d));
            }
        }
        if messages.is_empty() {
            return;
        }
        let stats = ForwardStats::default();
        let deliveries = self
            .forwarder
            .deliver(&messages, budget.finish_by, &stats)
            .await;
        metrics.send_message_batch_calls += stats.send_message_batch_calls.into_inner();
        for ((r, reason), delivery) in owners.into_iter().zip(&deliveries) {
            entries[r].state = State::Decided(dead_letter_outcome(delivery, reason));
        }
    }

    /// Failed records the router stops retrying become dead letters, with their failure's
    /// reason: denied ones past their grace, and SQS records on their last receive. The ingest
    /// queue's `maxReceiveCount` is read at most once per batch, bounded by the invocation's
    /// budget: [`crate::redeliver::Redeliver::max_receive_count`] remembers its answers and its
    /// failed reads.
    async fn give_up(&self, entries: &mut [Entry<'_>], budget: &Budget) {
        let now = unix_millis(SystemTime::now());
        for entry in entries.iter_mut() {
            let failure = match &entry.state {
                State::Decided(Outcome::Failed(f)) if f.cause != Cause::NotKept => f.clone(),
                _ => continue,
            };
            let last_receive = match entry.record.origin {
                Some(origin) => self
                    .redeliver
                    .max_receive_count(origin.queue_arn, policy_read_deadline(budget.finish_by))
                    .await
                    .filter(|max| origin.receive_count >= *max)
                    .map(|max| (origin.receive_count, max)),
                None => None,
            };
            let detail = if failure.cause == Cause::AccessDenied
                && denial_grace_over(entry.record, entry.interruption.as_ref(), now)
            {
                format!(
                    "denied for more than {} s: {failure}",
                    DENIAL_GRACE.as_secs()
                )
            } else if let Some((receive, max)) = last_receive {
                format!("still failing on receive {receive} of {max}: {failure}")
            } else {
                continue;
            };
            if failure.cause == Cause::AccessDenied {
                // A configuration error someone must fix: say what and where, at ERROR.
                tracing::error!(record = entry.record.id, reason = "access-denied", %detail, "a cluster queue refuses the router");
            }
            entry.state = State::DeadLetter(DeadLetter {
                reason: failure.cause.dead_letter_reason(),
                detail,
                clusters: None,
            });
        }
    }

    /// Step 5: records handed back to the ingest queue come back after a short, growing delay
    /// instead of the queue's visibility timeout.
    async fn hand_back(
        &self,
        entries: &mut [Entry<'_>],
        budget: &Budget,
        metrics: &mut InvocationMetrics,
    ) {
        let records: Vec<HandBack<'_>> = entries
            .iter()
            .filter(|e| matches!(e.state, State::Decided(Outcome::Failed(_))))
            .filter_map(|e| e.record.origin)
            .map(|origin| HandBack {
                origin,
                delay: retry::redelivery_delay(origin.receive_count, retry::jitter()),
            })
            .collect();
        if records.is_empty() {
            return;
        }
        let mut stats = HandBackStats::default();
        let handing = self.redeliver.hand_back(&records, &mut stats);
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

/// Whether a denied record has been retried long enough: [`DENIAL_GRACE`] since it was first
/// received, or since its event happened for a direct invocation. Without either, it has.
fn denial_grace_over(
    record: &Record<'_>,
    interruption: Option<&Interruption>,
    now_ms: i64,
) -> bool {
    let first_seen = match record.origin {
        Some(origin) => origin.first_receive_ms,
        None => interruption
            .and_then(|i| i.time.as_deref())
            .and_then(event::rfc3339_unix_millis),
    };
    first_seen.is_none_or(|at| now_ms - at >= DENIAL_GRACE.as_millis() as i64)
}

/// How long the redrive-policy read may take: at most [`MAX_POLICY_READ`], and never more than
/// half the time left, which the dead-letter queue and the hand-back need.
fn policy_read_deadline(finish_by: Instant) -> Instant {
    let now = Instant::now();
    let left = finish_by.saturating_duration_since(now);
    now + MAX_POLICY_READ.min(left / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_retries_for_its_window_a_direct_invocation_until_its_reserve() {
        let finish_by = Instant::now() + Duration::from_secs(29);
        let batch = Budget::new(finish_by, Mode::Batch);
        let direct = Budget::new(finish_by, Mode::Direct);
        assert_eq!(batch.deliver_until, finish_by - MAX_RESERVE);
        assert_eq!(direct.retry_until, direct.deliver_until);
        let window = batch.retry_until.saturating_duration_since(Instant::now());
        assert!(
            window <= BATCH_RETRY_WINDOW && window > BATCH_RETRY_WINDOW - Duration::from_secs(1),
            "{window:?}"
        );
        // A short invocation keeps a fifth back, and retries only within what is left.
        let short = Budget::new(Instant::now() + Duration::from_secs(2), Mode::Batch);
        assert!(short.retry_until <= short.deliver_until);
        assert!(short.deliver_until < short.finish_by);
        // No time left: no retry.
        let over = Budget::new(Instant::now(), Mode::Direct);
        assert_eq!(over.retry_delay(1), None);
    }
}
