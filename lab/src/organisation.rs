//! `lab demo --accounts N --regions M`: one hub serving an organisation, on the emulator.
//!
//! 1. deploys `base.yaml` in the hub account with its central bus, serving the member accounts;
//! 2. in every member account and region, deploys `spoke.yaml` (its rules forward to the hub
//!    bus; the first region creates the spoke role the router assumes) and one `tenant.yaml`
//!    per cluster, which imports the region's exports (the spoke stack's), so the queue admits
//!    the spoke role;
//! 3. gives every (account, region) a cluster named `prod` (the same name in every account, so
//!    a delivery to the wrong account's `prod` would show) and the hub a cluster of its own;
//! 4. sends per node a spot experiment (rebalance, warning, stopping, terminated), and one
//!    Health event naming nodes of two clusters of one member account;
//! 5. routes them with the router binary and reads every queue in its own account and region;
//! 6. prints the insights table from the router's interruption records (its counts must be what
//!    was sent: [`crate::insights`]).
//!
//! The hub's own events go through its default bus and the base stack's rules, as in AWS. The
//! members' events are put into the ingest queue as the hub bus's rules would deliver them:
//! moto delivers events across accounts without their `account` (and a cross-account bus target
//! is not emulated), and the router must see the member's account to look up and send there.
//! The exit status is non-zero on any event lost, misrouted, or delivered to the same-named
//! cluster of another account.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use serde_json::Value;

use super::{deployed_env, event_key_of, insights, instances_named, put_events, receive_all, step};
use aws_clients::aws::queue_url;
use aws_model::{
    events::{Origin, Synthetic},
    stacks,
};
use local_aws::{
    esm::{EventSourceMapping, Stop},
    function::{Function, router_binary},
    moto::{self, ACCOUNT, MotoServer, REGION},
    proxy::AwsProxy,
};

const BASE_STACK: &str = "interruption-router";
const SPOKE_STACK: &str = "interruption-router-spoke";
const SPOKE_ROLE: &str = "interruption-router-spoke";
const REGIONS: [&str; 4] = ["us-east-1", "eu-west-1", "ap-southeast-2", "us-west-2"];
/// Execution environments polling the ingest queue at once, as Lambda's poller would.
const ENVIRONMENTS: usize = 2;

#[derive(Debug, Clone)]
pub struct Options {
    /// Accounts in all, the hub included.
    pub accounts: usize,
    pub regions: usize,
    pub instances: usize,
    pub router_bin: Option<std::path::PathBuf>,
}

/// (account, region, cluster): a cluster's identity.
pub type Place = (String, String, String);

#[derive(Debug, Default, Clone)]
pub struct PlaceReport {
    pub expected: usize,
    pub received: usize,
    pub misrouted: usize,
    /// Received here although meant for the same-named cluster of another account or region.
    pub crossed: usize,
    pub missing: usize,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub places: BTreeMap<Place, PlaceReport>,
    pub dead_lettered: usize,
    pub router_calls: BTreeMap<String, u64>,
    pub records: u64,
    /// The insights table from the router's records, and how it compares with what was sent.
    pub insights: insights::Outcome,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.dead_lettered == 0
            && self.insights.matches()
            && self
                .places
                .values()
                .all(|p| p.missing == 0 && p.misrouted == 0 && p.crossed == 0)
    }
}

/// Clients acting in one account and region.
struct Site {
    cfn: aws_sdk_cloudformation::Client,
    ec2: aws_sdk_ec2::Client,
    sqs: aws_sdk_sqs::Client,
}

impl Site {
    fn new(config: &aws_config::SdkConfig) -> Self {
        Self {
            cfn: aws_sdk_cloudformation::Client::new(config),
            ec2: aws_sdk_ec2::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
        }
    }
}

pub async fn run(options: Options) -> Result<Report> {
    if options.accounts < 2 || options.regions < 1 || options.regions > REGIONS.len() {
        bail!(
            "--accounts takes 2 or more (the hub and its members), --regions 1 to {}",
            REGIONS.len()
        );
    }
    let binary = match &options.router_bin {
        Some(path) => path.clone(),
        None => router_binary()?,
    };
    let total = Instant::now();
    let moto = step("Starting the AWS emulator (moto)", MotoServer::start()).await?;
    let hub_config = moto.sdk_config().await;
    let hub = Site::new(&hub_config);
    let members: Vec<String> = (1..options.accounts)
        .map(|n| format!("{:012}", 111_111_111_111_u64 * n as u64))
        .collect();
    let regions = &REGIONS[..options.regions];

    let base = step(
        &format!(
            "Hub {ACCOUNT}: cloudformation/base.yaml with its central bus, serving {}",
            members.join(", ")
        ),
        async {
            moto.put_object(
                "demo-artifacts",
                &stacks::release_code_key("arm64"),
                b"placeholder",
            )
            .await?;
            Ok(aws_clients::stacks::create(
                &hub.cfn,
                BASE_STACK,
                stacks::BASE_TEMPLATE,
                &[
                    ("CodeS3Bucket", "demo-artifacts"),
                    ("CentralBus", "Enabled"),
                    ("ServedAccounts", &members.join(",")),
                ],
            )
            .await?)
        },
    )
    .await?;
    let hub_bus = base.output("HubEventBusArn")?.to_owned();
    let router_role = base.output("RouterRoleArn")?.to_owned();

    // Every site, its clusters and their queues and nodes.
    let mut sites: BTreeMap<(String, String), Site> = BTreeMap::new();
    let mut queues: BTreeMap<Place, String> = BTreeMap::new();
    let mut nodes: BTreeMap<Place, Vec<String>> = BTreeMap::new();
    let mut launched: BTreeMap<String, insights::Launched> = BTreeMap::new();
    let hub_place: Place = (ACCOUNT.into(), REGION.into(), "hub-tools".into());
    step("Hub: tenant.yaml for its own cluster hub-tools", async {
        let stack = aws_clients::stacks::create(
            &hub.cfn,
            &aws_model::stacks::tenant_stack_name(BASE_STACK, "hub-tools"),
            stacks::TENANT_TEMPLATE,
            &[("ClusterName", "hub-tools")],
        )
        .await?;
        let url = queue_url(&hub.sqs, stack.output("QueueName")?).await?;
        queues.insert(hub_place.clone(), url);
        Ok(())
    })
    .await?;
    sites.insert((ACCOUNT.into(), REGION.into()), hub);

    for account in &members {
        for (r, region) in regions.iter().enumerate() {
            let config = moto::sdk_config_as(moto.endpoint(), account, region, SPOKE_ROLE).await?;
            let site = Site::new(&config);
            // The first member in the first region has a second cluster, for a Health event
            // that spans two clusters of one account.
            let mut clusters = vec!["prod"];
            if account == &members[0] && r == 0 {
                clusters.push("web");
            }
            step(
                &format!(
                    "Member {account} {region}: spoke.yaml, tenant.yaml for {}",
                    clusters.join(", ")
                ),
                async {
                    aws_clients::stacks::create(
                        &site.cfn,
                        SPOKE_STACK,
                        stacks::SPOKE_TEMPLATE,
                        &[
                            ("HubEventBusArn", hub_bus.as_str()),
                            ("RouterRoleArn", router_role.as_str()),
                            ("CreateSpokeRole", if r == 0 { "true" } else { "false" }),
                        ],
                    )
                    .await?;
                    for cluster in &clusters {
                        let stack = aws_clients::stacks::create(
                            &site.cfn,
                            &aws_model::stacks::tenant_stack_name(BASE_STACK, cluster),
                            stacks::TENANT_TEMPLATE,
                            &[("ClusterName", cluster)],
                        )
                        .await?;
                        let url = queue_url(&site.sqs, stack.output("QueueName")?).await?;
                        queues.insert(
                            (account.clone(), region.to_string(), cluster.to_string()),
                            url,
                        );
                    }
                    Ok(())
                },
            )
            .await?;
            sites.insert((account.clone(), region.to_string()), site);
        }
    }
    step(
        &format!(
            "Launching {} Karpenter nodes per cluster",
            options.instances
        ),
        async {
            for place in queues.keys() {
                let site = &sites[&(place.0.clone(), place.1.clone())];
                for n in 0..options.instances {
                    let node = insights::Launched::nth(place, n);
                    let id = moto::launch_as(&site.ec2, &node.tags(), 1, node.placement())
                        .await?
                        .pop()
                        .ok_or_else(|| anyhow::anyhow!("RunInstances returned no instance"))?;
                    nodes.entry(place.clone()).or_default().push(id.clone());
                    launched.insert(id, node);
                }
            }
            Ok(())
        },
    )
    .await?;
    let owner_of = |instance: &str| {
        nodes
            .iter()
            .find(|(_, ids)| ids.iter().any(|i| i == instance))
            .map(|(p, _)| p.clone())
    };

    // The events, each with the places it must reach.
    let mut hub_events: Vec<(Synthetic, BTreeSet<Place>)> = Vec::new();
    let mut member_events: Vec<(Synthetic, BTreeSet<Place>)> = Vec::new();
    for (place, ids) in &nodes {
        let origin = Origin {
            account: place.0.clone(),
            region: place.1.clone(),
        };
        for (n, id) in ids.iter().enumerate() {
            let tag = format!("{}-{}-{}-{n}", place.0, place.1, place.2);
            for e in origin.spot_experiment(id, &tag) {
                let into = if place.0 == ACCOUNT {
                    &mut hub_events
                } else {
                    &mut member_events
                };
                into.push((e, BTreeSet::from([place.clone()])));
            }
        }
    }
    let prod: Place = (members[0].clone(), regions[0].to_string(), "prod".into());
    let web: Place = (members[0].clone(), regions[0].to_string(), "web".into());
    let origin = Origin {
        account: members[0].clone(),
        region: regions[0].to_string(),
    };
    member_events.push((
        origin.scheduled_change(
            &[nodes[&prod][0].clone(), nodes[&web][0].clone()],
            "health-two-clusters",
        ),
        BTreeSet::from([prod, web]),
    ));

    // The router, configured as the base stack configures the function.
    let proxy = AwsProxy::start(moto.endpoint()).await?;
    let lambda = aws_sdk_lambda::Client::new(&hub_config);
    let function_name = base.output("FunctionName")?;
    let functions = step(
        "Starting the router under local Lambda Runtime APIs",
        async {
            let env = deployed_env(&lambda, function_name, &proxy).await?;
            let mut functions = Vec::new();
            for _ in 0..ENVIRONMENTS {
                functions.push(Function::start_ready(&binary, &env).await?);
            }
            Ok(functions)
        },
    )
    .await?;
    let hub_sqs = &sites[&(ACCOUNT.to_owned(), REGION.to_owned())].sqs;
    let esm =
        EventSourceMapping::take_over(&lambda, hub_sqs, function_name, Duration::from_secs(30))
            .await?;

    let published = hub_events.len() + member_events.len();
    let eventbridge = aws_sdk_eventbridge::Client::new(&hub_config);
    let publish = async {
        let hub: Vec<&Synthetic> = hub_events.iter().map(|(e, _)| e).collect();
        put_events(&eventbridge, &hub).await?;
        for (event, _) in &member_events {
            hub_sqs
                .send_message()
                .queue_url(&esm.queue_url)
                .message_body(event.body())
                .send()
                .await?;
        }
        Ok::<_, anyhow::Error>(())
    };
    let stop = Stop {
        handled: Some(published as u64),
        idle: Duration::from_secs(20),
    };
    let environments: Vec<&Function> = functions.iter().collect();
    let started = Instant::now();
    let (published_result, drained) = tokio::join!(
        publish,
        esm.drain_with(hub_sqs, &environments, stop, |_| {})
    );
    published_result?;
    let drained = drained?;
    println!(
        "  ✓ Published {published} events ({} from the hub's default bus, {} from members into the ingest queue); the router took {} records in {} invocations ({:.1?})",
        hub_events.len(),
        member_events.len(),
        drained.records,
        drained.invocations,
        started.elapsed()
    );

    let mut report = Report {
        router_calls: proxy.calls(),
        records: drained.records,
        ..Default::default()
    };
    let all_events: Vec<&(Synthetic, BTreeSet<Place>)> =
        hub_events.iter().chain(&member_events).collect();
    for (place, url) in &queues {
        let site = &sites[&(place.0.clone(), place.1.clone())];
        let expected: BTreeSet<String> = all_events
            .iter()
            .filter(|(_, places)| places.contains(place))
            .map(|(e, _)| event_key_of(&e.event))
            .collect();
        let mut line = PlaceReport {
            expected: expected.len(),
            ..Default::default()
        };
        let mut seen = BTreeSet::new();
        for (body, _) in receive_all(&site.sqs, url).await? {
            let event: Value = serde_json::from_str(&body).unwrap_or_default();
            let owners: Vec<Option<Place>> = instances_named(&event)
                .iter()
                .filter(|i| i.starts_with("i-"))
                .map(|i| owner_of(i))
                .collect();
            if owners.iter().any(|o| o.as_ref() != Some(place)) {
                let same_name_elsewhere = owners
                    .iter()
                    .flatten()
                    .any(|o| o.2 == place.2 && o != place);
                if same_name_elsewhere {
                    line.crossed += 1;
                } else {
                    line.misrouted += 1;
                }
                continue;
            }
            seen.insert(event_key_of(&event));
        }
        line.received = seen.len();
        line.missing = expected.difference(&seen).count();
        line.misrouted += seen.difference(&expected).count();
        report.places.insert(place.clone(), line);
    }
    let dlq = queue_url(hub_sqs, &format!("{BASE_STACK}-dlq")).await?;
    report.dead_lettered = receive_all(hub_sqs, &dlq).await?.len();
    let sent = insights::sent(all_events.iter().map(|(e, p)| (e, p)), &launched);
    let records = insights::records(&environments, sent.values().sum()).await;
    report.insights = insights::outcome(REGION, &records, &sent);
    print_report(&report, total.elapsed(), members.len());
    for f in functions {
        f.stop().await;
    }
    moto.stop().await;
    Ok(report)
}

fn print_report(report: &Report, took: Duration, members: usize) {
    println!();
    println!(
        "  {:<14} {:<15} {:<10} {:>8} {:>8} {:>9} {:>22} {:>7}",
        "account",
        "region",
        "cluster",
        "expected",
        "received",
        "misrouted",
        "other account's same",
        "missing"
    );
    for ((account, region, cluster), line) in &report.places {
        println!(
            "  {account:<14} {region:<15} {cluster:<10} {:>8} {:>8} {:>9} {:>22} {:>7}",
            line.expected, line.received, line.misrouted, line.crossed, line.missing
        );
    }
    let calls = |a: &str| report.router_calls.get(a).copied().unwrap_or_default();
    println!(
        "  router AWS calls: {} for {} records ({:.3} per event); AssumeRole {} for {members} member accounts in {ENVIRONMENTS} execution environments (one per account per environment per credential lifetime)",
        report.router_calls.values().sum::<u64>(),
        report.records,
        report.router_calls.values().sum::<u64>() as f64 / report.records.max(1) as f64,
        calls("AssumeRole"),
    );
    println!("  dead-letter queue: {} messages", report.dead_lettered);
    println!();
    insights::print(&report.insights);
    println!();
    let expected: usize = report.places.values().map(|p| p.expected).sum();
    if report.passed() {
        println!(
            "PASS: {expected} deliveries to {} clusters in {} accounts, 0 lost, 0 misrouted, none to another account's same-named cluster, in {took:.1?}",
            report.places.len(),
            members + 1
        );
    } else {
        let sum = |f: fn(&PlaceReport) -> usize| report.places.values().map(f).sum::<usize>();
        println!(
            "FAIL: {} lost, {} misrouted, {} to another account's same-named cluster, {} dead-lettered, of {expected} expected deliveries, {} insights counts not what was sent",
            sum(|p| p.missing),
            sum(|p| p.misrouted),
            sum(|p| p.crossed),
            report.dead_lettered,
            report.insights.differences.len()
        );
    }
}
