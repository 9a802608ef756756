//! Karpenter not where the helm command said, on the model: the command run in another cluster's
//! kube-context, whose Karpenter (under a role adopt cannot tell is Karpenter's, allowed every
//! `karpenter-*` queue) then reads alpha's tenant queue and takes the probe, while alpha's still
//! reads the old queue and takes the sentinel. The GitOps revert is `super`'s.

use serde_json::json;

use super::{
    CLUSTER, Options, Reads, State, World, account, advance, assert_nothing_missed,
    assert_old_rules_kept, paused, play, run,
};

/// A controller role of `cluster` that may read every `karpenter-*` queue (and its cluster's
/// own), named `name`.
fn reader_of_every_tenant_queue(world: &World, name: &str, cluster: &str) {
    world.put_role(
        name,
        vec![
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueUrl"],
            "Resource": ["arn:aws:sqs:*:*:karpenter-*",
                         format!("arn:aws:sqs:us-east-1:123456789012:{cluster}-interruptions")]},
            {"Effect": "Allow", "Action": "eks:DescribeCluster",
             "Resource": format!("arn:aws:eks:us-east-1:123456789012:cluster/{cluster}")}]}),
        ],
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
    );
}

/// alpha's set-up, and zeta, whose controller role's name does not say Karpenter.
fn with_zeta() -> World {
    let world = account();
    world.create_queue("zeta-interruptions", &[]);
    reader_of_every_tenant_queue(&world, "eks-zeta-controller", "zeta");
    world
}

/// Once the helm command runs (in zeta's context), alpha's Karpenter stays on the old queue and
/// zeta's reads alpha's tenant queue.
fn elsewhere(did: &str, _: &[String], reads: &mut Reads) {
    if did.starts_with("operator: helm") {
        *reads = Reads::Elsewhere;
    }
}

/// Two rounds read and refused: enough to say no round disables the old rules.
fn refused_twice(moves: &[String]) -> bool {
    moves
        .iter()
        .filter(|m| m.starts_with("refused at step 4"))
        .count()
        >= 2
}

#[test]
fn a_helm_command_in_another_kube_context_is_named_and_the_old_rules_stay_on() {
    let world = with_zeta();
    let moves = play(&world, elsewhere, refused_twice);
    assert_nothing_missed();
    assert_old_rules_kept(&world, &moves);
    let refused = moves.iter().find(|m| m.starts_with("refused at step 4"));
    assert!(
        refused.is_some_and(|m| m.contains("ran in another kube-context")
            && m.contains("was taken from karpenter-alpha")),
        "{moves:#?}"
    );
}

/// A role whose name says Karpenter and that may read `karpenter-*` blocks step 2 (a helm
/// command run in its cluster would feed it alpha's interruptions) until it is scoped; scoped,
/// the walk goes on to the helm command.
#[test]
fn a_karpenter_role_that_may_read_every_tenant_queue_blocks_step_2_until_scoped() {
    let world = account();
    reader_of_every_tenant_queue(&world, "KarpenterController-omega", "omega");
    paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves = Vec::new();
        while !moves
            .iter()
            .any(|m: &String| m.starts_with("refused at step 2"))
        {
            moves.push(advance(&world, &mut reads).await.unwrap().unwrap());
            assert!(moves.len() < 20, "{moves:#?}");
        }
        let refused = moves.last().unwrap();
        assert!(
            refused.contains("scope each of those roles' sqs:ReceiveMessage"),
            "{refused}"
        );
        let plan = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
        let two = plan.cluster(CLUSTER).unwrap().step(2).clone();
        assert_eq!(two.state, State::Blocked);
        assert!(
            two.detail.contains(
                "KarpenterController-omega (cluster omega) may also read karpenter-alpha"
            ),
            "{}",
            two.detail
        );

        // Scoped (its policy no longer reaches karpenter-*): the walk goes on to the helm command.
        world.edit(|state, _, _| {
            let omega = "arn:aws:iam::123456789012:role/KarpenterController-omega";
            state.roles.get_mut(omega).unwrap().inline.clear();
        });
        let scoped = moves.len();
        while !moves.iter().any(|m| m.starts_with("operator: helm")) {
            moves.push(advance(&world, &mut reads).await.unwrap().unwrap());
            assert!(moves.len() < 40, "{moves:#?}");
        }
        assert!(
            !moves[scoped..]
                .iter()
                .any(|m| m.starts_with("refused at step 2")),
            "{moves:#?}"
        );
    });
}

/// Issue 44 on the model: the helm command ran in zeta's context, zeta's Karpenter takes every
/// probe from alpha's tenant queue, and alpha's keeps draining its old queue, which the account's
/// unfiltered rules fill past what a look can search. The operator applies again and again for
/// minutes of virtual time (SQS's counts published late): the look never meets the sentinel, a
/// probe taken proves only that a reader took it, and what the look met all came after the
/// sentinel, so the queue was read. No round disables alpha's rules, and alpha misses nothing.
#[test]
fn apply_repeated_with_the_helm_command_elsewhere_in_a_busy_account_disables_nothing() {
    let world = with_zeta();
    let moves = play(
        &world,
        |did, _, reads| {
            if did.starts_with("operator: helm") {
                *reads = Reads::ElsewhereBusy;
            }
        },
        |moves| moves.iter().any(|m| m.starts_with("applied step 5")) || refused_twice(moves),
    );
    assert_nothing_missed();
    assert_old_rules_kept(&world, &moves);
    // The look could not page to the sentinel, yet met only what came after it: what the queue
    // held before them, the sentinel with it, was taken. Never read as a backlog nobody reads.
    let refusals: Vec<&String> = moves
        .iter()
        .filter(|m| m.starts_with("refused at step 4"))
        .collect();
    assert!(
        refusals.len() >= 2
            && refusals.iter().all(|m| m.contains("had to stop")
                && m.contains("every one sent after the sentinel")
                && m.contains("so something still reads it")),
        "{moves:#?}"
    );
}
