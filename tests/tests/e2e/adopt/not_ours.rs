//! Queues and set-ups that are not the router's to take: EKS Blueprints' queue with the router's
//! name, and shared, unclaimed or unreadable set-ups, reported and left alone.

use super::*;

/// The rules lab makes as Terraform's module does carry `name_prefix`'s id (26 digits: a timestamp
/// and a counter), the mark adopt reads as "made by Terraform, EKS Blueprints addons" below; one
/// per rule.
#[test]
fn labs_terraform_rules_carry_name_prefix_ids_of_26_digits() {
    let id = lab::old_setups::name_prefix_id("beta", "SpotInterrupt");
    assert_eq!(id.len(), 26);
    assert!(id.bytes().all(|b| b.is_ascii_digit()), "{id}");
    assert_ne!(id, lab::old_setups::name_prefix_id("beta", "HealthEvent"));
}

/// EKS Blueprints names its Karpenter queue `karpenter-<cluster>`, the router's default name, and
/// feeds it with its own rules. The router writes nothing into it (its Karpenter reads each event
/// once); adopt shows it as an old set-up made by EKS Blueprints, and plans the tenant queue around
/// the name; verify says why the cluster is not onboarded.
#[tokio::test]
async fn a_blueprints_queue_with_the_routers_name_is_an_old_set_up_not_a_tenant() -> Result<()> {
    let estate = Estate::start(None, scene(&[("bp", Some(Flavour::Blueprints))])).await?;
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    let bp = plan.cluster("bp").context("bp")?;
    let today = bp.today.join("\n");
    assert!(
        today.contains(
            "old queue karpenter-bp, made by Terraform, EKS Blueprints addons (its rules' marks"
        ),
        "{text}"
    );
    assert!(
        today.contains("4 rule(s) made by Terraform, EKS Blueprints addons (rule named"),
        "{text}"
    );
    assert!(
        today.contains(
            "karpenter-bp has the router's queue name but the tenant stack did not make it"
        ),
        "{text}"
    );
    let one = bp.step(1);
    assert_eq!(one.state, State::Blocked, "{text}");
    assert!(
        one.detail
            .contains("The router never writes it, so bp stays on it"),
        "{text}"
    );
    assert!(
        text.contains("PARAMS=QueuePrefix=<prefix, e.g. interruption-router->"),
        "{text}"
    );
    let refused = estate.adopt(&estate.apply("bp")).await?;
    assert!(
        matches!(refused.outcome, Outcome::Refused { step: 1, .. }),
        "{}",
        refused.render()
    );
    let checked = verify_cluster(&estate.aws, "bp").await;
    let queue = checked
        .check("tenant:bp:queue")
        .context("no tenant:bp:queue")?;
    assert!(!queue.passed, "{}", checked.render());
    assert!(
        queue.detail.contains("the tenant stack did not make it")
            && queue.detail.contains("bp is not onboarded"),
        "{}",
        checked.render()
    );

    // Events flow for a while: bp's Karpenter reads each from its own queue, once.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert!(outcome.duplicates.is_empty(), "{:?}", outcome.duplicates);
    // At least one a second (the stream sends two, each after the last one's deliveries).
    assert!(outcome.published >= 20, "{}", outcome.published);
    assert_eq!(outcome.kinds["bp"].len(), 4, "{:?}", outcome.kinds);
    Ok(())
}

/// A queue two clusters' Karpenters read (the misconfiguration the router exists for), a queue no
/// cluster can be tied to, a rule whose pattern adopt cannot evaluate, and a cluster with no
/// set-up: each reported as such, and none touched, even once a cluster reading the shared queue
/// has its tenant queue.
#[tokio::test]
async fn shared_queues_unclaimed_set_ups_and_unreadable_rules_are_reported_and_left_alone()
-> Result<()> {
    use lab::{old_setups, sandbox::Sandbox};
    use local_aws::moto::{MotoServer, karpenter_tags, launch};

    let moto = MotoServer::start().await?;
    let sandbox = Sandbox::deploy(&moto, STACK, &[]).await?;
    let aws = sandbox.aws.clone();
    for cluster in ["epsilon", "zeta", "delta"] {
        launch(&aws.ec2, &karpenter_tags(cluster), 1).await?;
    }
    // One set-up made by hand, then a second controller role that reads the same queue.
    let made = old_setups::stand_up(&aws, Flavour::ByHand, "epsilon").await?;
    controller_role(&aws, "KarpenterController-zeta", "zeta", &[&made.queue]).await?;
    // A queue fed with spot warnings that no Karpenter role reads, and a rule adopt cannot read.
    aws.sqs
        .create_queue()
        .queue_name("orphan-interruptions")
        .send()
        .await?;
    let orphan_arn = "arn:aws:sqs:us-east-1:123456789012:orphan-interruptions";
    for (rule, pattern) in [
        (
            "OrphanSpot",
            json!({"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}),
        ),
        (
            "WildcardSpot",
            json!({"source": ["aws.ec2"], "detail-type": [{"wildcard": "EC2 Spot*"}]}),
        ),
    ] {
        aws.events
            .put_rule()
            .name(rule)
            .event_pattern(pattern.to_string())
            .send()
            .await?;
        aws.events
            .put_targets()
            .rule(rule)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("q")
                    .arn(orphan_arn)
                    .build()?,
            )
            .send()
            .await?;
    }

    let plan = adopt::run(&aws, &adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    assert_eq!(
        plan.shared,
        vec![format!("{} read by epsilon, zeta", made.queue)],
        "{text}"
    );
    assert_eq!(plan.unclaimed.len(), 1, "{text}");
    assert!(
        plan.unclaimed[0].starts_with("orphan-interruptions (1 rule(s)"),
        "{text}"
    );
    assert_eq!(plan.unreadable.len(), 1, "{text}");
    assert_eq!(plan.unreadable[0].0, "WildcardSpot", "{text}");
    assert!(
        text.contains("each Karpenter deletes the others' messages"),
        "{text}"
    );
    assert!(
        plan.cluster("delta").unwrap().today[0].starts_with("no interruption set-up found"),
        "{text}"
    );

    // epsilon gets its tenant queue ...
    let apply = adopt::Options::apply(STACK, "epsilon");
    let report = adopt::run(&aws, &apply).await?;
    assert!(
        matches!(report.outcome, Outcome::Applied { step: 1, .. }),
        "{}",
        report.render()
    );
    sandbox.complete_tenant("epsilon", Some(&made.role)).await?;
    // ... but the shared queue's rules stay: zeta's Karpenter still reads them.
    let report = adopt::run(&aws, &adopt::Options::plan_of(STACK, "epsilon")).await?;
    let text = report.render();
    let epsilon = report.cluster("epsilon").unwrap();
    assert_eq!(epsilon.step(5).state, State::Blocked, "{text}");
    assert!(
        epsilon.step(5).detail.contains("read by epsilon and zeta"),
        "{text}"
    );
    assert_eq!(
        rule_states(&aws, "KarpenterSpotInterrupt-epsilon").await?,
        vec![RuleState::Enabled]
    );
    for rule in ["OrphanSpot", "WildcardSpot"] {
        assert_eq!(rule_states(&aws, rule).await?, vec![RuleState::Enabled]);
    }
    aws.sqs
        .get_queue_url()
        .queue_name("orphan-interruptions")
        .send()
        .await
        .context("adopt must leave the unclaimed queue alone")?;
    moto.stop().await;
    Ok(())
}
