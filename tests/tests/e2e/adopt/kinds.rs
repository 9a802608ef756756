//! adopt keeps what a cluster chose: EKS Blueprints' set-up has no capacity-reservation rule, so
//! the tenant queue adopt deploys for it declines those events too (tenant.yaml's `EventKinds`),
//! and the plan says so before anything is deployed.

use super::*;
use interruption_router::{event::Kinds, tenancy::KINDS_TAG};

#[tokio::test]
async fn an_adopted_blueprints_cluster_keeps_its_choice_of_kinds() -> Result<()> {
    // Blueprints' queue carries the router's default name: the router's queues take another.
    let mut estate = Estate::start(
        None,
        Scene {
            base_parameters: vec![("QueuePrefix".into(), "interruption-router-".into())],
            ..scene(&[("bp", Some(Flavour::Blueprints))])
        },
    )
    .await?;
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    assert!(
        text.contains(
            "declining the others (capacity-reservation-interruption) as they did: \
             EventKinds=spot-interruption,rebalance-recommendation,state-change,scheduled-change"
        ),
        "{text}"
    );

    let moves = walk(&mut estate, "bp", |m| {
        matches!(m, Move::Applied { step: 1, .. })
    })
    .await?;
    assert!(
        matches!(moves.last(), Some(Move::Applied { step: 1, .. })),
        "{moves:?}"
    );
    let described = estate
        .aws
        .cfn
        .describe_stacks()
        .stack_name(tenant_stack("bp"))
        .send()
        .await?;
    let parameters =
        aws_clients::stacks::parameters(described.stacks().first().context("the tenant stack")?);
    assert_eq!(
        parameters.get("EventKinds").map(String::as_str),
        Some("spot-interruption,rebalance-recommendation,state-change,scheduled-change")
    );
    let url = estate.sandbox.queue_url("interruption-router-bp").await?;
    let tags = estate
        .aws
        .sqs
        .list_queue_tags()
        .queue_url(&url)
        .send()
        .await?;
    let tagged = tags
        .tags()
        .and_then(|t| t.get(KINDS_TAG))
        .context("the kinds tag")?;
    let kinds = Kinds::parse(tagged).map_err(anyhow::Error::msg)?;
    assert!(!kinds.contains(interruption_router::event::Kind::CapacityReservationInterruption));
    assert_eq!(kinds.iter().count(), 4, "{tagged}");

    // verify shows the choice.
    let checked = verify_cluster(&estate.aws, "bp").await;
    let queue = checked
        .check("tenant:bp:queue")
        .context("no tenant:bp:queue")?;
    assert!(
        queue
            .detail
            .contains("declines capacity-reservation-interruption (EventKinds)"),
        "{}",
        checked.render()
    );
    Ok(())
}
