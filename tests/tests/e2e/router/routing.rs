//! Every kind of event reaches exactly its cluster's queue from an SQS batch, and a duplicate
//! reaches its own cluster again, never another.

use anyhow::Result;
use e2e_tests::{Received, assert_batch_handled, ec2_event, health_event};
use serde_json::{Value, json};

use super::{Estate, total};

#[tokio::test]
async fn every_event_reaches_exactly_its_cluster_from_an_sqs_batch() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let events = estate.events();
    let bodies: Vec<String> = events.iter().map(|(b, _)| b.clone()).collect();

    assert_batch_handled(&router, &bodies).await;
    estate.assert_queues_hold_exactly(&events).await?;

    // All misses of the batch went to EC2 in one call, then (the records delivered) the scope's
    // sweep, one page; one SendMessageBatch per queue per round.
    let calls = estate.world.proxy.calls();
    assert_eq!(calls.get("DescribeInstances"), Some(&2), "{calls:?}");
    // alpha, beta, gamma, then the DLQ once for the malformed record.
    assert_eq!(calls.get("SendMessageBatch"), Some(&4), "{calls:?}");
    let emf = router
        .emf_documents()
        .pop()
        .expect("an EMF document per invocation");
    assert_eq!(total(&emf, "Received"), 14);
    assert_eq!(total(&emf, "Sweeps"), 1);
    assert_eq!(total(&emf, "DescribeInstancesCalls"), 2);
    assert_eq!(total(&emf, "Forwarded.alpha"), 3);
    assert_eq!(total(&emf, "Forwarded.beta"), 3);
    assert_eq!(total(&emf, "Forwarded.gamma"), 1);
    assert_eq!(total(&emf, "Ignored"), 7);
    assert_eq!(total(&emf, "Ignored.unknown-instance"), 1);
    assert_eq!(total(&emf, "Ignored.unmanaged-instance"), 2);
    assert_eq!(total(&emf, "Ignored.no-tenant-queue"), 1);
    assert_eq!(total(&emf, "NoTenantQueue.delta"), 1);
    assert_eq!(total(&emf, "DeadLettered"), 1);
    assert_eq!(total(&emf, "DeadLettered.malformed"), 1);
    assert_eq!(total(&emf, "Failed"), 0);
    assert_eq!(total(&emf, "ColdStart"), 1);

    // The same batch again: everything is cached, so EC2 and GetQueueUrl are not asked again.
    estate.world.proxy.reset_counts();
    assert_batch_handled(&router, &bodies).await;
    estate.assert_queues_hold_exactly(&events).await?;
    let calls = estate.world.proxy.calls();
    assert_eq!(calls.get("DescribeInstances"), None, "{calls:?}");
    assert_eq!(calls.get("GetQueueUrl"), None, "{calls:?}");
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(total(&emf, "ColdStart"), 0);
    assert_eq!(total(&emf, "CacheMisses"), 0);

    // The structured logs name the event, kind, instance and cluster of each delivery.
    let logs = router.log_records();
    let delivery = logs
        .iter()
        .find(|l| l["fields"]["event_id"] == "stopping-g" && l["fields"]["outcome"] == "forwarded")
        .unwrap_or_else(|| panic!("no log of the delivery: {logs:#?}"));
    assert_eq!(delivery["fields"]["cluster"], "gamma");
    assert_eq!(delivery["fields"]["kind"], "state-change");
    assert_eq!(delivery["fields"]["instances"], estate.gamma.as_str());
    Ok(())
}

#[tokio::test]
async fn duplicates_reach_their_own_cluster_again_and_never_another() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let spot = ec2_event(
        "spot-interruption-warning.json",
        &estate.alpha[0],
        "spot-twice",
    )
    .to_string();
    // AWS Health sends backup copies (`backupEvent: "true"`, same communication) for resilience;
    // the router forwards them too, since the primary may be the copy that was lost.
    let mut health = health_event(
        &[&estate.alpha[1], &estate.beta[0], &estate.alpha[1]],
        "retirement",
    );
    let primary = health.to_string();
    health["detail"]["backupEvent"] = json!("true");
    let backup = health.to_string();

    // The same event twice in one batch, and the Health pair; then everything once more.
    let batch = vec![spot.clone(), spot.clone(), primary.clone(), backup.clone()];
    for _ in 0..2 {
        assert_batch_handled(&router, &batch).await;
    }

    let alpha = estate.world.drain(&estate.queues["alpha"]).await?;
    let beta = estate.world.drain(&estate.queues["beta"]).await?;
    let spots = alpha.iter().filter(|m| m.body == spot).count();
    assert_eq!(spots, 4, "every copy of the spot warning reached alpha");
    for (queue, mine, theirs) in [
        (&alpha, &estate.alpha[1], &estate.beta[0]),
        (&beta, &estate.beta[0], &estate.alpha[1]),
    ] {
        let copies: Vec<Value> = queue
            .iter()
            .map(Received::json)
            .filter(|e| e["source"] == "aws.health")
            .collect();
        assert_eq!(copies.len(), 4, "primary and backup, twice");
        for copy in &copies {
            let ids: Vec<&str> = copy["detail"]["affectedEntities"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["entityValue"].as_str().unwrap())
                .collect();
            assert_eq!(
                ids,
                [mine.as_str()],
                "the repeated entity is listed once, and only this cluster's"
            );
            assert!(!copy.to_string().contains(theirs.as_str()));
        }
    }
    assert_eq!(
        beta.len(),
        4,
        "beta got its Health copies and nothing of alpha's"
    );
    assert_eq!(estate.world.depth(&estate.queues["gamma"]).await?, 0);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);
    Ok(())
}
