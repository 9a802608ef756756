//! adopt's walk on the model of AWS ([`crate::cloud::model`]) in tokio's paused time: a cluster
//! whose interruption set-up was made by hand (a queue, five rules, Karpenter's role) moved onto
//! the router step by step, the operator's helm command and the waits (the router learning a
//! new queue, the round's quiet window, EventBridge's settle) played as they happen, and the
//! hazards that must stop it: Karpenter still reading the old queue when the round is read, and a
//! rollback that does not wait for EventBridge (the model applies a rule change 5 s late).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Options, Outcome, run, steps::State};

mod backlog;
mod busy;
mod plan;
mod retiring;
mod wrong_reader;
use crate::cloud::{Cloud, deliveries::Invoked, model::World};
use aws_model::stacks::BASE_TEMPLATE;
use router_core::event::Kind;

const CLUSTER: &str = "alpha";
const OLD_QUEUE: &str = "Karpenter-alpha";
const TENANT_QUEUE: &str = "karpenter-alpha";
const NODE: &str = "i-0aaaaaaaaaaaaaaa1";

/// Which queue Karpenter's controller reads (its settings.interruptionQueue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    Old,
    Tenant,
    /// The helm command ran in another cluster's kube-context: alpha's Karpenter still reads the
    /// old queue, and that cluster's (whose role may read `karpenter-*`) reads alpha's tenant
    /// queue, deleting what it takes as another cluster's.
    Elsewhere,
    /// [`Reads::Elsewhere`] in a busy account: between alpha's Karpenter's polls, the account's
    /// unfiltered old rules put more of its other interruptions into the old queue than a look
    /// can page through, so a look never runs dry.
    ElsewhereBusy,
    /// Back on the old queue (a GitOps controller reverted the helm value) with a backlog in it:
    /// Karpenter receives ten at a time, oldest first, and deletes them, one receive per move.
    OldBacklog,
}

/// The hub with alpha's set-up made by hand: the old queue, a rule per kind targeting it,
/// Karpenter's controller role (allowed the old queue and alpha's DescribeCluster), a node; the
/// router function runs the router, which forwards to the cluster's tenant queue once there is
/// one.
fn account() -> World {
    let world = World::new("123456789012", "us-east-1");
    let base = world
        .deploy("ir", BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    let old_arn = format!("arn:aws:sqs:us-east-1:123456789012:{OLD_QUEUE}");
    let policy = json!({"Version": "2012-10-17", "Statement": [{"Sid": "SendEventsToQueue",
        "Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
        "Action": "sqs:SendMessage", "Resource": old_arn}]});
    world.create_queue(OLD_QUEUE, &[("Policy", &policy.to_string())]);
    for kind in Kind::ALL {
        let pattern = json!({"source": [kind.source()], "detail-type": [kind.detail_type()]});
        world.put_rule(
            &format!("Karpenter{}-alpha", kind.label().replace('-', "")),
            &pattern,
            &[("KarpenterInterruptionQueueTarget", &old_arn)],
        );
    }
    karpenter_of(&world, CLUSTER, NODE);
    // The function is the router itself: this release's handler, configured and permitted as
    // base.yaml configures and permits it, forwarding into the tenant queue once tenant.yaml
    // made it (and ignoring what it cannot route until then).
    aws_world::router::run_router(&world, &base.outputs["FunctionName"]);
    world
}

/// `cluster`'s Karpenter as its getting-started set-up makes it: a controller role allowed the
/// old queue and its cluster's DescribeCluster, and a node of the cluster with id `node`.
fn karpenter_of(world: &World, cluster: &str, node: &str) {
    let old_arn = format!("arn:aws:sqs:us-east-1:123456789012:{OLD_QUEUE}");
    world.put_role(
        &format!("KarpenterController-{cluster}"),
        vec![json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl",
                "sqs:ReceiveMessage"], "Resource": old_arn},
            {"Effect": "Allow", "Action": "eks:DescribeCluster",
             "Resource": format!("arn:aws:eks:us-east-1:123456789012:cluster/{cluster}")}]})],
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
    );
    world.instance(
        node,
        "running",
        &[
            ("eks:eks-cluster-name", cluster),
            ("karpenter.sh/nodepool", "default"),
        ],
    );
}

/// What Karpenter of alpha received of the interruptions the account's bus carried during a
/// walk: each must reach it, whichever queue it read when the interruption came.
#[derive(Default)]
struct Ledger {
    sent: Vec<String>,
    received: std::collections::BTreeSet<String>,
}

thread_local! {
    static LEDGER: std::cell::RefCell<Ledger> = std::cell::RefCell::new(Ledger::default());
}

/// An interruption of alpha's node on the default bus, the router's mapping handing what the
/// ingest queue got to the function, and Karpenter reading the queue it reads.
async fn traffic(world: &World, reads: Reads) {
    let n = LEDGER.with(|l| l.borrow().sent.len());
    let origin = aws_model::events::Origin {
        account: "123456789012".into(),
        region: "us-east-1".into(),
    };
    let id = format!("alpha-spot-{n}");
    world.publish(&origin.spot_warning(NODE, &id).event);
    LEDGER.with(|l| l.borrow_mut().sent.push(id));
    let ingest = world.site(|site| {
        site.queues
            .keys()
            .find(|q| q.ends_with("-ingest") || q.contains("IngestQueue"))
            .cloned()
    });
    let bodies = ingest.map(|q| world.take(&q)).unwrap_or_default();
    if !bodies.is_empty() {
        let records: Vec<Value> = bodies
            .iter()
            .enumerate()
            .map(|(i, body)| json!({"messageId": format!("m{i}"), "body": body, "eventSource": "aws:sqs"}))
            .collect();
        let function = world.site(|site| site.stacks["ir"].stack.outputs["FunctionName"].clone());
        let _ = crate::cloud::deliveries::Deliveries::invoke(
            world,
            &function,
            json!({"Records": records}).to_string(),
        )
        .await;
    }
    if matches!(reads, Reads::Elsewhere | Reads::ElsewhereBusy) {
        world.take(TENANT_QUEUE);
    }
    let read = match reads {
        Reads::Old | Reads::Elsewhere | Reads::ElsewhereBusy => world.take(OLD_QUEUE),
        Reads::Tenant => world.take(TENANT_QUEUE),
        Reads::OldBacklog => receive_once(world, OLD_QUEUE),
    };
    if reads == Reads::ElsewhereBusy {
        let n = LEDGER.with(|l| l.borrow().sent.len());
        for m in 0..crate::adopt::evidence::look::MAX_LOOK_RECEIVES * 10 + 100 {
            let body = json!({"version": "0", "id": format!("account-{n}-{m}"),
                "source": "test.account", "detail-type": "another cluster's event"});
            world.deliver(OLD_QUEUE, &body.to_string());
        }
    }
    LEDGER.with(|l| {
        let mut l = l.borrow_mut();
        for body in read {
            if let Some(id) = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|b| b["id"].as_str().map(str::to_owned))
            {
                l.received.insert(id);
            }
        }
    });
}

/// One of Karpenter's receives from `queue` (ten messages at most, oldest first), each deleted:
/// their bodies.
fn receive_once(world: &World, queue: &str) -> Vec<String> {
    let Some(url) = world.site(|site| site.queues.get(queue).map(|q| q.url.clone())) else {
        return Vec::new();
    };
    let received = world.sqs_receive(&url, 20).unwrap_or_default();
    for message in &received {
        let _ = world.sqs_delete(&url, &message.receipt_handle);
    }
    received.into_iter().map(|m| m.body).collect()
}

/// Moves until `done` says the walk has gone far enough (60 at most), `react` changing what the
/// operator's side does after each (the move, the moves before it, Karpenter's queue); then a
/// last interruption, so every one of them is accounted for.
fn play(
    world: &World,
    mut react: impl FnMut(&str, &[String], &mut Reads),
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        while !done(&moves) && moves.len() <= 60 {
            let did = advance(world, &mut reads).await.unwrap().unwrap();
            react(&did, &moves, &mut reads);
            moves.push(did);
        }
        traffic(world, reads).await;
        moves
    })
}

/// The old set-up's rules still enabled.
fn old_rules_enabled(site: &crate::cloud::model::Site) -> usize {
    site.rules
        .iter()
        .filter(|((_, name), (rule, _))| {
            name.starts_with("Karpenter") && rule.state.as_deref() == Some("ENABLED")
        })
        .count()
}

/// Nothing disabled the old path: no move applied step 5, and the five old rules are all on.
fn assert_old_rules_kept(world: &World, moves: &[String]) {
    assert!(
        !moves.iter().any(|m| m.starts_with("applied step 5")),
        "rules disabled while Karpenter of alpha reads the old queue: {moves:#?}"
    );
    world.site(|site| assert_eq!(old_rules_enabled(site), 5, "the old rules stay on"));
}

/// Every interruption of the walk reached Karpenter, through the old queue or the router, and
/// there were enough of them to say so.
fn assert_nothing_missed() {
    let (sent, received) = LEDGER.with(|l| (l.borrow().sent.len(), l.borrow().received.len()));
    assert!(
        sent > 10 && received > 10,
        "{sent} sent, {received} received"
    );
    assert_eq!(
        missed(),
        Vec::<String>::new(),
        "interruptions Karpenter never received"
    );
}

/// The interruptions Karpenter never received.
fn missed() -> Vec<String> {
    LEDGER.with(|l| {
        let l = l.borrow();
        l.sent
            .iter()
            .filter(|id| !l.received.contains(*id))
            .cloned()
            .collect()
    })
}

/// One move, as the operator makes it: the helm command where the plan hands it over, a wait
/// where a step waits, a purge where the old queue holds only what nobody reads, else `--apply`
/// (with the operator's word that the set-up was made by hand). Before each move an
/// interruption comes and Karpenter reads its queue ([`traffic`]). What happened, in a line.
async fn advance(world: &World, reads: &mut Reads) -> anyhow::Result<Option<String>> {
    traffic(world, *reads).await;
    let plan = run(world, &Options::plan_of("ir", CLUSTER)).await?;
    let next = plan.cluster(CLUSTER).and_then(|c| c.next()).cloned();
    if let Some(next) = next {
        match (next.number, &next.state) {
            (3, State::Todo) if *reads == Reads::Old => {
                *reads = Reads::Tenant;
                return Ok(Some(
                    "operator: helm upgrade (Karpenter reads the tenant queue)".into(),
                ));
            }
            // An operator who looks every 5 s, whatever the plan says to wait until: each look
            // lets an interruption come, and the hazards below play between looks.
            (1 | 4, State::Waiting { .. }) => {
                tokio::time::sleep(Duration::from_secs(5)).await;
                return Ok(Some(format!("waited at step {}", next.number)));
            }
            (7, State::Waiting { .. }) => {
                world.site(|site| site.queues.get_mut(OLD_QUEUE).map(|q| q.messages.clear()));
                return Ok(Some("operator: aws sqs purge-queue".into()));
            }
            _ => {}
        }
    }
    let options = Options::apply("ir", CLUSTER).delete_hand_made();
    Ok(match run(world, &options).await?.outcome {
        Outcome::Finished => None,
        Outcome::Applied { step, did } => Some(format!("applied step {step}: {did}")),
        Outcome::Refused { step, why } => Some(format!("refused at step {step}: {why}")),
        other => Some(format!("{other:?}")),
    })
}

/// Step `n`'s state in a plan of alpha made now.
async fn step_state(world: &World, n: u8) -> State {
    let report = run(world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
    report.cluster(CLUSTER).unwrap().step(n).state.clone()
}

/// Moves until one starts with `prefix` (fewer than 100): the moves made, that one last.
async fn until(world: &World, reads: &mut Reads, prefix: &str) -> Vec<String> {
    let mut moves: Vec<String> = Vec::new();
    while !moves.last().is_some_and(|m| m.starts_with(prefix)) {
        moves.push(advance(world, reads).await.unwrap().unwrap());
        assert!(moves.len() < 100, "no {prefix}: {moves:#?}");
    }
    moves
}

/// Moves until adopt has nothing left to do (fewer than 200): the moves made.
async fn to_the_end(world: &World, reads: &mut Reads) -> Vec<String> {
    let mut moves = Vec::new();
    while let Some(did) = advance(world, reads).await.unwrap() {
        moves.push(did);
        assert!(moves.len() < 200, "no end: {moves:#?}");
    }
    moves
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

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
            !tags.contains_key(super::evidence::EVIDENCE_TAG),
            "{tags:?}"
        );
        assert!(tags.contains_key(super::evidence::VERIFIED_TAG), "{tags:?}");
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
            !tenant.tags.contains_key(super::evidence::EVIDENCE_TAG),
            "a round was recorded"
        );
    });
}

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
