//! A cluster name as long as EKS allows (100 characters) is served: its tenant stack is deployed
//! as `make deploy-tenant` and `routerctl adopt` deploy it (a `QueueName` within SQS's 80
//! characters, [`aws_model::stacks::tenant_parameters`]), and the deployed router derives the same
//! name and delivers there.

use anyhow::{Context, Result};
use aws_model::stacks::{self, TENANT_TEMPLATE};
use e2e_tests::{World, karpenter_tags};
use interruption_router::config::QueueNameTemplate;

use super::{BASE, Clients, deploy_base, home_origin, publish_and_drain, start_deployed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_name_of_100_characters_gets_its_queue_and_its_events() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let base = deploy_base(&world, &aws, stacks::BASE_TEMPLATE).await?;
    let cluster = "platform-prod-eu-west-1-payments-and-ledger-".repeat(3)[..100].to_owned();
    assert_eq!(cluster.len(), 100);

    let described = aws.cfn.describe_stacks().stack_name(BASE).send().await?;
    let base_parameters =
        aws_clients::stacks::parameters(described.stacks().first().context("base")?);
    let parameters = stacks::tenant_parameters(
        &base_parameters,
        &cluster,
        "",
        interruption_router::event::Kinds::ALL,
    );
    let parameters: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let tenant = aws_clients::stacks::create(
        &aws.cfn,
        &stacks::tenant_stack_name(BASE, &cluster),
        TENANT_TEMPLATE,
        &parameters,
    )
    .await?;
    let queue = QueueNameTemplate::parse("karpenter-{cluster}")
        .unwrap()
        .queue_name(&cluster)
        .unwrap();
    assert_eq!(tenant.output("QueueName")?, queue);
    assert_eq!(queue.len(), 80);

    let node = world.launch(&karpenter_tags(&cluster)).await?;
    let (router, esm) = start_deployed(&world, &aws, &base).await?;
    let origin = home_origin();
    let warning = origin.spot_warning(&node, "spot-long-name");
    let drained = publish_and_drain(&world, &aws, &esm, &router, &[&warning]).await?;
    assert_eq!(drained.handled, 1);
    let url = world.queue_url(&queue).await?;
    let received = world.drain(&url).await?;
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0].json()["detail"], warning.event["detail"]);
    let dlq = world.queue_url(&format!("{BASE}-dlq")).await?;
    assert_eq!(world.drain(&dlq).await?, []);
    router.stop().await;
    Ok(())
}
