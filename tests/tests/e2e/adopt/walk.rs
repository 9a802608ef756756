//! The demo's scene walked while every kind of event flows: three kinds of set-up moved side by
//! side through one round of evidence, one rolled back (its Karpenter sent back to its old queue
//! at once), the other two walked to the end, the hand-made one deleted only when the operator
//! says so. A rolled-back cluster walked again to the end: `adopt::on_the_model`'s
//! `a_rollback_after_the_rules_were_disabled_puts_the_old_path_back_and_adopt_goes_on`, and
//! getting-started's stack edited with `--stack-template` at the end: [`super::member`]'s walk.

use super::*;

#[tokio::test]
async fn adopting_every_kind_of_set_up_while_events_flow_misses_none_and_survives_a_rollback()
-> Result<()> {
    let mut estate = Estate::start(None, demo()).await?;

    // The plan reads what each cluster runs, by what the resources do, and changes nothing.
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    let today = |cluster: &str| plan.cluster(cluster).unwrap().today.join("\n");
    assert!(
        today("alpha").contains(
            "old queue alpha, made by stack Karpenter-alpha (KarpenterInterruptionQueue); its \
             Karpenter may read it (alpha-karpenter"
        ),
        "{text}"
    );
    assert!(
        today("beta")
            .contains("made by Terraform, terraform-aws-eks's karpenter module (rule named"),
        "{text}"
    );
    assert!(
        today("gamma").contains("made by hand or a tool that leaves no mark"),
        "{text}"
    );
    assert!(
        today("delta").starts_with("no interruption set-up found"),
        "{text}"
    );
    for cluster in ["alpha", "beta", "gamma"] {
        let steps = &plan.cluster(cluster).unwrap().steps;
        assert_eq!(steps[0].state, State::Todo, "{text}");
        assert!(
            steps[1..].iter().all(|s| s.state == State::Blocked),
            "{text}"
        );
    }
    let stacks = estate.aws.cfn.describe_stacks().send().await?;
    assert!(
        stacks
            .stacks()
            .iter()
            .all(|s| !s.stack_name().unwrap_or_default().contains("-tenant-")),
        "a plan deploys nothing"
    );

    // The three side by side up to the helm command: the plan prints it with its kube-context;
    // --apply before the operator ran it starts a check, which would fail; no rule is touched
    // until then.
    let at_helm = |m: &Move| matches!(m, Move::Operator { step: 3, .. });
    let three = |walked: Vec<Vec<Move>>| {
        <[Vec<Move>; 3]>::try_from(walked)
            .map_err(|w| anyhow::anyhow!("three walks, not {}", w.len()))
    };
    let [alpha_to_helm, ..] = three(
        walk_together(
            &mut estate,
            &[("alpha", &at_helm), ("gamma", &at_helm), ("beta", &at_helm)],
        )
        .await?,
    )?;
    assert!(
        matches!(alpha_to_helm[0], Move::Applied { step: 1, .. }),
        "{alpha_to_helm:?}"
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );

    // To step 5, their rounds of evidence overlapping: the round's probe taken from the new
    // queue, its sentinel untouched in the old.
    let at_step_5 = |m: &Move| matches!(m, Move::Applied { step: 5, .. });
    let [moves, gamma_moves, beta_moves] = three(
        walk_together(
            &mut estate,
            &[
                ("alpha", &at_step_5),
                ("gamma", &at_step_5),
                ("beta", &at_step_5),
            ],
        )
        .await?,
    )?;
    let mut sent = probes(&moves);
    assert_eq!(sent.len(), 1, "{moves:?}");
    sent.extend(probes(&gamma_moves));
    sent.extend(probes(&beta_moves));
    let Some(Move::Applied { did, .. }) = moves.last() else {
        anyhow::bail!("{moves:?}");
    };
    // The round's first read: the probe taken, the sentinel untouched. When the old queue took
    // interruptions between the helm command and the round (events flow all along), they are
    // older than the sentinel, which then proves nothing by itself: SQS's counts decide, and
    // step 5 says what they counted.
    let first_read = moves
        .iter()
        .filter_map(|m| match m {
            Move::Applied { did, .. } if did.contains("was taken from karpenter-alpha") => {
                Some(did.as_str())
            }
            _ => None,
        })
        .next()
        .unwrap_or_else(|| panic!("no read of the round: {moves:?}"));
    assert!(
        first_read.contains("is still in alpha, received by nobody"),
        "{first_read}"
    );
    assert!(
        did.contains("nothing reads it")
            && (did == first_read
                || did.contains("SQS counted no message received or deleted from alpha")),
        "{did}"
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5]
    );

    // Rollback: marked, rules enabled, and it returns only once EventBridge applies them, so
    // the helm command it prints, run at once, loses nothing.
    let rolled = estate.adopt(&estate.rollback("alpha")).await?;
    let Outcome::RolledBack {
        enabled,
        waited,
        helm,
    } = &rolled.outcome
    else {
        anyhow::bail!("{:?}", rolled.outcome);
    };
    assert_eq!(enabled.len(), 5);
    assert!(*waited >= estate.scene.settle(), "{waited:?}");
    assert!(helm.contains("settings.interruptionQueue=alpha"), "{helm}");
    // One helm command in the report, the one that goes back.
    let text = rolled.render();
    assert_eq!(text.matches("helm upgrade karpenter").count(), 1, "{text}");
    assert!(
        !text.contains("interruptionQueue=karpenter-alpha"),
        "{text}"
    );
    // The operator runs it the moment it appears.
    estate.helm("alpha", "alpha").await?;
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    let after = estate
        .adopt(&adopt::Options::plan_of(STACK, "alpha"))
        .await?;
    let plan_alpha = after.cluster("alpha").unwrap();
    assert!(plan_alpha.rolled_back);
    assert_eq!(plan_alpha.step(3).state, State::Todo, "{}", after.render());
    assert!(
        plan_alpha.step(3).detail.contains("rolled back at"),
        "{}",
        after.render()
    );
    assert_eq!(plan_alpha.step(5).state, State::Blocked);

    // gamma's set-up has no tool's mark: adopt deletes it only when the operator says it was made
    // by hand.
    let without = estate.adopt(&estate.apply("gamma")).await?;
    let Outcome::Refused { step: 6, why } = &without.outcome else {
        anyhow::bail!("{}", without.render());
    };
    assert!(why.contains("--delete-hand-made"), "{why}");
    assert_eq!(
        rule_states(&estate.aws, "KarpenterSpotInterrupt-gamma").await?,
        vec![RuleState::Disabled]
    );

    // beta and gamma to the end, side by side; alpha stays rolled back, its Karpenter on its old
    // queue, which its old rules fill again.
    let to_the_end = |_: &Move| false;
    let ended = walk_together(
        &mut estate,
        &[("beta", &to_the_end), ("gamma", &to_the_end)],
    )
    .await?;
    for moves in &ended {
        assert_eq!(moves.last(), Some(&Move::Finished), "{ended:?}");
        sent.extend(probes(moves));
    }
    let [beta_end, gamma_end] = <[Vec<Move>; 2]>::try_from(ended)
        .map_err(|w| anyhow::anyhow!("two walks, not {}", w.len()))?;
    // Terraform's set-up removed by Terraform, the one made by hand deleted by adopt.
    assert!(
        beta_end.iter().any(
            |m| matches!(m, Move::Operator { step: 6, did } if did.contains("terraform apply"))
        ),
        "{:?}",
        beta_end
    );
    assert!(
        gamma_end.iter().any(|m| matches!(m, Move::Applied { step: 6, did } if did.contains("KarpenterSpotInterrupt-gamma"))),
        "{:?}",
        gamma_end
    );

    // Nothing old is left of beta's and gamma's; alpha's rules and queue are as the rollback
    // left them; each tenant stack grants the controller role; a rollback with no old rule left
    // is refused.
    let rules = estate.aws.events.list_rules().send().await?;
    assert!(
        rules.rules().iter().all(|r| {
            let name = r.name().unwrap_or_default();
            name.starts_with(STACK) || name.starts_with("Karpenter-alpha")
        }),
        "{:?}",
        rules.rules()
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    for queue in ["Karpenter-beta", "Karpenter-gamma"] {
        assert!(
            estate.sandbox.queue_url(queue).await.is_err(),
            "{queue} is still there"
        );
    }
    assert!(estate.sandbox.queue_url("alpha").await.is_ok());
    for cluster in ["alpha", "gamma"] {
        let stack = estate
            .aws
            .cfn
            .describe_stacks()
            .stack_name(tenant_stack(cluster))
            .send()
            .await?;
        let role = estate.clusters[cluster].role.clone().unwrap();
        let parameters = stack.stacks()[0].parameters();
        assert!(
            parameters
                .iter()
                .any(|p| p.parameter_key() == Some("KarpenterRoleName")
                    && p.parameter_value() == Some(role.as_str())),
            "{parameters:?}"
        );
    }
    let error = estate
        .adopt(&estate.rollback("gamma"))
        .await
        .expect_err("nothing to roll back to")
        .to_string();
    assert!(error.contains("no old rule left"), "{error}");
    let last = estate.adopt(&adopt::Options::plan(STACK)).await?;
    for cluster in ["beta", "gamma"] {
        assert!(
            last.cluster(cluster).unwrap().next().is_none(),
            "{}",
            last.render()
        );
    }
    assert_eq!(
        last.cluster("alpha").unwrap().next().map(|s| s.number),
        Some(3),
        "{}",
        last.render()
    );

    // Every event reached the queue its cluster's Karpenter was pointed at when it was sent,
    // once; no router queue holds another cluster's event.
    let clusters = estate.clusters.keys().cloned().collect::<Vec<_>>();
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    assert!(outcome.duplicates.is_empty(), "{:?}", outcome.duplicates);
    assert!(
        outcome.dead_lettered.is_empty(),
        "dead-lettered: {:?}: {:#?}\nthe router's warnings:\n{}",
        outcome.dead_lettered,
        outcome.dead_letter_details,
        outcome.router_warnings.join("\n")
    );
    for cluster in ["alpha", "beta", "gamma"] {
        assert_eq!(
            outcome.kinds[cluster].len(),
            5,
            "{cluster}: {:?}",
            outcome.kinds
        );
    }
    // The stream ran through the round and both retirements (two events a second, fewer when
    // the machine is busy: 264 in a run that took 166 s).
    assert!(outcome.published >= 150, "{}", outcome.published);
    // Each round's probe went through the router to its cluster's new queue, where that
    // cluster's Karpenter read it; no sentinel was read (each Karpenter had left its old queue).
    assert_eq!(sent.len(), 3, "one round each: {sent:?}");
    for probe in &sent {
        let cluster = probe.split('-').nth(2).unwrap();
        assert!(
            outcome.probes.contains(&(
                cluster.to_owned(),
                Estate::tenant_queue(cluster),
                probe.clone()
            )),
            "{probe}: {:?}",
            outcome.probes
        );
    }
    assert_eq!(outcome.probes.len(), sent.len(), "{:?}", outcome.probes);
    assert_eq!(outcome.sentinels, Vec::new(), "{clusters:?}");
    Ok(())
}
