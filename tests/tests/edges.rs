//! The router's two AWS edges on their own, against moto through the counting proxy: the
//! Resolver (DescribeInstances) and the Forwarder (GetQueueUrl, SendMessageBatch).

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use e2e_tests::{World, karpenter_tags, local::moto::sdk_config_for, managed_nodegroup_tags};
use interruption_router::{
    config::Config,
    event::{IgnoreReason, InstanceId, Scope},
    forward::{Delivery, Destination, ForwardStats, Forwarder, Message},
    resolve::{InstanceKey, Owner, Resolver},
};
use tokio::time::Instant;

fn key(id: &str) -> InstanceKey {
    InstanceKey {
        scope: Scope::default(),
        instance: InstanceId::parse(id).unwrap(),
    }
}

async fn resolver(world: &World) -> Resolver {
    let config = Config::from_lookup(|_| None).unwrap();
    let sdk = sdk_config_for(&world.proxy.endpoint()).await;
    Resolver::new(aws_sdk_ec2::Client::new(&sdk), config.tags, &config.cache)
}

#[tokio::test]
async fn one_lookup_resolves_many_instances_and_an_unknown_id_fails_none_of_them() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let beta = world.launch(&karpenter_tags("beta")).await?;
    let mng = world.launch(&managed_nodegroup_tags("alpha")).await?;
    let unknown = "i-0123456789abcdef9";
    let resolver = resolver(&world).await;

    let keys = [
        key(&alpha),
        key(unknown),
        key(&beta),
        key(&mng),
        key(&alpha),
    ];
    let resolution = resolver.resolve(keys.clone()).await;
    assert_eq!(world.proxy.calls().get("DescribeInstances"), Some(&1));
    assert_eq!(resolution.describe_calls, 1);
    assert_eq!(
        (resolution.cache_hits, resolution.cache_misses),
        (0, 4),
        "the repeated key is looked up once"
    );
    let owner = |id: &str| resolution.owners[&key(id)].clone().unwrap();
    assert_eq!(owner(&alpha), Owner::Cluster(Arc::from("alpha")));
    assert_eq!(owner(&beta), Owner::Cluster(Arc::from("beta")));
    assert_eq!(owner(&mng), Owner::NotOurs(IgnoreReason::UnmanagedInstance));
    assert_eq!(
        owner(unknown),
        Owner::NotOurs(IgnoreReason::UnknownInstance)
    );

    // A second pass is served from the cache, negatives included.
    let again = resolver.resolve(keys).await;
    assert_eq!(
        (again.cache_hits, again.cache_misses, again.describe_calls),
        (4, 0, 0)
    );
    assert_eq!(world.proxy.calls().get("DescribeInstances"), Some(&1));
    Ok(())
}

#[tokio::test]
async fn concurrent_misses_for_the_same_instances_share_one_lookup() -> Result<()> {
    let world = World::start().await?;
    let ids = [
        world.launch(&karpenter_tags("alpha")).await?,
        world.launch(&karpenter_tags("beta")).await?,
    ];
    let resolver = resolver(&world).await;
    let keys: Vec<InstanceKey> = ids.iter().map(|id| key(id)).collect();
    let (a, b, c) = tokio::join!(
        resolver.resolve(keys.clone()),
        resolver.resolve(keys.clone()),
        resolver.resolve(keys)
    );
    assert_eq!(world.proxy.calls().get("DescribeInstances"), Some(&1));
    for r in [a, b, c] {
        assert!(
            r.owners
                .values()
                .all(|o| matches!(o, Ok(Owner::Cluster(_))))
        );
    }
    Ok(())
}

#[tokio::test]
async fn more_than_two_hundred_misses_are_looked_up_in_chunks() -> Result<()> {
    let world = World::start().await?;
    let known = world.launch(&karpenter_tags("alpha")).await?;
    let resolver = resolver(&world).await;
    // 449 ids nobody owns plus one real one: three filter chunks of at most 200 values.
    let mut keys: Vec<InstanceKey> = (0..449).map(|i| key(&format!("i-{i:017x}"))).collect();
    keys.push(key(&known));
    let resolution = resolver.resolve(keys).await;
    assert_eq!(resolution.describe_calls, 3);
    assert_eq!(
        resolution.owners[&key(&known)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    assert_eq!(
        resolution
            .owners
            .values()
            .filter(|o| matches!(o, Ok(Owner::NotOurs(_))))
            .count(),
        449
    );
    Ok(())
}

#[tokio::test]
async fn a_failed_lookup_is_an_error_for_its_keys_and_is_not_cached() -> Result<()> {
    use e2e_tests::local::proxy::{Fault, FaultPlan};
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let resolver = resolver(&world).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances"],
        &[Fault::InternalError],
        1,
    ));
    let resolution = resolver.resolve([key(&alpha)]).await;
    let error = resolution.owners[&key(&alpha)].clone().unwrap_err();
    assert!(error.to_string().contains("InternalError"), "{error}");
    assert_eq!(
        world.proxy.calls()["DescribeInstances"],
        3,
        "the SDK retried a 500 before giving up"
    );

    world.proxy.set_plan(FaultPlan::none());
    let resolution = resolver.resolve([key(&alpha)]).await;
    assert_eq!(
        resolution.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    Ok(())
}

#[tokio::test]
async fn forwarder_batches_per_queue_and_reports_a_missing_queue_per_message() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_queue("karpenter-alpha").await?;
    let beta = world.create_queue("karpenter-beta").await?;
    let config = Config::from_lookup(|_| None).unwrap();
    let sdk = sdk_config_for(&world.proxy.endpoint()).await;
    let forwarder = Forwarder::new(
        aws_sdk_sqs::Client::new(&sdk),
        config.queue_names,
        None,
        &config.cache,
    );
    let to = |cluster: &str, n: usize| Message {
        destination: Destination::Cluster {
            scope: Scope::default(),
            cluster: Arc::from(cluster),
        },
        body: format!("{{\"n\":{n}}}"),
        attributes: Vec::new(),
    };
    let mut messages: Vec<Message> = (0..23).map(|n| to("alpha", n)).collect();
    messages.extend((0..4).map(|n| to("beta", n)));
    messages.push(to("nowhere", 0));
    messages.push(to("not/a/queue/name", 0));

    let stats = ForwardStats::default();
    let deliveries = forwarder
        .deliver(&messages, Instant::now() + Duration::from_secs(60), &stats)
        .await;
    assert!(
        deliveries[..27].iter().all(|d| *d == Delivery::Sent),
        "{deliveries:?}"
    );
    assert!(
        matches!(&deliveries[27], Delivery::QueueMissing { queue } if queue == "karpenter-nowhere")
    );
    assert!(matches!(&deliveries[28], Delivery::QueueMissing { .. }));
    // alpha: 10 + 10 + 3; beta: 4 — four calls; the queue with an invalid name is never asked for.
    assert_eq!(stats.send_message_batch_calls.into_inner(), 4);
    assert_eq!(world.proxy.calls().get("GetQueueUrl"), Some(&3));
    assert_eq!(world.drain(&alpha).await?.len(), 23);
    assert_eq!(world.drain(&beta).await?.len(), 4);

    // Queue URLs, and the missing queue, are remembered.
    let stats = ForwardStats::default();
    forwarder
        .deliver(
            &[to("alpha", 99), to("nowhere", 1)],
            Instant::now() + Duration::from_secs(60),
            &stats,
        )
        .await;
    assert_eq!(world.proxy.calls().get("GetQueueUrl"), Some(&3));
    Ok(())
}

#[tokio::test]
async fn a_queue_deleted_after_its_url_was_cached_is_reported_missing() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_queue("karpenter-alpha").await?;
    let config = Config::from_lookup(|_| None).unwrap();
    let sdk = sdk_config_for(&world.proxy.endpoint()).await;
    let forwarder = Forwarder::new(
        aws_sdk_sqs::Client::new(&sdk),
        config.queue_names,
        None,
        &config.cache,
    );
    let message = Message {
        destination: Destination::Cluster {
            scope: Scope::default(),
            cluster: Arc::from("alpha"),
        },
        body: "{}".into(),
        attributes: Vec::new(),
    };
    let deadline = || Instant::now() + Duration::from_secs(60);
    let stats = ForwardStats::default();
    assert_eq!(
        forwarder
            .deliver(std::slice::from_ref(&message), deadline(), &stats)
            .await,
        [Delivery::Sent]
    );
    world.sqs.delete_queue().queue_url(&alpha).send().await?;
    let result = forwarder
        .deliver(std::slice::from_ref(&message), deadline(), &stats)
        .await;
    assert!(
        matches!(&result[0], Delivery::QueueMissing { .. }),
        "{result:?}"
    );
    Ok(())
}
