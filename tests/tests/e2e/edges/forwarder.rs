//! The Forwarder on its own: batches per queue, a missing queue reported per message (lost when
//! its tenant record stands, not onboarded when it does not), and only the queues the tenant
//! stack made written (their tag, or a policy that admits the router alone), even by a sender
//! that may not read them.

use std::time::Duration;

use anyhow::Result;
use e2e_tests::World;
use interruption_router::forward::{Delivery, ForwardStats, Message};
use local_aws::proxy::{Fault, FaultPlan};
use tokio::time::Instant;

use super::{forwarder, forwarder_with, to};

#[tokio::test]
async fn forwarder_batches_per_queue_and_reports_a_missing_queue_per_message() -> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    let beta = world.create_tenant_queue("beta").await?;
    let forwarder = forwarder(&world).await;
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
    // A cluster with neither a queue nor a tenant record is not onboarded (nothing to page about).
    assert!(
        matches!(&deliveries[27], Delivery::NoTenantQueue { queue, foreign: None } if queue == "karpenter-nowhere")
    );
    assert!(matches!(&deliveries[28], Delivery::NoTenantQueue { .. }));
    // alpha: 10 + 10 + 3; beta: 4 — four calls; the queue with an invalid name is never asked for.
    assert_eq!(stats.send_message_batch_calls.get(), 4);
    assert_eq!(world.proxy.calls().get("GetQueueUrl"), Some(&3));
    assert_eq!(
        world.proxy.calls().get("GetParameter"),
        Some(&1),
        "nowhere's record"
    );
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
async fn a_queue_deleted_by_hand_is_lost_and_one_deleted_with_its_stack_is_not_onboarded()
-> Result<()> {
    let world = World::start().await?;
    let alpha = world.create_tenant_queue("alpha").await?;
    let beta = world.create_tenant_queue("beta").await?;
    let forwarder = forwarder(&world).await;
    let messages = [to("alpha", 0), to("beta", 0)];
    let deadline = || Instant::now() + Duration::from_secs(60);
    let stats = ForwardStats::default();
    assert_eq!(
        forwarder.deliver(&messages, deadline(), &stats).await,
        [Delivery::Sent, Delivery::Sent]
    );
    // alpha's queue deleted by hand (its tenant record stands); beta's whole tenant deleted.
    world.sqs.delete_queue().queue_url(&alpha).send().await?;
    world.delete_tenant(&beta).await?;
    let lost = |d: &Delivery| matches!(d, Delivery::QueueMissing { .. });
    let gone = |d: &Delivery| matches!(d, Delivery::NoTenantQueue { foreign: None, .. });
    // The forwarder that sent to them (SendMessageBatch answers QueueDoesNotExist) ...
    let warm = forwarder.deliver(&messages, deadline(), &stats).await;
    assert!(lost(&warm[0]) && gone(&warm[1]), "{warm:?}");
    // ... and one that never did (GetQueueUrl answers it) decide alike.
    let cold = forwarder_with(&world, None)
        .await
        .deliver(&messages, deadline(), &stats)
        .await;
    assert!(lost(&cold[0]) && gone(&cold[1]), "{cold:?}");
    assert_eq!(world.proxy.calls().get("GetParameter"), Some(&4));
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
        aws_model::documents::tenant_queue_policy(&gamma_arn, ROUTER_ROLE)?,
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
    let forwarder = forwarder_with(&world, Some(ROUTER_ROLE)).await;
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
    assert_eq!(stats.queue_ownership_calls.get(), 6);

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
    let forwarder = forwarder(&world).await;
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
