//! Dead letters: every reason a record goes to the dead-letter queue, and what happens when the
//! dead-letter queue cannot take it.

use super::{
    Msg, alpha, alpha_warning as warning, dead_letter_reasons, handed_back, invoke, router, spot,
    world::{Fault, HUB, MEMBER, REGION},
};
use router_core::retry::DENIAL_GRACE;

/// (what happens, record, expected reason) — each record alone in a fresh world.
#[tokio::test(start_paused = true)]
async fn each_permanent_failure_is_dead_lettered_once_with_its_reason() {
    type Setup = fn(&super::world::WorldAws);
    /// (what happens, the world's setup, the record, the router's variables, the reason)
    type Case<'a> = (&'a str, Setup, Msg, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 6] = [
        (
            "not an event",
            |_| {},
            Msg::new("m", "{not json".into()),
            &[],
            "malformed",
        ),
        (
            "an account not served",
            |_| {},
            Msg::new("m", spot("m", "i-0a000001", MEMBER, REGION)),
            &[("SERVED_ACCOUNTS", "")],
            "account-not-served",
        ),
        (
            "SQS refusing the entry",
            |aws| aws.fail_entries("karpenter-alpha", 1, "InvalidMessageContents", true),
            warning("m"),
            &[],
            "rejected",
        ),
        (
            "still failing on the last receive",
            |aws| aws.break_queue("karpenter-alpha", Fault::code("ServiceUnavailable")),
            warning("m").receive(20),
            &[],
            "retries-exhausted",
        ),
        (
            "the member account unreachable on the last receive",
            |aws| {
                aws.node(MEMBER, REGION, "i-0b000001", "beta");
                aws.forbid_role("arn:aws:iam::222222222222:role/interruption-router-spoke");
            },
            Msg::new("m", spot("m", "i-0b000001", MEMBER, REGION)).receive(20),
            &[],
            "account-unreachable",
        ),
        (
            "the queue deleted by hand",
            |aws| aws.delete_queue(HUB, REGION, "karpenter-alpha"),
            warning("m"),
            &[],
            "queue-missing",
        ),
    ];
    for (what, setup, record, vars, reason) in cases {
        let aws = alpha();
        setup(&aws);
        let router = router(&aws, vars);
        let answered = invoke(&router, &aws, &[record]).await;
        assert!(handed_back(&answered).is_empty(), "{what}: handed back");
        assert_eq!(dead_letter_reasons(&aws), [reason], "{what}");
        assert_eq!(
            answered.metrics.dead_lettered.get(reason),
            Some(&1),
            "{what}: {:?}",
            answered.metrics.dead_lettered
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_dead_letter_keeps_the_original_body_and_says_why() {
    let aws = alpha();
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[Msg::new("m", "{not json".into())]).await;
    let held = aws.held(HUB, REGION, super::DLQ);
    assert_eq!(held[0].body, "{not json");
    let detail = &held[0]
        .attributes
        .iter()
        .find(|(k, _)| k == "detail")
        .unwrap()
        .1;
    assert!(detail.contains("not an EventBridge event"), "{detail}");
}

#[tokio::test(start_paused = true)]
async fn a_record_failing_before_its_last_receive_is_handed_back_not_dead_lettered() {
    let aws = alpha();
    aws.break_action("SendMessageBatch", Fault::code("ServiceUnavailable"));
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("m").receive(19)]).await;
    assert_eq!(handed_back(&answered), ["m"]);
    assert!(dead_letter_reasons(&aws).is_empty());
    // Without MAX_RECEIVE_COUNT no receive is the last: SQS's redrive keeps it.
    let unset = router_without_max(&aws);
    let answered = invoke(&unset, &aws, &[warning("n").receive(20)]).await;
    assert_eq!(handed_back(&answered), ["n"]);
    assert!(dead_letter_reasons(&aws).is_empty());
}

fn router_without_max(
    aws: &std::sync::Arc<super::world::WorldAws>,
) -> router_core::handler::Router<super::world::WorldAws> {
    router(aws, &[("MAX_RECEIVE_COUNT", "")])
}

#[tokio::test(start_paused = true)]
async fn a_denied_record_is_retried_for_its_grace_then_dead_lettered_access_denied() {
    let aws = alpha();
    aws.break_queue("karpenter-alpha", Fault::code("AccessDenied"));
    let router = router(&aws, &[]);
    // First received just now: within the grace, handed back like any failure.
    let answered = invoke(&router, &aws, &[warning("fresh")]).await;
    assert_eq!(handed_back(&answered), ["fresh"]);
    assert!(dead_letter_reasons(&aws).is_empty());
    // The same denial once the grace has passed since the first receive.
    tokio::time::advance(DENIAL_GRACE).await;
    let answered = invoke(&router, &aws, &[warning("old").receive(3)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(dead_letter_reasons(&aws), ["access-denied"]);
    assert_eq!(answered.metrics.access_denied, 1);
    let detail = aws.held(HUB, REGION, super::DLQ)[0]
        .attributes
        .iter()
        .find(|(k, _)| k == "detail")
        .unwrap()
        .1
        .clone();
    assert!(
        detail.contains("karpenter-alpha") && detail.contains("Fix:"),
        "{detail}"
    );
}

#[tokio::test(start_paused = true)]
async fn what_the_dead_letter_queue_cannot_take_is_handed_back() {
    // No dead-letter queue configured.
    let malformed = || [Msg::new("m", "{".into())];
    let no_dlq = alpha();
    let answered = invoke(
        &router(&no_dlq, &[("DEAD_LETTER_QUEUE_URL", "")]),
        &no_dlq,
        &malformed(),
    )
    .await;
    assert_eq!(handed_back(&answered), ["m"]);
    // A dead-letter queue that is gone.
    let gone = alpha();
    gone.delete_queue(HUB, REGION, super::DLQ);
    let answered = invoke(&router(&gone, &[]), &gone, &malformed()).await;
    assert_eq!(handed_back(&answered), ["m"]);
    // A dead-letter write that fails.
    let failing = alpha();
    failing.fail("SendMessageBatch", 1, Fault::code("ServiceUnavailable"));
    let answered = invoke(&router(&failing, &[]), &failing, &malformed()).await;
    assert_eq!(handed_back(&answered), ["m"]);
}
