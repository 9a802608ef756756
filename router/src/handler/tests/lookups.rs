//! Lookups: the hedge to the Tagging API, EC2 suspicion, stale-if-error, chunks, and what is not
//! a cluster's.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    Msg, aws,
    fake::{Fault, HUB, REGION},
    handed_back, invoke, router, spot, sum,
};
use crate::resolve::hedge::INITIAL_HEDGE_DELAY;

fn alpha() -> std::sync::Arc<super::fake::FakeAws> {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws
}

fn warning(n: &str, instance: &str) -> Msg {
    Msg::new(n, spot(n, instance, HUB, REGION))
}

#[tokio::test(start_paused = true)]
async fn a_failing_ec2_is_answered_by_the_tagging_api_at_once() {
    let aws = alpha();
    aws.fail("DescribeInstances", 1, Fault::code("Unavailable"));
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke(&router, &aws, &[warning("m", "i-0a000001")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(answered.metrics.hedged_lookups, 1);
    assert_eq!(answered.metrics.get_resources_calls, 1);
    assert!(
        started.elapsed() < INITIAL_HEDGE_DELAY,
        "no wait for the hedge delay"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_ec2_is_outrun_after_the_hedge_delay() {
    let aws = alpha();
    aws.fail("DescribeInstances", 1, Fault::Slow(Duration::from_secs(2)));
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke(&router, &aws, &[warning("m", "i-0a000001")]).await;
    assert_eq!(sum(&answered.metrics.forwarded), 1);
    assert_eq!(answered.metrics.hedged_lookups, 1);
    let took = started.elapsed();
    assert!(
        took >= INITIAL_HEDGE_DELAY && took < Duration::from_secs(1),
        "{took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn after_two_ec2_failures_the_tagging_api_is_asked_first() {
    let aws = alpha();
    aws.node(HUB, REGION, "i-0a000002", "alpha");
    aws.node(HUB, REGION, "i-0a000003", "alpha");
    aws.break_action("DescribeInstances", Fault::code("RequestLimitExceeded"));
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("1", "i-0a000001")]).await;
    invoke(&router, &aws, &[warning("2", "i-0a000002")]).await;
    let before = aws.calls().len();
    invoke(&router, &aws, &[warning("3", "i-0a000003")]).await;
    let third: Vec<&str> = aws.calls()[before..]
        .iter()
        .map(|c| c.action)
        .filter(|a| *a == "DescribeInstances" || *a == "GetResources")
        .collect();
    assert_eq!(third, ["GetResources"], "EC2, suspected, is spared");
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 3);
}

#[tokio::test(start_paused = true)]
async fn when_every_path_fails_a_known_owner_is_still_served() {
    let aws = alpha();
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("first", "i-0a000001")]).await;
    // An hour later the answer is no longer fresh, and both paths fail.
    tokio::time::advance(Duration::from_secs(3601)).await;
    aws.break_action("DescribeInstances", Fault::code("Unavailable"));
    aws.break_action("GetResources", Fault::code("ThrottlingException"));
    let answered = invoke(&router, &aws, &[warning("later", "i-0a000001")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.stale_answers, 1);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 2);
    // An instance never seen cannot be answered: handed back for another try.
    aws.node(HUB, REGION, "i-0a000009", "alpha");
    let answered = invoke(&router, &aws, &[warning("new", "i-0a000009")]).await;
    assert_eq!(handed_back(&answered), ["new"]);
}

#[tokio::test(start_paused = true)]
async fn what_no_cluster_owns_is_ignored_with_a_reason() {
    let aws = alpha();
    aws.instance(
        HUB,
        REGION,
        "i-0e000001",
        &[
            ("eks:eks-cluster-name", "alpha"),
            ("eks:nodegroup-name", "system"),
        ],
    );
    aws.instance(
        HUB,
        REGION,
        "i-0e000002",
        &[("karpenter.sh/nodepool", "default")],
    );
    let router = router(&aws, &[]);
    let answered = invoke(
        &router,
        &aws,
        &[
            warning("unmanaged", "i-0e000001"),
            warning("no-cluster", "i-0e000002"),
            warning("unknown", "i-0e000003"),
        ],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    let ignored = &answered.metrics.ignored;
    assert_eq!(ignored.get("unmanaged-instance"), Some(&1), "{ignored:?}");
    assert_eq!(ignored.get("no-cluster-tag"), Some(&1));
    assert_eq!(ignored.get("unknown-instance"), Some(&1));
    assert!(aws.bodies(HUB, REGION, "karpenter-alpha").is_empty());
}

#[tokio::test(start_paused = true)]
async fn many_misses_go_out_two_hundred_ids_per_lookup() {
    let aws = alpha();
    let records: Vec<Msg> = (0..450)
        .map(|n| {
            let id = format!("i-{n:08x}");
            aws.node(HUB, REGION, &id, "alpha");
            warning(&format!("m{n}"), &id)
        })
        .collect();
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &records).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.count("DescribeInstances"), 3);
    assert_eq!(aws.count("SendMessageBatch"), 45);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 450);
    // The same instances again: every answer is cached.
    let again = invoke(&router, &aws, &records[..10]).await;
    assert_eq!(again.metrics.cache_hits, 10);
    assert_eq!(aws.count("DescribeInstances"), 3);
}

#[tokio::test(start_paused = true)]
async fn a_suspected_ec2_is_asked_at_most_once_per_probe_interval() {
    use crate::resolve::hedge::PROBE_INTERVAL;
    let aws = suspected_ec2().await;
    let router = &aws.1;
    let aws = &aws.0;
    // The Tagging API fails too: within the probe interval EC2 is spared, the record waits.
    aws.break_action("GetResources", Fault::code("ThrottlingException"));
    let answered = invoke(router, aws, &[warning("3", "i-0a000003")]).await;
    assert_eq!(handed_back(&answered), ["3"]);
    assert_eq!(
        aws.count("DescribeInstances"),
        2,
        "spared for the whole invocation"
    );
    // A probe interval later, one probe (still throttled), and only one, however many retries.
    tokio::time::advance(PROBE_INTERVAL).await;
    let answered = invoke(router, aws, &[warning("4", "i-0a000003")]).await;
    assert_eq!(handed_back(&answered), ["4"]);
    assert_eq!(aws.count("DescribeInstances"), 3);
}

#[tokio::test(start_paused = true)]
async fn what_the_tagging_api_does_not_list_waits_for_ec2_while_it_is_suspected() {
    let (aws, router) = suspected_ec2().await;
    // Untagged: the Tagging API does not list it.
    aws.instance(HUB, REGION, "i-0e000001", &[]);
    // Suspected: alpha's node is answered by the Tagging API, the untagged one cannot be, and is
    // retried rather than taken as unknown.
    let answered = invoke(
        &router,
        &aws,
        &[
            warning("ours", "i-0a000003"),
            warning("unlisted", "i-0e000001"),
        ],
    )
    .await;
    assert_eq!(handed_back(&answered), ["unlisted"]);
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
}

/// A router whose EC2 failed twice in a row (throttled), so it is suspected; alpha has nodes
/// i-0a000001 to i-0a000003.
async fn suspected_ec2() -> (
    std::sync::Arc<super::fake::FakeAws>,
    crate::handler::Router<super::fake::FakeAws>,
) {
    let aws = alpha();
    aws.node(HUB, REGION, "i-0a000002", "alpha");
    aws.node(HUB, REGION, "i-0a000003", "alpha");
    aws.break_action("DescribeInstances", Fault::code("RequestLimitExceeded"));
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("1", "i-0a000001")]).await;
    invoke(&router, &aws, &[warning("2", "i-0a000002")]).await;
    assert_eq!(aws.count("DescribeInstances"), 2);
    (aws, router)
}
