//! Karpenter not where the helm command said: a GitOps revert, or the command run in another
//! cluster's kube-context. The old rules stay on either way.

use super::*;

/// Fixed, alpha's walk goes on to step 5: its old rules off.
async fn walk_alpha_to_step_5(estate: &mut Estate) -> Result<()> {
    let moves = walk(estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5],
        "{moves:?}"
    );
    Ok(())
}

/// Nothing missed or misrouted, and the one sentinel the failed check left was taken by alpha's
/// Karpenter, from alpha.
async fn finish_with_one_sentinel_from_alpha(estate: Estate) -> Result<()> {
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    assert_eq!(outcome.sentinels.len(), 1, "{:?}", outcome.sentinels);
    assert!(
        outcome
            .sentinels
            .iter()
            .all(|(cluster, queue, _)| cluster == "alpha" && queue == "alpha"),
        "{:?}",
        outcome.sentinels
    );
    Ok(())
}

/// The two ways Karpenter is not where the helm command said: a GitOps controller puts the old
/// value back, or the command ran in another cluster's kube-context (whose Karpenter, with a role
/// that may read `karpenter-*`, then reads this cluster's new queue). Either way the sentinel in
/// the old queue is taken, and the old rules stay on; fixed, the walk goes on. One test each, so
/// that their rounds of evidence run side by side.
///
/// This one: Argo CD's self-heal puts the old value back after the helm command.
#[tokio::test]
async fn a_gitops_revert_leaves_the_old_rules_on_and_verify_names_the_reader() -> Result<()> {
    let mut estate =
        Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
    let aws = estate.aws.clone();

    // The helm command runs; then Argo CD's self-heal puts the old value back.
    walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Operator { step: 3, .. })
    })
    .await?;
    let started = estate.adopt(&estate.apply("alpha")).await?;
    assert!(
        matches!(started.outcome, Outcome::Applied { step: 3, .. }),
        "{}",
        started.render()
    );
    estate.helm("alpha", "alpha").await?;
    until_ripe().await;
    let read = estate.adopt(&estate.apply("alpha")).await?;
    let Outcome::Refused { step: 4, why } = &read.outcome else {
        anyhow::bail!("{}", read.render());
    };
    assert!(why.contains("the sentinel sent"), "{why}");
    assert!(why.contains("was taken from alpha"), "{why}");
    assert!(why.contains("Argo CD self-heal"), "{why}");
    assert_eq!(
        rule_states(&aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    // Nobody has read the router's queue since the revert: verify says so, with the reader.
    let checked = verify_cluster(&aws, "alpha").await;
    let read = checked
        .check("tenant:alpha:read")
        .context("no read check")?;
    assert!(!read.passed, "{}", checked.render());
    assert!(
        read.detail.contains("karpenter-alpha holds a message")
            && read
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("KarpenterControllerRole-alpha")),
        "{}",
        checked.render()
    );

    // Fixed (the value changed in Git): to step 5, the old rules off.
    estate.helm("alpha", "karpenter-alpha").await?;
    walk_alpha_to_step_5(&mut estate).await?;
    finish_with_one_sentinel_from_alpha(estate).await?;
    Ok(())
}

/// The other way (see above): the helm command ran in zeta's kube-context, so zeta's Karpenter
/// takes the probe from alpha's new queue and alpha's, still on its old queue, the sentinel. A
/// Karpenter role adopt can see that may read the new queue blocks step 2.
#[tokio::test]
async fn a_helm_command_in_another_kube_context_leaves_the_old_rules_on() -> Result<()> {
    let mut estate =
        Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
    let aws = estate.aws.clone();

    // zeta: a cluster whose controller role's name does not say Karpenter (adopt cannot find it)
    // and may read every karpenter-* queue.
    let zeta_queue = "zeta-interruptions";
    aws.sqs.create_queue().queue_name(zeta_queue).send().await?;
    controller_role(
        &aws,
        "eks-zeta-controller",
        "zeta",
        &["karpenter-*", zeta_queue],
    )
    .await?;
    let mut zeta = Karpenter::start(&aws, zeta_queue, Behaviour::default()).await?;

    // The plan's helm command, run in zeta's kube-context: alpha's Karpenter stays on its old
    // queue, zeta's moves to alpha's new one.
    walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Operator { step: 3, .. })
    })
    .await?;
    estate.helm("alpha", "alpha").await?;
    zeta.point_at("karpenter-alpha").await?;
    let started = estate.adopt(&estate.apply("alpha")).await?;
    assert!(
        matches!(started.outcome, Outcome::Applied { step: 3, .. }),
        "{}",
        started.render()
    );
    until_ripe().await;
    let read = estate.adopt(&estate.apply("alpha")).await?;
    let Outcome::Refused { step: 4, why } = &read.outcome else {
        anyhow::bail!("{}", read.render());
    };
    assert!(why.contains("ran in another kube-context"), "{why}");
    assert!(why.contains("was taken from karpenter-alpha"), "{why}");
    assert_eq!(
        rule_states(&aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );

    // A role that says Karpenter and may read karpenter-* blocks step 2 until it is scoped.
    controller_role(&aws, "KarpenterController-omega", "omega", &["karpenter-*"]).await?;
    let plan = estate
        .adopt(&adopt::Options::plan_of(STACK, "alpha"))
        .await?;
    let two = plan.cluster("alpha").unwrap().step(2);
    assert_eq!(two.state, State::Blocked, "{}", plan.render());
    assert!(
        two.detail
            .contains("KarpenterController-omega (cluster omega) may also read karpenter-alpha"),
        "{}",
        plan.render()
    );
    aws.iam
        .delete_role_policy()
        .role_name("KarpenterController-omega")
        .policy_name("controller")
        .send()
        .await?;

    // Fixed: zeta back on its own queue, alpha's Karpenter on the new one; then to the end.
    zeta.point_at(zeta_queue).await?;
    estate.helm("alpha", "karpenter-alpha").await?;
    walk_alpha_to_step_5(&mut estate).await?;
    zeta.stop().await?;
    finish_with_one_sentinel_from_alpha(estate).await?;
    let zeta_took = zeta
        .reads()
        .iter()
        .filter(|r| r.queue == "karpenter-alpha")
        .count();
    assert!(zeta_took > 0, "zeta's Karpenter read karpenter-alpha");
    Ok(())
}
