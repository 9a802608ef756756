//! Time: what a hanging call costs, the budget's bounds inside one invocation, and how long a
//! record that never succeeds takes across receives. Virtual time: exact, and instant.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    alpha, alpha_warning as warning, dead_letter_reasons, handed_back, invoke, invoke_with, router,
    world::{Fault, HUB, REGION},
};
use router_core::{
    aws::Aws,
    event::unix_millis_rfc3339,
    metrics::LATE_AFTER_MS,
    retry::{ATTEMPT_TIMEOUT, DELIVER_WINDOW, LONGEST_IN_INVOCATION, longest_across_receives},
};

#[tokio::test(start_paused = true)]
async fn a_hanging_send_costs_one_attempt_timeout() {
    let aws = alpha();
    aws.fail("SendMessageBatch", 1, Fault::Hang);
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke(&router, &aws, &[warning("m")]).await;
    let took = started.elapsed();
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert!(took >= ATTEMPT_TIMEOUT && took < DELIVER_WINDOW, "{took:?}");
    assert_eq!(
        aws.count("SendMessageBatch"),
        2,
        "one attempt, then one retry"
    );
}

#[tokio::test(start_paused = true)]
async fn when_everything_hangs_a_record_leaves_the_invocation_within_its_bound() {
    let aws = alpha();
    for action in [
        "DescribeInstances",
        "GetResources",
        "ChangeMessageVisibilityBatch",
    ] {
        aws.break_action(action, Fault::Hang);
    }
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke(&router, &aws, &[warning("m")]).await;
    let took = started.elapsed();
    assert_eq!(handed_back(&answered), ["m"]);
    assert!(took <= LONGEST_IN_INVOCATION, "{took:?}");
    assert!(
        took >= DELIVER_WINDOW,
        "it delivered for its whole window: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_short_invocation_hands_back_before_its_deadline() {
    let aws = alpha();
    aws.break_action("DescribeInstances", Fault::Hang);
    aws.break_action("GetResources", Fault::Hang);
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke_with(&router, &aws, &[warning("m")], Duration::from_secs(2)).await;
    assert_eq!(handed_back(&answered), ["m"]);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// The event source mapping's batching window in base.yaml.
const BATCHING_WINDOW: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn a_record_that_never_succeeds_reaches_the_dead_letter_queue_within_the_stated_bound() {
    let aws = alpha();
    // The cluster's queue gives no answer, ever; the dead-letter queue works.
    aws.break_queue("karpenter-alpha", Fault::Hang);
    let router = router(&aws, &[]);
    let started = Instant::now();
    // Played as the event source mapping plays it: each receive waits out the visibility the
    // router set (the batching window on top), until the record is no longer handed back.
    let mut receive = 0;
    loop {
        receive += 1;
        tokio::time::advance(BATCHING_WINDOW).await;
        let seen_before = aws.visibility().len();
        let answered = invoke(&router, &aws, &[warning("m").receive(receive)]).await;
        if handed_back(&answered).is_empty() {
            break;
        }
        let (_, secs) = aws.visibility()[seen_before].clone();
        tokio::time::advance(Duration::from_secs(u64::from(secs))).await;
        assert!(receive < 20, "handed back past the last receive");
    }
    assert_eq!(receive, 20);
    assert_eq!(dead_letter_reasons(&aws), ["retries-exhausted"]);
    let took = started.elapsed();
    assert!(
        took <= longest_across_receives(20, BATCHING_WINDOW),
        "{took:?} > {:?}",
        longest_across_receives(20, BATCHING_WINDOW)
    );
}

/// A forward's age is the time since the event's own `time`, and one older than
/// `LATE_AFTER_MS` (two minutes: a spot warning's notice) counts as late.
#[tokio::test(start_paused = true)]
async fn each_forward_is_aged_from_the_events_time_and_late_past_two_minutes() {
    let aws = alpha();
    let router = router(&aws, &[]);
    let now = aws
        .now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let aged = |n: &str, age_ms: u64| {
        let mut m = warning(n);
        let mut body: serde_json::Value = serde_json::from_str(&m.body).unwrap();
        body["time"] = unix_millis_rfc3339(now - age_ms as i64).into();
        m.body = body.to_string();
        m
    };
    let answered = invoke(
        &router,
        &aws,
        &[
            aged("fresh", 30_000),
            aged("due", LATE_AFTER_MS),
            aged("late", LATE_AFTER_MS + 1_000),
            aged("later", LATE_AFTER_MS + 5_000),
        ],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    assert!(
        answered.metrics.cold_start,
        "an environment's first invocation is its cold start"
    );
    let mut ages = answered.metrics.forward_ages_ms.clone();
    ages.sort();
    assert_eq!(
        ages,
        [
            30_000,
            LATE_AFTER_MS,
            LATE_AFTER_MS + 1_000,
            LATE_AFTER_MS + 5_000
        ]
    );
    assert_eq!(
        answered.metrics.late_forwards, 2,
        "the two past two minutes"
    );
    let again = invoke(&router, &aws, &[warning("next")]).await;
    assert!(!again.metrics.cold_start, "and only its first");
}

/// The work deadline leaves a tenth of the remaining time for the answer, at least 100 ms and at
/// most 1 s.
#[test]
fn the_work_deadline_keeps_a_tenth_for_the_answer_within_its_bounds() {
    use std::time::UNIX_EPOCH;
    let now = Instant::now();
    let wall = UNIX_EPOCH + Duration::from_secs(1_790_000_000);
    let at = |remaining_ms: u64| {
        let deadline_ms =
            wall.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64 + remaining_ms;
        router_core::handler::work_deadline(deadline_ms, wall, now) - now
    };
    assert_eq!(at(5_000), Duration::from_millis(4_500));
    assert_eq!(at(60_000), Duration::from_millis(59_000), "at most 1 s");
    assert_eq!(at(500), Duration::from_millis(400), "at least 100 ms");
}
