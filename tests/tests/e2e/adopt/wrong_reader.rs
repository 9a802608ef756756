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

/// zeta's own queue.
const ZETA_QUEUE: &str = "zeta-interruptions";

/// alpha's set-up, and zeta: a cluster whose controller role's name does not say Karpenter (adopt
/// cannot find it) and may read every karpenter-* queue. The plan's helm command for alpha then
/// runs in zeta's kube-context: alpha's Karpenter stays on its old queue, zeta's moves to alpha's
/// new one.
async fn alphas_helm_command_in_zetas_context() -> Result<(Estate, Karpenter)> {
    let mut estate =
        Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
    let aws = estate.aws.clone();
    aws.sqs.create_queue().queue_name(ZETA_QUEUE).send().await?;
    controller_role(
        &aws,
        "eks-zeta-controller",
        "zeta",
        &["karpenter-*", ZETA_QUEUE],
    )
    .await?;
    let mut zeta = Karpenter::start(&aws, ZETA_QUEUE, Behaviour::default()).await?;
    walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Operator { step: 3, .. })
    })
    .await?;
    estate.helm("alpha", "alpha").await?;
    zeta.point_at("karpenter-alpha").await?;
    Ok((estate, zeta))
}

/// The other way (see above): the helm command ran in zeta's kube-context, so zeta's Karpenter
/// takes the probe from alpha's new queue and alpha's, still on its old queue, the sentinel. A
/// Karpenter role adopt can see that may read the new queue blocks step 2.
#[tokio::test]
async fn a_helm_command_in_another_kube_context_leaves_the_old_rules_on() -> Result<()> {
    let (mut estate, mut zeta) = alphas_helm_command_in_zetas_context().await?;
    let aws = estate.aws.clone();
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
    zeta.point_at(ZETA_QUEUE).await?;
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

/// The rest of a busy account's interruptions, as alpha's unfiltered old rules put them in its old
/// queue: one every 50 ms (of a source no parser knows, so a Karpenter deletes them as another
/// cluster's), until `stop`.
fn account_traffic(
    aws: &Aws,
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<Result<usize>> {
    let sqs = aws.sqs.clone();
    tokio::spawn(async move {
        let mut sent = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let body = json!({"version": "0", "id": format!("account-{sent}"),
                "source": "test.account", "detail-type": "another cluster's event",
                "account": "123456789012", "time": "2026-11-26T12:00:00Z",
                "region": "us-east-1", "resources": [], "detail": {}});
            sqs.send_message()
                .queue_url(&url)
                .message_body(body.to_string())
                .send()
                .await?;
            sent += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(sent)
    })
}

/// Issue 44, as an operator met it: the helm command for alpha ran in zeta's kube-context, so
/// zeta's Karpenter (its role may read every `karpenter-*` queue, under a name adopt does not
/// recognise) reads alpha's new queue and takes every probe, while alpha's Karpenter keeps
/// draining its old queue, into which a busy account's rules write twenty events a second. The
/// operator runs `--apply` every few seconds for minutes, with EventBridge's rule delay and SQS's
/// late metrics on. A look through alpha's old queue never runs dry: it pages through new
/// arrivals until it must stop, never meeting the sentinel alpha's Karpenter took. A probe taken
/// proves only that *a* reader took it, and a look that misses the sentinel must not be read as a
/// backlog nobody reads. No round may disable alpha's rules; alpha misses nothing.
#[tokio::test]
async fn apply_repeated_for_minutes_with_the_helm_command_in_another_context_disables_nothing()
-> Result<()> {
    let (estate, mut zeta) = alphas_helm_command_in_zetas_context().await?;
    let aws = estate.aws.clone();
    let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = std::sync::Arc::default();
    let traffic = account_traffic(&aws, estate.sandbox.queue_url("alpha").await?, stop.clone());

    let started = std::time::Instant::now();
    let mut transcript = Vec::new();
    let mut reads = 0;
    while started.elapsed() < Duration::from_secs(240) {
        let report = estate.adopt(&estate.apply("alpha")).await?;
        let said = match &report.outcome {
            Outcome::Applied { step, did } => format!("applied step {step}: {did}"),
            Outcome::Refused { step, why } => format!("refused at step {step}: {why}"),
            other => format!("{other:?}"),
        };
        if said.contains("step 4's evidence does not hold") {
            reads += 1;
        }
        transcript.push(said);
        assert_eq!(
            rule_states(&aws, "Karpenter-alpha").await?,
            vec![RuleState::Enabled; 5],
            "{transcript:#?}"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = traffic.await??;
    eprintln!("{sent} events of the account's other clusters; adopt said: {transcript:#?}");
    assert!(
        reads >= 2,
        "fewer than two rounds were read: {transcript:#?}"
    );
    zeta.stop().await?;
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new(), "{transcript:#?}");
    Ok(())
}
