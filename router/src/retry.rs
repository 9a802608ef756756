//! Retry timing: how long a failed lookup or send waits before it is tried again, inside one
//! invocation and across invocations. Pure: the jitter is an argument, so the schedules can be
//! tested exactly.
//!
//! Two schedules, because the two retries cost different things:
//!
//! * [`backoff`], inside an invocation: a brownout of a few seconds should hand nothing back, so
//!   retries start fast (200 ms) and stay frequent (at most 2 s apart) until the invocation's
//!   retry window closes. Waiting costs only this invocation's time.
//! * [`redelivery_delay`], across invocations: a record handed back to the ingest queue becomes
//!   visible again after the delay the router sets with ChangeMessageVisibility, instead of the
//!   queue's 180 s visibility timeout. It grows with the record's receive count (1, 2, 4, … s,
//!   at most 60 s), so a long outage costs few receives and a short one costs seconds.
//!
//! Both use "equal jitter": the delay is drawn from [d/2, d], so retries of many records spread
//! out instead of arriving together, and no retry comes sooner than half the schedule.

use std::time::Duration;

/// First in-invocation retry delay, before jitter.
pub const RETRY_BASE: Duration = Duration::from_millis(200);
/// Longest in-invocation retry delay, before jitter.
pub const RETRY_CAP: Duration = Duration::from_secs(2);
/// Longest redelivery delay, before jitter.
pub const REDELIVERY_CAP: Duration = Duration::from_secs(60);
/// Longest one SDK call attempt may take (the bootstrap's timeout configuration) before it is
/// abandoned and retried: a fixed lookup hedge delay past it would never hedge on time.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);

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

/// A jitter draw in [0, 1).
pub fn jitter() -> f64 {
    fastrand::f64()
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
}
