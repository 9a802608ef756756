//! Rolling back on the model: after the old rules were disabled the old path comes back and adopt
//! goes on; a rollback that does not wait for EventBridge loses what comes meanwhile; after the
//! old rules were deleted a rollback is refused.

use super::*;

/// `--rollback` after step 5: the old rules enabled again, EventBridge waited for, and the helm
/// command that points Karpenter back at the old queue; after it, Karpenter on the old queue
/// misses nothing, the plan starts the round again (step 3 says when it was rolled back), and
/// adopt walks the cluster again to the end: a second round, the old set-up gone.
#[test]
fn a_rollback_after_the_rules_were_disabled_puts_the_old_path_back_and_adopt_goes_on() {
    let world = account();
    let (outcome, plan, again) = paused().block_on(async {
        let mut reads = Reads::Old;
        until(&world, &mut reads, "applied step 5").await;
        let rolled = run(&world, &Options::rollback("ir", CLUSTER))
            .await
            .unwrap();
        let outcome = rolled.outcome.clone();
        // One helm command in the report, at its end: the one that goes back.
        let text = rolled.render();
        assert_eq!(text.matches("helm upgrade karpenter").count(), 1, "{text}");
        assert!(
            text.contains(
                "next: yours: the helm command at the end of this report, which points \
                 Karpenter back at its old queue"
            ),
            "{text}"
        );
        // The helm command it prints: Karpenter reads the old queue again.
        reads = Reads::Old;
        for _ in 0..3 {
            traffic(&world, reads).await;
        }
        let plan = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
        world.site(|site| assert_eq!(old_rules_enabled(site), 5));
        // Adopted again, to the end.
        let again = to_the_end(&world, &mut reads).await;
        traffic(&world, reads).await;
        (outcome, plan, again)
    });
    let Outcome::RolledBack {
        enabled,
        waited,
        helm,
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(enabled.len(), 5, "{enabled:?}");
    assert!(waited >= Duration::from_secs(60), "{waited:?}");
    assert!(helm.contains(OLD_QUEUE), "{helm}");
    let at = plan.cluster(CLUSTER).unwrap();
    assert!(at.rolled_back, "{}", plan.render());
    assert_eq!(at.step(3).state, State::Todo, "{}", plan.render());
    assert!(
        at.step(3).detail.contains("rolled back at"),
        "{}",
        plan.render()
    );
    assert_eq!(at.step(5).state, State::Blocked, "{}", plan.render());
    // The second walk: the helm command again, a new round, the rules disabled and deleted, the
    // old queue deleted.
    let position = |prefix: &str| again.iter().position(|m| m.starts_with(prefix));
    let (Some(helm), Some(round), Some(disabled), Some(deleted)) = (
        position("operator: helm upgrade"),
        position("applied step 3"),
        position("applied step 5"),
        position("applied step 6"),
    ) else {
        panic!("{again:#?}");
    };
    assert!(
        helm < round && round < disabled && disabled < deleted,
        "{again:#?}"
    );
    world.site(|site| {
        assert!(!site.queues.contains_key(OLD_QUEUE), "{again:#?}");
        assert!(
            !site
                .rules
                .keys()
                .any(|(_, name)| name.starts_with("Karpenter")),
            "{again:#?}"
        );
    });
    assert_nothing_missed();
}

/// The hazard adopt's wait is for, on the model's EventBridge (a rule change applies
/// [`crate::cloud::model::RULE_CHANGE_DELAY`] later): a rollback that does not wait (`--rule-settle 0`)
/// returns while the old rules still deliver nothing, so an interruption that comes as its helm
/// command runs reaches only the router's queue, which Karpenter has just left.
#[test]
fn a_rollback_that_does_not_wait_for_eventbridge_loses_what_comes_meanwhile() {
    let world = account();
    paused().block_on(async {
        let mut reads = Reads::Old;
        until(&world, &mut reads, "applied step 5").await;
        assert_eq!(missed(), Vec::<String>::new(), "missed before the rollback");
        let rolled = run(
            &world,
            &Options::rollback("ir", CLUSTER).settle(Duration::ZERO),
        )
        .await
        .unwrap();
        assert!(
            matches!(rolled.outcome, Outcome::RolledBack { .. }),
            "{}",
            rolled.render()
        );
        // Its helm command, run at once: Karpenter reads the old queue again.
        traffic(&world, Reads::Old).await;
        world.site(|site| assert_eq!(old_rules_enabled(site), 5, "ListRules shows them on"));
    });
    assert_eq!(
        missed().len(),
        1,
        "the interruption sent as the helm command ran"
    );
}

/// After the whole walk there is nothing to roll back to: `--rollback` refuses, and says to keep
/// Karpenter on the router's queue.
#[test]
fn a_rollback_after_the_old_rules_were_deleted_is_refused() {
    let world = account();
    let error = paused().block_on(async {
        let mut reads = Reads::Old;
        let mut n = 0;
        while advance(&world, &mut reads).await.unwrap().is_some() {
            n += 1;
            assert!(n < 200);
        }
        run(&world, &Options::rollback("ir", CLUSTER))
            .await
            .expect_err("nothing to roll back to")
    });
    let why = format!("{error:#}");
    assert!(why.contains("no old rule left to re-enable"), "{why}");
    assert!(
        why.contains("keep Karpenter on the router's queue"),
        "{why}"
    );
}
