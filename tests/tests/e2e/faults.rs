//! On time while AWS fails: storms of spot warnings through the router with real SQS redelivery.
//!
//! Each scenario plays what AWS plays: an ingest queue with the base stack's settings (180 s
//! visibility timeout, redrive after 20 receives), the local event source mapping polling it with
//! five execution environments at once and leaving handed-back records to their visibility (or
//! to the router's ChangeMessageVisibility), routers starting with a cold cache, and a storm of
//! spot warnings over five clusters arriving at 10 per second while the fault proxy fails calls
//! by time window and at random.
//!
//! Every scenario prints, per run, the age of every delivery when it arrived in its cluster's
//! queue (arrival in the ingest queue → arrival in the cluster queue, both SQS SentTimestamps):
//! p50, p99, max and how many were later than 120 s, next to lost / misrouted / duplicates.
//! The assertions are about mechanisms and counts, not wall-clock times: nothing lost or
//! misrouted, and no record waited out the visibility timeout (its age at delivery is below it,
//! which only the router's shortened visibility can give a handed-back record).
//!
//! Scenarios (the names): (a) DescribeInstances down for the first 30 s, 10 % of every
//! call failing at random; (b) DescribeInstances down for the whole storm, the Tagging API up;
//! (c) one cluster's queue failing its sends for 30 s, against a baseline without faults: its
//! neighbours' records are never handed back. A direct-mode part plays Lambda's async retries.
//! `FAULT_SCENARIO_EVENTS` sets the storm size (default 300; `make soak` runs more).

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use aws_model::events::{Origin, Synthetic};
use e2e_tests::{World, karpenter_tags};
use local_aws::{
    esm::{Drained, EventSourceMapping, Stop},
    function::Function,
    moto::{ACCOUNT, REGION},
    proxy::{Fault, FaultPlan},
    runtime_api::Invocation,
};

const CLUSTERS: usize = 5;
const EVENTS_PER_SECOND: u64 = 10;
/// Lambda's SQS poller starts with five concurrent batches.
const ENVIRONMENTS: usize = 5;
/// The base stack's ingest queue.
const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(180);
const MAX_RECEIVE_COUNT: u32 = 20;
/// The base stack's event source mapping and function.
const BATCH_SIZE: usize = 100;
const BATCHING_WINDOW: Duration = Duration::from_secs(1);
const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);
const OUTAGE: Duration = Duration::from_secs(30);
const RANDOM_RATE: f64 = 0.1;
const LATE: Duration = Duration::from_secs(120);
/// Lambda's async invoke retries a failed event about a minute, then two minutes, later.
const ASYNC_RETRY_DELAYS: [Duration; 2] = [Duration::from_secs(60), Duration::from_secs(120)];

/// The scenarios share two cores with their emulator and five routers each: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn storm_size() -> usize {
    std::env::var("FAULT_SCENARIO_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

fn random_faults(actions: &[&str], seed: u64) -> FaultPlan {
    FaultPlan::rate(
        RANDOM_RATE,
        actions,
        &[
            Fault::Unavailable,
            Fault::InternalError,
            Fault::Throttled,
            Fault::Reset,
            Fault::Slow(Duration::from_secs(2)),
            Fault::PartialBatch,
        ],
        seed,
    )
}

const EVERY_CALL: [&str; 5] = [
    "DescribeInstances",
    "GetResources",
    "GetQueueUrl",
    "SendMessageBatch",
    "ChangeMessageVisibilityBatch",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ec2_down_for_thirty_seconds_and_random_faults() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let storm = Storm::new(storm_size()).await?;
    let plan = random_faults(&EVERY_CALL, 20_261_123).with_window(
        "DescribeInstances",
        Duration::ZERO..OUTAGE,
        Fault::Unavailable,
    );
    let run = storm.run("(a) EC2 down 30 s + 10 % faults", plan).await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    assert!(
        run.calls.get("GetResources").copied().unwrap_or_default() > 0,
        "the Tagging API was never asked: {:?}",
        run.calls
    );
    assert!(run.faults_injected() > 0, "no fault was injected");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_describe_instances_down_for_the_whole_storm_tagging_api_up() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let storm = Storm::new(storm_size()).await?;
    let plan = random_faults(&EVERY_CALL, 20_261_124).with_window(
        "DescribeInstances",
        Duration::ZERO..Duration::from_secs(3600),
        Fault::Throttled,
    );
    let run = storm
        .run("(b) DescribeInstances down, Tagging up", plan)
        .await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    let describe = run
        .calls
        .get("DescribeInstances")
        .copied()
        .unwrap_or_default();
    let tagging = run.calls.get("GetResources").copied().unwrap_or_default();
    assert!(tagging > 0, "{:?}", run.calls);
    // After a failure the router asks the Tagging API first for a while, so a throttled EC2 is
    // not asked once per batch.
    assert!(
        describe < run.drained.invocations,
        "DescribeInstances asked {describe} times in {} invocations",
        run.drained.invocations
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_one_clusters_queue_failing_does_not_delay_its_neighbours() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let baseline = Storm::new(storm_size())
        .await?
        .run("(c) baseline, no faults", FaultPlan::none())
        .await?;
    baseline.assert_nothing_lost_or_misrouted();

    let storm = Storm::new(storm_size()).await?;
    let failing = "c0";
    // Only SendMessageBatch calls naming c0's queue fail.
    let plan = FaultPlan::none().with_window_matching(
        "SendMessageBatch",
        &format!("karpenter-{failing}\""),
        Duration::ZERO..OUTAGE,
        Fault::Unavailable,
    );
    let run = storm.run("(c) c0's queue failing 30 s", plan).await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    for label in ["baseline", "with c0 failing"] {
        let r = if label == "baseline" { &baseline } else { &run };
        println!(
            "  {label}: neighbours {}",
            Ages::of(r.ages_where(|c| c != failing))
        );
    }
    let neighbours_handed_back: Vec<&String> = run
        .handed_back_by_cluster
        .iter()
        .filter(|(c, n)| c.as_str() != failing && **n > 0)
        .map(|(c, _)| c)
        .collect();
    assert!(
        neighbours_handed_back.is_empty(),
        "neighbours were handed back: {:?}",
        run.handed_back_by_cluster
    );
    assert!(
        run.handed_back_by_cluster
            .get(failing)
            .copied()
            .unwrap_or_default()
            > 0,
        "c0's records were never handed back: the outage did not bite"
    );
    assert!(
        run.calls
            .get("ChangeMessageVisibilityBatch")
            .copied()
            .unwrap_or_default()
            > 0,
        "handed-back records kept the full visibility timeout"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_mode_retries_inside_the_invocation_before_lambda_would() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let storm = Storm::new(50).await?;
    let router = storm
        .world
        .start_router(&[("DEAD_LETTER_QUEUE_URL", storm.dlq.as_str())])
        .await?;
    // Both lookup paths down for 10 s: a direct invocation keeps retrying until they answer.
    storm.world.proxy.set_plan(
        random_faults(&EVERY_CALL, 20_261_125)
            .with_window(
                "DescribeInstances",
                Duration::ZERO..Duration::from_secs(10),
                Fault::Unavailable,
            )
            .with_window(
                "GetResources",
                Duration::ZERO..Duration::from_secs(10),
                Fault::Unavailable,
            ),
    );
    // Lambda's async retries come a minute and two minutes after a failure: their delay is added
    // to the event's age instead of being waited out here.
    let mut ages = Vec::new();
    let mut lambda_retries = 0;
    let mut exhausted = Vec::new();
    for event in &storm.events {
        let started = Instant::now();
        let mut waited = Duration::ZERO;
        let mut delivered = false;
        for attempt in 0..=ASYNC_RETRY_DELAYS.len() {
            if attempt > 0 {
                lambda_retries += 1;
                waited += ASYNC_RETRY_DELAYS[attempt - 1];
            }
            if let Invocation::Response(_) = router.invoke(event.body(), FUNCTION_TIMEOUT).await {
                delivered = true;
                break;
            }
        }
        if delivered {
            ages.push(started.elapsed() + waited);
        } else {
            exhausted.push(event.id.clone());
        }
    }
    storm.world.proxy.set_plan(FaultPlan::none());
    let (received, misrouted) = storm.collect().await?;
    let lost: Vec<&Synthetic> = storm
        .events
        .iter()
        .filter(|e| !received.contains_key(&e.id))
        .collect();
    println!(
        "direct mode: {} events, both lookup paths down 10 s, 10 % faults\n  \
         age at forward (with Lambda's retry delays added) {}\n  \
         Lambda async retries needed {lambda_retries}, past all retries {}, lost {}, misrouted {}",
        storm.events.len(),
        Ages::of(ages.iter().map(|a| a.as_millis() as u64).collect()),
        exhausted.len(),
        lost.len(),
        misrouted.len()
    );
    assert!(misrouted.is_empty(), "misrouted: {misrouted:#?}");
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert_eq!(
        lambda_retries, 0,
        "an invocation failed although it had time to retry until the lookups answered"
    );
    Ok(())
}

/// The world of one scenario: clusters, their queues and instances, the ingest queue, the storm.
struct Storm {
    world: World,
    queues: BTreeMap<String, String>,
    owner: HashMap<String, String>,
    dlq: String,
    ingest: (String, String),
    events: Vec<Synthetic>,
}

/// What one run saw.
struct Run {
    name: String,
    drained: Drained,
    calls: BTreeMap<String, u64>,
    faults: BTreeMap<String, u64>,
    /// Per event id: its cluster, and the age of its first delivery there (ms).
    delivered: HashMap<String, (String, u64)>,
    duplicates: usize,
    misrouted: Vec<String>,
    lost: Vec<String>,
    dead_lettered: BTreeMap<String, usize>,
    handed_back_by_cluster: BTreeMap<String, u32>,
}

impl Storm {
    async fn new(events: usize) -> Result<Self> {
        let world = World::start().await?;
        let origin = Origin {
            account: ACCOUNT.into(),
            region: REGION.into(),
        };
        let per_cluster = events.div_ceil(CLUSTERS);
        let mut owner = HashMap::new();
        let mut queues = BTreeMap::new();
        let mut nodes = Vec::new();
        for c in 0..CLUSTERS {
            let cluster = format!("c{c}");
            queues.insert(cluster.clone(), world.create_tenant_queue(&cluster).await?);
            let ids = world
                .launch_many(&karpenter_tags(&cluster), per_cluster as i32)
                .await?;
            owner.extend(ids.iter().map(|i| (i.clone(), cluster.clone())));
            nodes.push(ids);
        }
        // One warning per node, the clusters interleaved as a storm is.
        let events = (0..events)
            .map(|n| origin.spot_warning(&nodes[n % CLUSTERS][n / CLUSTERS], &format!("w{n}")))
            .collect();
        let dlq = world.create_queue("interruption-router-dlq").await?;
        let ingest = world
            .ingest_queue(&dlq, VISIBILITY_TIMEOUT, MAX_RECEIVE_COUNT)
            .await?;
        Ok(Self {
            world,
            queues,
            owner,
            dlq,
            ingest,
            events,
        })
    }

    /// Starts five routers, sets `plan` as the storm starts, publishes at 10 per second while the
    /// event source mapping drains, then collects every queue.
    async fn run(self, name: &str, plan: FaultPlan) -> Result<Run> {
        let mut routers: Vec<Function> = Vec::with_capacity(ENVIRONMENTS);
        for _ in 0..ENVIRONMENTS {
            routers.push(
                self.world
                    .start_router(&[("DEAD_LETTER_QUEUE_URL", self.dlq.as_str())])
                    .await?,
            );
        }
        let esm = EventSourceMapping {
            queue_url: self.ingest.0.clone(),
            queue_arn: self.ingest.1.clone(),
            batch_size: BATCH_SIZE,
            batching_window: BATCHING_WINDOW,
            function_timeout: FUNCTION_TIMEOUT,
        };
        let stop = Stop {
            handled: Some(self.events.len() as u64),
            // Longer than the longest redelivery delay the router sets (60 s).
            idle: Duration::from_secs(75),
        };
        self.world.proxy.reset_counts();
        self.world.proxy.set_plan(plan);
        let started = Instant::now();
        let environments: Vec<&Function> = routers.iter().collect();
        let (published, drained) = tokio::join!(
            self.publish(),
            esm.drain_with(&self.world.sqs, &environments, stop, |_| {})
        );
        published?;
        let drained = drained?;
        let took = started.elapsed();
        let calls = self.world.proxy.calls();
        let faults = self.world.proxy.faults();
        self.world.proxy.set_plan(FaultPlan::none());

        let (received, misrouted) = self.collect().await?;
        let mut delivered = HashMap::new();
        let mut duplicates = 0;
        for (id, (cluster, sent)) in &received {
            let body = &self
                .events
                .iter()
                .find(|e| &e.id == id)
                .context("an unknown id")?;
            let arrived = drained
                .arrivals
                .get(&body.body())
                .copied()
                .unwrap_or_default();
            let first = sent.iter().min().copied().unwrap_or_default();
            duplicates += sent.len().saturating_sub(1);
            delivered.insert(id.clone(), (cluster.clone(), first.saturating_sub(arrived)));
        }
        let dead = self.world.drain(&self.dlq).await?;
        let mut dead_lettered = BTreeMap::new();
        for d in &dead {
            let reason = d
                .attributes
                .get("reason")
                .cloned()
                .unwrap_or_else(|| "redriven by SQS (no reason)".into());
            *dead_lettered.entry(reason).or_default() += 1;
        }
        let dead_ids: Vec<String> = dead
            .iter()
            .filter_map(|d| d.json()["id"].as_str().map(str::to_owned))
            .collect();
        let lost = self
            .events
            .iter()
            .filter(|e| !received.contains_key(&e.id) && !dead_ids.contains(&e.id))
            .map(|e| e.id.clone())
            .collect();
        let mut handed_back_by_cluster: BTreeMap<String, u32> =
            self.queues.keys().map(|c| (c.clone(), 0)).collect();
        for event in &self.events {
            if let Some(n) = drained.handed_back.get(&event.body()) {
                *handed_back_by_cluster
                    .entry(self.owner[&event.instances[0]].clone())
                    .or_default() += n;
            }
        }
        let run = Run {
            name: name.to_owned(),
            drained,
            calls,
            faults,
            delivered,
            duplicates,
            misrouted,
            lost,
            dead_lettered,
            handed_back_by_cluster,
        };
        run.print(took, self.events.len());
        Ok(run)
    }

    /// Sends the storm into the ingest queue at [`EVENTS_PER_SECOND`], as EventBridge would.
    async fn publish(&self) -> Result<()> {
        let mut tick = tokio::time::interval(Duration::from_millis(1000 / EVENTS_PER_SECOND));
        for event in &self.events {
            tick.tick().await;
            self.world
                .sqs
                .send_message()
                .queue_url(&self.ingest.0)
                .message_body(event.body())
                .send()
                .await
                .context("publishing into the ingest queue")?;
        }
        Ok(())
    }

    /// Drains every cluster queue: per event id, the cluster and the SentTimestamp of each copy;
    /// and every copy that landed in a queue not its cluster's, or names another's instance.
    #[allow(clippy::type_complexity)]
    async fn collect(&self) -> Result<(HashMap<String, (String, Vec<u64>)>, Vec<String>)> {
        let expected: HashMap<&str, &str> = self
            .events
            .iter()
            .map(|e| (e.id.as_str(), self.owner[&e.instances[0]].as_str()))
            .collect();
        let mut received: HashMap<String, (String, Vec<u64>)> = HashMap::new();
        let mut misrouted = Vec::new();
        for (cluster, url) in &self.queues {
            for message in self.world.drain(url).await? {
                let event = message.json();
                let id = event["id"].as_str().unwrap_or_default().to_owned();
                let instance = event["detail"]["instance-id"].as_str().unwrap_or_default();
                if expected.get(id.as_str()) != Some(&cluster.as_str())
                    || self.owner.get(instance) != Some(cluster)
                {
                    misrouted.push(format!("{id} ({instance}) in {cluster}"));
                    continue;
                }
                received
                    .entry(id)
                    .or_insert_with(|| (cluster.clone(), Vec::new()))
                    .1
                    .push(message.sent_ms);
            }
        }
        Ok((received, misrouted))
    }
}

impl Run {
    fn ages_where(&self, cluster: impl Fn(&str) -> bool) -> Vec<u64> {
        self.delivered
            .values()
            .filter(|(c, _)| cluster(c))
            .map(|(_, age)| *age)
            .collect()
    }

    fn faults_injected(&self) -> u64 {
        self.faults.values().sum()
    }

    fn print(&self, took: Duration, events: usize) {
        let calls = |a: &str| self.calls.get(a).copied().unwrap_or_default();
        println!(
            "{}: {events} spot warnings over {CLUSTERS} clusters at {EVENTS_PER_SECOND}/s, \
             {ENVIRONMENTS} environments, ran {took:.1?}\n  \
             delivery age (ingest queue → cluster queue) {}\n  \
             lost {}, misrouted {}, duplicates {}, dead-lettered {:?}\n  \
             invocations {}, records handed back {} (by cluster {:?})\n  \
             calls: DescribeInstances {}, GetResources {}, SendMessageBatch {}, \
             ChangeMessageVisibilityBatch {}; injected faults {:?}",
            self.name,
            Ages::of(self.ages_where(|_| true)),
            self.lost.len(),
            self.misrouted.len(),
            self.duplicates,
            self.dead_lettered,
            self.drained.invocations,
            self.drained.retried,
            self.handed_back_by_cluster,
            calls("DescribeInstances"),
            calls("GetResources"),
            calls("SendMessageBatch"),
            calls("ChangeMessageVisibilityBatch"),
            self.faults,
        );
    }

    fn assert_nothing_lost_or_misrouted(&self) {
        assert!(
            self.misrouted.is_empty(),
            "{}: misrouted {:#?}",
            self.name,
            self.misrouted
        );
        assert!(self.lost.is_empty(), "{}: lost {:?}", self.name, self.lost);
        assert!(
            self.dead_lettered.is_empty(),
            "{}: transient failures were dead-lettered: {:?}",
            self.name,
            self.dead_lettered
        );
    }

    /// No record waited out the 180 s visibility timeout: only a shortened visibility brings a
    /// handed-back record back sooner.
    fn assert_none_waited_the_visibility_timeout(&self) {
        let waited: Vec<(&String, &u64)> = self
            .delivered
            .iter()
            .filter(|(_, (_, age))| *age >= VISIBILITY_TIMEOUT.as_millis() as u64)
            .map(|(id, (_, age))| (id, age))
            .collect();
        assert!(
            waited.is_empty(),
            "{}: records waited out the visibility timeout: {waited:?}",
            self.name
        );
    }
}

/// p50 / p99 / max of delivery ages, and how many were late.
struct Ages(Vec<u64>);

impl Ages {
    fn of(mut ages: Vec<u64>) -> Self {
        ages.sort_unstable();
        Self(ages)
    }

    fn at(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let i = ((self.0.len() as f64 * q).ceil() as usize).clamp(1, self.0.len()) - 1;
        self.0[i] as f64 / 1000.0
    }
}

impl std::fmt::Display for Ages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let late = self
            .0
            .iter()
            .filter(|a| **a > LATE.as_millis() as u64)
            .count();
        write!(
            f,
            "n {}: p50 {:.1} s, p99 {:.1} s, max {:.1} s, later than {} s: {late}",
            self.0.len(),
            self.at(0.5),
            self.at(0.99),
            self.at(1.0),
            LATE.as_secs()
        )
    }
}
