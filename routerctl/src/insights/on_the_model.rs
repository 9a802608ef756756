//! insights on the model of AWS ([`crate::cloud::model`]): a hub in each of two regions deployed
//! from base.yaml and tenant.yaml, each cluster's nodes in EC2 of the types, zones, capacity
//! types and node pools Karpenter launched, the router function answered by the router itself
//! (`aws_world::router::run_router`, whose records go to the function's log group). Interruptions
//! are put on each region's default bus, which base.yaml's rules deliver to the ingest queue and
//! the mapping to the router; insights then reads the records back through the model of Logs
//! Insights, and its counts must be what was sent.

use std::{collections::BTreeMap, time::Duration};

use serde_json::{Value, json};

use super::{Options, Report, run, tally};
use crate::cloud::{deliveries::Deliveries, model::World};
use aws_model::{
    events::{Origin, Synthetic, rfc3339},
    stacks::{BASE_TEMPLATE, TENANT_TEMPLATE, tenant_parameters, tenant_stack_name},
};
use aws_world::{Capacity, Described};
use router_core::event::Kinds;

const ACCOUNT: &str = "123456789012";
const STACK: &str = "interruption-router";
const EAST: &str = "us-east-1";
const WEST: &str = "us-west-2";

/// A node: (id, cluster, node pool, type, zone, capacity).
type Node = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Capacity,
);

const EAST_NODES: [Node; 3] = [
    (
        "i-0a000000000000001",
        "alpha",
        "batch",
        "c6i.2xlarge",
        "us-east-1a",
        Capacity::Spot,
    ),
    (
        "i-0a000000000000002",
        "alpha",
        "batch",
        "c6i.2xlarge",
        "us-east-1b",
        Capacity::Spot,
    ),
    (
        "i-0a000000000000003",
        "alpha",
        "default",
        "m7g.large",
        "us-east-1a",
        Capacity::OnDemand,
    ),
];

const WEST_NODES: [Node; 2] = [
    (
        "i-0b000000000000001",
        "beta",
        "gpu",
        "p5.48xlarge",
        "us-west-2b",
        Capacity::Reserved,
    ),
    (
        "i-0b000000000000002",
        "beta",
        "default",
        "m7i.xlarge",
        "us-west-2c",
        Capacity::Spot,
    ),
];

/// A hub in `region` of the world: base.yaml, a tenant stack per cluster of `nodes`, the nodes,
/// and the router answering its function.
fn hub(world: &World, region: &str, nodes: &[Node]) -> World {
    let view = world.in_region(region);
    let base = view
        .deploy(STACK, BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    let mut clusters: Vec<&str> = nodes.iter().map(|n| n.1).collect();
    clusters.dedup();
    for cluster in clusters {
        let parameters = tenant_parameters(&base.parameters, cluster, "", Kinds::ALL);
        let parameters: Vec<(&str, &str)> = parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        view.deploy(
            &tenant_stack_name(STACK, cluster),
            TENANT_TEMPLATE,
            &parameters,
        )
        .expect("tenant.yaml deploys");
    }
    for &(id, cluster, pool, instance_type, zone, capacity) in nodes {
        let tags = [
            ("eks:eks-cluster-name", cluster),
            ("karpenter.sh/nodepool", pool),
        ];
        let described = Described {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity,
        };
        view.instance_described(id, "running", &tags, described);
    }
    aws_world::router::run_router(&view, &base.outputs["FunctionName"]);
    view
}

/// Both hubs.
fn regional_hubs() -> (World, World) {
    let world = World::new(ACCOUNT, EAST);
    let east = hub(&world, EAST, &EAST_NODES);
    let west = hub(&world, WEST, &WEST_NODES);
    (east, west)
}

/// `events` on the hub's default bus, their `time` `ago` before the hub's clock; what the rules
/// put in the ingest queue handed to the router as its mapping would, ten records a batch.
async fn interrupt(hub: &World, events: &[Synthetic], ago: Duration) {
    for e in events {
        let mut event = e.event.clone();
        event["time"] = json!(rfc3339(hub.clock() - ago));
        let delivered = hub.publish(&event);
        assert_eq!(delivered.len(), 1, "one rule delivers {}", e.id);
    }
    let ingest = format!("{STACK}-ingest");
    let bodies = hub.take(&ingest);
    let function = hub.site(|site| site.stacks[STACK].stack.outputs["FunctionName"].clone());
    for (n, batch) in bodies.chunks(10).enumerate() {
        let records: Vec<Value> = batch
            .iter()
            .enumerate()
            .map(|(i, body)| {
                json!({"messageId": format!("m{n}-{i}"), "body": body, "eventSource": "aws:sqs"})
            })
            .collect();
        let invoked = hub
            .invoke(&function, json!({ "Records": records }).to_string())
            .await
            .expect("the router answers");
        assert_eq!(invoked.function_error, None);
    }
}

/// Each node's spot experiment (rebalance, warning, stopping, terminated), and a capacity
/// reservation's warning for the reserved node.
fn storm(region: &str, nodes: &[Node]) -> Vec<Synthetic> {
    let origin = Origin {
        account: ACCOUNT.into(),
        region: region.into(),
    };
    let mut events = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        match node.5 {
            Capacity::Reserved => {
                events.push(origin.capacity_reservation(node.0, &format!("{region}-cr-{n}")));
            }
            _ => events.extend(origin.spot_experiment(node.0, &format!("{region}-{n}"))),
        }
    }
    events
}

/// What the pools table must count for `events` of `nodes` in `region`: (cluster, kind, pool,
/// type, zone, capacity) → interruptions.
fn expected(region: &str, nodes: &[Node], events: &[Synthetic]) -> BTreeMap<[String; 7], u64> {
    let mut counts = BTreeMap::new();
    for e in events {
        let node = nodes.iter().find(|n| e.instances[0] == n.0).unwrap();
        let key = [
            region.to_owned(),
            node.1.to_owned(),
            e.kind.label().to_owned(),
            node.2.to_owned(),
            node.3.to_owned(),
            node.4.to_owned(),
            node.5.label().to_owned(),
        ];
        *counts.entry(key).or_default() += 1;
    }
    counts
}

fn counted(report: &Report) -> BTreeMap<[String; 7], u64> {
    report
        .insights
        .pools
        .iter()
        .map(|p| {
            assert_eq!(p.account, ACCOUNT);
            (
                [
                    p.region.clone(),
                    p.cluster.clone(),
                    p.kind.clone(),
                    p.node_pool.clone(),
                    p.instance_type.clone(),
                    p.zone.clone(),
                    p.capacity_type.clone(),
                ],
                p.interruptions,
            )
        })
        .collect()
}

fn options() -> Options {
    Options {
        stack: STACK.into(),
        log_group: None,
        since: Duration::from_secs(3600),
        clusters: Vec::new(),
    }
}

/// Two regions' storms, each through its own hub: the pools table counts exactly what was sent
/// per cluster, kind, pool, type and zone, with each node's capacity type; each cluster's delay
/// row counts its deliveries, every one on time.
#[tokio::test(start_paused = true)]
async fn the_counts_are_what_was_sent_across_the_hubs_regions() {
    let (east, west) = regional_hubs();
    let (east_storm, west_storm) = (storm(EAST, &EAST_NODES), storm(WEST, &WEST_NODES));
    // EventBridge writes `time` to the second.
    interrupt(&east, &east_storm, Duration::from_secs(1)).await;
    interrupt(&west, &west_storm, Duration::from_secs(2)).await;

    let report = run(&[east, west], &options()).await.unwrap();
    let mut sent = expected(EAST, &EAST_NODES, &east_storm);
    sent.extend(expected(WEST, &WEST_NODES, &west_storm));
    assert_eq!(counted(&report), sent);
    assert_eq!(report.insights.interruptions(), 17);
    let delays: Vec<(&str, &str, u64, u64, u64)> = report
        .insights
        .delays
        .iter()
        .map(|d| {
            (
                d.hub.as_str(),
                d.cluster.as_str(),
                d.delivered,
                d.p99_ms,
                d.late,
            )
        })
        .collect();
    assert_eq!(
        delays,
        [(WEST, "beta", 5, 2000, 0), (EAST, "alpha", 12, 1000, 0)]
    );
    assert!(report.passed());
    assert_eq!(
        report.hubs,
        [
            (EAST.to_owned(), format!("/aws/lambda/{STACK}-router")),
            (WEST.to_owned(), format!("/aws/lambda/{STACK}-router")),
        ]
    );
    let text = report.render();
    // What docs/operating.md shows (`cargo test -p routerctl --lib insights -- --nocapture`).
    println!("{text}");
    assert!(
        text.contains("PASS: no delivery later than 120 s"),
        "{text}"
    );
    assert!(text.contains("c6i.2xlarge"), "{text}");
    let json = report.to_json();
    assert_eq!(json["pools"].as_array().unwrap().len(), sent.len());
    assert_eq!(json["delays"][0]["cluster"], "beta");
    assert_eq!(json["passed"], true);
}

/// A delivery later than two minutes fails the report, is counted on its cluster's row and
/// listed; `--cluster` keeps only the named cluster's rows; `--since` only the window's records.
#[tokio::test(start_paused = true)]
async fn a_late_delivery_fails_the_report_and_the_window_and_cluster_narrow_it() {
    let (east, west) = regional_hubs();
    interrupt(
        &east,
        &storm(EAST, &EAST_NODES[..1]),
        Duration::from_secs(1),
    )
    .await;
    let late = Origin {
        account: ACCOUNT.into(),
        region: WEST.into(),
    }
    .spot_warning(WEST_NODES[1].0, "late");
    interrupt(&west, &[late], Duration::from_secs(150)).await;

    let report = run(&[east.clone(), west.clone()], &options())
        .await
        .unwrap();
    assert!(!report.passed());
    assert_eq!(report.insights.late.len(), 1);
    let listed = &report.insights.late[0];
    assert_eq!(
        (
            listed.cluster.as_str(),
            listed.instance.as_str(),
            listed.delay_ms
        ),
        ("beta", WEST_NODES[1].0, 150_000)
    );
    let beta = report.insights.delays.iter().find(|d| d.cluster == "beta");
    assert_eq!(beta.map(|d| d.late), Some(1));
    assert!(
        report
            .render()
            .contains("FAIL: 1 deliveries later than 120 s")
    );

    let alpha_only = Options {
        clusters: vec!["alpha".into()],
        ..options()
    };
    let report = run(&[east.clone(), west.clone()], &alpha_only)
        .await
        .unwrap();
    assert!(report.passed(), "beta's late delivery is not alpha's");
    assert_eq!(report.insights.interruptions(), 4);
    assert!(report.insights.delays.iter().all(|d| d.cluster == "alpha"));

    // An hour and a minute later, a 1-hour window holds nothing.
    tokio::time::advance(Duration::from_secs(3660)).await;
    let report = run(&[east, west], &options()).await.unwrap();
    assert_eq!(report.insights.interruptions(), 0);
    assert!(report.insights.delays.is_empty());
}

/// base.yaml's query definitions, deployed into the model, are insights' three queries on the
/// router's log group; the dashboard's Logs Insights row draws the same three.
#[test]
fn base_yaml_saves_insights_queries_and_its_dashboard_draws_them() {
    let world = World::new(ACCOUNT, EAST);
    world
        .deploy(STACK, BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    let group = format!("/aws/lambda/{STACK}-router");
    let saved = world.site(|site| site.query_definitions.clone());
    assert_eq!(saved.len(), tally::QUERIES.len(), "{saved:#?}");
    for (name, query) in tally::QUERIES {
        let definition = saved
            .values()
            .find(|d| d.name == format!("{STACK}/{name}"))
            .unwrap_or_else(|| panic!("no query definition {STACK}/{name}: {saved:#?}"));
        assert_eq!(definition.log_groups, std::slice::from_ref(&group));
        assert!(
            tally::same_query(&definition.query, query),
            "{name}: {}",
            definition.query
        );
    }
    let dashboard = world.site(|site| site.dashboards[&format!("{STACK}-{EAST}")].clone());
    let body: Value = serde_json::from_str(&dashboard).unwrap();
    let queries: Vec<String> = body["widgets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["type"] == "log")
        .map(|w| w["properties"]["query"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(queries.len(), tally::QUERIES.len(), "{dashboard}");
    for (query, (name, shipped)) in queries.iter().zip(tally::QUERIES) {
        let source = format!("SOURCE '{group}' | ");
        let rest = query.strip_prefix(&source).unwrap_or_else(|| {
            panic!("{name}'s widget does not query the router's log group: {query}")
        });
        assert!(tally::same_query(rest, shipped), "{name}: {query}");
    }
}

/// A stack that is not the router's, or a log group that is not there, stops insights with the
/// flag to fix.
#[tokio::test(start_paused = true)]
async fn a_wrong_stack_or_log_group_names_the_fix() {
    let (east, _) = regional_hubs();
    let wrong_stack = Options {
        stack: "other".into(),
        ..options()
    };
    let error = run(std::slice::from_ref(&east), &wrong_stack)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("--stack"), "{error}");
    assert!(error.contains("--log-group"), "{error}");
    let wrong_group = Options {
        log_group: Some("/aws/lambda/nothing".into()),
        ..options()
    };
    let error = run(&[east], &wrong_group).await.unwrap_err().to_string();
    assert!(error.contains("StartQuery"), "{error}");
    assert!(error.contains("does not exist"), "{error}");
    assert!(error.contains("--region"), "{error}");
}
