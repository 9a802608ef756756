//! What a storm runs on, and what one pass of it costs: the [`Estate`] (the emulator with its
//! clusters, queues and Karpenter nodes), a [`pass`] of the release router over a storm's bodies
//! counting the calls the proxy saw, and the [`naive`] per-event strategy it is compared with.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use aws_model::events::{Origin, Synthetic};
use e2e_tests::{World, karpenter_tags, sqs_event};
use local_aws::{
    function::Function,
    moto::{ACCOUNT, REGION},
};

use super::Options;

/// The emulator with `clusters` queues and `events / clusters` Karpenter nodes per cluster.
pub struct Estate {
    pub world: World,
    /// Nodes, interleaved across clusters: node i belongs to cluster i % K.
    pub nodes: Vec<(String, String)>,
    pub queues: BTreeMap<String, String>,
}

impl Estate {
    pub async fn new(o: &Options) -> Result<Self> {
        let world = World::start().await?;
        let mut queues = BTreeMap::new();
        let mut per_cluster = Vec::new();
        for c in 0..o.clusters {
            let cluster = format!("c{c:02}");
            queues.insert(cluster.clone(), world.create_tenant_queue(&cluster).await?);
            per_cluster.push((
                cluster.clone(),
                world
                    .launch_many(&karpenter_tags(&cluster), (o.events / o.clusters) as i32)
                    .await?,
            ));
        }
        let nodes = (0..o.events).map(|i| {
            let (cluster, ids) = &per_cluster[i % o.clusters];
            (ids[i / o.clusters].clone(), cluster.clone())
        });
        Ok(Self {
            nodes: nodes.collect(),
            queues,
            world,
        })
    }

    /// One spot warning per node, with ids unique to `run`.
    pub fn storm(&self, run: &str) -> Vec<Synthetic> {
        let origin = Origin {
            account: ACCOUNT.into(),
            region: REGION.into(),
        };
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, (node, _))| origin.spot_warning(node, &format!("{run}-{i}")))
            .collect()
    }

    /// Reads every queue and checks it holds exactly the storm's events for its cluster, once.
    pub async fn check_delivery(&self, storm: &[Synthetic]) -> Result<()> {
        let owner: HashMap<&str, &str> = self
            .nodes
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_str()))
            .collect();
        let mut expected: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in storm {
            expected
                .entry(owner[e.instances[0].as_str()])
                .or_default()
                .push(&e.id);
        }
        for (cluster, url) in &self.queues {
            let mut got: Vec<String> = self
                .world
                .drain(url)
                .await?
                .iter()
                .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
                .collect();
            got.sort();
            let mut want: Vec<String> = expected
                .remove(cluster.as_str())
                .unwrap_or_default()
                .iter()
                .map(|s| s.to_string())
                .collect();
            want.sort();
            if got != want {
                let missing = want.iter().filter(|w| !got.contains(w)).count();
                bail!(
                    "DELIVERY CHECK FAILED for {cluster}: {} received, {} expected, {missing} missing or misrouted",
                    got.len(),
                    want.len()
                );
            }
        }
        Ok(())
    }

    pub async fn start_router(&self, binary: &Path) -> Result<Function> {
        Function::start_ready(binary, &self.world.router_env(&[])).await
    }
}

/// What one pass of a storm cost.
#[derive(Clone, Default)]
pub struct Pass {
    pub events: usize,
    pub calls: BTreeMap<String, u64>,
    pub wall: Duration,
    pub latencies: Vec<Duration>,
}

impl Pass {
    pub fn calls_per_event(&self) -> f64 {
        self.calls.values().sum::<u64>() as f64 / self.events as f64
    }
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64()
    }
    /// Adds `other`'s events, calls, time and latencies to this pass.
    pub fn add(&mut self, other: Pass) {
        self.events += other.events;
        for (action, n) in other.calls {
            *self.calls.entry(action).or_default() += n;
        }
        self.wall += other.wall;
        self.latencies.extend(other.latencies);
    }
}

/// Sends `bodies` to `router` as SQS batches of `batch` records, and counts the calls `world`'s
/// proxy saw.
pub async fn pass(
    world: &World,
    router: &Function,
    bodies: &[String],
    batch: usize,
) -> Result<Pass> {
    world.proxy.reset_counts();
    let mut latencies = Vec::new();
    let started = Instant::now();
    for chunk in bodies.chunks(batch) {
        let payload = sqs_event(chunk).to_string();
        let t = Instant::now();
        let outcome = router.invoke(payload, Duration::from_secs(30)).await;
        latencies.push(t.elapsed());
        let ok = outcome
            .json()
            .is_some_and(|r| r["batchItemFailures"].as_array().is_some_and(Vec::is_empty));
        if !ok {
            let log = router.stdout_lines();
            let problems: Vec<&String> = log
                .iter()
                .filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\""))
                .collect();
            bail!(
                "the router did not forward everything: {outcome:?}\nits last warnings:\n{:#?}",
                &problems[problems.len().saturating_sub(5)..]
            );
        }
    }
    Ok(Pass {
        events: bodies.len(),
        calls: world.proxy.calls(),
        wall: started.elapsed(),
        latencies,
    })
}

/// The events' bodies, as EventBridge delivers them.
pub fn bodies(storm: &[Synthetic]) -> Vec<String> {
    storm.iter().map(Synthetic::body).collect()
}

/// The naive per-event strategy: DescribeInstances + GetQueueUrl + SendMessage for every event,
/// no cache, no batching (what a simple per-event router does), through the same proxy.
pub async fn naive(estate: &Estate, storm: &[Synthetic]) -> Result<Pass> {
    let sdk = local_aws::moto::sdk_config_for(&estate.world.proxy.endpoint()).await;
    let (ec2, sqs) = (
        aws_sdk_ec2::Client::new(&sdk),
        aws_sdk_sqs::Client::new(&sdk),
    );
    estate.world.proxy.reset_counts();
    let mut latencies = Vec::new();
    let started = Instant::now();
    for event in storm {
        let t = Instant::now();
        let out = ec2
            .describe_instances()
            .instance_ids(&event.instances[0])
            .send()
            .await?;
        let tags = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .flat_map(|i| i.tags())
            .collect::<Vec<_>>();
        let cluster = tags
            .iter()
            .find(|t| t.key() == Some("eks:eks-cluster-name"))
            .and_then(|t| t.value())
            .context("untagged")?;
        let url = sqs
            .get_queue_url()
            .queue_name(format!("karpenter-{cluster}"))
            .send()
            .await?;
        sqs.send_message()
            .queue_url(url.queue_url().context("no url")?)
            .message_body(event.body())
            .send()
            .await?;
        latencies.push(t.elapsed());
    }
    Ok(Pass {
        events: storm.len(),
        calls: estate.world.proxy.calls(),
        wall: started.elapsed(),
        latencies,
    })
}
