//! `routerctl adopt` against clusters that run other tools' interruption set-ups, while
//! interruptions keep coming, with AWS's hazards in ([`routerctl::demo::adoption::Estate`]): the
//! default bus applies rule changes seconds late, SQS's deletion metrics arrive minutes late and
//! per minute, each Karpenter long-polls 20 s on its leader and hands over on a settings change.
//!
//! The verdict is per event: the queue its cluster's Karpenter was pointed at when it was sent
//! must have received it, once. Each test plays one way the switch goes wrong in production: a
//! GitOps controller putting the old queue back, a helm command run in another cluster's
//! kube-context, a rollback followed at once by its helm command, EKS Blueprints' queue that
//! carries the router's name.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_model::aws::Aws;
use aws_sdk_eventbridge::types::RuleState;
use local_aws::karpenter::{Behaviour, Karpenter};
use routerctl::{
    adopt::{self, Outcome, evidence::QUIET_WINDOW, steps::State},
    demo::adoption::{Estate, Move, STACK, Scene, tenant_stack},
    demo::old_setups::Flavour,
    verify,
};
use serde_json::json;

/// A scene of these clusters, as the demo's otherwise.
fn scene(clusters: &[(&str, Option<Flavour>)]) -> Scene {
    Scene {
        clusters: clusters.iter().map(|(c, f)| (c.to_string(), *f)).collect(),
        ..Scene::demo()
    }
}

/// Advances `cluster` until `until` says stop (or it finishes); the moves made.
async fn walk(
    estate: &mut Estate,
    cluster: &str,
    until: impl Fn(&Move) -> bool,
) -> Result<Vec<Move>> {
    let mut moves = Vec::new();
    for _ in 0..600 {
        let made = estate.advance(cluster).await?;
        let stop = until(&made) || made == Move::Finished;
        moves.push(made);
        if stop {
            return Ok(moves);
        }
    }
    anyhow::bail!("{cluster} did not get there in 600 moves: {moves:?}")
}

/// A cluster to walk and where its walk stops.
type Walk<'a> = (&'a str, &'a dyn Fn(&Move) -> bool);

/// Advances several clusters side by side, a move each in turn, each until its own `until` says
/// stop (or it finishes), so that their rounds of evidence overlap as they would when an operator
/// adopts several clusters at once; the moves made, per cluster, in the order given.
async fn walk_together(estate: &mut Estate, clusters: &[Walk<'_>]) -> Result<Vec<Vec<Move>>> {
    let mut moves = vec![Vec::new(); clusters.len()];
    let mut done = vec![false; clusters.len()];
    for _ in 0..600 {
        for (i, (cluster, until)) in clusters.iter().enumerate() {
            if done[i] {
                continue;
            }
            let made = estate.advance(cluster).await?;
            done[i] = until(&made) || made == Move::Finished;
            moves[i].push(made);
        }
        if done.iter().all(|d| *d) {
            return Ok(moves);
        }
    }
    anyhow::bail!("not every cluster got there in 600 rounds of moves: {moves:?}")
}

/// The probe each round sent (from the moves that started rounds).
fn probes(moves: &[Move]) -> Vec<String> {
    moves
        .iter()
        .filter_map(|m| match m {
            Move::Applied { step: 3, did } => did.split_whitespace().nth(2).map(str::to_owned),
            _ => None,
        })
        .collect()
}

async fn rule_states(aws: &Aws, prefix: &str) -> Result<Vec<RuleState>> {
    let rules = aws.events.list_rules().name_prefix(prefix).send().await?;
    Ok(rules
        .rules()
        .iter()
        .filter_map(|r| r.state().cloned())
        .collect())
}

/// A Karpenter controller role for `cluster` (its `eks:DescribeCluster` grant names it) that may
/// read `queues` (names; `*` as IAM reads it), in the emulator's account and region.
async fn controller_role(aws: &Aws, role: &str, cluster: &str, queues: &[&str]) -> Result<()> {
    routerctl::demo::sandbox::create_karpenter_role(&aws.iam, role).await?;
    let arns: Vec<String> = queues
        .iter()
        .map(|q| format!("arn:aws:sqs:us-east-1:123456789012:{q}"))
        .collect();
    aws.iam
        .put_role_policy()
        .role_name(role)
        .policy_name("controller")
        .policy_document(
            json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage",
                    "sqs:GetQueueUrl"], "Resource": arns},
                {"Effect": "Allow", "Action": "eks:DescribeCluster",
                 "Resource": format!("arn:aws:eks:us-east-1:123456789012:cluster/{cluster}")}]})
            .to_string(),
        )
        .send()
        .await?;
    Ok(())
}

/// `routerctl verify --cluster <cluster>` against the scene's base stack.
async fn verify_cluster(aws: &Aws, cluster: &str) -> verify::Report {
    verify::run(
        aws,
        &verify::Options {
            stack: STACK.into(),
            clusters: vec![cluster.into()],
            ..verify::Options::default()
        },
    )
    .await
}

/// Waits until `cluster`'s round can be read.
async fn until_ripe() {
    tokio::time::sleep(QUIET_WINDOW + Duration::from_secs(1)).await;
}

#[tokio::test]
async fn adopting_every_kind_of_set_up_while_events_flow_misses_none_and_survives_a_rollback()
-> Result<()> {
    let mut estate = Estate::start(None, Scene::demo()).await?;

    // The plan reads what each cluster runs, by what the resources do, and changes nothing.
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    let today = |cluster: &str| plan.cluster(cluster).unwrap().today.join("\n");
    assert!(
        today("alpha").contains(
            "old queue alpha, made by stack Karpenter-alpha (KarpenterInterruptionQueue); its \
             Karpenter may read it (KarpenterControllerRole-alpha"
        ),
        "{text}"
    );
    assert!(
        today("beta").contains("made by Terraform (tag ClusterName"),
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

    // alpha up to the helm command: the plan prints it with its kube-context; --apply before
    // the operator ran it starts a check, which would fail; no rule is touched until then.
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Operator { step: 3, .. })
    })
    .await?;
    assert!(
        matches!(moves[0], Move::Applied { step: 1, .. }),
        "{moves:?}"
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );

    // To step 5, with gamma and beta walking beside it (their rounds of evidence overlap
    // alpha's): the round's probe taken from the new queue, its sentinel untouched in the old.
    let at_step_5 = |m: &Move| matches!(m, Move::Applied { step: 5, .. });
    let walked = walk_together(
        &mut estate,
        &[
            ("alpha", &at_step_5),
            ("gamma", &at_step_5),
            ("beta", &at_step_5),
        ],
    )
    .await?;
    let [moves, gamma_moves, beta_moves] = <[Vec<Move>; 3]>::try_from(walked)
        .map_err(|w| anyhow::anyhow!("three walks, not {}", w.len()))?;
    let mut sent = probes(&moves);
    assert_eq!(sent.len(), 1, "{moves:?}");
    sent.extend(probes(&gamma_moves));
    sent.extend(probes(&beta_moves));
    let Some(Move::Applied { did, .. }) = moves.last() else {
        anyhow::bail!("{moves:?}");
    };
    assert!(did.contains("was taken from karpenter-alpha"), "{did}");
    assert!(
        did.contains("is still in alpha, received by nobody"),
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

    // Everyone to the end, side by side (alpha moves again after its rollback).
    let mut finished = Vec::new();
    let mut all = Vec::new();
    for _ in 0..1000 {
        for cluster in ["alpha", "beta", "gamma"] {
            if finished.contains(&cluster) {
                continue;
            }
            let made = estate.advance(cluster).await?;
            if made == Move::Finished {
                finished.push(cluster);
            }
            all.push((cluster, made));
        }
        if finished.len() == 3 {
            break;
        }
    }
    assert_eq!(finished.len(), 3, "{all:?}");
    let by = |cluster: &str| -> Vec<Move> {
        all.iter()
            .filter(|(c, _)| *c == cluster)
            .map(|(_, m)| m.clone())
            .collect()
    };
    sent.extend(
        all.iter()
            .flat_map(|(_, m)| probes(std::slice::from_ref(m))),
    );
    // The getting-started stack edited with --stack-template, Terraform's set-up removed by
    // Terraform, the one made by hand deleted by adopt.
    assert!(
        by("alpha").iter().any(|m| matches!(m, Move::Operator { step: 7, did } if did.contains("--stack-template") && did.contains("InterruptionPolicy now grant"))),
        "{:?}",
        by("alpha")
    );
    assert!(
        by("beta").iter().any(
            |m| matches!(m, Move::Operator { step: 6, did } if did.contains("terraform apply"))
        ),
        "{:?}",
        by("beta")
    );
    assert!(
        by("gamma").iter().any(|m| matches!(m, Move::Applied { step: 6, did } if did.contains("KarpenterSpotInterrupt-gamma"))),
        "{:?}",
        by("gamma")
    );

    // Nothing old is left; each tenant stack grants the controller role; a rollback with no old
    // rule left is refused.
    let rules = estate.aws.events.list_rules().send().await?;
    assert!(
        rules
            .rules()
            .iter()
            .all(|r| r.name().unwrap_or_default().starts_with(STACK)),
        "{:?}",
        rules.rules()
    );
    for queue in ["alpha", "Karpenter-beta", "Karpenter-gamma"] {
        assert!(
            estate.sandbox.queue_url(queue).await.is_err(),
            "{queue} is still there"
        );
    }
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
    for cluster in ["alpha", "beta", "gamma"] {
        assert!(
            last.cluster(cluster).unwrap().next().is_none(),
            "{}",
            last.render()
        );
    }

    // Every event reached the queue its cluster's Karpenter was pointed at when it was sent,
    // once; no router queue holds another cluster's event.
    let clusters = estate.clusters.keys().cloned().collect::<Vec<_>>();
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    assert!(outcome.duplicates.is_empty(), "{:?}", outcome.duplicates);
    assert_eq!(outcome.dead_lettered, 0);
    for cluster in ["alpha", "beta", "gamma"] {
        assert_eq!(
            outcome.kinds[cluster].len(),
            5,
            "{cluster}: {:?}",
            outcome.kinds
        );
    }
    assert!(outcome.published >= 300, "{}", outcome.published);
    // Each round's probe went through the router to its cluster's new queue, where that
    // cluster's Karpenter read it; no sentinel was read (each Karpenter had left its old queue).
    assert_eq!(sent.len(), 4, "alpha twice, beta and gamma once: {sent:?}");
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
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    assert_eq!(
        rule_states(&aws, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5],
        "{moves:?}"
    );
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    // The sentinel the failed check left was taken by alpha's Karpenter, from alpha.
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
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    assert_eq!(
        rule_states(&aws, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5],
        "{moves:?}"
    );
    zeta.stop().await?;
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    // The sentinel the failed check left was taken by alpha's Karpenter, from alpha.
    assert_eq!(outcome.sentinels.len(), 1, "{:?}", outcome.sentinels);
    assert!(
        outcome
            .sentinels
            .iter()
            .all(|(cluster, queue, _)| cluster == "alpha" && queue == "alpha"),
        "{:?}",
        outcome.sentinels
    );
    let zeta_took = zeta
        .reads()
        .iter()
        .filter(|r| r.queue == "karpenter-alpha")
        .count();
    assert!(zeta_took > 0, "zeta's Karpenter read karpenter-alpha");
    Ok(())
}

/// EventBridge applies EnableRule "after a short period". A rollback that returned at once would
/// have its helm command move Karpenter back to the old queue before the old rules deliver again:
/// what comes meanwhile reaches only the new queue, which Karpenter has left. The stand-in's
/// delay has those teeth (a rollback without the wait loses events here); adopt's wait does not.
#[tokio::test]
async fn a_rollback_returns_once_the_old_rules_deliver_so_its_helm_command_misses_nothing()
-> Result<()> {
    for settle in [Duration::ZERO, Scene::demo().settle()] {
        let mut estate =
            Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
        walk(&mut estate, "alpha", |m| {
            matches!(m, Move::Applied { step: 5, .. })
        })
        .await?;
        let rolled = estate
            .adopt(&adopt::Options::rollback(STACK, "alpha").settle(settle))
            .await?;
        assert!(
            matches!(rolled.outcome, Outcome::RolledBack { .. }),
            "{}",
            rolled.render()
        );
        // The operator runs the printed helm command the moment it appears.
        estate.helm("alpha", "alpha").await?;
        tokio::time::sleep(estate.scene.rule_delay * 2).await;
        let outcome = estate.finish().await?;
        if settle.is_zero() {
            assert!(
                !outcome.missed.is_empty(),
                "a rollback that does not wait for EventBridge must lose events here"
            );
        } else {
            assert_eq!(outcome.missed, Vec::<String>::new());
        }
    }
    Ok(())
}

/// EKS Blueprints names its Karpenter queue `karpenter-<cluster>`, the router's default name, and
/// feeds it with its own rules. The router writes nothing into it (its Karpenter reads each event
/// once); adopt shows it as an old set-up made by Terraform, and plans the tenant queue around
/// the name; verify says why the cluster is not onboarded.
#[tokio::test]
async fn a_blueprints_queue_with_the_routers_name_is_an_old_set_up_not_a_tenant() -> Result<()> {
    let estate = Estate::start(None, scene(&[("bp", Some(Flavour::Blueprints))])).await?;
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    let bp = plan.cluster("bp").context("bp")?;
    let today = bp.today.join("\n");
    assert!(
        today.contains("old queue karpenter-bp, made by Terraform (its rules' marks"),
        "{text}"
    );
    assert!(
        today.contains("4 rule(s) made by Terraform (tag ClusterName"),
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
    assert!(outcome.published >= 40, "{}", outcome.published);
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
    use local_aws::moto::{MotoServer, karpenter_tags, launch};
    use routerctl::demo::{old_setups, sandbox::Sandbox};

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
