//! Nothing lost, nothing misrouted, while AWS fails.
//!
//! A storm of interruption events over ten clusters goes through the router while a fifth of its
//! EC2 and SQS calls fail (500/503, throttling in each protocol's error shape, connection resets,
//! answers that arrive after the SDK's attempt timeout, SendMessageBatch answers with failed
//! entries), and the first lookups of the storm fail outright (an EC2 brownout). Both delivery
//! paths are played as AWS plays them:
//!
//! * queue mode: a real ingest queue with the base stack's redrive policy (5 receives, then the
//!   DLQ), drained by the local event source mapping, which returns `batchItemFailures` records;
//! * direct mode: one invocation per event, retried twice on error as Lambda's async invoke does,
//!   then sent to the DLQ as the on-failure destination would.
//!
//! Every event must end in exactly its cluster's queue (at least once) or in the DLQ; no message
//! may name another cluster's instance. Duplicates are allowed (at-least-once) and reported.
//! `FAULT_SCENARIO_EVENTS` sets the storm size (default 2,000; `make soak` runs 10,000).

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use e2e_tests::{
    Received, World, karpenter_tags,
    local::{
        esm::{EventSourceMapping, Stop},
        moto::{ACCOUNT, REGION},
        proxy::{Fault, FaultPlan},
        runtime_api::Invocation,
    },
};
use routerctl::events::{Origin, Synthetic};
use serde_json::Value;

const CLUSTERS: usize = 10;
const FAILURE_RATE: f64 = 0.2;
/// Lambda's async invoke: the first attempt and two retries.
const ASYNC_ATTEMPTS: usize = 3;
const DIRECT_EVENTS: usize = 100;
/// DescribeInstances calls failed in a row as the storm starts: two invocations' worth of the
/// SDK's three attempts.
const OUTAGE_CALLS: u64 = 6;

fn storm_size() -> usize {
    std::env::var("FAULT_SCENARIO_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_fifth_of_aws_calls_failing_every_event_reaches_its_cluster_or_the_dlq() -> Result<()>
{
    let world_started = Instant::now();
    let world = World::start().await?;
    let origin = Origin {
        account: ACCOUNT.into(),
        region: REGION.into(),
    };

    // Ten clusters, each with its queue and enough nodes for four events (a FIS spot experiment)
    // per node.
    let per_cluster = storm_size().div_ceil(CLUSTERS * 4);
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut nodes: Vec<Vec<String>> = Vec::new();
    let mut queues = BTreeMap::new();
    for c in 0..CLUSTERS {
        let cluster = format!("c{c:02}");
        queues.insert(
            cluster.clone(),
            world.create_queue(&format!("karpenter-{cluster}")).await?,
        );
        let ids = world
            .launch_many(&karpenter_tags(&cluster), per_cluster as i32)
            .await?;
        owner.extend(ids.iter().map(|i| (i.clone(), cluster.clone())));
        nodes.push(ids);
    }
    let dlq = world.create_queue("interruption-router-dlq").await?;
    let ingest = ingest_queue(&world, &dlq).await?;

    // The storm, interleaved across clusters; plus separate events for the direct path.
    let mut storm: Vec<Synthetic> = Vec::new();
    for n in 0..per_cluster {
        for cluster_nodes in &nodes {
            storm.extend(origin.spot_experiment(
                &cluster_nodes[n],
                &format!("{}-{n}", owner[&cluster_nodes[n]]),
            ));
        }
    }
    let direct: Vec<Synthetic> = (0..DIRECT_EVENTS)
        .map(|n| {
            origin.spot_warning(
                &nodes[n % CLUSTERS][n / CLUSTERS % per_cluster],
                &format!("direct-{n}"),
            )
        })
        .collect();
    let expected: HashMap<String, String> = storm
        .iter()
        .chain(&direct)
        .map(|e| (e.id.clone(), owner[&e.instances[0]].clone()))
        .collect();

    for chunk in storm.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, e)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(e.body())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = world
            .sqs
            .send_message_batch()
            .queue_url(&ingest.0)
            .set_entries(Some(entries))
            .send()
            .await?;
        anyhow::ensure!(
            out.failed().is_empty(),
            "seeding the ingest queue failed: {:?}",
            out.failed()
        );
    }

    let router = world
        .start_router(&[("DEAD_LETTER_QUEUE_URL", dlq.as_str())])
        .await?;
    let failing = ["DescribeInstances", "GetQueueUrl", "SendMessageBatch"];
    let faults = [
        Fault::Unavailable,
        Fault::InternalError,
        Fault::Throttled,
        Fault::Reset,
        Fault::Slow(Duration::from_secs(4)),
        Fault::PartialBatch,
    ];
    // On top of the random failures, an EC2 brownout as the storm starts: the first lookups fail
    // past every SDK retry, so records are certain to be handed back and redelivered (random
    // failures alone are mostly absorbed by the retries inside the router).
    world.proxy.set_plan(
        FaultPlan::rate(FAILURE_RATE, &failing, &faults, 20_261_122).with_outage(
            "DescribeInstances",
            OUTAGE_CALLS,
            Fault::Unavailable,
        ),
    );
    let started = Instant::now();
    let set_up = world_started.elapsed();

    // Queue mode.
    let esm = EventSourceMapping {
        queue_url: ingest.0.clone(),
        queue_arn: ingest.1.clone(),
        batch_size: 100,
        batching_window: Duration::ZERO,
        function_timeout: Duration::from_secs(30),
    };
    let stop = Stop {
        handled: Some(storm.len() as u64),
        idle: Duration::from_secs(15),
    };
    let drained = esm.drain(&world.sqs, &router, stop, |_| {}).await?;
    let queue_mode = started.elapsed();

    // Direct mode.
    let mut async_retries = 0;
    let mut exhausted = Vec::new();
    for event in &direct {
        let mut delivered = false;
        for attempt in 0..ASYNC_ATTEMPTS {
            async_retries += usize::from(attempt > 0);
            if let Invocation::Response(_) =
                router.invoke(event.body(), Duration::from_secs(30)).await
            {
                delivered = true;
                break;
            }
        }
        if !delivered {
            exhausted.push(event.id.clone());
            // Lambda's on-failure destination: the DLQ.
            world
                .sqs
                .send_message()
                .queue_url(&dlq)
                .message_body(event.body())
                .send()
                .await?;
        }
    }
    let direct_mode = started.elapsed() - queue_mode;
    let injected = world.proxy.faults();
    let calls = world.proxy.calls();
    world.proxy.set_plan(FaultPlan::none());

    // Where did everything end up?
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut misrouted = Vec::new();
    for (cluster, url) in &queues {
        for message in world.drain(url).await? {
            let event = message.json();
            let id = event["id"].as_str().unwrap_or_default().to_owned();
            let named_instances = named(&event);
            if expected.get(&id) != Some(cluster)
                || named_instances
                    .iter()
                    .any(|i| owner.get(i) != Some(cluster))
            {
                misrouted.push(format!("{id} ({named_instances:?}) in {cluster}"));
            }
            *seen.entry(id).or_default() += 1;
        }
    }
    let dead: Vec<Received> = world.drain(&dlq).await?;
    let mut dead_by_reason: BTreeMap<String, usize> = BTreeMap::new();
    for d in &dead {
        let reason = d
            .attributes
            .get("reason")
            .cloned()
            .unwrap_or_else(|| "redriven (no reason: SQS or Lambda moved it)".into());
        *dead_by_reason.entry(reason).or_default() += 1;
        seen.entry(d.json()["id"].as_str().unwrap_or_default().to_owned())
            .or_default();
    }
    let lost: Vec<&String> = expected
        .keys()
        .filter(|id| !seen.contains_key(*id))
        .collect();
    let duplicates: usize = seen.values().map(|n| n.saturating_sub(1)).sum();
    let total_faults: u64 = injected.values().sum();
    let total_calls: u64 = calls.values().sum();

    println!(
        "fault scenario: {} events ({} queued, {} direct) over {CLUSTERS} clusters\n  \
         set-up {set_up:.1?}, queue mode {queue_mode:.1?}, direct mode {direct_mode:.1?}\n  \
         router AWS calls {total_calls}, failed by injection {total_faults} ({:.0}%): {injected:?}\n  \
         queue mode: {} invocations, {} records handed back for retry\n  \
         direct mode: {async_retries} async retries, {} events past all retries\n  \
         delivered {} distinct events, {duplicates} duplicates; DLQ {}: {dead_by_reason:?}\n  \
         lost {}, misrouted {}",
        expected.len(),
        storm.len(),
        direct.len(),
        100.0 * total_faults as f64 / total_calls.max(1) as f64,
        drained.invocations,
        drained.retried,
        exhausted.len(),
        seen.len() - dead.len().min(seen.len()),
        dead.len(),
        lost.len(),
        misrouted.len(),
    );
    assert!(misrouted.is_empty(), "misrouted: {misrouted:#?}");
    assert!(lost.is_empty(), "lost: {lost:?}");
    // The scenario really exercised failure: faults near the configured rate, and records retried.
    assert!(
        total_faults as f64 > total_calls as f64 * FAILURE_RATE * 0.5,
        "only {total_faults} of {total_calls} calls failed"
    );
    assert!(drained.retried > 0, "no record ever needed a retry");
    Ok(())
}

/// The ingest queue with the base stack's settings: 180 s visibility, redrive after 5 receives.
async fn ingest_queue(world: &World, dlq_url: &str) -> Result<(String, String)> {
    let arn = |url: &str| {
        let url = url.to_owned();
        async move {
            let out = world
                .sqs
                .get_queue_attributes()
                .queue_url(&url)
                .attribute_names(QueueAttributeName::QueueArn)
                .send()
                .await?;
            out.attributes()
                .and_then(|a| a.get(&QueueAttributeName::QueueArn))
                .cloned()
                .context("no QueueArn")
        }
    };
    let redrive =
        serde_json::json!({"deadLetterTargetArn": arn(dlq_url).await?, "maxReceiveCount": 5})
            .to_string();
    let url = world
        .sqs
        .create_queue()
        .queue_name("interruption-router-ingest")
        .attributes(QueueAttributeName::VisibilityTimeout, "180")
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await?
        .queue_url()
        .context("no queue url")?
        .to_owned();
    let arn = arn(&url).await?;
    Ok((url, arn))
}

fn named(event: &Value) -> Vec<String> {
    let detail = &event["detail"];
    if let Some(id) = detail["instance-id"].as_str() {
        return vec![id.to_owned()];
    }
    detail["affectedEntities"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["entityValue"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
