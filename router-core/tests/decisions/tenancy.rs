//! One truth: whether a cluster is onboarded is read from AWS (its queue, the queue's tenant tag,
//! its tenant record), so a warm and a cold execution environment decide the same for the same
//! event, whatever either saw before.

use super::{
    alpha, alpha_warning as warning, aws, dead_letter_reasons, handed_back, invoke, router,
    world::{Fault, HUB, REGION},
};
use router_core::handler::Router;

/// A warm environment (it delivered to alpha before) and a cold one.
async fn warm_and_cold(
    aws: &std::sync::Arc<super::world::WorldAws>,
) -> (
    Router<super::world::WorldAws>,
    Router<super::world::WorldAws>,
) {
    let warm = router(aws, &[]);
    let answered = invoke(&warm, aws, &[warning("before")]).await;
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    (warm, router(aws, &[]))
}

#[tokio::test(start_paused = true)]
async fn a_queue_deleted_by_hand_pages_from_warm_and_cold_environments_alike() {
    let aws = alpha();
    let (warm, cold) = warm_and_cold(&aws).await;
    aws.delete_queue(HUB, REGION, "karpenter-alpha");
    for (name, router) in [("warm", &warm), ("cold", &cold)] {
        let answered = invoke(router, &aws, &[warning(name)]).await;
        assert!(handed_back(&answered).is_empty(), "{name}");
        assert_eq!(
            answered.metrics.dead_lettered.get("queue-missing"),
            Some(&1),
            "{name}"
        );
    }
    assert_eq!(
        dead_letter_reasons(&aws),
        ["queue-missing", "queue-missing"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_tenant_stack_deleted_on_purpose_pages_nobody_warm_or_cold() {
    let aws = alpha();
    let (warm, cold) = warm_and_cold(&aws).await;
    aws.delete_queue(HUB, REGION, "karpenter-alpha");
    aws.delete_record(HUB, REGION, "karpenter-alpha");
    for (name, router) in [("warm", &warm), ("cold", &cold)] {
        let answered = invoke(router, &aws, &[warning(name)]).await;
        assert!(handed_back(&answered).is_empty(), "{name}");
        assert_eq!(
            answered.metrics.no_tenant_queue.get("alpha"),
            Some(&1),
            "{name}"
        );
        assert_eq!(
            answered.metrics.ignored.get("no-tenant-queue"),
            Some(&1),
            "{name}"
        );
    }
    assert!(dead_letter_reasons(&aws).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_cluster_never_onboarded_is_counted_not_paged() {
    let aws = aws();
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("m")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.no_tenant_queue.get("alpha"), Some(&1));
    assert!(dead_letter_reasons(&aws).is_empty());
    // Deployed while events flow: used once the short "missing" answer runs out.
    aws.tenant(HUB, REGION, "alpha");
    tokio::time::advance(router_core::forward::MISSING_QUEUE_RECHECK).await;
    let answered = invoke(&router, &aws, &[warning("n")]).await;
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
}

/// The tenant stack makes its queue, then its record. Deployed between the router's GetQueueUrl
/// and its GetParameter, it would read as "record, no queue": lost, paged. The queue is asked
/// for again before that verdict.
#[tokio::test(start_paused = true)]
async fn a_tenant_stack_deployed_between_two_reads_is_written_not_paged() {
    let aws = aws();
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws.after_next("GetQueueUrl", |aws| aws.tenant(HUB, REGION, "alpha"));
    let answered = invoke(&router(&aws, &[]), &aws, &[warning("m")]).await;
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert!(dead_letter_reasons(&aws).is_empty());
    assert_eq!(aws.count("GetQueueUrl"), 2);
}

/// A send that finds its known queue gone, when the queue is there again by the time the router
/// looks (deleted and made again): the retry writes it; nothing pages.
#[tokio::test(start_paused = true)]
async fn a_queue_made_again_after_a_send_found_it_gone_gets_the_retry() {
    let aws = alpha();
    let (warm, _) = warm_and_cold(&aws).await;
    aws.fail(
        "SendMessageBatch",
        1,
        Fault::code("AWS.SimpleQueueService.NonExistentQueue"),
    );
    let answered = invoke(&warm, &aws, &[warning("again")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    assert!(dead_letter_reasons(&aws).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 2);
}

#[tokio::test(start_paused = true)]
async fn only_a_queue_the_tenant_stack_made_is_written() {
    let aws = aws();
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    // EKS Blueprints' look-alike: the name, no tenant tag, a policy for EventBridge.
    let blueprints = r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}]}"#;
    aws.queue(HUB, REGION, "karpenter-alpha", &[], Some(blueprints));
    let answered = invoke(&router(&aws, &[]), &aws, &[warning("m")]).await;
    assert!(aws.bodies(HUB, REGION, "karpenter-alpha").is_empty());
    assert_eq!(answered.metrics.no_tenant_queue.get("alpha"), Some(&1));
    // Another cluster's tag is not this cluster's queue either.
    let other = super::aws();
    other.node(HUB, REGION, "i-0a000001", "alpha");
    other.queue(
        HUB,
        REGION,
        "karpenter-alpha",
        &[(router_core::tenancy::TENANT_TAG, "beta")],
        None,
    );
    invoke(&router(&other, &[]), &other, &[warning("m")]).await;
    assert!(other.bodies(HUB, REGION, "karpenter-alpha").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_record_that_cannot_be_read_counts_the_cluster_as_not_onboarded() {
    let aws = alpha();
    aws.delete_queue(HUB, REGION, "karpenter-alpha");
    aws.break_action("GetParameter", Fault::code("AccessDeniedException"));
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("m")]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.no_tenant_queue.get("alpha"), Some(&1));
    assert!(dead_letter_reasons(&aws).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_record_read_that_fails_is_retried_and_then_decides() {
    let aws = alpha();
    aws.delete_queue(HUB, REGION, "karpenter-alpha");
    aws.fail("GetParameter", 1, Fault::code("ThrottlingException"));
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("m")]).await;
    assert_eq!(
        answered.metrics.dead_lettered.get("queue-missing"),
        Some(&1)
    );
    assert_eq!(aws.count("GetParameter"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_tenant_queue_found_once_is_not_looked_up_again_within_the_cache_lifetime() {
    let aws = alpha();
    let router = router(&aws, &[]);
    invoke(&router, &aws, &[warning("m")]).await;
    let answered = invoke(&router, &aws, &[warning("n")]).await;
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
    assert_eq!(aws.count("GetQueueUrl"), 1);
    assert_eq!(aws.count("ListQueueTags"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_queue_lookup_that_fails_is_handed_back_not_judged_by_the_record() {
    let aws = alpha();
    aws.break_action("GetQueueUrl", Fault::code("ThrottlingException"));
    let answered = invoke(&router(&aws, &[]), &aws, &[warning("m")]).await;
    assert_eq!(handed_back(&answered), ["m"]);
    assert_eq!(aws.count("GetParameter"), 0);
    assert!(dead_letter_reasons(&aws).is_empty());
    assert!(answered.metrics.no_tenant_queue.is_empty());
}

/// What the ownership check does when it may not read a queue's tags or policy (a sender from
/// before those grants: it writes as before, and warns) and when the read fails (handed back).
#[tokio::test(start_paused = true)]
async fn an_ownership_read_that_is_denied_sends_as_before_and_one_that_fails_hands_back() {
    for (action, untagged) in [("ListQueueTags", false), ("GetQueueAttributes", true)] {
        for (code, delivered) in [("AccessDenied", true), ("ThrottlingException", false)] {
            let aws = aws();
            aws.node(HUB, REGION, "i-0a000001", "alpha");
            if untagged {
                // No tenant tag: the policy decides, so it is read.
                aws.queue(HUB, REGION, "karpenter-alpha", &[], None);
                aws.record(HUB, REGION, "karpenter-alpha");
            } else {
                aws.tenant(HUB, REGION, "alpha");
            }
            aws.break_action(action, Fault::code(code));
            let answered = invoke(&router(&aws, &[]), &aws, &[warning("m")]).await;
            let case = format!("{action} answering {code}");
            assert_eq!(
                aws.bodies(HUB, REGION, "karpenter-alpha").len(),
                usize::from(delivered),
                "{case}"
            );
            assert_eq!(handed_back(&answered).is_empty(), delivered, "{case}");
            assert!(dead_letter_reasons(&aws).is_empty(), "{case}");
        }
    }
}
