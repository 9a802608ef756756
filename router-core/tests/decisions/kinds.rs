//! Each cluster takes the event kinds its tenant stack chose (the queue's kinds tag): a copy of
//! a kind it declined is counted per cluster and kind, never sent, dead-lettered or paged, and a
//! Health event naming several clusters reaches exactly those that take Health events.

use std::time::Duration;

use serde_json::json;

use super::{
    Msg, aws, dead_letter_reasons, ec2, handed_back, health, invoke, router, spot,
    world::{HUB, REGION},
};
use router_core::tenancy::KINDS_TAG;

/// alpha takes everything; beta declines Health and rebalance events.
fn two_clusters() -> std::sync::Arc<super::world::WorldAws> {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.tenant_taking(
        HUB,
        REGION,
        "beta",
        "spot-interruption state-change capacity-reservation-interruption",
    );
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws.node(HUB, REGION, "i-0b000001", "beta");
    aws
}

#[tokio::test(start_paused = true)]
async fn a_health_event_reaches_only_the_clusters_that_take_health_events() {
    let aws = two_clusters();
    let router = router(&aws, &[]);
    let body = health("h", &["i-0a000001", "i-0b000001"], HUB, REGION);
    let answered = invoke(&router, &aws, &[Msg::new("h", body)]).await;

    assert!(handed_back(&answered).is_empty());
    assert!(dead_letter_reasons(&aws).is_empty(), "nobody is paged");
    let alpha = aws.bodies(HUB, REGION, "karpenter-alpha");
    assert_eq!(alpha.len(), 1);
    assert!(alpha[0].contains("i-0a000001") && !alpha[0].contains("i-0b000001"));
    assert!(aws.bodies(HUB, REGION, "karpenter-beta").is_empty());
    let declined = &answered.metrics.declined;
    assert_eq!(
        declined.get(&("beta".to_owned(), "scheduled-change")),
        Some(&1)
    );
    assert_eq!(declined.len(), 1, "{declined:?}");
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
}

#[tokio::test(start_paused = true)]
async fn a_declined_kind_is_counted_not_dead_lettered_and_the_chosen_ones_still_arrive() {
    let aws = two_clusters();
    let router = router(&aws, &[]);
    let rebalance = ec2(
        "r",
        "EC2 Instance Rebalance Recommendation",
        "i-0b000001",
        json!({}),
    );
    let warning = spot("s", "i-0b000001", HUB, REGION);
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("r", rebalance), Msg::new("s", warning)],
    )
    .await;

    assert!(handed_back(&answered).is_empty());
    assert!(dead_letter_reasons(&aws).is_empty());
    let beta = aws.bodies(HUB, REGION, "karpenter-beta");
    assert_eq!(beta.len(), 1, "only the warning");
    assert!(beta[0].contains("Spot Instance Interruption Warning"));
    assert_eq!(answered.metrics.ignored.get("kind-declined"), Some(&1));
    assert_eq!(
        answered
            .metrics
            .declined
            .get(&("beta".to_owned(), "rebalance-recommendation")),
        Some(&1)
    );
}

/// A changed choice (a tenant stack update re-tags the queue; the queue stays) is used once the
/// cached answer expires, `CACHE_TTL_SECONDS` at most, and not before: no extra call per event.
#[tokio::test(start_paused = true)]
async fn a_changed_choice_takes_effect_within_the_cache_lifetime() {
    let aws = two_clusters();
    let router = router(&aws, &[("CACHE_TTL_SECONDS", "300")]);
    let rebalance = |n: &str| {
        Msg::new(
            n,
            ec2(
                n,
                "EC2 Instance Rebalance Recommendation",
                "i-0b000001",
                json!({}),
            ),
        )
    };
    invoke(&router, &aws, &[rebalance("r1")]).await;
    assert!(aws.bodies(HUB, REGION, "karpenter-beta").is_empty());

    aws.tag_queue(
        HUB,
        REGION,
        "karpenter-beta",
        KINDS_TAG,
        &router_core::event::Kinds::ALL.to_string(),
    );
    let tags_read = aws.count("ListQueueTags");
    tokio::time::advance(Duration::from_secs(299)).await;
    invoke(&router, &aws, &[rebalance("r2")]).await;
    assert!(
        aws.bodies(HUB, REGION, "karpenter-beta").is_empty(),
        "the cached choice holds for its lifetime"
    );
    assert_eq!(aws.count("ListQueueTags"), tags_read, "no call per event");

    tokio::time::advance(Duration::from_secs(2)).await;
    invoke(&router, &aws, &[rebalance("r3")]).await;
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-beta").len(), 1);
}

/// A hand-edited tag that names no kind costs the cluster nothing: every kind is sent.
#[tokio::test(start_paused = true)]
async fn a_broken_kinds_tag_sends_every_kind() {
    let aws = aws();
    aws.tenant_taking(HUB, REGION, "beta", "health");
    aws.node(HUB, REGION, "i-0b000001", "beta");
    let router = router(&aws, &[]);
    let body = health("h", &["i-0b000001"], HUB, REGION);
    let answered = invoke(&router, &aws, &[Msg::new("h", body)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-beta").len(), 1);
    assert!(answered.metrics.declined.is_empty());
}
