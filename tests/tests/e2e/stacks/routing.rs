//! The deployed router at work: configured from the deployed function's environment, it routes
//! events published through EventBridge into the queues the tenant stacks made, a Health event
//! cut into one copy per cluster.

use std::collections::BTreeMap;

use anyhow::Result;
use aws_model::events::Synthetic;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use serde_json::{Value, json};

use super::{
    BASE, CLUSTERS, Clients, deploy_queue_mode, home_origin, publish_and_drain, start_deployed,
};

/// The ingest body of the Health event, cut down to what `cluster`'s copy must be: its own
/// instances in `affectedEntities` and `resources`, everything else as it arrived.
fn health_copy(ingest_body: &Value, instances: &[&str]) -> Value {
    let mut copy = ingest_body.clone();
    let keep = |v: &Value| instances.contains(&v.as_str().unwrap_or_default());
    let entities: Vec<Value> = copy["detail"]["affectedEntities"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| keep(&e["entityValue"]))
        .cloned()
        .collect();
    copy["detail"]["affectedEntities"] = Value::Array(entities);
    copy["resources"] = json!(instances);
    copy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployed_router_routes_eventbridge_events_into_the_tenant_queues() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let (base, _) = deploy_queue_mode(&world, &aws).await?;

    let a = [
        world.launch(&karpenter_tags("alpha")).await?,
        world.launch(&karpenter_tags("alpha")).await?,
    ];
    let b = world.launch(&karpenter_tags("beta")).await?;
    let g = world.launch(&karpenter_tags("gamma")).await?;
    let managed = world.launch(&managed_nodegroup_tags("alpha")).await?;
    let untagged = world.launch(&[]).await?;

    let (router, esm) = start_deployed(&world, &aws, &base).await?;
    let origin = home_origin();
    let health = origin.scheduled_change(&[a[0].clone(), b.clone(), untagged.clone()], "retire");
    let routed: Vec<(Synthetic, &str)> = vec![
        (origin.spot_warning(&a[0], "spot-a0"), "alpha"),
        (
            origin.state_change(&a[1], "terminated", "terminated-a1"),
            "alpha",
        ),
        (origin.rebalance(&b, "rebalance-b"), "beta"),
        (origin.state_change(&g, "stopping", "stopping-g"), "gamma"),
        (origin.capacity_reservation(&g, "capacity-g"), "gamma"),
    ];
    // Reach the ingest queue, and the router ignores them: not Karpenter's instances.
    let ignored = [
        origin.spot_warning(&managed, "spot-managed-nodegroup"),
        origin.spot_warning(&untagged, "spot-untagged"),
    ];
    // Dropped by the rules' patterns: never reach the ingest queue.
    let mut health_issue = origin.scheduled_change(std::slice::from_ref(&a[1]), "issue");
    health_issue.event["detail"]["eventTypeCategory"] = json!("issue");
    let mut health_rds = origin.scheduled_change(std::slice::from_ref(&a[1]), "rds");
    health_rds.event["detail"]["service"] = json!("RDS");
    let filtered = [
        origin.state_change(&a[0], "running", "running-a0"),
        origin.state_change(&a[0], "pending", "pending-a0"),
        health_issue,
        health_rds,
    ];

    let all: Vec<&Synthetic> = routed
        .iter()
        .map(|(e, _)| e)
        .chain([&health])
        .chain(&ignored)
        .chain(&filtered)
        .collect();
    // moto delivers to the rule targets inside PutEvents: everything is queued by now.
    let drained = publish_and_drain(&world, &aws, &esm, &router, &all).await?;
    let reached = routed.len() + 1 + ignored.len();
    assert_eq!(
        drained.records, reached as u64,
        "the rules let noise through"
    );
    assert_eq!(drained.handled, reached as u64);
    assert_eq!(drained.retried, 0);

    // What each cluster's queue holds, exactly. Single-instance events are forwarded byte for
    // byte; the Health event is split.
    let ingest_bodies: Vec<&String> = drained.arrivals.keys().collect();
    let ingest_body_of = |s: &Synthetic| -> Value {
        let found: Vec<Value> = ingest_bodies
            .iter()
            .filter_map(|b| serde_json::from_str::<Value>(b).ok())
            .filter(|v| v["detail"] == s.event["detail"])
            .collect();
        assert_eq!(found.len(), 1, "{} in the ingest queue", s.id);
        found[0].clone()
    };
    let mut expected: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for (event, cluster) in &routed {
        expected
            .entry(cluster)
            .or_default()
            .push(ingest_body_of(event));
    }
    let health_in = ingest_body_of(&health);
    expected
        .entry("alpha")
        .or_default()
        .push(health_copy(&health_in, &[&a[0]]));
    expected
        .entry("beta")
        .or_default()
        .push(health_copy(&health_in, &[&b]));

    for cluster in CLUSTERS {
        let url = world.queue_url(&format!("karpenter-{cluster}")).await?;
        let received = world.drain(&url).await?;
        for r in received.iter().filter(|r| r.json()["source"] == "aws.ec2") {
            assert!(
                drained.arrivals.contains_key(&r.body),
                "{cluster}: not forwarded verbatim: {}",
                r.body
            );
        }
        let mut got: Vec<String> = received.iter().map(|r| r.json().to_string()).collect();
        let mut want: Vec<String> = expected[cluster].iter().map(Value::to_string).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{cluster}'s queue");
    }
    let dlq = world.queue_url(&format!("{BASE}-dlq")).await?;
    assert_eq!(world.drain(&dlq).await?, []);
    assert_eq!(world.depth(&esm.queue_url).await?, 0);
    router.stop().await;
    Ok(())
}
