//! Interruption records: one per instance of each finished record, carrying what the lookup
//! already returned (type, zone, capacity type, node pool) and how late the router delivered it,
//! with no call of its own; what the Tagging API cannot tell recorded as unknown.

use serde_json::{Value, json};

use super::{
    Msg, aws, handed_back, health, invoke, router, spot,
    world::{Fault, HUB, REGION, WorldAws},
};
use router_core::{
    aws::{Capacity, Described},
    insight::InterruptionRecord,
    logging::Level,
};

/// The world's clock at the start of a test, as an event's `time`: 2026-11-28T00:00:00Z.
const NOW: &str = "2026-11-28T00:00:00Z";

fn described(instance_type: &str, zone: &str, capacity: Capacity) -> Described {
    Described {
        instance_type: instance_type.into(),
        zone: zone.into(),
        capacity,
    }
}

/// alpha with a spot node of its `batch` pool and an On-Demand one of `default`; beta with a
/// node in a capacity reservation.
fn estate() -> std::sync::Arc<WorldAws> {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.tenant(HUB, REGION, "beta");
    let at = (HUB, REGION);
    let spot_node = described("c6i.2xlarge", "us-east-1c", Capacity::Spot);
    aws.node_of(at, "i-0a000001", ("alpha", "batch"), spot_node);
    let on_demand = described("m7g.xlarge", "us-east-1b", Capacity::OnDemand);
    aws.node_of(at, "i-0a000002", ("alpha", "default"), on_demand);
    let reserved = described("p5.48xlarge", "us-east-1a", Capacity::Reserved);
    aws.node_of(at, "i-0b000001", ("beta", "gpu"), reserved);
    aws
}

/// `body` with its `time` set to `time`.
fn at_time(body: String, time: &str) -> String {
    let mut event: Value = serde_json::from_str(&body).unwrap();
    event["time"] = json!(time);
    event.to_string()
}

/// (instance, outcome, reason, cluster, type, zone, capacity, pool) of each record.
fn seen(records: &[InterruptionRecord]) -> Vec<[String; 8]> {
    records
        .iter()
        .map(|r| {
            [
                r.instance.clone().unwrap_or_default(),
                r.outcome.clone(),
                r.reason.clone().unwrap_or_default(),
                r.cluster.clone().unwrap_or_default(),
                r.instance_type.clone(),
                r.zone.clone(),
                r.capacity_type.clone(),
                r.node_pool.clone(),
            ]
        })
        .collect()
}

fn row(cells: [&str; 8]) -> [String; 8] {
    cells.map(str::to_owned)
}

/// A spot warning and a Health event naming two clusters' nodes: one forwarded record per
/// instance, with what DescribeInstances said of each, the event's own time and the delay from
/// it; and DescribeInstances asked exactly as without the records (the lookup and the sweep).
#[tokio::test(start_paused = true)]
async fn each_delivered_instance_is_recorded_with_what_describe_instances_said() {
    let aws = estate();
    let router = router(&aws, &[]);
    let warning = at_time(
        spot("w", "i-0a000001", HUB, REGION),
        "2026-11-27T23:59:58.500Z",
    );
    let retirement = health("h", &["i-0a000002", "i-0b000001"], HUB, REGION);
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("w", warning), Msg::new("h", retirement)],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    let records = &answered.metrics.interruptions;
    assert_eq!(
        seen(records),
        [
            row([
                "i-0a000001",
                "forwarded",
                "",
                "alpha",
                "c6i.2xlarge",
                "us-east-1c",
                "spot",
                "batch"
            ]),
            row([
                "i-0a000002",
                "forwarded",
                "",
                "alpha",
                "m7g.xlarge",
                "us-east-1b",
                "on-demand",
                "default"
            ]),
            row([
                "i-0b000001",
                "forwarded",
                "",
                "beta",
                "p5.48xlarge",
                "us-east-1a",
                "reserved",
                "gpu"
            ]),
        ]
    );
    let warning = &records[0];
    assert_eq!(warning.account.as_deref(), Some(HUB));
    assert_eq!(warning.region.as_deref(), Some(REGION));
    assert_eq!(warning.kind.as_deref(), Some("spot-interruption"));
    assert_eq!(warning.event_id.as_deref(), Some("w"));
    assert_eq!(
        warning.event_time.as_deref(),
        Some("2026-11-27T23:59:58.500Z")
    );
    assert_eq!(warning.delay_ms, Some(1500), "event time to the send");
    assert_eq!(records[1].kind.as_deref(), Some("scheduled-change"));
    // No call of its own: the batch's one lookup and the scope's sweep.
    let described: Vec<&str> = aws
        .calls()
        .iter()
        .map(|c| c.action)
        .filter(|a| a.starts_with("Describe") || *a == "GetResources")
        .collect();
    assert_eq!(described, ["DescribeInstances", "DescribeInstances"]);
    assert_eq!(answered.metrics.describe_instances_calls, 2);
}

/// What a sweep described is kept with the owner it found: the next event's node, answered from
/// the cache with no call, is recorded with its type, zone and pool.
#[tokio::test(start_paused = true)]
async fn a_node_the_sweep_described_is_recorded_without_a_lookup() {
    let aws = estate();
    let router = router(&aws, &[]);
    invoke(
        &router,
        &aws,
        &[Msg::new("1", spot("1", "i-0a000001", HUB, REGION))],
    )
    .await;
    let before = aws.calls().len();
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("2", spot("2", "i-0b000001", HUB, REGION))],
    )
    .await;
    let lookups = aws.calls()[before..]
        .iter()
        .filter(|c| c.action == "DescribeInstances" || c.action == "GetResources")
        .count();
    assert_eq!(lookups, 0, "answered from what the sweep found");
    assert_eq!(answered.metrics.cache_hits, 1);
    assert_eq!(
        seen(&answered.metrics.interruptions),
        [row([
            "i-0b000001",
            "forwarded",
            "",
            "beta",
            "p5.48xlarge",
            "us-east-1a",
            "reserved",
            "gpu"
        ])]
    );
}

/// The Tagging API returns tags only: an instance it alone answered for is recorded with its
/// node pool (a tag) and its type, zone and capacity type unknown. A stale answer served when
/// every path fails keeps what the first lookup told.
#[tokio::test(start_paused = true)]
async fn what_the_tagging_api_cannot_tell_is_recorded_unknown() {
    let aws = estate();
    // The lookup and the scope's sweep.
    aws.fail("DescribeInstances", 2, Fault::code("Unavailable"));
    let router = router(&aws, &[]);
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("t", spot("t", "i-0a000001", HUB, REGION))],
    )
    .await;
    assert_eq!(answered.metrics.get_resources_calls, 1);
    assert_eq!(
        seen(&answered.metrics.interruptions),
        [row([
            "i-0a000001",
            "forwarded",
            "",
            "alpha",
            "unknown",
            "unknown",
            "unknown",
            "batch"
        ])]
    );

    // beta's node, described by EC2 once EC2 is no longer suspected, then served stale while both
    // paths fail.
    tokio::time::advance(std::time::Duration::from_secs(31)).await;
    invoke(
        &router,
        &aws,
        &[Msg::new("b", spot("b", "i-0b000001", HUB, REGION))],
    )
    .await;
    tokio::time::advance(std::time::Duration::from_secs(3601)).await;
    aws.break_action("DescribeInstances", Fault::code("Unavailable"));
    aws.break_action("GetResources", Fault::code("ThrottlingException"));
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("s", spot("s", "i-0b000001", HUB, REGION))],
    )
    .await;
    assert_eq!(answered.metrics.stale_answers, 1);
    assert_eq!(
        seen(&answered.metrics.interruptions),
        [row([
            "i-0b000001",
            "forwarded",
            "",
            "beta",
            "p5.48xlarge",
            "us-east-1a",
            "reserved",
            "gpu"
        ])]
    );
}

/// Ignored and dead-lettered interruptions are recorded too, each instance with its own reason:
/// an instance EC2 does not know, a managed node group's (described, no pool), a cluster that is
/// not onboarded, an instance a Health event names beside a delivered one, a body that is not an
/// event (no instance), a queue deleted by hand.
#[tokio::test(start_paused = true)]
async fn ignored_and_dead_lettered_interruptions_are_recorded_with_their_reasons() {
    let aws = estate();
    aws.instance(
        HUB,
        REGION,
        "i-0e000001",
        &[
            ("eks:eks-cluster-name", "alpha"),
            ("eks:nodegroup-name", "system"),
        ],
    );
    aws.node(HUB, REGION, "i-0c000001", "gamma");
    let router = router(&aws, &[]);
    let answered = invoke(
        &router,
        &aws,
        &[
            Msg::new("unknown", spot("unknown", "i-0e000009", HUB, REGION)),
            Msg::new("managed", spot("managed", "i-0e000001", HUB, REGION)),
            Msg::new("gamma", spot("gamma", "i-0c000001", HUB, REGION)),
            Msg::new(
                "both",
                health("both", &["i-0a000001", "i-0e000009"], HUB, REGION),
            ),
            Msg::new("bad", "{not json".into()),
        ],
    )
    .await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(
        seen(&answered.metrics.interruptions),
        [
            row([
                "i-0e000009",
                "ignored",
                "unknown-instance",
                "",
                "unknown",
                "unknown",
                "unknown",
                "unknown"
            ]),
            row([
                "i-0e000001",
                "ignored",
                "unmanaged-instance",
                "",
                "m5.large",
                "us-east-1a",
                "on-demand",
                "unknown"
            ]),
            row([
                "i-0c000001",
                "ignored",
                "no-tenant-queue",
                "gamma",
                "m5.large",
                "us-east-1a",
                "on-demand",
                "default"
            ]),
            row([
                "i-0a000001",
                "forwarded",
                "",
                "alpha",
                "c6i.2xlarge",
                "us-east-1c",
                "spot",
                "batch"
            ]),
            row([
                "i-0e000009",
                "ignored",
                "unknown-instance",
                "",
                "unknown",
                "unknown",
                "unknown",
                "unknown"
            ]),
            row([
                "",
                "dead-lettered",
                "malformed",
                "",
                "unknown",
                "unknown",
                "unknown",
                "unknown"
            ]),
        ]
    );
    let bad = answered.metrics.interruptions.last().unwrap();
    assert_eq!((bad.kind.as_deref(), bad.account.as_deref()), (None, None));
    assert_eq!(answered.metrics.interruptions[0].delay_ms, None);

    aws.delete_queue(HUB, REGION, "karpenter-beta");
    let answered = invoke(
        &router,
        &aws,
        &[Msg::new("gone", spot("gone", "i-0b000001", HUB, REGION))],
    )
    .await;
    assert_eq!(
        seen(&answered.metrics.interruptions),
        [row([
            "i-0b000001",
            "dead-lettered",
            "queue-missing",
            "beta",
            "p5.48xlarge",
            "us-east-1a",
            "reserved",
            "gpu"
        ])]
    );
}

/// A record handed back is not finished: it writes no record until the receive that finishes
/// it, which writes one.
#[tokio::test(start_paused = true)]
async fn a_record_handed_back_is_recorded_once_it_is_finished() {
    let aws = estate();
    aws.break_queue("karpenter-alpha", Fault::code("ServiceUnavailable"));
    let router = router(&aws, &[]);
    let record = Msg::new("r", spot("r", "i-0a000001", HUB, REGION));
    let answered = invoke(&router, &aws, std::slice::from_ref(&record)).await;
    assert_eq!(handed_back(&answered), ["r"]);
    assert!(answered.metrics.interruptions.is_empty());
    aws.mend_queue("karpenter-alpha");
    let answered = invoke(&router, &aws, &[record.receive(2)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(answered.metrics.interruptions.len(), 1);
    assert_eq!(answered.metrics.interruptions[0].outcome, "forwarded");
}

/// The records are printed after the EMF documents, one line each, at the level the documents
/// carry (so Lambda's log filter keeps them at every LogLevel), and read back as written.
#[tokio::test(start_paused = true)]
async fn the_records_are_printed_at_the_level_the_metrics_carry() {
    let aws = estate();
    let router = router(&aws, &[]).with_metrics_level(Level::Error);
    let warning = at_time(spot("w", "i-0a000001", HUB, REGION), NOW);
    let answered = invoke(&router, &aws, &[Msg::new("w", warning)]).await;
    let lines = router.printed(&answered);
    let (documents, records): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|l| l.contains("\"_aws\""));
    assert_eq!(documents.len(), 1);
    assert_eq!(records.len(), 1);
    assert!(lines[0].contains("\"_aws\""), "the documents first");
    let line: Value = serde_json::from_str(records[0]).unwrap();
    assert_eq!(line["level"], "ERROR");
    assert_eq!(line["record"], "interruption");
    assert_eq!(line["timestamp"], "2026-11-28T00:00:00.000Z");
    assert_eq!(line["delay_ms"], 0);
    assert_eq!(
        InterruptionRecord::from_line(records[0]).as_ref(),
        answered.metrics.interruptions.first()
    );
}
