//! adopt's plan on the model: what it reports before and between moves (each step's state as the
//! operator reads it, the helm command handed over only while step 3 waits for it, step 1 waiting
//! exactly as long as the router takes to learn a new queue and step 4 for the round's quiet
//! window, each naming when its wait ends, step 4 saying when Karpenter was seen), and what it
//! refuses to guess (an unreadable pattern, a look-alike queue).

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::{
    CLUSTER, Options, Outcome, Reads, State, TENANT_QUEUE, account, advance, old_rules_enabled,
    paused, run, step_state, until,
};
use crate::adopt::{
    evidence::{EVIDENCE_TAG, QUIET_WINDOW, Round, counts::first_read_after},
    steps::ROUTER_LEARNS,
};
use aws_model::events::rfc3339;

#[test]
fn a_plan_labels_each_step_and_hands_over_the_helm_command_only_while_step_3_waits_for_it() {
    let world = account();
    paused().block_on(async {
        let first = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
        let text = first.render();
        assert!(
            text.contains("1. [to do  ] tenant stack deployed (karpenter-alpha)"),
            "{text}"
        );
        assert!(
            text.contains("3. [blocked] Karpenter pointed at karpenter-alpha"),
            "{text}"
        );
        let alpha = first.cluster(CLUSTER).unwrap();
        // What it runs today: the old queue and how it is tied to alpha, the kinds its rules send.
        assert_eq!(
            alpha.today[..2],
            [
                "old queue Karpenter-alpha, made by hand or a tool that leaves no mark; its \
                 Karpenter may read it (KarpenterController-alpha, whose policy names the cluster)",
                "Karpenter-alpha fed by 5 rule(s) made by hand or a tool that leaves no mark (5 \
                 enabled): capacity-reservation-interruption, rebalance-recommendation, \
                 scheduled-change, spot-interruption, state-change",
            ],
            "{text}"
        );
        assert!(!alpha.rolled_back, "never rolled back: {text}");
        assert!(text.contains("\nalpha: 1 Karpenter node(s)\n"), "{text}");
        assert!(
            first.shared.is_empty() && first.unclaimed.is_empty(),
            "alpha's queue is alpha's alone: {text}"
        );
        for heading in [
            "queues several clusters read",
            "interruption queues no cluster could be tied to",
            "rules adopt could not evaluate",
            "next: wait",
        ] {
            assert!(!text.contains(heading), "{heading}: {text}");
        }
        assert_eq!(
            alpha.step(3).snippet,
            None,
            "no helm command before step 3 is due"
        );
        assert_eq!(
            alpha.step(4).title,
            "Karpenter seen reading karpenter-alpha, nothing reading Karpenter-alpha"
        );

        let mut reads = Reads::Old;
        let due = loop {
            let now = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
            if now.cluster(CLUSTER).unwrap().step(3).state == State::Todo {
                break now;
            }
            advance(&world, &mut reads).await.unwrap().unwrap();
        };
        let text = due.render();
        assert!(text.contains("1. [done   ]"), "{text}");
        assert!(text.contains("3. [to do  ]"), "{text}");
        let snippet = due.cluster(CLUSTER).unwrap().step(3).snippet.clone();
        assert!(
            snippet.is_some_and(|s| s.contains("helm upgrade") && s.contains("karpenter-alpha")),
            "{text}"
        );
    });
}

/// Step 1 waits until every router instance can have learned the new queue: exactly
/// [`ROUTER_LEARNS`] after SQS created it, not a moment less.
#[test]
fn step_1_waits_exactly_as_long_as_the_router_takes_to_learn_the_new_queue() {
    let world = account();
    paused().block_on(async {
        let apply = Options::apply("ir", CLUSTER).delete_hand_made();
        let applied = run(&world, &apply).await.unwrap();
        assert!(
            matches!(applied.outcome, Outcome::Applied { step: 1, .. }),
            "{}",
            applied.render()
        );
        let created: u64 = world.site(|site| {
            site.queues["karpenter-alpha"].attributes["CreatedTimestamp"]
                .parse()
                .unwrap()
        });
        let learnt = UNIX_EPOCH + Duration::from_secs(created) + ROUTER_LEARNS;
        world.advance(learnt.duration_since(world.clock()).unwrap() - Duration::from_secs(1));
        // It names that instant: the operator (or a script) looks again then, not sooner.
        assert_eq!(
            step_state(&world, 1).await,
            State::Waiting {
                until: Some(learnt)
            }
        );
        let waiting = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
        let said = format!(
            "\n  next: wait until {}: karpenter-alpha was created ",
            rfc3339(learnt)
        );
        assert!(
            waiting.render().contains(&said),
            "{said}: {}",
            waiting.render()
        );
        world.advance(Duration::from_secs(1));
        assert_eq!(world.clock(), learnt);
        assert_eq!(step_state(&world, 1).await, State::Done);
    });
}

/// Step 4 waits out the round's quiet window and names when it ends: [`QUIET_WINDOW`] after the
/// round started, or the end of its first whole minute if later, when the round can be read and
/// not a second before.
#[test]
fn step_4_waits_until_the_rounds_quiet_window_has_passed() {
    let world = account();
    paused().block_on(async {
        let mut reads = Reads::Old;
        until(&world, &mut reads, "applied step 3").await;
        let tag = world.site(|site| site.queues[TENANT_QUEUE].tags[EVIDENCE_TAG].clone());
        let round = Round::parse(&tag).unwrap();
        let ripe = round.ripe_at();
        // The quiet window, and the round's first whole minute ended (for SQS's counts, should
        // its look meet a backlog): whichever is later.
        assert!(ripe >= round.started + QUIET_WINDOW);
        assert_eq!(
            ripe,
            (round.started + QUIET_WINDOW).max(first_read_after(round.started))
        );
        assert_eq!(
            step_state(&world, 4).await,
            State::Waiting { until: Some(ripe) }
        );
        world.advance(ripe.duration_since(world.clock()).unwrap() - Duration::from_secs(1));
        assert_eq!(
            step_state(&world, 4).await,
            State::Waiting { until: Some(ripe) }
        );
        world.advance(Duration::from_secs(1));
        assert_eq!(step_state(&world, 4).await, State::Todo);
    });
}

/// Once the round's evidence was recorded, step 4 says when Karpenter was seen and what it read.
#[test]
fn once_seen_step_4_says_when_and_what_was_read() {
    let world = account();
    paused().block_on(async {
        let mut reads = Reads::Old;
        until(&world, &mut reads, "applied step 5").await;
        let report = run(&world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
        let four = report.cluster(CLUSTER).unwrap().step(4).clone();
        assert_eq!(four.state, State::Done);
        assert!(
            four.detail.starts_with("seen at 2026-11-28T")
                && four
                    .detail
                    .ends_with("it read karpenter-alpha and nothing read Karpenter-alpha"),
            "{}",
            four.detail
        );
    });
}

/// A rule whose pattern the matcher cannot read is reported, never guessed, and a plan changes
/// nothing.
#[test]
fn a_plan_reports_a_pattern_it_cannot_read_and_changes_nothing() {
    let world = account();
    // A pattern with a filter the matcher does not read.
    world.put_rule(
        "KarpenterOdd-alpha",
        &json!({"source": ["aws.ec2"], "detail-type": [{"wildcard": "EC2 Spot*"}]}),
        &[("Odd", "arn:aws:sqs:us-east-1:123456789012:Karpenter-alpha")],
    );
    let report = paused()
        .block_on(run(&world, &Options::plan("ir")))
        .unwrap();
    assert!(
        report
            .unreadable
            .iter()
            .any(|(rule, _)| rule == "KarpenterOdd-alpha"),
        "{:?}",
        report.unreadable
    );
    assert!(
        report
            .render()
            .contains("\nrules adopt could not evaluate (left alone):\n  KarpenterOdd-alpha: "),
        "{}",
        report.render()
    );
    world.site(|site| {
        let enabled = old_rules_enabled(site);
        assert_eq!(enabled, 6);
        assert!(!site.queues.contains_key(TENANT_QUEUE));
        assert!(!site.stacks.contains_key("ir-tenant-alpha"));
    });
}

/// A queue with the router's name for the cluster, made by another tool (no tenant tag, no
/// policy for the router): the router would never write it, so adopt says the name is taken and
/// deploys nothing over it.
#[test]
fn a_look_alike_queue_with_the_routers_name_stops_step_1() {
    let world = account();
    world.create_queue(TENANT_QUEUE, &[]);
    let report = paused()
        .block_on(run(&world, &Options::plan_of("ir", CLUSTER)))
        .unwrap();
    let plan = report.cluster(CLUSTER).unwrap();
    let first = &plan.steps[0];
    assert_eq!(first.number, 1);
    assert_ne!(first.state, State::Done, "{first:?}");
    // Whose it is (no set-up adopt knows), and the way out while no tenant uses the prefix.
    let said = format!("{first:?}");
    assert!(said.contains("no set-up adopt knows"), "{said}");
    assert!(
        said.contains("give the router a queue prefix no other tool uses"),
        "{said}"
    );
    assert!(
        plan.today
            .iter()
            .any(|t| t.contains("tenant stack did not make it")),
        "{:?}",
        plan.today
    );
    let applied = paused().block_on(run(&world, &Options::apply("ir", CLUSTER)));
    assert!(
        !matches!(
            applied.as_ref().map(|r| &r.outcome),
            Ok(Outcome::Applied { step: 1, .. })
        ),
        "{applied:?}"
    );
    world.site(|site| assert!(!site.stacks.contains_key("ir-tenant-alpha")));
}

/// A queue `queue` in alpha's account and a rule `rule` sending it spot warnings: someone's
/// interruption set-up. The queue's ARN.
fn spot_set_up(world: &crate::cloud::model::World, queue: &str, rule: &str) -> String {
    let arn = format!("arn:aws:sqs:us-east-1:123456789012:{queue}");
    world.create_queue(queue, &[]);
    world.put_rule(
        rule,
        &json!({"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}),
        &[("Target", &arn)],
    );
    arn
}

/// What the plan reads as alpha's today, with `change` made to the account first.
fn today_after(
    change: impl FnOnce(&crate::cloud::model::World),
) -> (Vec<String>, crate::adopt::Report) {
    let world = account();
    change(&world);
    let report = paused()
        .block_on(run(&world, &Options::plan("ir")))
        .unwrap();
    (report.cluster(CLUSTER).unwrap().today.clone(), report)
}

/// Terraform's modules tag only their rules: the queue they feed, with no mark of its own, is
/// theirs too, never taken for hand-made.
#[test]
fn a_queue_whose_rules_alone_carry_terraforms_mark_is_terraforms() {
    let (today, report) = today_after(|world| {
        world.site(|site| {
            let arns: Vec<String> = site
                .rules
                .iter()
                .filter(|((_, name), _)| name.starts_with("Karpenter"))
                .filter_map(|(_, (rule, _))| rule.arn.clone())
                .collect();
            for arn in arns {
                site.rule_tags
                    .insert(arn, [("ClusterName".to_owned(), "alpha".to_owned())].into());
            }
        });
    });
    assert!(
        today[0].starts_with(
            "old queue Karpenter-alpha, made by Terraform (its rules' marks: tag ClusterName"
        ),
        "{}",
        report.render()
    );
}

/// Rules deleted by hand while Karpenter may still read the queue: it is still alpha's old
/// set-up, fed by nothing.
#[test]
fn an_old_queue_karpenter_may_read_is_found_with_no_rule_left() {
    let (today, report) = today_after(|world| {
        world.site(|site| {
            site.rules
                .retain(|(_, name), _| !name.starts_with("Karpenter"))
        });
    });
    assert!(
        today[0].starts_with("old queue Karpenter-alpha, made by hand"),
        "{}",
        report.render()
    );
    assert!(
        today.iter().any(|t| t.contains("no rule")),
        "{}",
        report.render()
    );
}

/// A queue and a rule no cluster's Karpenter is tied to: reported as unclaimed, left alone. Its
/// name ends in alpha's, but only Karpenter's naming (`Karpenter-<cluster>`, `<cluster>-karpenter…`)
/// ties a queue to a cluster by name.
#[test]
fn a_set_up_no_cluster_is_tied_to_is_reported_unclaimed() {
    let (_, report) = today_after(|world| {
        spot_set_up(world, "interruptions-alpha", "OldSpotRule");
    });
    assert_eq!(report.unclaimed.len(), 1, "{}", report.render());
    assert!(
        report.render().contains(
            "\ninterruption queues no cluster could be tied to (name one's Karpenter role with \
             --karpenter-role <cluster>=<role>; adopt leaves them alone):\n  interruptions-alpha ("
        ),
        "{}",
        report.render()
    );
    assert!(
        report.unclaimed[0].starts_with("interruptions-alpha (1 rule(s) made by hand"),
        "{}",
        report.render()
    );
    assert!(report.shared.is_empty(), "{}", report.render());
}

/// A Karpenter-looking role whose DescribeCluster grant is `cluster/*` names no cluster: the
/// queue it may read is tied to none (and no cluster called `*` appears).
#[test]
fn a_role_describing_every_cluster_ties_its_queue_to_none() {
    let (_, report) = today_after(|world| {
        let arn = spot_set_up(world, "interruptions-shared", "SharedSpotRule");
        world.put_role(
            "KarpenterShared",
            vec![json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": arn},
                {"Effect": "Allow", "Action": "eks:DescribeCluster",
                 "Resource": "arn:aws:eks:us-east-1:123456789012:cluster/*"}]})],
            json!({"Version": "2012-10-17", "Statement": []}),
        );
    });
    let text = report.render();
    assert!(
        report.unclaimed.len() == 1
            && report.unclaimed[0].starts_with("interruptions-shared (")
            && report.unclaimed[0]
                .ends_with("; readable by KarpenterShared, whose policies name no cluster)"),
        "{text}"
    );
    assert!(report.cluster("*").is_none(), "{text}");
}

/// A rule that sends to a queue of another account, named like alpha's old queue: not this
/// account's to adopt, and never mistaken for the local queue of that name.
#[test]
fn a_rule_targeting_another_accounts_namesake_queue_is_not_this_accounts() {
    let (today, report) = today_after(|world| {
        world.put_rule(
            "KarpenterCentral-alpha",
            &json!({"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]}),
            &[("Central", "arn:aws:sqs:us-east-1:999999999999:Karpenter-alpha")],
        );
    });
    let old_queues = today.iter().filter(|t| t.starts_with("old queue")).count();
    assert_eq!(old_queues, 1, "{}", report.render());
    assert!(
        !report.render().contains("KarpenterCentral-alpha"),
        "{}",
        report.render()
    );
}

/// A rule deleted between adopt's ListRules and its ListTargetsByRule (a colleague's clean-up,
/// another cluster's adopt, Terraform's apply) routes nothing any more: the plan reads on without
/// it, instead of failing on EventBridge's ResourceNotFoundException.
#[test]
fn a_rule_deleted_while_the_plan_reads_the_rules_is_left_out() {
    let (today, report) = today_after(|world| {
        spot_set_up(world, "colleagues-queue", "ColleaguesSpotRule");
        let other = world.clone();
        world.before_next("ListTargetsByRule", move || {
            other.site(|site| {
                site.rules
                    .retain(|(_, name), _| name != "ColleaguesSpotRule")
            });
        });
    });
    let text = report.render();
    assert!(!text.contains("colleagues-queue"), "{text}");
    assert!(
        today[0].starts_with("old queue Karpenter-alpha, made by hand"),
        "{text}"
    );
}
