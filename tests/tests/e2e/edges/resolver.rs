//! The Resolver on its own: one lookup for many instances, chunked misses, failures that are not
//! cached, the Tagging API answering when DescribeInstances fails or hangs, an expired owner
//! still served when every lookup fails, and the sweep of an account and region's nodes.

use std::{sync::Arc, time::Duration};

use anyhow::Result;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use interruption_router::{
    event::IgnoreReason,
    resolve::{InstanceKey, Owner, ResolveError},
};
use local_aws::proxy::{Fault, FaultPlan};

use super::{key, resolver, resolver_sweeping, resolver_with};

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
        (1, 1),
        "one attempt each: EC2's failure sends the hedge at once, and retrying is the handler's"
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
async fn with_hedging_off_the_tagging_api_is_asked_only_once_ec2_failed() -> Result<()> {
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
        (1, 1, 1),
        "one attempt at EC2, then the Tagging API"
    );
    Ok(())
}

#[tokio::test]
async fn an_instance_the_tagging_api_does_not_list_waits_for_ec2() -> Result<()> {
    let world = World::start().await?;
    let untagged = world.launch(&[]).await?;
    let resolver = resolver(&world).await;
    world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["DescribeInstances"],
        &[Fault::Unavailable],
        1,
    ));
    // Untagged, unknown or launched too lately to be indexed, the Tagging API cannot tell, and
    // EC2 failed: a failed lookup (its record is retried), not an instance nobody owns.
    let first = resolver.resolve([key(&untagged)]).await;
    let error = first.owners[&key(&untagged)]
        .as_ref()
        .expect_err("an unlisted instance was answered while EC2 failed");
    assert!(
        error.to_string().contains("not listed by the Tagging API"),
        "{error}"
    );
    // Nothing was cached: EC2 is asked again once it answers, and tells.
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

#[tokio::test]
async fn a_sweep_lists_the_karpenter_nodes_by_their_managed_tag_and_answers_later_misses()
-> Result<()> {
    let world = World::start().await?;
    let first = world.launch(&karpenter_tags("alpha")).await?;
    let second = world.launch(&karpenter_tags("alpha")).await?;
    let third = world.launch(&karpenter_tags("beta")).await?;
    let mng = world.launch(&managed_nodegroup_tags("alpha")).await?;
    let resolver = resolver_sweeping(&world, &[]).await;

    // The first miss: its lookup, then the sweep (filter tag-key=karpenter.sh/nodepool).
    let resolution = resolver.resolve([key(&first)]).await;
    assert_eq!(
        (resolution.describe_calls, resolution.sweeps),
        (2, 1),
        "a lookup and one sweep page"
    );
    // The other nodes were listed: no call for them.
    let resolution = resolver.resolve([key(&second), key(&third)]).await;
    assert_eq!((resolution.cache_hits, resolution.describe_calls), (2, 0));
    assert_eq!(
        resolution.owners[&key(&third)],
        Ok(Owner::Cluster(Arc::from("beta")))
    );
    // Not Karpenter's: the sweep did not list it, so it is looked up; the scope is not swept again.
    let resolution = resolver.resolve([key(&mng)]).await;
    assert_eq!(
        (
            resolution.cache_misses,
            resolution.describe_calls,
            resolution.sweeps
        ),
        (1, 1, 0)
    );
    assert_eq!(world.proxy.calls().get("DescribeInstances"), Some(&3));
    Ok(())
}
