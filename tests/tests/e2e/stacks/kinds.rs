//! Each cluster chooses what reaches it (tenant.yaml's `EventKinds`): the deployed router, fed
//! through EventBridge, sends beta only the kinds beta's tenant stack takes, a Health event
//! naming alpha's and beta's nodes reaches alpha alone, and what beta declined is counted, not
//! dead-lettered. Updating beta's stack to take everything keeps its queue and is used once the
//! router's cached answer expires (`CacheTtlSeconds`, set short here).

use std::time::Duration;

use anyhow::Result;
use aws_model::stacks::TENANT_TEMPLATE;
use e2e_tests::{World, karpenter_tags};
use serde_json::Value;

use super::{BASE, Clients, home_origin, publish_and_drain, start_deployed, upload_code};

/// What beta takes: no Health events and no rebalance recommendations.
const BETA_KINDS: &str = "spot-interruption,state-change,capacity-reservation-interruption";
/// The router keeps a queue's answer (and so its kinds) this long.
const CACHE_TTL_SECONDS: u64 = 5;

fn declined(emf: &[Value], metric: &str) -> u64 {
    emf.iter().filter_map(|d| d[metric].as_u64()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_cluster_receives_the_kinds_its_tenant_stack_takes() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    upload_code(&world).await?;
    let ttl = CACHE_TTL_SECONDS.to_string();
    let base = aws_clients::stacks::create(
        &aws.cfn,
        BASE,
        aws_model::stacks::BASE_TEMPLATE,
        &[
            ("CodeS3Bucket", "artifacts"),
            ("CacheTtlSeconds", &ttl),
            ("NegativeCacheTtlSeconds", &ttl),
        ],
    )
    .await?;
    let alpha_stack = format!("{BASE}-tenant-alpha");
    let beta_stack = format!("{BASE}-tenant-beta");
    aws_clients::stacks::create(
        &aws.cfn,
        &alpha_stack,
        TENANT_TEMPLATE,
        &[("ClusterName", "alpha")],
    )
    .await?;
    aws_clients::stacks::create(
        &aws.cfn,
        &beta_stack,
        TENANT_TEMPLATE,
        &[("ClusterName", "beta"), ("EventKinds", BETA_KINDS)],
    )
    .await?;
    let beta_url = world.queue_url("karpenter-beta").await?;
    assert_eq!(
        kinds_tag(&world, &beta_url).await?,
        BETA_KINDS.replace(',', " ")
    );
    let alpha_url = world.queue_url("karpenter-alpha").await?;
    assert_eq!(
        kinds_tag(&world, &alpha_url).await?,
        interruption_router::event::Kinds::ALL.to_string(),
        "the default takes all five"
    );

    let a = world.launch(&karpenter_tags("alpha")).await?;
    let b = world.launch(&karpenter_tags("beta")).await?;
    let (router, esm) = start_deployed(&world, &aws, &base).await?;
    let origin = home_origin();

    let health = origin.scheduled_change(&[a.clone(), b.clone()], "retire");
    let rebalance = origin.rebalance(&b, "rebalance-b");
    let warning = origin.spot_warning(&b, "spot-b");
    let drained = publish_and_drain(
        &world,
        &aws,
        &esm,
        &router,
        &[&health, &rebalance, &warning],
    )
    .await?;
    assert_eq!((drained.handled, drained.retried), (3, 0));

    let alpha = world.drain(&alpha_url).await?;
    assert_eq!(alpha.len(), 1, "alpha takes Health events");
    assert_eq!(
        alpha[0].json()["detail"]["affectedEntities"][0]["entityValue"],
        a.as_str()
    );
    assert!(
        !alpha[0].body.contains(b.as_str()),
        "alpha's copy names only alpha's node"
    );
    let beta = world.drain(&beta_url).await?;
    let kinds: Vec<Value> = beta
        .iter()
        .map(|r| r.json()["detail-type"].clone())
        .collect();
    assert_eq!(
        kinds,
        ["EC2 Spot Instance Interruption Warning"],
        "beta takes only its kinds"
    );
    let dlq = world.queue_url(&format!("{BASE}-dlq")).await?;
    assert_eq!(world.drain(&dlq).await?, [], "a declined kind pages nobody");
    let emf = router.emf_documents();
    assert_eq!(declined(&emf, "Declined.beta.scheduled-change"), 1);
    assert_eq!(declined(&emf, "Declined.beta.rebalance-recommendation"), 1);

    // beta takes everything now: its stack is updated in place, the queue kept.
    aws_clients::stacks::update(
        &aws.cfn,
        &beta_stack,
        TENANT_TEMPLATE,
        &[(
            "EventKinds",
            &interruption_router::event::Kinds::ALL
                .to_string()
                .replace(' ', ","),
        )],
    )
    .await?;
    assert_eq!(
        world.queue_url("karpenter-beta").await?,
        beta_url,
        "the queue stays"
    );
    assert_eq!(
        kinds_tag(&world, &beta_url).await?,
        interruption_router::event::Kinds::ALL.to_string()
    );
    // Past the router's cache lifetime, the new choice is read with the queue's tags.
    tokio::time::sleep(Duration::from_secs(CACHE_TTL_SECONDS + 1)).await;
    let again = origin.rebalance(&b, "rebalance-b-again");
    publish_and_drain(&world, &aws, &esm, &router, &[&again]).await?;
    let beta = world.drain(&beta_url).await?;
    assert_eq!(beta.len(), 1, "beta now takes rebalance recommendations");
    assert_eq!(beta[0].json()["detail-type"], again.event["detail-type"]);
    router.stop().await;
    Ok(())
}

async fn kinds_tag(world: &World, url: &str) -> Result<String> {
    let tags = world.sqs.list_queue_tags().queue_url(url).send().await?;
    Ok(tags
        .tags()
        .and_then(|t| t.get(interruption_router::tenancy::KINDS_TAG))
        .cloned()
        .unwrap_or_default())
}
