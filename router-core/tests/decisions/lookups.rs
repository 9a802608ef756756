//! Lookups: the hedge to the Tagging API, EC2 suspicion, stale-if-error, chunks, and what is not
//! a cluster's.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    Msg, alpha, handed_back, invoke, router, spot, sum,
    world::{Fault, HUB, REGION, SWEEP},
};
use router_core::resolve::hedge::INITIAL_HEDGE_DELAY;

fn warning(n: &str, instance: &str) -> Msg {
    Msg::new(n, spot(n, instance, HUB, REGION))
}

#[tokio::test(start_paused = true)]
async fn a_failing_ec2_is_answered_by_the_tagging_api_at_once() {
    let aws = alpha();
    // The scope's sweep and the lookup.
    aws.fail("DescribeInstances", 2, Fault::code("Unavailable"));
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
    aws.fail("DescribeInstances", 2, Fault::Slow(Duration::from_secs(2)));
    let router = router(&aws, &[]);
    // When the copy is in the queue (the invocation itself also waits for the scope's sweep).
    let queue = &*aws;
    let delivered = |at: Duration| async move {
        tokio::time::sleep(at).await;
        queue.bodies(HUB, REGION, "karpenter-alpha").len()
    };
    let records = [warning("m", "i-0a000001")];
    let (answered, before_the_hedge, within_a_second) = tokio::join!(
        invoke(&router, &aws, &records),
        delivered(INITIAL_HEDGE_DELAY - Duration::from_millis(1)),
        delivered(Duration::from_millis(999)),
    );
    assert_eq!(sum(&answered.metrics.forwarded), 1);
    assert_eq!(answered.metrics.hedged_lookups, 1);
    assert_eq!((before_the_hedge, within_a_second), (0, 1));
}

#[tokio::test(start_paused = true)]
async fn after_two_ec2_failures_the_tagging_api_is_asked_first() {
    let (aws, router) = suspected_ec2().await;
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
    // Three chunks, and the scope's sweep (450 nodes: one page).
    assert_eq!(aws.count("DescribeInstances"), 4);
    assert_eq!(aws.count("SendMessageBatch"), 45);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 450);
    // The same instances again: every answer is cached.
    let again = invoke(&router, &aws, &records[..10]).await;
    assert_eq!(again.metrics.cache_hits, 10);
    assert_eq!(aws.count("DescribeInstances"), 4);
}

#[tokio::test(start_paused = true)]
async fn a_swept_scope_answers_its_other_nodes_without_a_lookup() {
    let aws = alpha();
    for n in 2..=5 {
        aws.node(HUB, REGION, &format!("i-0a00000{n}"), "alpha");
    }
    // Not Karpenter's: no managed tag, so the sweep does not list it.
    aws.instance(
        HUB,
        REGION,
        "i-0e000001",
        &[("eks:eks-cluster-name", "alpha")],
    );
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("first", "i-0a000001")]).await;
    assert_eq!(
        aws.count("DescribeInstances"),
        2,
        "the lookup and the sweep"
    );
    // Nodes never seen before: the sweep found them all.
    let answered = invoke(
        &router,
        &aws,
        &[warning("2", "i-0a000002"), warning("5", "i-0a000005")],
    )
    .await;
    assert_eq!(answered.metrics.cache_hits, 2);
    assert_eq!(aws.count("DescribeInstances"), 2);
    // What the sweep could not list is looked up, and the scope is not swept again soon.
    let answered = invoke(&router, &aws, &[warning("mng", "i-0e000001")]).await;
    assert_eq!(answered.metrics.ignored.get("unmanaged-instance"), Some(&1));
    assert_eq!(answered.metrics.sweeps, 0);
    assert_eq!(aws.count("DescribeInstances"), 3);
}

#[tokio::test(start_paused = true)]
async fn with_sweeps_off_each_miss_is_looked_up_alone() {
    let aws = alpha();
    aws.node(HUB, REGION, "i-0a000002", "alpha");
    let router = router(&aws, &[("SWEEP_INTERVAL_SECONDS", "0")]);
    let answered = invoke(&router, &aws, &[warning("1", "i-0a000001")]).await;
    assert_eq!(answered.metrics.sweeps, 0);
    let answered = invoke(&router, &aws, &[warning("2", "i-0a000002")]).await;
    assert_eq!(answered.metrics.cache_misses, 1);
    assert_eq!(aws.count("DescribeInstances"), 2, "two lookups, no sweep");
}

/// alpha with a second node, a sweep that answers after `slow`, and the first warning answered:
/// the world, the router, when the invocation started, and what it answered.
async fn with_slow_sweep(
    slow: Duration,
) -> (
    std::sync::Arc<super::world::WorldAws>,
    router_core::handler::Router<super::world::WorldAws>,
    Instant,
    router_core::handler::Answered,
) {
    let aws = alpha();
    aws.node(HUB, REGION, "i-0a000002", "alpha");
    aws.fail(SWEEP, 1, Fault::Slow(slow));
    let router = router(&aws, &[]);
    let started = Instant::now();
    let answered = invoke(&router, &aws, &[warning("first", "i-0a000001")]).await;
    (aws, router, started, answered)
}

#[tokio::test(start_paused = true)]
async fn an_invocation_answers_once_its_sweeps_are_done() {
    // The lookup answers at once, the sweep after two seconds.
    let (aws, router, started, answered) = with_slow_sweep(Duration::from_secs(2)).await;
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(answered.metrics.sweeps, 1);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "answered before its sweep ended: Lambda would freeze it mid-call"
    );
    // So the next invocation has what it found.
    let answered = invoke(&router, &aws, &[warning("2", "i-0a000002")]).await;
    assert_eq!(answered.metrics.cache_hits, 1);
    assert_eq!(aws.count("DescribeInstances"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_sweep_unfinished_at_the_delivery_deadline_is_stopped_and_tried_again_later() {
    use router_core::{resolve::SWEEP_RETRY, retry::DELIVER_WINDOW};
    let (aws, router, started, answered) = with_slow_sweep(Duration::from_secs(60)).await;
    assert!(handed_back(&answered).is_empty());
    assert!(
        started.elapsed() <= DELIVER_WINDOW,
        "{:?}",
        started.elapsed()
    );
    // Not swept: the next node is looked up, and no sweep starts again at once.
    let answered = invoke(&router, &aws, &[warning("2", "i-0a000002")]).await;
    assert_eq!(answered.metrics.cache_hits, 0);
    assert_eq!(answered.metrics.sweeps, 0);
    assert_eq!(aws.count("DescribeInstances"), 3);
    tokio::time::advance(SWEEP_RETRY).await;
    aws.node(HUB, REGION, "i-0a000003", "alpha");
    let answered = invoke(&router, &aws, &[warning("3", "i-0a000003")]).await;
    assert_eq!(answered.metrics.sweeps, 1);
}

#[tokio::test(start_paused = true)]
async fn a_suspected_ec2_is_asked_at_most_once_per_probe_interval() {
    use router_core::resolve::hedge::PROBE_INTERVAL;
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
    unlisted_waits_for_ec2(&router, &aws, "i-0a000003").await;
}

/// alpha's `ours` and the untagged i-0e000001 in one batch while EC2 fails: the Tagging API
/// answers for `ours` (forwarded), and the unlisted record is handed back, not ignored.
async fn unlisted_waits_for_ec2(
    router: &router_core::handler::Router<super::world::WorldAws>,
    aws: &super::world::WorldAws,
    ours: &str,
) -> router_core::handler::Answered {
    let answered = invoke(
        router,
        aws,
        &[warning("ours", ours), warning("unlisted", "i-0e000001")],
    )
    .await;
    assert_eq!(handed_back(&answered), ["unlisted"]);
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    answered
}

/// A router whose EC2 failed twice in a row (throttled), so it is suspected; alpha has nodes
/// i-0a000001 to i-0a000003.
async fn suspected_ec2() -> (
    std::sync::Arc<super::world::WorldAws>,
    router_core::handler::Router<super::world::WorldAws>,
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

/// A known owner stays available as a stale answer for `LAST_KNOWN_HORIZON` (a week) after it
/// stopped being fresh: a node that lives for days is still served when both paths fail; past
/// the horizon it is not.
#[tokio::test(start_paused = true)]
async fn a_stale_answer_serves_for_a_week_and_not_after() {
    let aws = alpha();
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("first", "i-0a000001")]).await;
    aws.break_action("DescribeInstances", Fault::code("Unavailable"));
    aws.break_action("GetResources", Fault::code("ThrottlingException"));
    tokio::time::advance(Duration::from_secs(2 * 24 * 3600)).await;
    let answered = invoke(&router, &aws, &[warning("days", "i-0a000001")]).await;
    assert!(handed_back(&answered).is_empty(), "two days on: served");
    assert_eq!(answered.metrics.stale_answers, 1);
    tokio::time::advance(router_core::resolve::LAST_KNOWN_HORIZON).await;
    let answered = invoke(&router, &aws, &[warning("weeks", "i-0a000001")]).await;
    assert_eq!(handed_back(&answered), ["weeks"], "past the horizon: not");
}

/// Without sweeps, each lookup's answer is kept for the cache lifetime: the instance's next
/// event is routed from the cache, without asking EC2 again.
#[tokio::test(start_paused = true)]
async fn a_looked_up_owner_is_kept_for_the_next_event() {
    let aws = alpha();
    let router = router(&aws, &[("SWEEP_INTERVAL_SECONDS", "0")]);
    invoke(&router, &aws, &[warning("1", "i-0a000001")]).await;
    assert_eq!(aws.count("DescribeInstances"), 1);
    let answered = invoke(&router, &aws, &[warning("2", "i-0a000001")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(
        aws.count("DescribeInstances"),
        1,
        "the second from the cache"
    );
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 2);
}

/// The hedge's half of the rule above: EC2 failing once (not yet suspected), the Tagging API's
/// answer serves what it lists, and what it leaves out (untagged, or a node launched so lately it
/// is not indexed yet) is retried until EC2 can say, never ignored as unknown.
#[tokio::test(start_paused = true)]
async fn what_the_tagging_api_does_not_list_waits_for_ec2_after_a_hedged_lookup() {
    let aws = alpha();
    aws.instance(HUB, REGION, "i-0e000001", &[]);
    // The lookup, then the scope's sweep.
    aws.fail("DescribeInstances", 2, Fault::code("Unavailable"));
    let router = router(&aws, &[]);
    let answered = unlisted_waits_for_ec2(&router, &aws, "i-0a000001").await;
    assert!(
        answered.metrics.hedged_lookups > 0,
        "EC2's failure was not hedged"
    );
}
