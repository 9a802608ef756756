//! The retry ladder: every way the router tries again, in one place.
//!
//! A spot warning gives two minutes, and a storm is when AWS throttles. Each layer below exists
//! for one failure no other layer handles as well, has a bound, and has a test that shows it (the
//! decision tests in `tests/decisions/` run the real handler against a model of AWS behind [`crate::aws::Aws`] in
//! paused time; `e2e` runs the binary against the emulator).
//!
//! | # | layer | the failure it is for | its bound | shown by |
//! |---|---|---|---|---|
//! | 1 | one attempt per AWS call, [`ATTEMPT_TIMEOUT`] each (the SDK's own retries are off) | a call that hangs or fails: every retry below is the router's, so it is bounded by the budget and can be modelled | 3 s per call | `decisions::timing::a_hanging_send_costs_one_attempt_timeout` |
//! | 2 | lookup hedge ([`crate::resolve::hedge`]) | DescribeInstances late or failing: GetResources (its own quota) is asked too; an id it does not list waits for EC2 (retried below), never taken as nobody's | the hedge delay, the p95 of recent latencies within 50 ms–1 s | `resolve::hedge::tests`, `decisions::lookups` |
//! | 3 | EC2 suspicion (same module) | a throttled EC2 that every Karpenter of the account needs: the Tagging API is asked first | after 2 consecutive failures, for 30 s | `resolve::hedge::tests`, `decisions::lookups` |
//! | 4 | stale-if-error ([`crate::resolve`]) | both lookup paths failing for an instance already seen: its owner never changes | owners seen in the last 7 days | `decisions::lookups` |
//! | 5 | AssumeRole failure memory ([`crate::accounts`]) | a spoke role that cannot be assumed: one attempt per account for the whole batch | one call per account per 500 ms | `decisions::accounts` |
//! | 6 | retries inside the invocation ([`backoff`], [`Budget`]) | any transient lookup or send failure (5xx, throttling, a reset, an entry SQS failed) | 200 ms · 2ⁿ (≤ 2 s) apart, none scheduled after [`RETRY_WINDOW`], nothing running after [`DELIVER_WINDOW`] | `decisions::batches` |
//! | 7 | hand-back with a short visibility ([`redelivery_delay`], [`crate::redeliver`]) | still failing when the window closes: the record returns in seconds, not the queue's 180 s | 1 s · 2ⁿ⁻¹ (≤ 60 s) by receive count | `decisions::batches` |
//! | 8 | access-denied grace ([`DENIAL_GRACE`]) | a denial right after a deploy (IAM, queue policies and keys propagate) | 60 s from the first receive, then dead-lettered `access-denied` | `decisions::dead_letters` |
//! | 9 | the last receive (`MAX_RECEIVE_COUNT`) | a record failing on every receive: dead-lettered with its reason | the ingest queue's `maxReceiveCount` (20) | `decisions::dead_letters` |
//! | 10 | SQS's redrive (base.yaml) | the dead-letter write itself failing on the last receive: SQS moves the record, without a reason | `maxReceiveCount` | the policy checks (`ReportBatchItemFailures`, redrive) |
//!
//! Removed, because another layer covers them: the SDK's own retries (2 and 6 retry sooner and
//! within the budget), SendMessageBatch's per-entry retries (6), and reading the ingest queue's
//! redrive policy (its `maxReceiveCount` is configuration the stack sets, layer 9).
//!
//! ## How long a record can take
//!
//! Inside one invocation a record is delivered, dead-lettered or handed back within
//! [`LONGEST_IN_INVOCATION`] (9 s): retries are scheduled for [`RETRY_WINDOW`], calls still
//! running are abandoned at [`DELIVER_WINDOW`], and the dead-letter write and the hand-back have
//! [`MAX_RESERVE`] after that. Across receives, a record that never succeeds reaches the
//! dead-letter queue within [`longest_across_receives`] of its first receive: 20 receives, each at
//! most [`LONGEST_IN_INVOCATION`] plus the batching window, with the hand-back delays between
//! them (17 min 23 s with the base stack's settings). Both bounds are tested.
//!
//! Both schedules use "equal jitter": a delay is drawn from [d/2, d], so the retries of many
//! records spread out instead of arriving together, and none comes sooner than half the schedule.

use std::time::Duration;

use tokio::time::Instant;

/// Longest one AWS call attempt may take (the SDK's timeout configuration).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// First in-invocation retry delay, before jitter.
pub const RETRY_BASE: Duration = Duration::from_millis(200);
/// Longest in-invocation retry delay, before jitter.
pub const RETRY_CAP: Duration = Duration::from_secs(2);
/// How long an invocation schedules retries: about four backoff steps, enough to ride out a
/// brownout. Past that, a record handed back with a short visibility returns as soon as another
/// retry here would, and the execution environment takes the next batch instead of idling on one
/// failing destination.
pub const RETRY_WINDOW: Duration = Duration::from_secs(4);
/// How long an invocation delivers: the retry window and one attempt started at its end.
pub const DELIVER_WINDOW: Duration = RETRY_WINDOW.saturating_add(ATTEMPT_TIMEOUT);
/// Longest time kept back after delivering for the dead-letter write and the hand-back.
pub const MAX_RESERVE: Duration = Duration::from_secs(2);
/// The longest a record spends inside one invocation.
pub const LONGEST_IN_INVOCATION: Duration = DELIVER_WINDOW.saturating_add(MAX_RESERVE);
/// Longest redelivery delay, before jitter.
pub const REDELIVERY_CAP: Duration = Duration::from_secs(60);
/// How long a record SQS refuses as not allowed is retried before it is dead-lettered
/// `access-denied`, counted from when it was first received. A denial is a configuration error,
/// but right after a deploy it can be propagation: SQS says attribute changes (the queue policy
/// among them) take up to 60 seconds to propagate (SetQueueAttributes API reference), and IAM
/// changes are eventually consistent too.
pub const DENIAL_GRACE: Duration = Duration::from_secs(60);

/// When each step of an invocation must be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// No retry is scheduled to start after this.
    pub retry_until: Instant,
    /// No lookup or send runs past this; what is left is for the dead-letter queue and hand-backs.
    pub deliver_until: Instant,
    /// Everything is done by this.
    pub finish_by: Instant,
}

impl Budget {
    /// The budget of an invocation started `now` that must answer by `deadline`.
    pub fn new(now: Instant, deadline: Instant) -> Self {
        let reserve = (deadline.saturating_duration_since(now) / 5).min(MAX_RESERVE);
        let deliver_until = (deadline - reserve).min(now + DELIVER_WINDOW);
        Self {
            retry_until: deliver_until.min(now + RETRY_WINDOW),
            deliver_until,
            finish_by: deadline.min(deliver_until + MAX_RESERVE),
        }
    }

    /// The wait before retry number `attempt` of a job, if the retry would still start in time.
    pub fn retry_delay(&self, attempt: u32, jitter: f64) -> Option<Duration> {
        let delay = backoff(attempt, jitter);
        (Instant::now() + delay < self.retry_until).then_some(delay)
    }
}

/// The wait before retry number `attempt` (1 for the first retry) inside an invocation:
/// 200 ms · 2^(attempt-1), at most 2 s, scaled by `jitter` ∈ [0, 1] into [d/2, d].
pub fn backoff(attempt: u32, jitter: f64) -> Duration {
    let doubled = RETRY_BASE.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    equal_jitter(doubled.min(RETRY_CAP), jitter)
}

/// How long a handed-back record stays invisible, given how often it has been received
/// (`ApproximateReceiveCount`, 1 on the first delivery): 2^(count-1) s, at most 60 s, scaled by
/// `jitter` ∈ [0, 1] into [d/2, d], and never under one second (ChangeMessageVisibility takes whole
/// seconds, and 0 would make the record reappear before the invocation has even answered).
pub fn redelivery_delay(receive_count: u32, jitter: f64) -> Duration {
    let doubled = Duration::from_secs(1 << receive_count.saturating_sub(1).min(16));
    let delay = equal_jitter(doubled.min(REDELIVERY_CAP), jitter);
    Duration::from_secs(delay.as_secs_f64().round().max(1.0) as u64)
}

/// The shortest time a record can spend being redelivered before its `receives`-th receive, if
/// every delivery fails at once and every jitter draw is the smallest: the sum of the delays
/// before it. The base stack's maxReceiveCount is chosen with this (see the README).
pub fn min_time_before_receive(receives: u32) -> Duration {
    (1..receives).map(|n| redelivery_delay(n, 0.0)).sum()
}

/// The longest a record that never succeeds takes from its first receive to the dead-letter
/// queue, with `max_receives` receives and the event source mapping's `batching_window`: each
/// receive's invocation, the window before the next, and the longest hand-back delays between.
pub fn longest_across_receives(max_receives: u32, batching_window: Duration) -> Duration {
    let delays: Duration = (1..max_receives).map(|n| redelivery_delay(n, 1.0)).sum();
    let receives = (LONGEST_IN_INVOCATION + batching_window) * max_receives;
    delays + receives
}

fn equal_jitter(d: Duration, jitter: f64) -> Duration {
    d.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_invocation_backoff_doubles_to_two_seconds_within_jitter() {
        let full: Vec<u128> = (1..=6).map(|a| backoff(a, 1.0).as_millis()).collect();
        assert_eq!(full, [200, 400, 800, 1600, 2000, 2000]);
        let half: Vec<u128> = (1..=6).map(|a| backoff(a, 0.0).as_millis()).collect();
        assert_eq!(half, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(0, 1.0), RETRY_BASE, "attempt 0 reads as the first");
        assert_eq!(backoff(u32::MAX, 1.0), RETRY_CAP, "no overflow");
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_is_scheduled_only_if_it_starts_before_the_retry_window_ends() {
        let now = Instant::now();
        let delay = backoff(1, 1.0);
        let budget = |retry_until| Budget {
            retry_until,
            deliver_until: now + DELIVER_WINDOW,
            finish_by: now + LONGEST_IN_INVOCATION,
        };
        let just_in_time = budget(now + delay + Duration::from_millis(1));
        assert_eq!(just_in_time.retry_delay(1, 1.0), Some(delay));
        // Starting exactly as the window closes is too late.
        assert_eq!(budget(now + delay).retry_delay(1, 1.0), None);
    }

    #[test]
    fn redelivery_grows_with_receives_in_whole_seconds_capped_at_a_minute() {
        let full: Vec<u64> = (1..=8)
            .map(|n| redelivery_delay(n, 1.0).as_secs())
            .collect();
        assert_eq!(full, [1, 2, 4, 8, 16, 32, 60, 60]);
        let half: Vec<u64> = (1..=8)
            .map(|n| redelivery_delay(n, 0.0).as_secs())
            .collect();
        assert_eq!(half, [1, 1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(redelivery_delay(0, 0.5), Duration::from_secs(1));
        assert_eq!(redelivery_delay(u32::MAX, 1.0), REDELIVERY_CAP);
    }

    #[test]
    fn twenty_receives_outlast_a_five_minute_outage_even_with_the_shortest_delays() {
        // The base stack redrives after 20 receives: the 20th comes no sooner than this, even if
        // the router spent no time at all retrying inside its invocations.
        assert!(min_time_before_receive(20) >= Duration::from_secs(300));
        assert_eq!(min_time_before_receive(20), Duration::from_secs(422));
        assert_eq!(min_time_before_receive(1), Duration::ZERO);
    }

    #[test]
    fn the_longest_times_are_as_the_ladder_states() {
        assert_eq!(LONGEST_IN_INVOCATION, Duration::from_secs(9));
        // 1+2+4+8+16+32 + 13·60 = 843 s of hand-back delays, 20 · (9 + 1) s of receives.
        assert_eq!(
            longest_across_receives(20, Duration::from_secs(1)),
            Duration::from_secs(1043)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_budget_retries_for_its_window_and_delivers_for_one_attempt_more() {
        let now = Instant::now();
        let b = Budget::new(now, now + Duration::from_secs(29));
        assert_eq!(b.retry_until, now + RETRY_WINDOW);
        assert_eq!(b.deliver_until, now + DELIVER_WINDOW);
        assert_eq!(b.finish_by, now + LONGEST_IN_INVOCATION);
        // A short invocation keeps a fifth back, and retries only within what is left.
        let short = Budget::new(now, now + Duration::from_secs(2));
        assert_eq!(short.deliver_until, now + Duration::from_millis(1600));
        assert_eq!(short.retry_until, short.deliver_until);
        assert_eq!(short.finish_by, now + Duration::from_secs(2));
        // No time left: no retry.
        let over = Budget::new(now, now);
        assert_eq!(over.retry_delay(1, 0.0), None);
        assert_eq!(b.retry_delay(1, 1.0), Some(RETRY_BASE));
    }
}
