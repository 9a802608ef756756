//! Retiring an old set-up another tool owns, on the model: steps 6 and 7 are then the owner's,
//! and adopt says exactly whose (the stack, with every logical id; the tool, once), and a queue
//! two clusters read is never retired under one of them.

use std::collections::BTreeMap;

use super::{OLD_QUEUE, Reads, World, account, advance, paused, to_the_end, until};

/// Tags every old rule and the old queue with `tags(logical id)`.
fn mark(world: &World, tags: impl Fn(&str) -> BTreeMap<String, String>) {
    world.site(|site| {
        let rules: Vec<(String, String)> = site
            .rules
            .iter()
            .filter(|((_, name), _)| name.starts_with("Karpenter"))
            .filter_map(|((_, name), (rule, _))| Some((name.clone(), rule.arn.clone()?)))
            .collect();
        for (name, arn) in rules {
            site.rule_tags.insert(arn, tags(&name));
        }
        site.queues.get_mut(OLD_QUEUE).unwrap().tags = tags("KarpenterInterruptionQueue");
    });
}

/// The walk until step 6 is refused: the moves, and the refusal.
fn to_step_6(world: &World) -> (Vec<String>, String) {
    paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        loop {
            let did = advance(world, &mut reads).await.unwrap();
            let did = did.unwrap_or_else(|| panic!("finished without step 6: {moves:#?}"));
            if did.starts_with("refused at step 6") {
                return (moves, did);
            }
            moves.push(did);
            // Minutes of moves while SQS's counts decide the round (its sentinel behind what the
            // old rules put in the old queue after the helm command).
            assert!(moves.len() < 200, "{moves:#?}");
        }
    })
}

#[test]
fn a_set_up_a_stack_owns_is_retired_by_updating_that_stack_naming_every_resource() {
    let world = account();
    mark(&world, |logical| {
        BTreeMap::from([
            (
                "aws:cloudformation:stack-name".to_owned(),
                "Karpenter-alpha".to_owned(),
            ),
            (
                "aws:cloudformation:logical-id".to_owned(),
                logical.to_owned(),
            ),
        ])
    });
    let (moves, refused) = to_step_6(&world);
    assert!(
        refused.contains("stack Karpenter-alpha owns the rules (")
            && refused.contains("update it with its template edited"),
        "{refused}"
    );
    let named = world.site(|site| {
        site.rules
            .keys()
            .filter(|(_, name)| name.starts_with("Karpenter"))
            .filter(|(_, name)| refused.contains(name.as_str()))
            .count()
    });
    assert_eq!(named, 5, "every rule's logical id: {refused}");
    assert!(
        moves.iter().any(|m| m.starts_with("applied step 5")),
        "{moves:#?}"
    );
}

#[test]
fn a_set_up_a_tool_made_is_left_to_that_tool_named_once() {
    let world = account();
    mark(&world, |_| {
        BTreeMap::from([("ClusterName".to_owned(), "alpha".to_owned())])
    });
    let (_, refused) = to_step_6(&world);
    assert!(
        refused.contains("made by Terraform (tag ClusterName"),
        "{refused}"
    );
    assert_eq!(
        refused.matches("Terraform (").count(),
        1,
        "the tool named once for its five rules: {refused}"
    );
    assert!(
        refused.contains("adopt deletes no tool's resources"),
        "{refused}"
    );
}

/// Another cluster's Karpenter reads the same old queue: retiring it for alpha would cut beta
/// off, so step 5 is blocked and no rule is disabled.
#[test]
fn an_old_queue_two_clusters_read_is_not_retired_under_one() {
    let world = account();
    super::karpenter_of(&world, "beta", "i-0bbbbbbbbbbbbbbb1");
    let report = paused()
        .block_on(super::run(
            &world,
            &super::Options::plan_of("ir", super::CLUSTER),
        ))
        .unwrap();
    let five = report.cluster(super::CLUSTER).unwrap().step(5).clone();
    assert_eq!(five.state, super::State::Blocked, "{}", report.render());
    assert!(
        five.detail
            .contains("Karpenter-alpha is read by alpha and beta"),
        "{}",
        five.detail
    );
    // The report names it among the queues several clusters read, and no other.
    assert_eq!(
        report.shared,
        ["Karpenter-alpha read by alpha, beta"],
        "{}",
        report.render()
    );
    assert!(
        report.render().contains(
            "\nqueues several clusters read (each Karpenter deletes the others' messages, so each \
             cluster misses interruptions):\n  Karpenter-alpha read by alpha, beta\n"
        ),
        "{}",
        report.render()
    );
    assert!(report.unclaimed.is_empty(), "{}", report.render());
}

/// Once adopt deleted the old rules (step 6) it has marked the old queue, so the queue is still
/// found, and deleted at step 7, when nothing else ties it to alpha any more: here Karpenter's
/// role no longer names it (its grant narrowed to the tenant queue once Karpenter read that).
#[test]
fn an_old_queue_adopt_marked_is_deleted_after_karpenters_role_stops_naming_it() {
    let world = account();
    let moves = paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves = until(&world, &mut reads, "applied step 6").await;
        world.put_role(
            "KarpenterController-alpha",
            vec![serde_json::json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl",
                    "sqs:ReceiveMessage"],
                 "Resource": "arn:aws:sqs:us-east-1:123456789012:karpenter-alpha"},
                {"Effect": "Allow", "Action": "eks:DescribeCluster",
                 "Resource": "arn:aws:eks:us-east-1:123456789012:cluster/alpha"}]})],
            serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        );
        moves.extend(to_the_end(&world, &mut reads).await);
        moves
    });
    assert!(
        moves
            .iter()
            .any(|m| m.starts_with("applied step 7: deleted")),
        "{moves:#?}"
    );
    world.site(|site| assert!(!site.queues.contains_key(OLD_QUEUE), "{moves:#?}"));
}

/// After the walk, with the old queue gone, alpha's controller role is one that names alpha and
/// may read its tenant queue: never a Karpenter-looking role that names no cluster, however much
/// it may read.
#[test]
fn after_the_walk_a_role_naming_no_cluster_is_not_taken_for_alphas_karpenter() {
    let world = account();
    // One runtime for the walk and the plans after it: the model's clock is its paused time.
    let (moves, finished, report) = paused().block_on(async {
        let moves = to_the_end(&world, &mut Reads::Old).await;
        let finished = super::run(&world, &super::Options::plan("ir"))
            .await
            .unwrap();
        world.put_role(
            "KarpenterAudit",
            vec![serde_json::json!({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "sqs:ReceiveMessage",
                 "Resource": "arn:aws:sqs:us-east-1:123456789012:karpenter-*"}]})],
            serde_json::json!({"Version": "2012-10-17", "Statement": []}),
        );
        let report = super::run(&world, &super::Options::plan("ir"))
            .await
            .unwrap();
        (moves, finished, report)
    });
    let done = finished.render();
    assert!(
        done.contains("next: nothing: it is on the router and its old set-up is gone"),
        "{done}"
    );
    assert!(
        done.contains("Karpenter's controller role: KarpenterController-alpha"),
        "{done}"
    );
    // The audit role may read alpha's queue, and adopt says so at step 2; it is not alpha's
    // Karpenter.
    let text = report.render();
    assert!(
        text.contains("Karpenter's controller role: KarpenterController-alpha"),
        "{moves:#?}\n{text}"
    );
    assert!(
        !text.contains("Karpenter's controller role: KarpenterAudit"),
        "{text}"
    );
}

/// Walked over an old queue beta's Karpenter may read too, alpha's round holds but step 5 is
/// blocked, and says why: the old rules stay on.
#[test]
fn a_walk_over_a_shared_old_queue_disables_nothing_and_says_why() {
    let world = account();
    super::karpenter_of(&world, "beta", "i-0bbbbbbbbbbbbbbb1");
    let moves = paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        while !moves
            .last()
            .is_some_and(|m| m.contains("step 5 is blocked"))
        {
            moves.push(advance(&world, &mut reads).await.unwrap().unwrap());
            assert!(moves.len() < 200, "{moves:#?}");
        }
        moves
    });
    assert!(
        moves.last().is_some_and(|m| m.contains(
            "step 5 is blocked: Karpenter-alpha is read by alpha and beta: each Karpenter deletes \
             the others' messages; move every cluster reading it first"
        )),
        "{moves:#?}"
    );
    world.site(|site| assert_eq!(super::old_rules_enabled(site), 5, "{moves:#?}"));
}

/// alpha's set-up as terraform-aws-eks's karpenter module makes it: rules
/// `Karpenter<Kind>-<name_prefix id>` tagged `ClusterName`, the queue `Karpenter-alpha` with no
/// mark of its own. Step 6 hands over the module's one variable, once; the apply it names (the
/// module's queue, rules and its policy's statement on that queue gone; the role and the tenant
/// stack's grant kept) finishes the walk with nothing missed.
#[test]
fn a_set_up_terraform_aws_eks_made_is_retired_by_its_one_variable() {
    let world = account();
    world.site(|site| {
        let old: Vec<(String, String)> = site.rules.keys().cloned().collect();
        for (bus, name) in old.into_iter().filter(|(_, n)| n.ends_with("-alpha")) {
            let (mut rule, targets) = site.rules.remove(&(bus.clone(), name.clone())).unwrap();
            let short = match name
                .trim_start_matches("Karpenter")
                .trim_end_matches("-alpha")
            {
                "spotinterruption" => "SpotInterrupt",
                "rebalancerecommendation" => "InstanceRebalance",
                "statechange" => "InstanceStateChange",
                "scheduledchange" => "HealthEvent",
                "capacityreservationinterruption" => "CRInterruption",
                other => panic!("no module name for {other}"),
            };
            let module = format!("Karpenter{short}-20261118120000000000000001");
            let arn = format!("arn:aws:events:us-east-1:123456789012:rule/{module}");
            rule.arn = Some(arn.clone());
            site.rules.insert((bus, module), (rule, targets));
            site.rule_tags.insert(
                arn,
                BTreeMap::from([("ClusterName".into(), "alpha".into())]),
            );
        }
    });
    // Steps 1 and 3 name the Terraform way: the tenant module, the helm_release's values.
    let plan = paused()
        .block_on(super::run(
            &world,
            &super::Options::plan_of("ir", super::CLUSTER),
        ))
        .unwrap();
    let alpha = plan.cluster(super::CLUSTER).unwrap();
    assert!(
        alpha.today[0].contains("made by Terraform, terraform-aws-eks's karpenter module"),
        "{}",
        plan.render()
    );
    assert!(
        alpha.step(1).detail.contains("terraform/modules/tenant")
            && alpha.step(1).detail.contains("ir-tenant-alpha"),
        "{}",
        plan.render()
    );
    let step_3 = paused().block_on(async {
        let mut reads = Reads::Old;
        for _ in 0..50 {
            let plan = super::run(&world, &super::Options::plan_of("ir", super::CLUSTER))
                .await
                .unwrap();
            let next = plan
                .cluster(super::CLUSTER)
                .unwrap()
                .next()
                .cloned()
                .unwrap();
            if next.number == 3 {
                return next.detail;
            }
            advance(&world, &mut reads).await.unwrap();
        }
        panic!("never at step 3")
    });
    assert!(
        step_3.contains("settings.interruptionQueue = \"karpenter-alpha\" in its values"),
        "{step_3}"
    );
    let (moves, refused) = to_step_6(&world);
    assert!(
        moves
            .iter()
            .any(|m| m.starts_with("operator: helm upgrade")),
        "{moves:#?}"
    );
    assert!(
        refused.contains("made by Terraform, terraform-aws-eks's karpenter module (")
            && refused.contains("set enable_spot_termination = false on that module and apply")
            && refused.contains("settings.interruptionQueue must name karpenter-alpha"),
        "{refused}"
    );
    assert_eq!(
        refused.matches("karpenter module (").count(),
        1,
        "the module named once for its five rules: {refused}"
    );
    // The operator's apply: the module's rules, queue and statement on that queue go at once.
    let rules = world.site(|site| {
        site.rules
            .retain(|(_, name), _| !name.starts_with("Karpenter"));
        site.queues.remove(OLD_QUEUE).is_some()
    });
    assert!(rules, "the old queue was there until the apply");
    {
        let mut state = world.lock();
        let role = state
            .roles
            .get_mut("arn:aws:iam::123456789012:role/KarpenterController-alpha")
            .unwrap();
        for (_, doc) in &mut role.inline {
            let statements = doc["Statement"].as_array_mut().unwrap();
            statements.retain(|s| !s["Resource"].to_string().contains(OLD_QUEUE));
        }
    }
    let (moves, finished) = paused().block_on(async {
        let moves = to_the_end(&world, &mut Reads::Tenant).await;
        let finished = super::run(&world, &super::Options::plan("ir"))
            .await
            .unwrap();
        (moves, finished)
    });
    assert!(
        !moves.iter().any(|m| m.starts_with("applied")),
        "nothing left for adopt: {moves:#?}"
    );
    let done = finished.render();
    assert!(
        done.contains("next: nothing: it is on the router and its old set-up is gone"),
        "{done}"
    );
    super::assert_nothing_missed();
}
