//! Health events: one event naming several clusters' instances becomes one copy per cluster,
//! each naming only that cluster's instances.

use serde_json::Value;

use super::{
    Msg, aws, handed_back, health, invoke, router,
    world::{HUB, REGION},
};

#[tokio::test(start_paused = true)]
async fn a_health_event_spanning_two_clusters_gives_each_only_its_own_instances() {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.tenant(HUB, REGION, "beta");
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws.node(HUB, REGION, "i-0a000002", "alpha");
    aws.node(HUB, REGION, "i-0b000001", "beta");
    let router = router(&aws, &[]);
    let body = health(
        "h",
        &["i-0a000001", "i-0b000001", "i-0a000002"],
        HUB,
        REGION,
    );
    let answered = invoke(&router, &aws, &[Msg::new("h", body)]).await;
    assert!(handed_back(&answered).is_empty());
    let named = |queue: &str| -> Vec<String> {
        let bodies = aws.bodies(HUB, REGION, queue);
        assert_eq!(bodies.len(), 1, "{queue}");
        let event: Value = serde_json::from_str(&bodies[0]).unwrap();
        event["detail"]["affectedEntities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["entityValue"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(named("karpenter-alpha"), ["i-0a000001", "i-0a000002"]);
    assert_eq!(named("karpenter-beta"), ["i-0b000001"]);
    // The invocation's delivery records (what `routerctl fis` reads from the logs) name each
    // copy's own instances too.
    let mut delivered: Vec<(&str, &str)> = answered
        .metrics
        .deliveries
        .iter()
        .map(|d| (d.cluster.as_str(), d.instances.as_str()))
        .collect();
    delivered.sort();
    assert_eq!(
        delivered,
        [("alpha", "i-0a000001,i-0a000002"), ("beta", "i-0b000001")]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cluster_not_onboarded_does_not_hold_back_its_neighbour() {
    let aws = aws();
    aws.tenant(HUB, REGION, "alpha");
    aws.node(HUB, REGION, "i-0a000001", "alpha");
    aws.node(HUB, REGION, "i-0c000001", "gamma");
    let router = router(&aws, &[]);
    let body = health("h", &["i-0a000001", "i-0c000001"], HUB, REGION);
    let answered = invoke(&router, &aws, &[Msg::new("h", body)]).await;
    assert!(handed_back(&answered).is_empty());
    assert_eq!(aws.bodies(HUB, REGION, "karpenter-alpha").len(), 1);
    assert_eq!(answered.metrics.no_tenant_queue.get("gamma"), Some(&1));
    assert_eq!(answered.metrics.forwarded.get("alpha"), Some(&1));
}
