//! adopt in a member account, in another region than the hub: the guide's layout (Karpenter's
//! getting-started stack) in account 111111111111, us-west-2, whose spoke stack forwards its
//! default bus's events to the hub's central bus in us-east-1; adopt reads and deploys there with
//! the member's credentials and sends its probe through the hub's router. And what adopt refuses
//! before it touches a member: no spoke stack, a spoke serving another hub.

use aws_model::stacks;
use lab::{adoption::Member, sandbox::Sandbox};
use local_aws::moto::sdk_config_as;
use routerctl::verify::DEFAULT_SPOKE_STACK;

use super::*;

const MEMBER: &str = "111111111111";
const MEMBER_REGION: &str = "us-west-2";

fn member_scene() -> Scene {
    Scene {
        member: Some(Member {
            account: MEMBER.into(),
            region: MEMBER_REGION.into(),
        }),
        ..scene(&[("zeta", Some(Flavour::GettingStarted))])
    }
}

/// zeta walked to the end while every kind of event flows: the tenant stack deployed in the
/// member, the probe through the hub's router, the old rules disabled on that evidence, the
/// guide's stack edited with `--stack-template` and the old queue deleted, all with the member's
/// credentials: nothing missed, nothing misrouted. A rollback is walked at the hub
/// ([`super::rollback`], [`super::walk`]); a cluster rolled back and walked again to the end, on
/// the model (`adopt::on_the_model`).
#[tokio::test]
async fn a_member_accounts_cluster_in_another_region_is_adopted_to_the_end() -> Result<()> {
    let mut estate = Estate::start(None, member_scene()).await?;

    // The plan reads the member's account: the guide's stack, its Karpenter's role.
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    assert!(
        text.starts_with(&format!(
            "routerctl adopt: member account {MEMBER}, {MEMBER_REGION}, connected by spoke stack \
             {DEFAULT_SPOKE_STACK} to router stack {STACK}"
        )),
        "{text}"
    );
    assert!(
        plan.cluster("zeta")
            .unwrap()
            .today
            .join("\n")
            .contains("old queue zeta, made by stack Karpenter-zeta"),
        "{text}"
    );
    // Every command it prints reaches the member again.
    assert!(
        text.contains(&format!(
            "routerctl adopt --account {MEMBER} --profile <{MEMBER}'s profile> --region \
             {MEMBER_REGION} --hub-region us-east-1 --cluster zeta --apply"
        )),
        "{text}"
    );

    // To step 5: the tenant stack deployed in the member (importing the spoke's exports), the
    // probe through the hub's router into it, and the old rules disabled on that evidence.
    let moves = walk(&mut estate, "zeta", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    assert!(
        matches!(&moves[0], Move::Applied { step: 1, did } if did.contains("deployed")),
        "{moves:?}"
    );
    let tenant = estate
        .site
        .cfn
        .describe_stacks()
        .stack_name(tenant_stack("zeta"))
        .send()
        .await?;
    assert_eq!(tenant.stacks().len(), 1, "the tenant stack is the member's");
    let parameters = aws_clients::stacks::parameters(&tenant.stacks()[0]);
    assert_eq!(
        parameters.get("RouterName").map(String::as_str),
        Some("interruption-router"),
        "{parameters:?}"
    );
    assert!(
        rule_states(&estate.site, "Karpenter")
            .await?
            .iter()
            .all(|s| *s == RuleState::Disabled)
    );

    // To the end: the guide's stack edited with --stack-template (the operator's step), the old
    // rules and queue gone from the member.
    let rest = walk(&mut estate, "zeta", |_| false).await?;
    assert_eq!(rest.last(), Some(&Move::Finished), "{rest:?}");
    assert!(
        rest.iter()
            .any(|m| matches!(m, Move::Operator { step: 7, did }
            if did.contains("--stack-template") && did.contains("InterruptionPolicy now grant"))),
        "{rest:?}"
    );
    assert_eq!(rule_states(&estate.site, "Karpenter").await?, Vec::new());
    assert!(
        estate
            .site
            .sqs
            .get_queue_url()
            .queue_name("zeta")
            .send()
            .await
            .is_err(),
        "the old queue is still in the member"
    );

    let outcome = estate.finish().await?;
    assert!(outcome.published > 0);
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    assert!(outcome.dead_lettered.is_empty(), "{outcome:?}");
    assert!(
        outcome
            .probes
            .iter()
            .all(|(cluster, queue, _)| cluster == "zeta" && queue == "karpenter-zeta"),
        "{:?}",
        outcome.probes
    );
    assert!(
        !outcome.probes.is_empty(),
        "the probes reached the member's queue"
    );
    Ok(())
}

/// Clients acting in the member account and region, as moto hands them out.
async fn member_site(world: &e2e_tests::World) -> Result<Aws> {
    let config = sdk_config_as(
        world.moto.endpoint(),
        MEMBER,
        MEMBER_REGION,
        interruption_router::config::DEFAULT_SPOKE_ROLE_NAME,
    )
    .await?;
    Aws::new(&config)
}

/// The refusal adopt gives for `hub` and the member `site`, as text.
async fn refusal(hub: &Sandbox, site: &Aws) -> String {
    let options = adopt::Options::plan(hub.stack()).in_member(MEMBER, DEFAULT_SPOKE_STACK, "");
    match adopt::run_at(&hub.aws, site, &options).await {
        Ok(report) => panic!("adopt went ahead: {}", report.render()),
        Err(e) => format!("{e:#}"),
    }
}

/// No spoke stack, a spoke stack that serves another hub: each refused with its fix, before adopt
/// reads or changes anything in the member (an account the base stack does not serve is refused
/// before adopt calls AWS at all: `adopt::connect`'s unit tests).
#[tokio::test]
async fn adopt_refuses_a_member_it_cannot_feed_with_the_fix() -> Result<()> {
    let world = e2e_tests::World::start().await?;
    let hub = Sandbox::deploy_hub(&world.moto, "ir", &[], &[MEMBER]).await?;
    let site = member_site(&world).await?;

    let none = refusal(&hub, &site).await;
    assert!(
        none.contains(&format!(
            "account {MEMBER} has no spoke stack {DEFAULT_SPOKE_STACK} in {MEMBER_REGION}"
        )) && none.contains("aws cloudformation deploy --region us-west-2")
            && none.contains(hub.base.output("HubEventBusArn")?),
        "{none}"
    );

    // A spoke forwarding to another hub's bus and trusting its router.
    aws_clients::stacks::create(
        &site.cfn,
        DEFAULT_SPOKE_STACK,
        stacks::SPOKE_TEMPLATE,
        &[
            (
                "HubEventBusArn",
                "arn:aws:events:us-east-1:222222222222:event-bus/other-hub",
            ),
            (
                "RouterRoleArn",
                "arn:aws:iam::222222222222:role/other-router",
            ),
        ],
    )
    .await?;
    let other = refusal(&hub, &site).await;
    assert!(
        other.contains("serves another hub")
            && other.contains("other-hub")
            && other.contains(&format!("RouterRoleArn={}", hub.router_role_arn()?)),
        "{other}"
    );

    Ok(())
}
