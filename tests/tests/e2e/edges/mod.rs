//! The router's two AWS edges on their own, against moto through the counting proxy: the
//! Resolver (DescribeInstances, GetResources, the cache) and the Forwarder (GetQueueUrl,
//! SendMessageBatch).

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use interruption_router::{
    accounts::{Accounts, Served},
    config::Config,
    event::{IgnoreReason, InstanceId, Scope},
    forward::{Delivery, Destination, ForwardStats, Forwarder, Message},
    resolve::{InstanceKey, Owner, ResolveError, Resolver},
};
use local_aws::{
    moto::{ACCOUNT, REGION, sdk_config_for},
    proxy::{Fault, FaultPlan},
};
use tokio::time::Instant;

/// The emulator's account and region, as the handler completes an event's scope.
fn home() -> Scope {
    Scope {
        account: Some(Arc::from(ACCOUNT)),
        region: Some(Arc::from(REGION)),
    }
}

fn key(id: &str) -> InstanceKey {
    InstanceKey {
        scope: home(),
        instance: InstanceId::parse(id).unwrap(),
    }
}

/// The function's accounts, reaching the emulator through the proxy with the router's SDK
/// settings (two attempts per call).
async fn accounts(world: &World) -> Arc<Accounts> {
    let sdk = sdk_config_for(&world.proxy.endpoint())
        .await
        .into_builder()
        .retry_config(aws_config::retry::RetryConfig::standard().with_max_attempts(2))
        .build();
    let accounts = Accounts::new(sdk, Served::Own, "interruption-router-spoke".into());
    accounts.learn_home_account(&format!(
        "arn:aws:lambda:{REGION}:{ACCOUNT}:function:interruption-router"
    ));
    Arc::new(accounts)
}

async fn resolver_with(world: &World, vars: &[(&str, &str)]) -> Resolver {
    let config = Config::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    Resolver::new(
        accounts(world).await,
        config.tags,
        &config.cache,
        config.lookup,
    )
}

async fn resolver(world: &World) -> Resolver {
    resolver_with(world, &[]).await
}

/// Message `n` for `cluster`'s queue, in the emulator's account and region.
fn to(cluster: &str, n: usize) -> Message {
    Message {
        destination: Destination::Cluster {
            scope: home(),
            cluster: Arc::from(cluster),
        },
        body: format!("{{\"n\":{n}}}"),
        attributes: Vec::new(),
    }
}

fn forwarder(accounts: Arc<Accounts>) -> Forwarder {
    let config = Config::from_lookup(|_| None).unwrap();
    Forwarder::new(accounts, config.queue_names, None, None, &config.cache)
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
async fn a_lookup_failing_on_both_paths_is_an_error_for_its_keys_and_is_not_cached() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let resolver = resolver(&world).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances", "GetResources"],
        &[Fault::InternalError],
        1,
    ));
    let resolution = resolver.resolve([key(&alpha)]).await;
    let error = resolution.owners[&key(&alpha)].clone().unwrap_err();
    assert!(matches!(*error, ResolveError::Failed(_)), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("DescribeInstances") && text.contains("GetResources"),
        "both paths are named: {text}"
    );
    assert!(text.contains("InternalError"), "{text}");
    let calls = world.proxy.calls();
    assert_eq!(
        (calls["DescribeInstances"], calls["GetResources"]),
        (1, 2),
        "EC2 once (its failure sends the hedge at once), the Tagging API with the SDK's one retry"
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
    let alpha = world.create_tenant_queue("alpha").await?;
    let beta = world.create_tenant_queue("beta").await?;
    let forwarder = forwarder(accounts(&world).await);
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
    // Clusters whose queue this forwarder never found are not onboarded (nothing to page about).
    assert!(
        matches!(&deliveries[27], Delivery::NoTenantQueue { queue, foreign: None } if queue == "karpenter-nowhere")
    );
    assert!(matches!(&deliveries[28], Delivery::NoTenantQueue { .. }));
    // alpha: 10 + 10 + 3; beta: 4 — four calls; the queue with an invalid name is never asked for.
    assert_eq!(stats.send_message_batch_calls.into_inner(), 4);
    assert_eq!(world.proxy.calls().get("GetQueueUrl"), Some(&3));
    assert_eq!(world.drain(&alpha).await?.len(), 23);
    assert_eq!(world.drain(&beta).await?.len(), 4);

    // Queue URLs are remembered, and the missing queue for a moment (MISSING_QUEUE_RECHECK).
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
async fn a_queue_deleted_after_it_was_used_is_reported_missing() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    let forwarder = forwarder(accounts(&world).await);
    let message = to("alpha", 0);
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
    // And it stays lost (not "never onboarded") when asked again after the URL is forgotten.
    tokio::time::sleep(interruption_router::forward::MISSING_QUEUE_RECHECK).await;
    let again = forwarder
        .deliver(std::slice::from_ref(&message), deadline(), &stats)
        .await;
    assert!(
        matches!(&again[0], Delivery::QueueMissing { .. }),
        "{again:?}"
    );
    Ok(())
}

#[tokio::test]
async fn when_describe_instances_fails_get_resources_answers_at_once_and_is_asked_first_after_two_failures()
-> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let beta = world.launch(&karpenter_tags("beta")).await?;
    let gamma = world.launch(&karpenter_tags("gamma")).await?;
    let mng = world.launch(&managed_nodegroup_tags("alpha")).await?;
    let resolver = resolver(&world).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances"],
        &[Fault::Throttled],
        1,
    ));
    let resolution = resolver.resolve([key(&alpha), key(&mng)]).await;
    assert_eq!(
        resolution.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    assert_eq!(
        resolution.owners[&key(&mng)],
        Ok(Owner::NotOurs(IgnoreReason::UnmanagedInstance)),
        "the Tagging API reads the same tags, through the same rules"
    );
    // One attempt at EC2: its failure is the hedge's signal, not a reason for the SDK's backoff.
    let calls = world.proxy.calls();
    assert_eq!(
        (
            calls["DescribeInstances"],
            calls["GetResources"],
            resolution.hedged
        ),
        (1, 1, 1)
    );

    // One failure is a blip: EC2 is asked first again, fails again, and is now suspected.
    let resolution = resolver.resolve([key(&beta)]).await;
    assert_eq!(
        resolution.owners[&key(&beta)],
        Ok(Owner::Cluster(Arc::from("beta")))
    );
    assert_eq!((resolution.describe_calls, resolution.hedged), (1, 1));

    // Suspected: the Tagging API first, EC2 left alone, and that is not a hedge.
    let before = world.proxy.calls();
    let resolution = resolver.resolve([key(&gamma)]).await;
    assert_eq!(
        resolution.owners[&key(&gamma)],
        Ok(Owner::Cluster(Arc::from("gamma")))
    );
    let after = world.proxy.calls();
    assert_eq!(after["DescribeInstances"], before["DescribeInstances"]);
    assert_eq!(after["GetResources"], before["GetResources"] + 1);
    assert_eq!(resolution.hedged, 0);
    Ok(())
}

#[tokio::test]
async fn a_describe_instances_that_hangs_is_outrun_by_the_tagging_api() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let resolver = resolver(&world).await;
    // EC2 takes the call and answers a minute later; the Tagging API is well.
    world.proxy.set_plan(FaultPlan::none().with_window(
        "DescribeInstances",
        Duration::ZERO..Duration::from_secs(3600),
        Fault::Slow(Duration::from_secs(60)),
    ));
    let resolution = resolver.resolve([key(&alpha)]).await;
    assert_eq!(
        resolution.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    // The answer came while EC2 still held the call: the hedge answered, not a timeout.
    assert_eq!(world.proxy.calls().get("DescribeInstances"), Some(&1));
    assert_eq!(world.proxy.answered().get("DescribeInstances"), None);
    assert_eq!((resolution.get_resources_calls, resolution.hedged), (1, 1));
    // A complete Tagging answer is kept like EC2's.
    let again = resolver.resolve([key(&alpha)]).await;
    assert_eq!((again.cache_hits, again.cache_misses), (1, 0));
    Ok(())
}

#[tokio::test]
async fn with_hedging_off_ec2_gets_the_sdk_retry_before_the_tagging_api() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let resolver = resolver_with(&world, &[("LOOKUP_HEDGE_DELAY_MS", "off")]).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances"],
        &[Fault::Unavailable],
        1,
    ));
    let resolution = resolver.resolve([key(&alpha)]).await;
    assert_eq!(
        resolution.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    let calls = world.proxy.calls();
    assert_eq!(
        (
            calls["DescribeInstances"],
            calls["GetResources"],
            resolution.hedged
        ),
        (2, 1, 1),
        "two attempts at EC2 (the SDK's retry), then the Tagging API"
    );
    Ok(())
}

#[tokio::test]
async fn an_instance_the_tagging_api_does_not_list_is_unknown_but_not_remembered() -> Result<()> {
    let world = World::start().await?;
    let untagged = world.launch(&[]).await?;
    let resolver = resolver(&world).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances"],
        &[Fault::Unavailable],
        1,
    ));
    let first = resolver.resolve([key(&untagged)]).await;
    assert_eq!(
        first.owners[&key(&untagged)],
        Ok(Owner::NotOurs(IgnoreReason::UnknownInstance))
    );
    // Untagged or unknown, the Tagging API cannot tell: the answer is not cached, so EC2 is asked
    // again once it answers.
    world.proxy.set_plan(FaultPlan::none());
    let second = resolver.resolve([key(&untagged)]).await;
    assert_eq!((second.cache_hits, second.cache_misses), (0, 1));
    assert_eq!(
        second.owners[&key(&untagged)],
        Ok(Owner::NotOurs(IgnoreReason::UnmanagedInstance))
    );
    Ok(())
}

#[tokio::test]
async fn when_every_lookup_fails_an_expired_owner_is_still_served() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.launch(&karpenter_tags("alpha")).await?;
    let never_seen = world.launch(&karpenter_tags("beta")).await?;
    let resolver = resolver_with(
        &world,
        &[
            ("CACHE_TTL_SECONDS", "1"),
            ("NEGATIVE_CACHE_TTL_SECONDS", "0"),
        ],
    )
    .await;
    assert_eq!(
        resolver.resolve([key(&alpha)]).await.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha")))
    );
    // Let the positive entry expire (a wait, not a timing assertion).
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances", "GetResources"],
        &[Fault::Unavailable],
        1,
    ));
    let resolution = resolver.resolve([key(&alpha), key(&never_seen)]).await;
    assert_eq!(resolution.cache_misses, 2, "the entry had expired");
    assert_eq!(
        resolution.owners[&key(&alpha)],
        Ok(Owner::Cluster(Arc::from("alpha"))),
        "an owner never changes: the stale answer is correct"
    );
    assert_eq!(resolution.stale_answers, 1);
    assert!(
        resolution.owners[&key(&never_seen)].is_err(),
        "nothing known, nothing served"
    );
    Ok(())
}

/// The router's role, as base.yaml passes it (ROUTER_ROLE_ARN).
const ROUTER_ROLE: &str = "arn:aws:iam::123456789012:role/interruption-router-RouterRole-X";

/// Sets a queue's policy, as a stack or a Terraform module would.
async fn set_policy(world: &World, url: &str, policy: serde_json::Value) -> Result<()> {
    world
        .sqs
        .set_queue_attributes()
        .queue_url(url)
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::Policy,
            policy.to_string(),
        )
        .send()
        .await?;
    Ok(())
}

/// Other tools name queues as the router does: EKS Blueprints' Karpenter addon makes
/// `karpenter-<cluster>` with its own rules feeding it. The forwarder writes only a queue the
/// tenant stack made (tagged for the cluster), or a tenant queue from before that tag (its policy
/// admits the router alone); a look-alike's cluster is not onboarded. Tag and policy are read once,
/// with the URL, and cached with it.
#[tokio::test]
async fn the_forwarder_writes_only_queues_the_tenant_stack_made() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    // Blueprints' queue for beta: EventBridge may send, nothing denies anyone.
    let beta = world.create_queue("karpenter-beta").await?;
    let beta_arn = world.queue_arn(&beta).await?;
    set_policy(
        &world,
        &beta,
        serde_json::json!({"Version": "2012-10-17", "Statement": [{"Sid": "SendEventsToQueue",
            "Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
            "Action": "sqs:SendMessage", "Resource": beta_arn}]}),
    )
    .await?;
    // gamma's queue from a tenant stack deployed before the tag: only its policy says so.
    let gamma = world.create_queue("karpenter-gamma").await?;
    let gamma_arn = world.queue_arn(&gamma).await?;
    set_policy(
        &world,
        &gamma,
        routerctl::verify::tenant_queue_policy(&gamma_arn, ROUTER_ROLE),
    )
    .await?;
    // delta's name, tagged for another cluster.
    world
        .sqs
        .create_queue()
        .queue_name("karpenter-delta")
        .tags(interruption_router::tenancy::TENANT_TAG, "epsilon")
        .send()
        .await?;
    let config = Config::from_lookup(|_| None).unwrap();
    let forwarder = Forwarder::new(
        accounts(&world).await,
        config.queue_names,
        None,
        Some(ROUTER_ROLE.to_owned()),
        &config.cache,
    );
    let messages: Vec<Message> = ["alpha", "beta", "gamma", "delta"]
        .iter()
        .flat_map(|c| [to(c, 0), to(c, 1)])
        .collect();
    let stats = ForwardStats::default();
    let deliveries = forwarder
        .deliver(&messages, Instant::now() + Duration::from_secs(60), &stats)
        .await;
    assert_eq!(deliveries[0..2], [Delivery::Sent, Delivery::Sent]);
    assert_eq!(deliveries[4..6], [Delivery::Sent, Delivery::Sent]);
    for (d, why) in [
        (&deliveries[2], "no interruption-router:tenant tag"),
        (&deliveries[7], "another cluster's queue"),
    ] {
        assert!(
            matches!(d, Delivery::NoTenantQueue { foreign: Some(w), .. } if w.contains(why)),
            "{d:?}"
        );
    }
    assert_eq!(world.drain(&alpha).await?.len(), 2);
    assert_eq!(world.drain(&gamma).await?.len(), 2);
    assert_eq!(
        world.depth(&beta).await?,
        0,
        "the router wrote Blueprints' queue"
    );
    // One tag read per queue; a policy read only where no tag settles it (beta, gamma).
    let calls = world.proxy.calls();
    assert_eq!(calls.get("ListQueueTags"), Some(&4), "{calls:?}");
    assert_eq!(calls.get("GetQueueAttributes"), Some(&2), "{calls:?}");
    assert_eq!(stats.queue_ownership_calls.into_inner(), 6);

    // Cached with the URL: the same messages again cost only the sends.
    world.proxy.reset_counts();
    forwarder
        .deliver(
            &messages,
            Instant::now() + Duration::from_secs(60),
            &ForwardStats::default(),
        )
        .await;
    let calls = world.proxy.calls();
    assert_eq!(calls.get("SendMessageBatch"), Some(&2), "{calls:?}");
    assert_eq!(calls.len(), 1, "{calls:?}");
    Ok(())
}

/// A sender that may not read a queue's tags or policy (a spoke role from before these reads)
/// cannot tell whose the queue is: it writes the queue as before rather than silence the cluster.
#[tokio::test]
async fn a_sender_that_may_not_read_the_tags_writes_as_before() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    world
        .proxy
        .set_plan(FaultPlan::none().with_outage("ListQueueTags", 10, Fault::Denied));
    let forwarder = forwarder(accounts(&world).await);
    let message = to("alpha", 0);
    let deliveries = forwarder
        .deliver(
            &[message],
            Instant::now() + Duration::from_secs(60),
            &ForwardStats::default(),
        )
        .await;
    assert_eq!(deliveries, [Delivery::Sent]);
    assert_eq!(world.proxy.faults().get("ListQueueTags"), Some(&1));
    assert_eq!(world.drain(&alpha).await?.len(), 1);
    Ok(())
}
