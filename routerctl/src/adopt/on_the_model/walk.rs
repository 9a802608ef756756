//! The whole walk on the model, and the hazards that must stop it: Karpenter still reading the old
//! queue when the round is read, a GitOps revert after the probe, a probe the router does not
//! forward, a Karpenter role the account does not have.

use super::*;

/// The whole walk: tenant stack, Karpenter's grant, the helm command, the round (probe taken from
/// the tenant queue, sentinel left in the old one), the old rules disabled, deleted, the old queue
/// deleted; the router then the only path, in minutes of virtual time.
#[test]
fn a_hand_made_set_up_is_walked_onto_the_router_to_the_end() {
    let world = account();
    let (moves, ended) = paused().block_on(async {
        let mut reads = Reads::Old;
        let moves = to_the_end(&world, &mut reads).await;
        // After the walk the router is the only path: an interruption still reaches Karpenter.
        traffic(&world, reads).await;
        traffic(&world, reads).await;
        (moves, world.now())
    });
    assert_nothing_missed();
    // Step 2 needs no move: the tenant stack names Karpenter's role from the start.
    for (n, expected) in [
        (
            1,
            "applied step 1: deployed ir-tenant-alpha: queue karpenter-alpha",
        ),
        (2, "operator: helm upgrade"),
        (3, "sent probe routerctl-adopt-alpha-"),
        // The round's first read met the sentinel behind the interruptions the old rules put in
        // the old queue after the helm command: SQS's counts decided, minutes later.
        (
            4,
            "SQS counted no message received or deleted from Karpenter-alpha",
        ),
        (5, "applied step 6: deleted Karpenter"),
        (
            6,
            "applied step 7: deleted https://sqs.us-east-1.amazonaws.com/123456789012/Karpenter-alpha",
        ),
    ] {
        let at = moves.iter().position(|m| m.contains(expected));
        assert!(at.is_some(), "move {n} ({expected}) never made: {moves:#?}");
    }
    let order: Vec<usize> = [
        "applied step 1",
        "operator: helm",
        "sent probe",
        "applied step 5",
        "applied step 6",
        "applied step 7",
    ]
    .iter()
    .map(|e| moves.iter().position(|m| m.contains(e)).unwrap())
    .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "out of order: {moves:#?}"
    );
    // The round's quiet window waited out in virtual time (5-s looks), and the sentinel found
    // untouched: "received by nobody".
    assert!(
        moves.iter().filter(|m| *m == "waited at step 4").count() >= 13,
        "{moves:#?}"
    );
    assert!(
        moves.iter().any(|m| m.contains("received by nobody")),
        "{moves:#?}"
    );
    assert!(
        moves.iter().any(|m| m.starts_with("operator: helm")),
        "{moves:#?}"
    );
    assert!(
        !moves.iter().any(|m| m.starts_with("refused")),
        "{moves:#?}"
    );
    world.site(|site| {
        assert!(
            !site.queues.contains_key(OLD_QUEUE),
            "the old queue is deleted"
        );
        // The round was concluded: its mark is off the tenant queue, the evidence's is on.
        let tags = &site.queues[TENANT_QUEUE].tags;
        assert!(
            !tags.contains_key(crate::adopt::evidence::EVIDENCE_TAG),
            "{tags:?}"
        );
        assert!(
            tags.contains_key(crate::adopt::evidence::VERIFIED_TAG),
            "{tags:?}"
        );
        assert!(
            site.rules
                .keys()
                .all(|(_, name)| !name.starts_with("Karpenter")),
            "the old rules are deleted"
        );
    });
    // Virtual time: the router learning the queue, the round's quiet window and EventBridge's
    // settle, minutes of the world's clock, passed without waiting.
    let began = std::time::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    assert!(ended > began + Duration::from_secs(65 + 60), "{ended:?}");
}

/// Karpenter still reads the old queue when the round is read (the helm command never reached
/// it, or GitOps put the old value back): the sentinel is taken, the evidence fails, and the old
/// rules stay enabled.
#[test]
fn karpenter_still_on_the_old_queue_keeps_the_old_rules_on() {
    let world = account();
    let moves = play(
        &world,
        |did, _, reads| {
            // The operator's helm command does not take: Karpenter goes on reading the old queue.
            if did.starts_with("operator: helm") {
                *reads = Reads::Old;
            }
        },
        |moves| {
            moves
                .iter()
                .filter(|m| m.starts_with("applied step 4"))
                .count()
                >= 2
        },
    );
    assert_nothing_missed();
    assert_old_rules_kept(&world, &moves);
}

/// GitOps puts the old queue back after the helm command: Karpenter took the probe from the
/// tenant queue, then went back to the old queue and took the sentinel. Only the sentinel tells:
/// the old rules stay on, and the reading says what reads the old queue.
#[test]
fn a_gitops_revert_after_the_probe_is_caught_by_the_sentinel() {
    let world = account();
    let moves = play(
        &world,
        |did, before, reads| {
            // The revert lands once the tenant queue's probe was taken.
            let probe_taken =
                before.iter().any(|m| m.contains("sent probe")) && did == "waited at step 4";
            if probe_taken && *reads == Reads::Tenant {
                *reads = Reads::Old;
            }
        },
        |moves| {
            moves
                .iter()
                .filter(|m| m.starts_with("applied") || m.starts_with("refused"))
                .count()
                >= 3
        },
    );
    assert_nothing_missed();
    assert_old_rules_kept(&world, &moves);
    let refused = moves
        .iter()
        .find(|m| m.contains("was taken from Karpenter-alpha: something still reads it"));
    // And says where to look: the value GitOps owns.
    assert!(
        refused.is_some_and(|m| m.contains("Karpenter of alpha may still point at it")
            && m.contains("Argo CD self-heal")),
        "{moves:#?}"
    );
}

/// The router does not forward the probe (it answers the record failed): the round is not
/// started, since a probe that never arrived would look taken.
#[test]
fn a_probe_the_router_does_not_forward_starts_no_round() {
    let world = account();
    let function = world.site(|site| site.stacks["ir"].stack.outputs["FunctionName"].clone());
    let error = paused().block_on(async {
        let mut reads = Reads::Old;
        loop {
            let plan = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
            let next = plan
                .cluster(CLUSTER)
                .and_then(|c| c.next())
                .cloned()
                .unwrap();
            // The helm command made: the next --apply starts the round.
            if next.number == 3 && reads == Reads::Tenant {
                break;
            }
            advance(&world, &mut reads).await.unwrap();
        }
        world.function(&function, |payload| {
            let batch: Value = serde_json::from_str(payload).unwrap_or_default();
            let id = batch["Records"][0]["messageId"].clone();
            Invoked {
                function_error: None,
                payload: json!({"batchItemFailures": [{"itemIdentifier": id}],
                    "outcomes": {id.as_str().unwrap_or_default(): "failed"}})
                .to_string()
                .into_bytes(),
            }
        });
        run(&world, &Options::apply("ir", CLUSTER).delete_hand_made())
            .await
            .expect_err("no round without the probe")
    });
    let why = format!("{error:#}");
    assert!(
        why.contains("the router did not forward the probe"),
        "{why}"
    );
    world.site(|site| {
        let tenant = &site.queues[TENANT_QUEUE];
        assert!(
            !tenant
                .tags
                .contains_key(crate::adopt::evidence::EVIDENCE_TAG),
            "a round was recorded"
        );
    });
}

/// `--karpenter-role` naming a role the account does not have (the migration guide's name where
/// the getting-started guide made another) is refused before anything is made: the tenant stack
/// could not attach its grant, and would end in ROLLBACK_COMPLETE.
#[test]
fn a_karpenter_role_the_account_does_not_have_is_refused_before_anything_is_made() {
    let world = account();
    paused().block_on(async {
        let mut options = Options::apply("ir", CLUSTER).delete_hand_made();
        options.karpenter_roles = vec![(CLUSTER.into(), "KarpenterControllerRole-alpha".into())];
        let refused = run(&world, &options).await.expect_err("refused");
        let said = format!("{refused:#}");
        assert!(
            said.contains("--karpenter-role alpha=KarpenterControllerRole-alpha: account 123456789012 has no such role")
                && said.contains("nothing was changed")
                && said.contains("alpha-karpenter"),
            "{said}"
        );
    });
    world.site(|site| {
        assert!(
            !site.queues.contains_key(TENANT_QUEUE),
            "no tenant queue made"
        )
    });
}
