//! `lab demo` (`make demo`): the whole system on a local AWS emulator, in one command, no account needed.
//!
//! 1. starts moto on a free loopback port (installing it if missing);
//! 2. deploys the real `cloudformation/base.yaml` and one `tenant.yaml` per cluster;
//! 3. launches Karpenter-tagged nodes per cluster, plus a managed-node-group node and an untagged one;
//! 4. publishes through EventBridge what FIS and AWS would send: per node a spot interruption
//!    experiment (rebalance, warning, stopping, terminated), one Health scheduled change naming
//!    nodes of two clusters, a capacity-reservation warning, and events for the distractor nodes;
//!    the base stack's rules put them in the ingest queue, exactly as in production;
//! 5. runs the router binary under a local Lambda Runtime API, fed by a local event source mapping;
//! 6. reads every tenant queue as Karpenter does and prints, per cluster, what was expected,
//!    received and misrouted, end-to-end latency, and the AWS calls the router made per event;
//! 7. prints the insights table (`routerctl insights`' answer) from the router's interruption
//!    records ([`insights`]): each cluster's nodes are node pools of realistic types, zones and
//!    capacity types, and every count must be what the lab sent.
//!
//! The exit status is non-zero on any misrouted or lost event, or an insights count that is not
//! what was sent. [`organisation`] is the same for a
//! hub serving several accounts and regions (`--accounts`, `--regions`).

pub mod adoption;
pub mod insights;
pub mod kept;
pub mod old_setups;
pub mod organisation;
mod report;
pub mod sandbox;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use aws_clients::events::PutEvents as _;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use aws_model::{
    events::{Origin, Synthetic},
    stacks,
};
use report::print_report;
pub use report::{ClusterReport, Report};

use local_aws::{
    esm::{EventSourceMapping, Stop},
    function::{Function, router_binary},
    moto::{ACCOUNT, MotoServer, REGION},
    proxy::AwsProxy,
};

const BASE_STACK: &str = "interruption-router";
const CLUSTER_NAMES: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
];

#[derive(Debug, Clone)]
pub struct Options {
    pub clusters: usize,
    pub instances: usize,
    /// Records per invocation; `None` takes the deployed event source mapping's BatchSize.
    pub batch_size: Option<usize>,
    pub keep: bool,
    pub router_bin: Option<PathBuf>,
}

pub async fn run(options: Options) -> Result<Report> {
    let binary = match &options.router_bin {
        Some(path) => path.clone(),
        None => router_binary()?,
    };
    let total = Instant::now();

    let moto = step("Starting the AWS emulator (moto)", MotoServer::start()).await?;
    let sdk = moto.sdk_config().await;
    let (cfn, ec2, sqs) = (
        aws_sdk_cloudformation::Client::new(&sdk),
        aws_sdk_ec2::Client::new(&sdk),
        aws_sdk_sqs::Client::new(&sdk),
    );
    let clusters: Vec<String> = (0..options.clusters)
        .map(|i| {
            CLUSTER_NAMES
                .get(i)
                .map_or_else(|| format!("cluster-{}", i + 1), |n| n.to_string())
        })
        .collect();

    let base = step("Deploying cloudformation/base.yaml", async {
        // Where the stack's default CodeS3Key finds the release's zip.
        moto.put_object(
            "demo-artifacts",
            &stacks::release_code_key("arm64"),
            b"placeholder: the router runs as a local process",
        )
        .await?;
        Ok(aws_clients::stacks::create(
            &cfn,
            BASE_STACK,
            stacks::BASE_TEMPLATE,
            &[("CodeS3Bucket", "demo-artifacts")],
        )
        .await?)
    })
    .await?;
    let tenant_queues = step(
        &format!(
            "Deploying cloudformation/tenant.yaml for {} clusters",
            clusters.len()
        ),
        async {
            let mut queues = BTreeMap::new();
            for cluster in &clusters {
                let stack = aws_clients::stacks::create(
                    &cfn,
                    &aws_model::stacks::tenant_stack_name(BASE_STACK, cluster),
                    stacks::TENANT_TEMPLATE,
                    &[("ClusterName", cluster)],
                )
                .await?;
                let url = sqs
                    .get_queue_url()
                    .queue_name(stack.output("QueueName")?)
                    .send()
                    .await?;
                queues.insert(
                    cluster.clone(),
                    url.queue_url().context("no queue url")?.to_owned(),
                );
            }
            Ok::<_, anyhow::Error>(queues)
        },
    )
    .await?;

    let mut launched: BTreeMap<String, insights::Launched> = BTreeMap::new();
    let nodes = step(
        &format!(
            "Launching {} Karpenter nodes per cluster and 2 distractors",
            options.instances
        ),
        async {
            let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for cluster in &clusters {
                let place = (ACCOUNT.to_owned(), REGION.to_owned(), cluster.clone());
                for n in 0..options.instances {
                    let node = insights::Launched::nth(&place, n);
                    let id = local_aws::moto::launch_as(&ec2, &node.tags(), 1, node.placement())
                        .await?
                        .pop()
                        .context("RunInstances returned no instance")?;
                    nodes.entry(cluster.clone()).or_default().push(id.clone());
                    launched.insert(id, node);
                }
            }
            let managed = launch(
                &ec2,
                &[
                    ("eks:eks-cluster-name".into(), clusters[0].clone()),
                    ("eks:nodegroup-name".into(), "system".into()),
                ],
            )
            .await?;
            let untagged = launch(&ec2, &[]).await?;
            Ok::<_, anyhow::Error>((nodes, [managed, untagged]))
        },
    )
    .await?;
    let (nodes, distractor_nodes) = nodes;

    // What goes out, and where each event must end up.
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };
    let mut events: Vec<(Synthetic, BTreeSet<String>)> = Vec::new();
    for (cluster, instances) in &nodes {
        for (n, instance) in instances.iter().enumerate() {
            for e in origin.spot_experiment(instance, &format!("{cluster}-{n}")) {
                events.push((e, BTreeSet::from([cluster.clone()])));
            }
        }
    }
    let owner_of = |instance: &str| {
        nodes
            .iter()
            .find(|(_, v)| v.iter().any(|i| i == instance))
            .map(|(c, _)| c.clone())
    };
    if clusters.len() >= 2 && options.instances >= 1 {
        let named = vec![
            nodes[&clusters[0]][0].clone(),
            nodes[&clusters[1]][0].clone(),
            distractor_nodes[0].clone(),
        ];
        let owners = named.iter().filter_map(|i| owner_of(i)).collect();
        events.push((origin.scheduled_change(&named, "health-retirement"), owners));
        let last = clusters.last().unwrap();
        events.push((
            origin.capacity_reservation(&nodes[last][0], "capacity"),
            BTreeSet::from([last.clone()]),
        ));
    }
    let distractors = [
        origin.spot_warning(&distractor_nodes[0], "distractor-managed-nodegroup"),
        origin.state_change(&distractor_nodes[1], "terminated", "distractor-untagged"),
    ];

    // The router, configured exactly as the base stack configures the function.
    let proxy = AwsProxy::start(moto.endpoint()).await?;
    let function = step(
        "Starting the router under a local Lambda Runtime API",
        async {
            let lambda = aws_sdk_lambda::Client::new(&sdk);
            let env = deployed_env(&lambda, base.output("FunctionName")?, &proxy).await?;
            Function::start_ready(&binary, &env).await
        },
    )
    .await?;

    let esm = EventSourceMapping::take_over(
        &aws_sdk_lambda::Client::new(&sdk),
        &sqs,
        base.output("FunctionName")?,
        Duration::from_secs(30),
    )
    .await?;
    let esm = EventSourceMapping {
        batch_size: options.batch_size.unwrap_or(esm.batch_size),
        ..esm
    };

    let published = events.len() + distractors.len();
    let bar = ProgressBar::new(published as u64).with_style(
        ProgressStyle::with_template("  {spinner} {msg} [{bar:30}] {pos}/{len}")
            .unwrap()
            .progress_chars("=> "),
    );
    bar.set_message("Publishing through EventBridge, routing");
    let eventbridge = aws_sdk_eventbridge::Client::new(&sdk);
    let started = Instant::now();
    let all: Vec<&Synthetic> = events
        .iter()
        .map(|(e, _)| e)
        .chain(distractors.iter())
        .collect();
    let publish = put_events(&eventbridge, &all);
    // Every published event matches exactly one rule, so the ingest queue gets exactly that many.
    let stop = Stop {
        handled: Some(published as u64),
        idle: Duration::from_secs(20),
    };
    let (published_result, drained) =
        tokio::join!(publish, esm.drain(&sqs, &function, stop, |n| bar.inc(n)));
    published_result?;
    let drained = drained?;
    bar.finish_and_clear();
    println!(
        "  ✓ Published {published} events through EventBridge; the router took {} records in {} invocations ({:.1?})",
        drained.records,
        drained.invocations,
        started.elapsed()
    );
    // Latency is measured from the event's arrival in the ingest queue (EventBridge's delivery in
    // moto is slow and says nothing about AWS) to its arrival in the cluster's queue.
    let arrived: BTreeMap<String, u64> = drained
        .arrivals
        .iter()
        .filter_map(|(body, at)| Some((event_key_of(&serde_json::from_str(body).ok()?), *at)))
        .collect();

    // Read every queue the way Karpenter does.
    let mut report = Report {
        published,
        distractors: distractors.len(),
        router_calls: proxy.calls(),
        router_records: drained.records,
        invocations: drained.invocations,
        ..Default::default()
    };
    let distractor_ids: BTreeSet<&str> = distractor_nodes.iter().map(String::as_str).collect();
    let expected_per_cluster = |cluster: &str| {
        events
            .iter()
            .filter(|(_, owners)| owners.contains(cluster))
            .map(|(e, _)| event_key_of(&e.event))
            .collect::<Vec<_>>()
    };
    for (cluster, url) in &tenant_queues {
        let mut line = ClusterReport::default();
        let expected = expected_per_cluster(cluster);
        line.expected = expected.len();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (body, sent_ms) in receive_all(&sqs, url).await? {
            let event: Value = serde_json::from_str(&body).unwrap_or_default();
            let named = instances_named(&event);
            if named.iter().any(|i| distractor_ids.contains(i.as_str())) {
                report.distractors_delivered += 1;
            }
            if named
                .iter()
                .any(|i| owner_of(i).as_deref() != Some(cluster.as_str()))
                || named.is_empty()
            {
                line.misrouted += 1;
                continue;
            }
            let key = event_key_of(&event);
            *seen.entry(key.clone()).or_default() += 1;
            if let Some(at) = arrived.get(&key) {
                line.latencies_ms.push(sent_ms.saturating_sub(*at));
            }
        }
        line.received = seen.values().sum();
        line.duplicates = seen.values().map(|n| n.saturating_sub(1)).sum();
        line.missing = expected.iter().filter(|k| !seen.contains_key(*k)).count();
        line.misrouted += seen.keys().filter(|k| !expected.contains(k)).count();
        report.clusters.insert(cluster.clone(), line);
    }
    let dlq_url = sqs
        .get_queue_url()
        .queue_name(format!("{BASE_STACK}-dlq"))
        .send()
        .await?
        .queue_url()
        .context("no DLQ url")?
        .to_owned();
    report.dead_lettered = receive_all(&sqs, &dlq_url).await?.len();
    report.invocation_times = drained.invocation_times.clone();

    // The insights table from the router's records, against what the lab sent.
    let places: Vec<(Synthetic, BTreeSet<insights::Place>)> = events
        .iter()
        .map(|(e, owners)| {
            let places = owners
                .iter()
                .map(|c| (ACCOUNT.to_owned(), REGION.to_owned(), c.clone()))
                .collect();
            (e.clone(), places)
        })
        .collect();
    let sent = insights::sent(places.iter().map(|(e, p)| (e, p)), &launched);
    let records = insights::records(&[&function], sent.values().sum()).await;
    report.insights = insights::outcome(REGION, &records, &sent);

    print_report(&report, total.elapsed());
    if options.keep {
        keep_running(&moto).await?;
    }
    function.stop().await;
    moto.stop().await;
    Ok(report)
}

/// The router's environment as the base stack configures the function, pointed at `proxy`.
pub(crate) async fn deployed_env(
    lambda: &aws_sdk_lambda::Client,
    function_name: &str,
    proxy: &AwsProxy,
) -> Result<Vec<(String, String)>> {
    let config = lambda
        .get_function_configuration()
        .function_name(function_name)
        .send()
        .await?;
    let mut env = local_aws::moto::env_for(&proxy.endpoint());
    if let Some(vars) = config.environment().and_then(|e| e.variables()) {
        env.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(env)
}

/// Publishes `events` through EventBridge's default bus, ten per PutEvents call.
async fn put_events(
    eventbridge: &aws_sdk_eventbridge::Client,
    events: &[&Synthetic],
) -> Result<()> {
    for chunk in events.chunks(10) {
        let out = eventbridge
            .put_events()
            .set_entries(Some(chunk.iter().map(|e| e.put_events_entry()).collect()))
            .send()
            .await?;
        if out.failed_entry_count() > 0 {
            bail!("PutEvents failed {} entries", out.failed_entry_count());
        }
    }
    Ok(())
}

/// Identifies a demo event by what Karpenter reads: kind, instance and state (Health: its ARN).
fn event_key_of(event: &Value) -> String {
    let detail = &event["detail"];
    match detail["eventArn"].as_str() {
        Some(arn) => arn.to_owned(),
        None => format!(
            "{}|{}|{}",
            event["detail-type"].as_str().unwrap_or_default(),
            detail["instance-id"].as_str().unwrap_or_default(),
            detail["state"].as_str().unwrap_or_default()
        ),
    }
}

fn instances_named(event: &Value) -> Vec<String> {
    let detail = &event["detail"];
    if let Some(id) = detail["instance-id"].as_str() {
        return vec![id.to_owned()];
    }
    let mut ids: Vec<String> = detail["affectedEntities"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["entityValue"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    ids.extend(
        event["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned)),
    );
    ids.sort();
    ids.dedup();
    ids
}

async fn receive_all(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<Vec<(String, u64)>> {
    let mut all = Vec::new();
    loop {
        let out = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await?;
        if out.messages().is_empty() {
            return Ok(all);
        }
        for m in out.messages() {
            let sent = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                .and_then(|s| s.parse().ok())
                .unwrap_or_default();
            all.push((m.body().unwrap_or_default().to_owned(), sent));
            if let Some(handle) = m.receipt_handle() {
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(handle)
                    .send()
                    .await?;
            }
        }
    }
}

async fn launch(ec2: &aws_sdk_ec2::Client, tags: &[(String, String)]) -> Result<String> {
    local_aws::moto::launch(ec2, tags, 1)
        .await?
        .pop()
        .context("RunInstances returned no instance")
}

/// Runs `work` behind a spinner and prints a check mark with its duration.
async fn step<T>(label: &str, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let spinner = ProgressBar::new_spinner().with_message(label.to_owned());
    spinner.enable_steady_tick(Duration::from_millis(80));
    let started = Instant::now();
    let result = work.await;
    spinner.finish_and_clear();
    match &result {
        Ok(_) => println!("  ✓ {label} ({:.1?})", started.elapsed()),
        Err(e) => println!("  ✗ {label}: {e:#}"),
    }
    result
}

async fn keep_running(moto: &MotoServer) -> Result<()> {
    println!("The emulator stays up until Ctrl-C. Point the aws CLI at it:");
    println!(
        "  export AWS_ENDPOINT_URL={} AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION={REGION}",
        moto.endpoint()
    );
    println!("  aws sqs list-queues; aws cloudformation describe-stacks; aws events list-rules");
    tokio::signal::ctrl_c().await?;
    Ok(())
}
