//! Clusters joining while events flow: one onboarded mid-stream gets its events seconds after its
//! queue exists, and those not yet onboarded are counted per cluster (shadow mode no longer
//! starts).

use std::collections::BTreeMap;

use anyhow::Result;
use e2e_tests::{assert_batch_handled, ec2_event, karpenter_tags};
use serde_json::Value;

use super::{Estate, refused_start, total};

#[tokio::test]
async fn a_cluster_onboarded_while_events_flow_gets_them_seconds_after_its_queue_exists()
-> Result<()> {
    use interruption_router::forward::MISSING_QUEUE_RECHECK;
    use std::time::{Duration, Instant};

    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let node = estate.world.launch(&karpenter_tags("epsilon")).await?;
    // One spot warning for epsilon every 250 ms, each in its own batch, as a steady trickle.
    let mut sent: Vec<(String, Instant)> = Vec::new();
    let mut send = async |n: usize| -> Result<()> {
        let id = format!("spot-{n}");
        let body = ec2_event("spot-interruption-warning.json", &node, &id).to_string();
        let at = Instant::now();
        assert_batch_handled(&router, &[body]).await;
        sent.push((id, at));
        tokio::time::sleep(Duration::from_millis(250)).await;
        Ok(())
    };
    for n in 0..8 {
        send(n).await?;
    }
    // The tenant stack arrives while events flow.
    let queue = estate.world.create_tenant_queue("epsilon").await?;
    let created = Instant::now();
    for n in 8..40 {
        send(n).await?;
    }

    let delivered: Vec<String> = estate
        .world
        .drain(&queue)
        .await?
        .iter()
        .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    // Every event sent once "missing" can no longer be remembered (it was last learned before
    // the queue existed) reached the new queue; every other one was counted as epsilon not being
    // onboarded, and none was dead-lettered: that pages nobody.
    let settled = created + MISSING_QUEUE_RECHECK;
    for (id, at) in &sent {
        if *at >= settled {
            assert!(
                delivered.contains(id),
                "{id} sent after {settled:?} is missing"
            );
        }
    }
    let undelivered = sent
        .iter()
        .filter(|(id, _)| !delivered.contains(id))
        .count();
    let not_onboarded: u64 = router
        .emf_documents()
        .iter()
        .filter_map(|d| d["NoTenantQueue.epsilon"].as_u64())
        .sum();
    assert_eq!(not_onboarded as usize, undelivered);
    assert!(
        undelivered >= 8,
        "the 8 events sent before the queue existed"
    );
    assert!(sent.iter().filter(|(_, at)| *at >= settled).count() >= 20);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);
    let early = router.emf_documents().first().cloned().unwrap();
    assert_eq!(total(&early, "NoTenantQueue.epsilon"), 1);
    assert_eq!(total(&early, "Ignored.no-tenant-queue"), 1);

    // Once it has one, losing it pages: the next event is dead-lettered queue-missing.
    estate
        .world
        .sqs
        .delete_queue()
        .queue_url(&queue)
        .send()
        .await?;
    let body = ec2_event("spot-interruption-warning.json", &node, "after-loss").to_string();
    assert_batch_handled(&router, &[body]).await;
    let dead = estate.world.drain(&estate.queues["dlq"]).await?;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].attributes["reason"], "queue-missing");
    Ok(())
}

/// The `<prefix>.<name>` metrics of an EMF document, by name.
fn per_name(emf: &Value, prefix: &str) -> BTreeMap<String, u64> {
    emf.as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_owned(), v.as_u64()?)))
        .collect()
}

/// How to compare before switching clusters over (shadow mode is gone: it sent nothing, not
/// even to clusters already reading the router's queue): in forward mode a cluster without a
/// tenant queue, or whose queue name another tool's queue holds (EKS Blueprints names its own
/// `karpenter-<cluster>`), is counted per cluster (`NoTenantQueue.<cluster>`) and nothing is
/// written there; the others are forwarded. A function still set for shadow mode does not start.
#[tokio::test]
async fn clusters_not_onboarded_are_counted_per_cluster_and_shadow_mode_does_not_start()
-> Result<()> {
    let estate = Estate::new().await?;
    // delta's name, held by a queue the tenant stack did not make.
    let foreign = estate.world.create_queue("karpenter-delta").await?;
    let events: Vec<String> = estate
        .events()
        .into_iter()
        .map(|(event, _)| event)
        .collect();
    let router = estate.world.start_router(&estate.router_config()).await?;
    assert_batch_handled(&router, &events).await;
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(
        per_name(&emf, "NoTenantQueue."),
        [("delta".to_owned(), 1)].into()
    );
    assert_eq!(total(&emf, "Ignored.no-tenant-queue"), 1, "{emf}");
    assert_eq!(
        estate.world.depth(&foreign).await?,
        0,
        "the router wrote another tool's queue"
    );
    let forwarded = per_name(&emf, "Forwarded.");
    assert_eq!(forwarded["alpha"], 3, "{emf}");
    let lines = router.log_records();
    assert!(
        lines.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a tenant queue"))
            && l["fields"]["queue"] == "karpenter-delta"),
        "{lines:#?}"
    );
    router.stop().await;

    let mut shadow = estate.router_config();
    shadow.push(("ROUTING_MODE", "shadow"));
    let env = estate.world.router_env(&shadow);
    let (_, message) = refused_start(&env).await?;
    assert!(message.contains("ROUTING_MODE"), "{message}");
    assert!(message.contains("NoTenantQueue.<cluster>"), "{message}");
    Ok(())
}
