//! One truth across execution environments. Two router processes configured from the deployed
//! function, one warm (it has delivered to every tenant queue before) and one cold (started
//! after the changes), decide alike for the same events: a tenant queue deleted by hand while its
//! tenant stack stands is lost (both dead-letter it, `queue-missing`, which pages); a tenant stack
//! deleted on purpose is an offboarded cluster (both count it, neither pages nor hands back); a
//! cluster never onboarded is counted as before. What decides is in AWS (the queue and the tenant
//! record beside it), not in what a process happened to see.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_model::{events::Origin, stacks};
use e2e_tests::{World, batch_item_failures, karpenter_tags, sqs_event};
use local_aws::{
    function::Function,
    moto::{ACCOUNT, REGION},
};
use serde_json::Value;

use super::{BASE, Clients, deploy_queue_mode};

/// Invocation `n`'s EMF document (counting from 0), once the process's stdout has been read.
async fn document(router: &Function, n: usize) -> Result<Value> {
    router
        .emf_documents_at_least(n + 1, Duration::from_secs(30))
        .await
        .get(n)
        .cloned()
        .with_context(|| format!("no metric document for invocation {n}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_and_a_cold_router_decide_alike_about_queues_that_come_and_go() -> Result<()> {
    let world = World::start().await?;
    let aws = Clients::of(&world).await;
    let (base, _) = deploy_queue_mode(&world, &aws).await?;
    let function = base.output("FunctionName")?.to_owned();
    let dlq = base.output("DeadLetterQueueUrl")?.to_owned();
    let node = async |cluster: &str| world.launch(&karpenter_tags(cluster)).await;
    let (alpha, beta, gamma, delta) = (
        node("alpha").await?,
        node("beta").await?,
        node("gamma").await?,
        // delta never had a tenant stack.
        node("delta").await?,
    );
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let warning = |instance: &str, id: &str| origin.spot_warning(instance, id).body();

    // The warm process delivers to every tenant queue first.
    let warm = world.start_deployed_router(&aws.lambda, &function).await?.0;
    let before = [
        warning(&alpha, "before-alpha"),
        warning(&beta, "before-beta"),
        warning(&gamma, "before-gamma"),
    ];
    let answer = warm
        .invoke(sqs_event(&before).to_string(), e2e_tests::INVOKE_BUDGET)
        .await;
    assert!(batch_item_failures(&answer).is_empty(), "{answer:?}");
    assert_eq!(document(&warm, 0).await?["Forwarded"], 3);
    for cluster in ["alpha", "beta", "gamma"] {
        world
            .drain(&world.queue_url(&format!("karpenter-{cluster}")).await?)
            .await?;
    }

    // alpha's queue is deleted by hand (its tenant stack stands); beta's tenant stack is deleted.
    world
        .sqs
        .delete_queue()
        .queue_url(world.queue_url("karpenter-alpha").await?)
        .send()
        .await?;
    aws_clients::stacks::delete(&aws.cfn, &stacks::tenant_stack_name(BASE, "beta")).await?;

    let cold = world.start_deployed_router(&aws.lambda, &function).await?.0;
    for (name, router, n) in [("warm", &warm, 1), ("cold", &cold, 0)] {
        let events = [
            warning(&alpha, &format!("{name}-alpha")),
            warning(&beta, &format!("{name}-beta")),
            warning(&gamma, &format!("{name}-gamma")),
            warning(&delta, &format!("{name}-delta")),
        ];
        let answer = router
            .invoke(sqs_event(&events).to_string(), e2e_tests::INVOKE_BUDGET)
            .await;
        assert!(
            batch_item_failures(&answer).is_empty(),
            "{name}: nothing is handed back: {answer:?}"
        );
        let emf = &document(router, n).await?;
        let count = |metric: &str| emf[metric].as_u64().unwrap_or_default();
        assert_eq!(count("Forwarded.gamma"), 1, "{name}: {emf}");
        assert_eq!(count("DeadLettered.queue-missing"), 1, "{name}: {emf}");
        assert_eq!(
            count("NoTenantQueue.beta"),
            1,
            "{name}: beta left on purpose"
        );
        assert_eq!(count("NoTenantQueue.delta"), 1, "{name}: delta never came");
        let dead = world.drain(&dlq).await?;
        assert_eq!(dead.len(), 1, "{name}: {dead:#?}");
        assert_eq!(dead[0].json()["id"], format!("{name}-alpha"));
        assert_eq!(dead[0].attributes["reason"], "queue-missing");
    }
    Ok(())
}
