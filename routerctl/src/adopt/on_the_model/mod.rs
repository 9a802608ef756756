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
mod rollback;
mod walk;
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
