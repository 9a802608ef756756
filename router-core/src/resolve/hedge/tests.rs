//! The race and EC2's health without AWS and without clocks: EC2 and the Tagging API are futures
//! the test completes (or never completes), and the hedge delay is a future the test fires.

use std::{
    collections::VecDeque,
    future::{pending, ready},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use super::*;

type Answer = Vec<&'static str>;

/// A hedge that records whether it was ever polled (that is, sent).
fn hedge(
    sent: &Arc<AtomicBool>,
    result: Result<Answer, &'static str>,
) -> impl Future<Output = Result<Answer, &'static str>> + use<> {
    let sent = sent.clone();
    async move {
        sent.store(true, Ordering::SeqCst);
        result
    }
}

fn complete(answer: &Answer) -> bool {
    answer.len() == 2
}

fn never() -> impl Future<Output = ()> {
    pending()
}

fn fired() -> impl Future<Output = ()> {
    ready(())
}

#[tokio::test]
async fn an_ec2_that_answers_in_time_is_never_hedged() {
    let sent = Arc::new(AtomicBool::new(false));
    let raced = race(
        ready(Ok(vec!["a", "b"])),
        hedge(&sent, Ok(vec!["a", "b"])),
        never(),
        complete,
    )
    .await;
    assert_eq!(
        raced,
        Raced::Primary {
            answer: vec!["a", "b"],
            hedged: false
        }
    );
    assert!(!sent.load(Ordering::SeqCst), "the Tagging API was asked");
}

#[tokio::test]
async fn an_ec2_that_hangs_is_outrun_once_the_delay_is_up() {
    let sent = Arc::new(AtomicBool::new(false));
    let raced = race(
        pending::<Result<Answer, &str>>(),
        hedge(&sent, Ok(vec!["a", "b"])),
        fired(),
        complete,
    )
    .await;
    assert_eq!(
        raced,
        Raced::Hedge {
            answer: vec!["a", "b"],
            primary: None
        }
    );
}

#[tokio::test]
async fn an_ec2_that_fails_is_hedged_at_once_without_waiting_for_the_delay() {
    let sent = Arc::new(AtomicBool::new(false));
    let raced = race(
        ready(Err("503")),
        hedge(&sent, Ok(vec!["a"])),
        never(),
        complete,
    )
    .await;
    assert_eq!(
        raced,
        Raced::Hedge {
            answer: vec!["a"],
            primary: Some("503")
        },
        "EC2 failed: the Tagging API's partial answer stands"
    );
}

#[tokio::test]
async fn both_failing_names_both_errors() {
    let sent = Arc::new(AtomicBool::new(false));
    assert_eq!(
        race(
            ready(Err::<Answer, _>("503")),
            hedge(&sent, Err("throttled")),
            never(),
            complete
        )
        .await,
        Raced::BothFailed {
            primary: "503",
            hedge: "throttled"
        }
    );
    // The same once the delay fired first.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let primary = async move {
        rx.await.ok();
        Err::<Answer, _>("timeout")
    };
    let failing_hedge = async move {
        tx.send(()).ok();
        Err("throttled")
    };
    assert_eq!(
        race(primary, failing_hedge, fired(), complete).await,
        Raced::BothFailed {
            primary: "timeout",
            hedge: "throttled"
        }
    );
}

#[tokio::test]
async fn a_hedge_that_leaves_an_id_out_waits_for_ec2() {
    // EC2 answers only after the Tagging API has (its answer is released by the hedge).
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let primary = async move {
        rx.await.ok();
        Ok::<Answer, &str>(vec!["a", "untagged"])
    };
    let partial = async move {
        tx.send(()).ok();
        Ok(vec!["a"])
    };
    assert_eq!(
        race(primary, partial, fired(), complete).await,
        Raced::Primary {
            answer: vec!["a", "untagged"],
            hedged: true
        }
    );
    // And if EC2 then fails, the partial answer stands (the caller does not cache what it left
    // out).
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let primary = async move {
        rx.await.ok();
        Err("500")
    };
    let partial = async move {
        tx.send(()).ok();
        Ok(vec!["a"])
    };
    assert_eq!(
        race(primary, partial, fired(), complete).await,
        Raced::Hedge {
            answer: vec!["a"],
            primary: Some("500")
        }
    );
}

#[tokio::test]
async fn a_failed_hedge_waits_for_a_late_ec2() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let primary = async move {
        rx.await.ok();
        Ok::<Answer, &str>(vec!["a", "b"])
    };
    let failing = async move {
        tx.send(()).ok();
        Err("throttled")
    };
    assert_eq!(
        race(primary, failing, fired(), complete).await,
        Raced::Primary {
            answer: vec!["a", "b"],
            hedged: true
        }
    );
}

fn scope() -> Scope {
    Scope::new("123456789012", "eu-west-1")
}

#[test]
fn ec2_is_suspected_after_consecutive_failures_only() {
    let health = Ec2Health::new(LookupConfig::default());
    let s = scope();
    assert!(!health.failed(&s), "one failure is a blip");
    health.answered(&s, Duration::from_millis(80));
    assert!(
        !health.failed(&s),
        "a success in between starts the count again"
    );
    assert!(health.failed(&s), "two in a row");
    assert!(health.suspected(&s));
    let other = Scope::new("123456789012", "us-east-1");
    assert!(!health.suspected(&other), "per scope");
    health.answered(&s, Duration::from_millis(80));
    assert!(!health.suspected(&s), "an answer ends the suspicion");

    let never = Ec2Health::new(LookupConfig {
        suspect_for: Duration::ZERO,
        ..LookupConfig::default()
    });
    never.failed(&s);
    never.failed(&s);
    assert!(!never.suspected(&s), "EC2_SUSPECT_SECONDS=0 never suspects");
}

#[test]
fn the_hedge_delay_is_the_recent_p95_within_bounds() {
    let health = Ec2Health::new(LookupConfig::default());
    let s = scope();
    assert_eq!(health.hedge_delay(&s), Some(INITIAL_HEDGE_DELAY));
    // 100 latencies of 1..=100 ms: the window keeps the last 64 (37..=100), whose p95 (nearest
    // rank: the 61st of 64) is 97 ms.
    for ms in 1..=100 {
        health.answered(&s, Duration::from_millis(ms));
    }
    assert_eq!(health.hedge_delay(&s), Some(Duration::from_millis(97)));

    let fast: VecDeque<Duration> = std::iter::repeat_n(Duration::from_millis(5), 20).collect();
    assert_eq!(learnt_delay(&fast), MIN_HEDGE_DELAY);
    let slow: VecDeque<Duration> = std::iter::repeat_n(Duration::from_secs(4), 20).collect();
    assert_eq!(learnt_delay(&slow), MAX_HEDGE_DELAY);
    let few: VecDeque<Duration> = std::iter::repeat_n(Duration::from_millis(80), 7).collect();
    assert_eq!(learnt_delay(&few), INITIAL_HEDGE_DELAY);

    let fixed = Ec2Health::new(LookupConfig {
        hedge: HedgeDelay::Fixed(Duration::from_millis(700)),
        ..LookupConfig::default()
    });
    assert_eq!(fixed.hedge_delay(&s), Some(Duration::from_millis(700)));
    let off = Ec2Health::new(LookupConfig {
        hedge: HedgeDelay::Off,
        ..LookupConfig::default()
    });
    assert_eq!(off.hedge_delay(&s), None);
}
