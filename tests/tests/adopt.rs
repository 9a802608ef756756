//! `routerctl adopt` against clusters that run Karpenter's own interruption set-ups, while
//! interruptions keep coming: the scene of `routerctl demo --adopt`
//! ([`routerctl::demo::adoption::Estate`]): the real base stack, two clusters with Karpenter's
//! getting-started stack, one with a Terraform-style set-up, one with none; the default bus as AWS
//! runs it (moto delivers to disabled rules too); a Karpenter per cluster that reads one queue
//! and is pointed at the router's queue by "helm" at step 3.
//!
//! The verdict is per event: the queue its cluster's Karpenter was reading when it was sent must
//! have received it. Disabling an old rule too early, a router that does not forward to a new
//! queue, or a rollback that does not re-enable the rules each leave events unread.

use std::time::Duration;

use anyhow::{Context, Result};
use aws_sdk_eventbridge::types::RuleState;
use routerctl::{
    adopt::{self, Outcome, steps::State},
    demo::adoption::{Estate, Move, STACK, STREAM_EVERY, tenant_stack},
    local::{karpenter::report_deleted, old_setups},
};

/// Advances `cluster` until `until` says stop (or it finishes); the moves made.
async fn walk(
    estate: &mut Estate,
    cluster: &str,
    until: impl Fn(&Move) -> bool,
) -> Result<Vec<Move>> {
    let mut moves = Vec::new();
    for _ in 0..200 {
        let made = estate.advance(cluster).await?;
        let stop = until(&made) || made == Move::Finished;
        moves.push(made);
        if stop {
            return Ok(moves);
        }
    }
    anyhow::bail!("{cluster} did not get there in 200 moves: {moves:?}")
}

async fn rule_states(estate: &Estate, prefix: &str) -> Result<Vec<RuleState>> {
    let rules = estate
        .aws
        .events
        .list_rules()
        .name_prefix(prefix)
        .send()
        .await?;
    Ok(rules
        .rules()
        .iter()
        .filter_map(|r| r.state().cloned())
        .collect())
}

#[tokio::test]
async fn adopting_three_clusters_while_events_flow_misses_none_and_survives_a_rollback()
-> Result<()> {
    let mut estate = Estate::start(None, STREAM_EVERY).await?;

    // The plan reads what each cluster runs, by what the resources do, and changes nothing.
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    let text = plan.render();
    let alpha = plan.cluster("alpha").unwrap();
    assert!(
        alpha.today.iter().any(|l| l.contains(
            "old queue alpha, made by stack Karpenter-alpha (KarpenterInterruptionQueue); its \
             Karpenter may read it (KarpenterControllerRole-alpha"
        )),
        "{text}"
    );
    assert!(
        alpha
            .today
            .iter()
            .any(|l| l.contains("5 rule(s) made by stack Karpenter-alpha (5 enabled)")),
        "{text}"
    );
    let gamma = plan.cluster("gamma").unwrap();
    assert!(
        gamma.today.iter().any(|l| l.contains(
            "old queue Karpenter-gamma, made by hand or a tool that tags nothing (no stack); \
             its Karpenter may read it (KarpenterController-gamma"
        )),
        "{text}"
    );
    let delta = plan.cluster("delta").unwrap();
    assert!(
        delta.today[0].starts_with("no interruption set-up found"),
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
    assert!(
        plan.shared.is_empty() && plan.unclaimed.is_empty(),
        "{text}"
    );
    let stacks = estate.aws.cfn.describe_stacks().send().await?;
    assert!(
        stacks
            .stacks()
            .iter()
            .all(|s| !s.stack_name().unwrap_or_default().contains("-tenant-")),
        "a plan deploys nothing"
    );

    // alpha up to step 3, which is the operator's: apply refuses, and no old rule is touched.
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(
            m,
            Move::Applied { step: 2, .. } | Move::Waited { step: 1, .. }
        )
    })
    .await?;
    assert!(
        matches!(moves[0], Move::Applied { step: 1, .. }),
        "{moves:?}"
    );
    let refused = loop {
        let report = estate.adopt(&adopt::Options::apply(STACK, "alpha")).await?;
        match report.outcome {
            Outcome::Refused { step: 3, .. } => break report,
            Outcome::Refused { step: 1, .. } => tokio::time::sleep(Duration::from_secs(1)).await,
            other => anyhow::bail!("expected a refusal at step 3: {other:?}"),
        }
    };
    assert!(!refused.passed());
    let plan_alpha = refused.cluster("alpha").unwrap();
    assert_eq!(plan_alpha.step(5).state, State::Blocked);
    assert!(
        plan_alpha.step(3).detail.contains("not visible from AWS"),
        "{}",
        refused.render()
    );
    assert!(refused.render().contains("helm upgrade karpenter"));
    assert_eq!(
        rule_states(&estate, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );

    // The operator points Karpenter at the new queue; adopt then sees it consume and disables
    // the old rules.
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    assert!(
        matches!(&moves[0], Move::Operator { step: 3, did } if did.contains("karpenter-alpha")),
        "{moves:?}"
    );
    assert_eq!(
        rule_states(&estate, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5]
    );

    // Rollback: the rules feed the old queue again, Karpenter goes back to it, and adopt goes on
    // only once the operator says Karpenter reads the new queue again (--resume) and it is seen
    // consuming it after that.
    let rolled = estate
        .adopt(&adopt::Options::rollback(STACK, "alpha"))
        .await?;
    let Outcome::RolledBack { enabled, helm } = &rolled.outcome else {
        anyhow::bail!("{:?}", rolled.outcome);
    };
    assert_eq!(enabled.len(), 5);
    assert!(helm.contains("settings.interruptionQueue=alpha"), "{helm}");
    assert_eq!(
        rule_states(&estate, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    estate.helm("alpha", "alpha").await?;
    let after = estate.adopt(&adopt::Options::apply(STACK, "alpha")).await?;
    assert!(
        matches!(after.outcome, Outcome::Refused { step: 3, .. }),
        "{}",
        after.render()
    );
    let plan_alpha = after.cluster("alpha").unwrap();
    assert!(plan_alpha.rolled_back);
    assert!(
        plan_alpha.step(3).detail.contains("rolled back at"),
        "{}",
        after.render()
    );
    assert!(after.render().contains("--resume"), "{}", after.render());
    assert_eq!(plan_alpha.step(4).state, State::Blocked);
    assert_eq!(plan_alpha.step(5).state, State::Blocked);
    assert_eq!(
        rule_states(&estate, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );

    // Resume: Karpenter pointed at the new queue again, and adopt told so (--resume); then to
    // the end. Deletions count only from the minute after the resume, so step 4 waits up to a
    // minute (with one probe, not one per run).
    let moves = walk(&mut estate, "alpha", |_| false).await?;
    assert!(
        matches!(&moves[0], Move::Operator { step: 3, did } if did.contains("--resume")),
        "{moves:?}"
    );
    let probes: Vec<&str> = moves
        .iter()
        .filter_map(|m| match m {
            Move::Applied { step: 4, did } => did.split_whitespace().nth(2),
            _ => None,
        })
        .collect();
    assert!(probes.len() <= 1, "{moves:?}");
    let probes: Vec<String> = probes.into_iter().map(str::to_owned).collect();
    assert!(
        moves.iter().any(|m| matches!(m, Move::Operator { step: 6, did } if did.contains("rules from stack Karpenter-alpha"))),
        "{moves:?}"
    );
    assert!(
        moves.iter().any(|m| matches!(m, Move::Operator { step: 7, did } if did.contains("queue from stack Karpenter-alpha"))),
        "{moves:?}"
    );

    // beta and gamma side by side; gamma's Terraform-style set-up is adopt's to delete.
    let mut finished = Vec::new();
    let mut gamma_moves = Vec::new();
    for _ in 0..200 {
        for cluster in ["beta", "gamma"] {
            if finished.contains(&cluster) {
                continue;
            }
            let made = estate.advance(cluster).await?;
            if cluster == "gamma" {
                gamma_moves.push(made.clone());
            }
            if made == Move::Finished {
                finished.push(cluster);
            }
        }
        if finished.len() == 2 {
            break;
        }
    }
    assert_eq!(finished.len(), 2, "{gamma_moves:?}");
    assert!(
        gamma_moves.iter().any(|m| matches!(m, Move::Applied { step: 6, did } if did.contains("KarpenterSpotInterrupt-gamma"))),
        "{gamma_moves:?}"
    );
    assert!(
        gamma_moves.iter().any(
            |m| matches!(m, Move::Applied { step: 7, did } if did.contains("Karpenter-gamma"))
        ),
        "{gamma_moves:?}"
    );

    // Nothing old is left, each tenant stack grants the controller role, and a rollback with no
    // old rule left is refused.
    let rules = estate.aws.events.list_rules().send().await?;
    assert!(
        rules
            .rules()
            .iter()
            .all(|r| r.name().unwrap_or_default().starts_with(STACK)),
        "{:?}",
        rules.rules()
    );
    for queue in ["alpha", "beta", "Karpenter-gamma"] {
        assert!(
            estate.sandbox.queue_url(queue).await.is_err(),
            "{queue} is still there"
        );
    }
    for (cluster, role) in [
        ("alpha", old_setups::getting_started_role("alpha")),
        ("gamma", old_setups::terraform_role("gamma")),
    ] {
        let stack = estate
            .aws
            .cfn
            .describe_stacks()
            .stack_name(tenant_stack(cluster))
            .send()
            .await?;
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
        .adopt(&adopt::Options::rollback(STACK, "gamma"))
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

    // Every event reached the queue its cluster's Karpenter read when it was sent, and no router
    // queue holds another cluster's event.
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    assert_eq!(outcome.misrouted, Vec::<String>::new());
    assert_eq!(outcome.dead_lettered, 0);
    for cluster in ["alpha", "beta", "gamma"] {
        assert_eq!(
            outcome.kinds[cluster].len(),
            5,
            "{cluster}: {:?}",
            outcome.kinds
        );
    }
    assert!(outcome.published >= 100, "{}", outcome.published);
    // A probe adopt sent went through the router to the new queue, where Karpenter read it.
    for probe in &probes {
        assert!(
            outcome
                .probes
                .contains(&("alpha".into(), "karpenter-alpha".into(), probe.clone())),
            "{probe}: {:?}",
            outcome.probes
        );
    }
    Ok(())
}

/// A queue two clusters' Karpenters read (the misconfiguration the router exists for), a queue no
/// cluster can be tied to, a rule whose pattern adopt cannot evaluate, and a cluster with no
/// set-up: each reported as such, and none touched, even once a cluster reading the shared queue
/// has moved to the router.
#[tokio::test]
async fn shared_queues_unclaimed_set_ups_and_unreadable_rules_are_reported_and_left_alone()
-> Result<()> {
    use routerctl::{
        local::moto::{MotoServer, karpenter_tags, launch},
        sandbox::Sandbox,
    };
    use serde_json::json;

    let moto = MotoServer::start().await?;
    let sandbox = Sandbox::deploy(&moto, STACK, &[]).await?;
    let aws = sandbox.aws.clone();
    for cluster in ["epsilon", "zeta", "delta"] {
        launch(&aws.ec2, &karpenter_tags(cluster), 1).await?;
    }
    // One Terraform-style set-up, then a second controller role that reads the same queue.
    let shared = old_setups::terraform_style(&aws, "epsilon").await?;
    let shared_arn = format!("arn:aws:sqs:us-east-1:123456789012:{shared}");
    aws.iam
        .create_role()
        .role_name("KarpenterController-zeta")
        .assume_role_policy_document(
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
            .to_string(),
        )
        .send()
        .await?;
    aws.iam
        .put_role_policy()
        .role_name("KarpenterController-zeta")
        .policy_name("KarpenterController")
        .policy_document(
            json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage",
                    "sqs:GetQueueUrl"], "Resource": shared_arn},
                {"Effect": "Allow", "Action": "eks:DescribeCluster",
                 "Resource": "arn:aws:eks:us-east-1:123456789012:cluster/zeta"}]})
            .to_string(),
        )
        .send()
        .await?;
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
        vec![format!("{shared} read by epsilon, zeta")],
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

    // epsilon moves to the router, as far as its own queue goes ...
    let apply = adopt::Options::apply(STACK, "epsilon");
    let report = adopt::run(&aws, &apply).await?;
    assert!(
        matches!(report.outcome, Outcome::Applied { step: 1, .. }),
        "{}",
        report.render()
    );
    sandbox
        .complete_tenant("epsilon", Some(&old_setups::terraform_role("epsilon")))
        .await?;
    // Karpenter is pointed at it and consumes it.
    tokio::time::sleep(adopt::steps::ROUTER_LEARNS).await;
    report_deleted(&aws, "karpenter-epsilon", 3).await?;
    // ... but the shared queue's rules stay: zeta's Karpenter still reads them.
    let report = adopt::run(&aws, &apply).await?;
    let text = report.render();
    let Outcome::Refused { step: 5, why } = &report.outcome else {
        anyhow::bail!("{text}");
    };
    assert!(why.contains("read by epsilon and zeta"), "{text}");
    let epsilon = report.cluster("epsilon").unwrap();
    assert_eq!(epsilon.step(4).state, State::Done, "{text}");
    assert_eq!(
        rule_states_of(&aws, "KarpenterSpotInterrupt-epsilon").await?,
        RuleState::Enabled
    );
    for rule in ["OrphanSpot", "WildcardSpot"] {
        assert_eq!(rule_states_of(&aws, rule).await?, RuleState::Enabled);
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

async fn rule_states_of(aws: &routerctl::aws::Aws, rule: &str) -> Result<RuleState> {
    Ok(aws
        .events
        .describe_rule()
        .name(rule)
        .send()
        .await?
        .state()
        .cloned()
        .unwrap())
}
