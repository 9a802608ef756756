//! A storm of spot warnings through routers with real SQS redelivery, while the fault proxy fails
//! calls: the harness of the fault scenarios (`tests/e2e/faults.rs`) and of `make bench`'s EC2
//! brownout row, which run it with the debug and the release router binary respectively.
//!
//! A run plays what AWS plays: an ingest queue with the base stack's settings (180 s visibility
//! timeout, redrive after 20 receives), the local event source mapping polling it with five
//! execution environments at once and leaving handed-back records to their visibility (or to the
//! router's ChangeMessageVisibility), routers starting with a cold cache, and spot warnings over
//! five clusters arriving at 10 per second. It measures each delivery's age (arrival in the
//! ingest queue → arrival in the cluster queue, both SQS SentTimestamps) and counts lost,
//! misrouted, duplicated and dead-lettered events.

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use aws_model::events::{Origin, Synthetic};
use aws_sdk_sqs::types::QueueAttributeName;
use local_aws::{
    esm::{Drained, EventSourceMapping, Stop},
    function::Function,
    moto::{ACCOUNT, REGION},
    proxy::{Fault, FaultPlan},
};

use crate::{World, karpenter_tags};

pub const CLUSTERS: usize = 5;
pub const EVENTS_PER_SECOND: u64 = 10;
/// Lambda's SQS poller starts with five concurrent batches.
pub const ENVIRONMENTS: usize = 5;
/// The base stack's ingest queue.
pub const VISIBILITY_TIMEOUT: Duration = Duration::from_secs(180);
pub const MAX_RECEIVE_COUNT: u32 = 20;
/// The same, as base.yaml gives it to the function (MAX_RECEIVE_COUNT).
const MAX_RECEIVE_COUNT_TEXT: &str = "20";
/// The base stack's event source mapping and function.
pub const BATCH_SIZE: usize = 100;
pub const BATCHING_WINDOW: Duration = Duration::from_secs(1);
pub const FUNCTION_TIMEOUT: Duration = Duration::from_secs(30);
pub const OUTAGE: Duration = Duration::from_secs(30);
pub const RANDOM_RATE: f64 = 0.1;
pub const LATE: Duration = Duration::from_secs(120);
/// Lambda's async invoke retries a failed event about a minute, then two minutes, later.
pub const ASYNC_RETRY_DELAYS: [Duration; 2] = [Duration::from_secs(60), Duration::from_secs(120)];

pub fn random_faults(actions: &[&str], seed: u64) -> FaultPlan {
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

/// The EC2 brownout: every DescribeInstances failing (503) for the first [`OUTAGE`], and
/// [`RANDOM_RATE`] of every call failing at random throughout.
pub fn ec2_brownout(seed: u64) -> FaultPlan {
    random_faults(&EVERY_CALL, seed).with_window(
        "DescribeInstances",
        Duration::ZERO..OUTAGE,
        Fault::Unavailable,
    )
}

pub const EVERY_CALL: [&str; 5] = [
    "DescribeInstances",
    "GetResources",
    "GetQueueUrl",
    "SendMessageBatch",
    "ChangeMessageVisibilityBatch",
];

/// The world of one scenario: clusters, their queues and instances, the ingest queue, the storm.
pub struct Storm {
    pub world: World,
    pub queues: BTreeMap<String, String>,
    pub owner: HashMap<String, String>,
    pub dlq: String,
    pub ingest: (String, String),
    pub events: Vec<Synthetic>,
}

/// What one run saw.
pub struct Run {
    pub name: String,
    /// Events published.
    pub events: usize,
    pub drained: Drained,
    pub calls: BTreeMap<String, u64>,
    pub faults: BTreeMap<String, u64>,
    /// Per event id: its cluster, and the age of its first delivery there (ms).
    pub delivered: HashMap<String, (String, u64)>,
    /// Per event id delivered more than once (SQS delivers at least once): its extra copies.
    pub duplicates: BTreeMap<String, usize>,
    pub misrouted: Vec<String>,
    /// Events in no cluster queue and not dead-lettered.
    pub lost: Vec<String>,
    /// Of the lost, those still in the ingest queue when the drain stopped (not dropped: the
    /// drain stopped before they came back).
    pub left_in_ingest: Vec<String>,
    /// Per lost event: what the mapping and the routers saw of it, so a loss names its cause
    /// (the router ignored or forwarded it, or no router ever received it).
    pub lost_trail: BTreeMap<String, String>,
    pub dead_lettered: BTreeMap<String, usize>,
    pub handed_back_by_cluster: BTreeMap<String, u32>,
    /// Per cluster, the calls naming it (its queue, or one of its instances) that the emulator
    /// itself answered late ([`local_aws::proxy::LATE_ANSWER`]): the delays the machine's load
    /// made, which no fault plan did.
    pub late_by_cluster: BTreeMap<String, usize>,
}

impl Storm {
    pub async fn new(events: usize) -> Result<Self> {
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
    pub async fn run(self, name: &str, plan: FaultPlan) -> Result<Run> {
        let mut routers: Vec<Function> = Vec::with_capacity(ENVIRONMENTS);
        for _ in 0..ENVIRONMENTS {
            routers.push(
                self.world
                    .start_router(&[
                        ("DEAD_LETTER_QUEUE_URL", self.dlq.as_str()),
                        ("MAX_RECEIVE_COUNT", MAX_RECEIVE_COUNT_TEXT),
                    ])
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
        let late_by_cluster = self.late_by_cluster();
        self.world.proxy.set_plan(FaultPlan::none());

        let (received, misrouted) = self.collect().await?;
        let mut delivered = HashMap::new();
        let mut duplicates = BTreeMap::new();
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
            if sent.len() > 1 {
                duplicates.insert(id.clone(), sent.len() - 1);
            }
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
            .collect::<Vec<String>>();
        let left_in_ingest = if lost.is_empty() {
            Vec::new()
        } else {
            // A look at what the drain left, after the longest hand-back delay, so a record handed
            // back late is seen and not taken for one the router dropped.
            tokio::time::sleep(Duration::from_secs(65)).await;
            self.world
                .drain(&self.ingest.0)
                .await?
                .iter()
                .filter_map(|m| m.json()["id"].as_str().map(str::to_owned))
                .filter(|id| lost.contains(id))
                .collect()
        };
        let mut lost_trail: BTreeMap<String, String> = lost
            .iter()
            .map(|id| (id.clone(), self.trail(id, &drained, &routers)))
            .collect();
        if !lost.is_empty() {
            // Messages a receive marked that no reader got (an answer lost on its way) stay
            // hidden for the visibility timeout: SQS's delay, not the router's loss.
            let hidden = self
                .world
                .sqs
                .get_queue_attributes()
                .queue_url(&self.ingest.0)
                .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                .send()
                .await?
                .attributes()
                .and_then(|a| {
                    a.get(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
                        .cloned()
                })
                .unwrap_or_default();
            lost_trail.insert(
                "(the ingest queue)".into(),
                format!(
                    "messages in flight after the drain: {hidden} (received, but not by the \
                     mapping's pollers: hidden until their visibility timeout)"
                ),
            );
        }
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
            events: self.events.len(),
            drained,
            calls,
            faults,
            delivered,
            duplicates,
            misrouted,
            lost,
            left_in_ingest,
            lost_trail,
            dead_lettered,
            handed_back_by_cluster,
            late_by_cluster,
        };
        run.print(took, self.events.len());
        Ok(run)
    }

    /// What the mapping and the routers' logs say of event `id`: whether the mapping received it
    /// (and handed it back), and every outcome a router logged for it.
    fn trail(&self, id: &str, drained: &Drained, routers: &[Function]) -> String {
        let body = self
            .events
            .iter()
            .find(|e| e.id == id)
            .map(Synthetic::body)
            .unwrap_or_default();
        let received = drained.arrivals.contains_key(&body);
        let handed_back = drained.handed_back.get(&body).copied().unwrap_or_default();
        let outcomes: Vec<String> = routers
            .iter()
            .enumerate()
            .flat_map(|(n, router)| {
                router
                    .log_records()
                    .into_iter()
                    .filter(|r| r["fields"]["event_id"] == id)
                    .map(move |r| format!("router {n}: {}", r["fields"]))
            })
            .collect();
        format!(
            "received by the mapping: {received}, handed back {handed_back} times; \
             router outcomes: {outcomes:?}"
        )
    }

    /// Per cluster, the late emulator answers naming its queue or one of its instances.
    fn late_by_cluster(&self) -> BTreeMap<String, usize> {
        let mut by_cluster = BTreeMap::new();
        for late in self.world.proxy.late_answers() {
            for cluster in self.queues.keys() {
                let queue = format!("karpenter-{cluster}\"");
                let names_an_instance = || {
                    self.owner
                        .iter()
                        .any(|(id, c)| c == cluster && late.request.contains(id.as_str()))
                };
                if late.request.contains(&queue) || names_an_instance() {
                    *by_cluster.entry(cluster.clone()).or_default() += 1;
                }
            }
        }
        by_cluster
    }

    /// Sends the storm into the ingest queue at [`EVENTS_PER_SECOND`], as EventBridge would.
    pub async fn publish(&self) -> Result<()> {
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
    pub async fn collect(&self) -> Result<(HashMap<String, (String, Vec<u64>)>, Vec<String>)> {
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
    pub fn ages_where(&self, cluster: impl Fn(&str) -> bool) -> Vec<u64> {
        self.delivered
            .values()
            .filter(|(c, _)| cluster(c))
            .map(|(_, age)| *age)
            .collect()
    }

    pub fn faults_injected(&self) -> u64 {
        self.faults.values().sum()
    }

    pub fn print(&self, took: Duration, events: usize) {
        let calls = |a: &str| self.calls.get(a).copied().unwrap_or_default();
        println!(
            "{}: {events} spot warnings over {CLUSTERS} clusters at {EVENTS_PER_SECOND}/s, \
             {ENVIRONMENTS} environments, ran {took:.1?}\n  \
             delivery age (ingest queue → cluster queue) {}\n  \
             lost {} (left in the ingest queue {:?}), misrouted {}, duplicates {:?}, \
             dead-lettered {:?}\n  \
             invocations {}, records handed back {} (by cluster {:?}); \
             late emulator answers by cluster {:?}\n  \
             calls: DescribeInstances {}, GetResources {}, SendMessageBatch {}, \
             ChangeMessageVisibilityBatch {}; injected faults {:?}",
            self.name,
            Ages::of(self.ages_where(|_| true)),
            self.lost.len(),
            self.left_in_ingest,
            self.misrouted.len(),
            self.duplicates,
            self.dead_lettered,
            self.drained.invocations,
            self.drained.retried,
            self.handed_back_by_cluster,
            self.late_by_cluster,
            calls("DescribeInstances"),
            calls("GetResources"),
            calls("SendMessageBatch"),
            calls("ChangeMessageVisibilityBatch"),
            self.faults,
        );
    }

    pub fn assert_nothing_lost_or_misrouted(&self) {
        assert!(
            self.misrouted.is_empty(),
            "{}: misrouted {:#?}",
            self.name,
            self.misrouted
        );
        assert!(
            self.lost.is_empty(),
            "{}: lost {:?} (of them left in the ingest queue: {:?}); what was seen of them: {:#?}",
            self.name,
            self.lost,
            self.left_in_ingest,
            self.lost_trail
        );
        assert!(
            self.dead_lettered.is_empty(),
            "{}: transient failures were dead-lettered: {:?}",
            self.name,
            self.dead_lettered
        );
    }

    /// No record waited out the 180 s visibility timeout: only a shortened visibility brings a
    /// handed-back record back sooner.
    pub fn assert_none_waited_the_visibility_timeout(&self) {
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
pub struct Ages(pub Vec<u64>);

impl Ages {
    pub fn of(mut ages: Vec<u64>) -> Self {
        ages.sort_unstable();
        Self(ages)
    }

    /// How many arrived later than [`LATE`].
    pub fn late(&self) -> usize {
        self.0
            .iter()
            .filter(|a| **a > LATE.as_millis() as u64)
            .count()
    }

    /// The `q` quantile (nearest rank), in seconds.
    pub fn at(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let i = ((self.0.len() as f64 * q).ceil() as usize).clamp(1, self.0.len()) - 1;
        self.0[i] as f64 / 1000.0
    }
}

impl std::fmt::Display for Ages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let late = self.late();
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
