//! simulate on the model of AWS ([`crate::cloud::model`]): a hub deployed from the templates,
//! a cluster's instances in EC2, the router function answering as the router does. What it
//! picks, where it sends, and what it refuses, with AWS's own answers (the ingest queue's policy
//! refusing the operator, an unknown instance id failing the whole DescribeInstances).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{Options, SimKind, run};
use crate::cloud::{deliveries::Invoked, model::World};
use aws_model::stacks::BASE_TEMPLATE;

const NODEPOOL: &str = "karpenter.sh/nodepool";

/// A hub, alpha's three Karpenter nodes and one node of its managed node group, beta's node; the
/// router function forwards every record it is given, and what it was given is kept.
fn hub() -> (World, Arc<Mutex<Vec<Value>>>, String, String) {
    let world = World::new("123456789012", "us-east-1");
    let base = world
        .deploy("ir", BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    for (id, cluster, karpenter) in [
        ("i-0000000000000000a", "alpha", true),
        ("i-0000000000000000b", "alpha", true),
        ("i-0000000000000000c", "alpha", true),
        ("i-0000000000000000d", "alpha", false),
        ("i-0000000000000000e", "beta", true),
    ] {
        let mut tags = vec![("eks:eks-cluster-name", cluster)];
        if karpenter {
            tags.push((NODEPOOL, "default"));
        }
        world.instance(id, "running", &tags);
    }
    let invoked = Arc::new(Mutex::new(Vec::new()));
    let seen = invoked.clone();
    let function = base.outputs["FunctionName"].clone();
    world.function(&function, move |payload| {
        let batch: Value = serde_json::from_str(payload).unwrap_or_default();
        let outcomes: serde_json::Map<String, Value> = batch["Records"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["messageId"].as_str().unwrap_or_default().to_owned(),
                    json!("forwarded"),
                )
            })
            .collect();
        seen.lock().unwrap().push(batch);
        Invoked {
            function_error: None,
            payload: json!({"batchItemFailures": [], "outcomes": outcomes})
                .to_string()
                .into_bytes(),
        }
    });
    let ingest = base.outputs["IngestQueueUrl"].clone();
    (world, invoked, function, ingest)
}

/// `count` events of `kind` for `cluster`'s nodes, through `function`.
fn simulate_count(
    world: &World,
    cluster: &str,
    kind: SimKind,
    count: usize,
    function: &str,
) -> anyhow::Result<super::Report> {
    simulate(
        world,
        Options {
            count,
            ..Options::new(cluster, kind, function)
        },
    )
}

fn simulate(world: &World, options: Options) -> anyhow::Result<super::Report> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(run(world, &options))
}

/// To the function: each event as an SQS record of a batch of at most ten, each answered.
#[test]
fn spot_warnings_through_the_function_name_exactly_the_clusters_karpenter_nodes() {
    let (world, invoked, function, _) = hub();
    let report = simulate_count(&world, "alpha", SimKind::Spot, 3, &function).unwrap();
    assert_eq!(report.failed(), 0, "{}", report.render());
    assert_eq!(
        report.instances,
        [
            "i-0000000000000000a",
            "i-0000000000000000b",
            "i-0000000000000000c"
        ]
    );
    assert_eq!(report.account, "123456789012");
    let batches = invoked.lock().unwrap();
    assert_eq!(batches.len(), 1);
    let bodies: Vec<Value> = batches[0]["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(bodies.len(), 3);
    for body in &bodies {
        assert_eq!(
            body["detail-type"],
            "EC2 Spot Instance Interruption Warning"
        );
        assert_eq!(body["account"], "123456789012");
    }
}

/// The ingest queue base.yaml deploys admits only its rules: AWS refuses the operator, and
/// simulate says to send to the function.
#[test]
fn the_ingest_queue_refuses_the_operator_and_simulate_names_the_way_that_works() {
    let (world, _, _, ingest) = hub();
    let report = simulate(&world, Options::new("alpha", SimKind::Rebalance, &ingest)).unwrap();
    assert_eq!(report.failed(), 1, "{}", report.render());
    let why = report.sent[0].result.as_ref().unwrap_err();
    assert!(why.contains("AccessDenied"), "{why}");
    assert!(
        why.contains("send to the router function instead: --to"),
        "{why}"
    );
    let queue = ingest.rsplit('/').next().unwrap().to_owned();
    assert!(world.site(|site| site.queues[&queue].messages.is_empty()));
}

/// What would not reach the cluster is refused before anything is sent, each with its reason.
#[test]
fn what_would_not_reach_the_cluster_is_refused_and_says_why() {
    let (world, invoked, function, _) = hub();
    let spot = |cluster: &str| Options::new(cluster, SimKind::Spot, &function);
    let cases = [
        (
            spot("nope"),
            "no running instances tagged eks:eks-cluster-name=nope in us-east-1",
        ),
        (
            Options {
                count: 4,
                ..spot("alpha")
            },
            "--count 4: only 3 running Karpenter instances are tagged eks:eks-cluster-name=alpha",
        ),
        (
            Options {
                instances: vec!["i-0000000000000000e".into()],
                ..spot("alpha")
            },
            "is not tagged eks:eks-cluster-name=alpha (it has eks:eks-cluster-name=beta)",
        ),
        (
            Options {
                instances: vec!["i-0000000000000000d".into()],
                ..spot("alpha")
            },
            "has no karpenter.sh/nodepool tag: the router forwards events only for instances tagged",
        ),
        (
            Options {
                instances: vec!["i-00000000000000fff".into()],
                ..spot("alpha")
            },
            "InvalidInstanceID.NotFound",
        ),
        (
            Options::new("alpha", SimKind::Spot, "no-such-function"),
            "function no-such-function not found in us-east-1",
        ),
        (
            Options {
                state: "running".into(),
                ..Options::new("alpha", SimKind::State, &function)
            },
            "--state running: the rules and the router only pass",
        ),
    ];
    for (options, expected) in cases {
        let error = simulate(&world, options).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}\nexpected: {expected}");
    }
    assert!(invoked.lock().unwrap().is_empty(), "nothing was sent");
}

/// One AWS Health scheduled change names every selected instance, as Health does for a
/// retirement batch.
#[test]
fn a_health_event_names_every_selected_node_at_once() {
    let (world, invoked, function, _) = hub();
    let report = simulate_count(&world, "alpha", SimKind::Health, 2, &function).unwrap();
    assert_eq!(report.sent.len(), 1, "{}", report.render());
    let batches = invoked.lock().unwrap();
    let body: Value =
        serde_json::from_str(batches[0]["Records"][0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["source"], "aws.health");
    let entities: Vec<&str> = body["detail"]["affectedEntities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entityValue"].as_str().unwrap())
        .collect();
    assert_eq!(entities, ["i-0000000000000000a", "i-0000000000000000b"]);
}

/// `--cluster-tag kubernetes.io/cluster/*`: the cluster is the tag's key, whatever its value.
#[test]
fn a_cluster_tag_by_key_picks_the_nodes_tagged_with_the_clusters_key() {
    let (world, _, function, _) = hub();
    world.instance(
        "i-0000000000000000f",
        "running",
        &[
            ("kubernetes.io/cluster/gamma", "owned"),
            (NODEPOOL, "default"),
        ],
    );
    let report = simulate(
        &world,
        Options {
            cluster_tag: "kubernetes.io/cluster/*".into(),
            ..Options::new("gamma", SimKind::Spot, &function)
        },
    )
    .unwrap();
    assert_eq!(report.instances, ["i-0000000000000000f"]);
    assert_eq!(report.failed(), 0, "{}", report.render());
}

/// A rebalance recommendation through the function, and an ingest queue URL that names no
/// queue (refused before anything is picked).
#[test]
fn a_rebalance_recommendation_and_a_queue_that_does_not_exist() {
    let (world, invoked, function, ingest) = hub();
    let report = simulate(&world, Options::new("alpha", SimKind::Rebalance, &function)).unwrap();
    assert_eq!(report.failed(), 0);
    let batches = invoked.lock().unwrap();
    let body: Value =
        serde_json::from_str(batches[0]["Records"][0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["detail-type"], "EC2 Instance Rebalance Recommendation");
    drop(batches);
    let missing = ingest.replace("-ingest", "-gone");
    let error = simulate(&world, Options::new("alpha", SimKind::Spot, &missing))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("does not exist in us-east-1: pass the base stack's IngestQueueUrl"),
        "{error}"
    );
}

/// Each of the other kinds as Karpenter's parser picks it: by source and detail-type.
#[test]
fn state_changes_and_capacity_reservation_warnings_carry_their_kind() {
    use router_core::event::Kind;
    for (kind, expected) in [
        (SimKind::State, Kind::StateChange),
        (SimKind::Capacity, Kind::CapacityReservationInterruption),
    ] {
        let (world, invoked, function, _) = hub();
        let report = simulate(&world, Options::new("alpha", kind, &function)).unwrap();
        assert_eq!(report.failed(), 0, "{}", report.render());
        let batches = invoked.lock().unwrap();
        let body: Value =
            serde_json::from_str(batches[0]["Records"][0]["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["source"], expected.source());
        assert_eq!(body["detail-type"], expected.detail_type());
        assert_eq!(body["version"], "0");
    }
}

/// The drill through the router itself (this release's handler, as base.yaml configures it):
/// with alpha's tenant stack deployed, each simulated warning reaches alpha's tenant queue and
/// names its node; beta, never onboarded, gets nothing.
#[test]
fn through_the_router_itself_each_warning_reaches_the_tenant_queue() {
    let (world, _, function, _) = hub();
    let parameters = world.read(|_, site| site.stacks["ir"].stack.parameters.clone());
    let tenant = aws_model::stacks::tenant_parameters(
        &parameters,
        "alpha",
        "KarpenterController-alpha",
        router_core::event::Kinds::ALL,
    );
    let tenant: Vec<(&str, &str)> = tenant
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    world.put_role(
        "KarpenterController-alpha",
        Vec::new(),
        json!({"Version": "2012-10-17", "Statement": []}),
    );
    world
        .deploy(
            "ir-tenant-alpha",
            aws_model::stacks::TENANT_TEMPLATE,
            &tenant,
        )
        .expect("tenant.yaml deploys");
    aws_world::router::run_router(&world, &function);
    let report = simulate_count(&world, "alpha", SimKind::Spot, 3, &function).unwrap();
    assert_eq!(report.failed(), 0, "{}", report.render());
    let bodies = world.take("karpenter-alpha");
    assert_eq!(bodies.len(), 3, "{}", report.render());
    for (body, node) in bodies.iter().zip(&report.instances) {
        let event: Value = serde_json::from_str(body).unwrap();
        assert_eq!(event["detail"]["instance-id"], node.as_str());
    }
    assert!(world.take("karpenter-beta").is_empty());
}
