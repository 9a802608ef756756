//! Batches: each record on its own, partial failures, retries inside the invocation, hand-backs.

use super::{
    Msg, aws, dead_letter_reasons, handed_back, invoke, router, spot, sum,
    world::{Fault, HUB, REGION},
};
use router_core::retry::redelivery_delay;

fn three_clusters() -> std::sync::Arc<super::world::WorldAws> {
    let aws = aws();
    for (cluster, id) in [("alpha", "i-0a"), ("beta", "i-0b"), ("gamma", "i-0c")] {
        aws.tenant(HUB, REGION, cluster);
        aws.node(HUB, REGION, &format!("{id}000001"), cluster);
        aws.node(HUB, REGION, &format!("{id}000002"), cluster);
    }
    aws
}

/// How many retries a job gets inside an invocation: as many as the doubling ladder's waits fit
/// into the retry window (the jitter is 1: the full waits).
fn ladder() -> u64 {
    let mut waited = std::time::Duration::ZERO;
    (1..)
        .take_while(|attempt| {
            waited += router_core::retry::backoff(*attempt, 1.0);
            waited < router_core::retry::RETRY_WINDOW
        })
        .count() as u64
}

fn warning(n: &str, instance: &str) -> Msg {
    Msg::new(n, spot(n, instance, HUB, REGION))
}

#[tokio::test(start_paused = true)]
async fn every_record_reaches_its_own_cluster_once_in_one_lookup_one_sweep_and_one_send_per_queue()
{
    let aws = three_clusters();
    let router = router(&aws, &[]);
    let records = [
        warning("a1", "i-0a000001"),
        warning("b1", "i-0b000001"),
        warning("c1", "i-0c000001"),
        warning("a2", "i-0a000002"),
    ];
    let answered = invoke(&router, &aws, &records).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 2);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-beta").len(), 1);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-gamma").len(), 1);
    // One lookup of the batch's four nodes, and the scope's sweep beside it.
    assert_eq!(aws.count("DescribeInstances"), 2, "{:?}", aws.calls());
    assert_eq!(answered.metrics.sweeps, 1);
    assert_eq!(aws.count("SendMessageBatch"), 3);
    assert_eq!(sum(&answered.metrics.forwarded), 4);
    // The bodies are the originals, byte for byte.
    assert_eq!(
        aws.bodies(HUB, REGION, "karpenter-beta"),
        [records[1].body.clone()]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_queue_hands_back_only_its_own_records() {
    let aws = three_clusters();
    // gamma's queue fails every entry on SQS's side for the whole invocation.
    aws.fail_entries("karpenter-gamma", 1000, "InternalError", false);
    let router = router(&aws, &[]);
    let records = [
        warning("a1", "i-0a000001"),
        warning("c1", "i-0c000001"),
        warning("b1", "i-0b000001"),
        warning("c2", "i-0c000002"),
    ];
    let answered = invoke(&router, &aws, &records).await;
    assert_eq!(handed_back(&answered), ["c1", "c2"]);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-beta").len(), 1);
    assert!(aws.bodies(HUB, REGION, "karpenter-gamma").is_empty());
    assert!(
        dead_letter_reasons(&aws).is_empty(),
        "a transient failure pages nobody"
    );
    assert!(
        answered.metrics.retries >= 2,
        "retried inside the invocation first"
    );
    // ... on the doubling ladder, not a retry every 200 ms.
    let ladder = ladder();
    assert!(
        answered.metrics.retries <= ladder,
        "{} retries, the ladder has {ladder}",
        answered.metrics.retries
    );
}

#[tokio::test(start_paused = true)]
async fn a_brief_brownout_is_ridden_out_inside_the_invocation() {
    let aws = three_clusters();
    aws.fail("SendMessageBatch", 2, Fault::code("ServiceUnavailable"));
    // The scope's sweep and the lookup both throttled, then the Tagging API too.
    aws.fail("DescribeInstances", 2, Fault::code("RequestLimitExceeded"));
    aws.fail("GetResources", 1, Fault::code("ThrottlingException"));
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("a1", "i-0a000001")]).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert!(answered.metrics.retries >= 3);
}

#[tokio::test(start_paused = true)]
async fn entries_failed_inside_a_200_answer_are_retried_or_dead_lettered_never_counted_sent() {
    let aws = three_clusters();
    aws.fail_entries("karpenter-alpha", 1, "InternalError", false);
    aws.fail_entries("karpenter-beta", 1, "InvalidMessageContents", true);
    let router = router(&aws, &[]);
    let answered = invoke(
        &router,
        &aws,
        &[warning("a1", "i-0a000001"), warning("b1", "i-0b000001")],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(
        aws.bodies(HUB, REGION, "karpenter-alpha").len(),
        1,
        "retried once"
    );
    assert!(aws.bodies(HUB, REGION, "karpenter-beta").is_empty());
    assert_eq!(
        dead_letter_reasons(&aws),
        ["rejected"],
        "SQS blamed the sender"
    );
    assert_eq!(sum(&answered.metrics.forwarded), 1);
}

#[tokio::test(start_paused = true)]
async fn a_handed_back_record_returns_sooner_the_fewer_times_it_was_received() {
    let aws = three_clusters();
    aws.break_action("SendMessageBatch", Fault::code("ServiceUnavailable"));
    let router = router(&aws, &[]);
    let records: Vec<Msg> = (1..=8)
        .map(|n| warning(&format!("r{n}"), "i-0a000001").receive(n))
        .collect();
    let answered = invoke(&router, &aws, &records).await;
    assert_eq!(handed_back(&answered).len(), 8);
    // Each record in the world's ingest queue is hidden for its delay from now.
    let now = aws.world().clock();
    let hidden: Vec<(String, u64)> = aws.world().read(|_, site| {
        site.queues["interruption-router-ingest"]
            .messages
            .iter()
            .map(|m| {
                let left = m.visible_at.duration_since(now).unwrap_or_default();
                (m.id.clone(), left.as_secs())
            })
            .collect()
    });
    let expected: Vec<(String, u64)> = (1..=8)
        .map(|n| (format!("r{n}"), redelivery_delay(n, 1.0).as_secs()))
        .collect();
    assert_eq!(hidden, expected);
    assert_eq!(aws.visibility().len(), 8, "one entry each");
    assert_eq!(
        expected.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        [1, 2, 4, 8, 16, 32, 60, 60]
    );
    assert_eq!(answered.metrics.redelivery_delays_set, 8);
    assert_eq!(answered.metrics.redelivery_delays_failed, 0);
    assert_eq!(
        answered.metrics.change_visibility_calls, 1,
        "8 records, one batch"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hand_back_whose_visibility_cannot_be_shortened_is_still_a_hand_back() {
    let aws = three_clusters();
    aws.break_action("SendMessageBatch", Fault::code("ServiceUnavailable"));
    aws.break_action(
        "ChangeMessageVisibilityBatch",
        Fault::code("ServiceUnavailable"),
    );
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("a1", "i-0a000001")]).await;
    assert_eq!(handed_back(&answered), ["a1"]);
    assert_eq!(answered.metrics.redelivery_delays_failed, 1);
    assert_eq!(answered.metrics.redelivery_delays_set, 0);
}

#[tokio::test(start_paused = true)]
async fn a_payload_that_is_not_an_sqs_event_fails_the_invocation_with_why() {
    let aws = aws();
    let router = router(&aws, &[]);
    let direct =
        serde_json::value::RawValue::from_string(spot("x", "i-0a000001", HUB, REGION)).unwrap();
    let answered = router
        .invoke(
            &direct,
            router_core::handler::Invocation {
                request_id: "r",
                function_arn: super::FUNCTION_ARN,
                deadline_ms: u64::MAX,
            },
        )
        .await;
    let error = answered.response.unwrap_err().to_string();
    assert!(error.contains("SQS event source mapping"), "{error}");
    assert!(aws.calls().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_operators_invoke_gets_each_records_outcome_and_a_mapping_only_its_failures() {
    let aws = three_clusters();
    let router = router(&aws, &[]);
    let records = [warning("a1", "i-0a000001"), Msg::new("bad", "{".into())];
    // As the event source mapping sends it: the partial-batch response, nothing more.
    let mapped = invoke(&router, &aws, &records).await;
    let response = mapped.response.as_ref().unwrap();
    assert!(response.get("outcomes").is_none(), "{response}");
    // Without eventSourceARN (simulate, adopt's probe): every record's outcome.
    let mut event: serde_json::Value =
        serde_json::from_str(super::sqs_event(&aws, &records).get()).unwrap();
    for r in event["Records"].as_array_mut().unwrap() {
        r.as_object_mut().unwrap().remove("eventSourceARN");
    }
    let payload = serde_json::value::RawValue::from_string(event.to_string()).unwrap();
    let direct = router
        .invoke(
            &payload,
            router_core::handler::Invocation {
                request_id: "r",
                function_arn: super::FUNCTION_ARN,
                deadline_ms: u64::MAX,
            },
        )
        .await;
    let response = direct.response.unwrap();
    assert_eq!(
        response["outcomes"],
        serde_json::json!({"a1": "forwarded", "bad": "dead-lettered"})
    );
}

/// The invocation's metrics (the EMF document and `make bench` read them) count what the router
/// did, call for call: each counter equals the seam's own count of that action, through a retried
/// lookup, a retried send, a lost queue whose record stands and its dead letter.
#[tokio::test(start_paused = true)]
async fn the_invocation_metrics_count_every_call_the_seam_saw() {
    let aws = three_clusters();
    // delta's queue was deleted by hand; its tenant record stands: dead-lettered, queue-missing.
    aws.node(HUB, REGION, "i-0d000001", "delta");
    aws.record(HUB, REGION, "karpenter-delta");
    aws.fail("DescribeInstances", 1, Fault::code("RequestLimitExceeded"));
    aws.fail("SendMessageBatch", 1, Fault::code("ServiceUnavailable"));
    let router = router(&aws, &[]);
    let records = [
        warning("a1", "i-0a000001"),
        warning("b1", "i-0b000001"),
        warning("c1", "i-0c000001"),
        warning("d1", "i-0d000001"),
    ];
    let answered = invoke(&router, &aws, &records).await;
    assert!(handed_back(&answered).is_empty(), "{:?}", answered.response);
    assert_eq!(dead_letter_reasons(&aws), ["queue-missing"]);
    let m = &answered.metrics;
    let seen = |action: &str| aws.count(action) as u64;
    assert_eq!(m.received, 4);
    assert!(m.retries >= 1, "the failed send was retried");
    for (counted, action) in [
        (m.describe_instances_calls, "DescribeInstances"),
        (m.get_resources_calls, "GetResources"),
        (m.get_queue_url_calls, "GetQueueUrl"),
        (m.tenant_record_calls, "GetParameter"),
        // The cluster queues' sends, their retry, and the dead letter's.
        (m.send_message_batch_calls, "SendMessageBatch"),
    ] {
        assert_eq!(counted, seen(action), "{action}: {:?}", aws.calls());
        if action != "GetResources" {
            assert!(counted > 0, "{action} was called");
        }
    }
    assert_eq!(
        m.queue_ownership_calls,
        seen("ListQueueTags") + seen("GetQueueAttributes")
    );
    assert!(m.queue_ownership_calls > 0);
}

/// Lookups that keep failing are retried on the same ladder as sends, then handed back.
#[tokio::test(start_paused = true)]
async fn failing_lookups_are_retried_on_the_ladder_then_handed_back() {
    let aws = three_clusters();
    aws.break_action("DescribeInstances", Fault::code("Unavailable"));
    aws.break_action("GetResources", Fault::code("ServiceUnavailable"));
    let router = router(&aws, &[]);
    let answered = invoke(&router, &aws, &[warning("a1", "i-0a000001")]).await;
    assert_eq!(handed_back(&answered), ["a1"]);
    let retries = answered.metrics.retries;
    assert!(
        (1..=ladder()).contains(&retries),
        "{retries} retries, the ladder has {}",
        ladder()
    );
}
