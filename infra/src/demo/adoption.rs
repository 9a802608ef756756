//! `routerctl demo --adopt`: clusters that run Karpenter with their own interruption set-ups moved
//! onto the router by `routerctl adopt` while interruptions keep coming, on the local emulator.
//!
//! [`Estate`] is the scene, shared with adopt's end-to-end test: the real base stack; clusters
//! `alpha` and `beta` with Karpenter's getting-started stack, `gamma` with a Terraform-style
//! set-up, `delta` with nodes and no set-up at all ([`crate::local::old_setups`]); each set-up
//! cluster's Karpenter reading its old queue ([`crate::local::karpenter`]); a stream of every kind
//! of event for those clusters' nodes through the default bus as AWS runs it
//! ([`crate::local::eventbridge`]), which feeds the old queues and the router's ingest queue; the
//! router binary behind the local event source mapping, and behind the local Invoke API for
//! adopt's probe. [`Estate::advance`] takes one cluster one move further: adopt's `--apply`, or,
//! where adopt hands the step to the operator, what the operator does (the helm upgrade, the
//! getting-started stack's update, a purge).
//!
//! [`Estate::finish`] stops the stream and checks every event against the queue its cluster's
//! Karpenter was reading when it was sent.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use interruption_router::event::Kind;
use tokio::task::JoinHandle;

use crate::{
    adopt::{self, Outcome as Adopted, steps::State},
    aws::Aws,
    events::Origin,
    local::{
        esm::{Drained, EventSourceMapping, Stop},
        eventbridge::DefaultBus,
        function::{Function, router_binary},
        invoke_api::InvokeApi,
        karpenter::Karpenter,
        moto::{ACCOUNT, MotoServer, REGION, karpenter_tags, launch, sdk_config_for},
        old_setups::{self, Retire},
        proxy::AwsProxy,
    },
    sandbox::Sandbox,
    stacks,
};

pub const STACK: &str = "interruption-router";

/// How often the stream sends an event: as often as the emulator keeps up with while adopt reads
/// the account (each event is a ListRules, and a SendMessage per matching target).
pub const STREAM_EVERY: Duration = Duration::from_millis(250);

/// How a cluster handles interruptions before the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    GettingStarted,
    Terraform,
}

/// The scene's clusters: name and set-up.
pub const CLUSTERS: [(&str, Option<Flavour>); 4] = [
    ("alpha", Some(Flavour::GettingStarted)),
    ("beta", Some(Flavour::GettingStarted)),
    ("gamma", Some(Flavour::Terraform)),
    ("delta", None),
];

pub struct Cluster {
    pub flavour: Option<Flavour>,
    pub nodes: Vec<String>,
    /// The queue its set-up made.
    pub old_queue: Option<String>,
    /// Karpenter's controller role.
    pub role: Option<String>,
    pub karpenter: Option<Karpenter>,
}

/// One event of the stream.
#[derive(Debug, Clone)]
pub struct Published {
    pub id: String,
    pub kind: Kind,
    pub clusters: Vec<String>,
    /// When the default bus had delivered it.
    pub at: Instant,
}

/// One move of [`Estate::advance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Move {
    /// adopt --apply made step `step`'s change.
    Applied {
        step: u8,
        did: String,
    },
    /// adopt handed step `step` to the operator, who did this.
    Operator {
        step: u8,
        did: String,
    },
    /// Step `step` waits on time (a new queue's propagation, SQS's metrics).
    Waited {
        step: u8,
        why: String,
    },
    Finished,
}

impl std::fmt::Display for Move {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Move::Applied { step, did } => write!(f, "step {step}, adopt --apply: {did}"),
            Move::Operator { step, did } => write!(f, "step {step}, operator: {did}"),
            Move::Waited { step, why } => write!(f, "step {step}, waiting: {why}"),
            Move::Finished => f.write_str("adopted: every step done"),
        }
    }
}

pub struct Estate {
    pub moto: MotoServer,
    pub sandbox: Sandbox,
    /// Clients for the emulator, with Lambda at the local Invoke API (adopt's probe).
    pub aws: Aws,
    pub clusters: BTreeMap<String, Cluster>,
    _proxy: AwsProxy,
    _invoke: InvokeApi,
    esm: JoinHandle<Result<Drained>>,
    stream_stop: Arc<AtomicBool>,
    stream: JoinHandle<Result<Vec<Published>>>,
}

impl Estate {
    /// Sets the scene up and starts the stream, one event every `every`.
    pub async fn start(router_bin: Option<PathBuf>, every: Duration) -> Result<Self> {
        let binary = match router_bin {
            Some(path) => path,
            None => router_binary()?,
        };
        let moto = MotoServer::start().await?;
        let sandbox = Sandbox::deploy(&moto, STACK, &[]).await?;
        let mut clusters = BTreeMap::new();
        for (name, flavour) in CLUSTERS {
            let aws = &sandbox.aws;
            let nodes = launch(&aws.ec2, &karpenter_tags(name), 2).await?;
            let (old_queue, role) = match flavour {
                Some(Flavour::GettingStarted) => (
                    Some(old_setups::getting_started(aws, name).await?),
                    Some(old_setups::getting_started_role(name)),
                ),
                Some(Flavour::Terraform) => (
                    Some(old_setups::terraform_style(aws, name).await?),
                    Some(old_setups::terraform_role(name)),
                ),
                None => (None, None),
            };
            let karpenter = match &old_queue {
                Some(queue) => Some(Karpenter::start(aws, queue).await?),
                None => None,
            };
            clusters.insert(
                name.to_owned(),
                Cluster {
                    flavour,
                    nodes,
                    old_queue,
                    role,
                    karpenter,
                },
            );
        }

        // The router, as the base stack configures it, behind the mapping and the Invoke API.
        let proxy = AwsProxy::start(moto.endpoint()).await?;
        let env =
            super::deployed_env(&sandbox.aws.lambda, sandbox.function_name()?, &proxy).await?;
        let router = Arc::new(Function::start_ready(&binary, &env).await?);
        let function = sandbox.function_name()?.to_owned();
        let invoke = InvokeApi::start(router.clone(), &function, Duration::from_secs(30)).await?;
        let aws = Aws {
            lambda: aws_sdk_lambda::Client::new(&sdk_config_for(&invoke.endpoint()).await),
            ..sandbox.aws.clone()
        };
        let mapping = EventSourceMapping::take_over(
            &sandbox.aws.lambda,
            &sandbox.aws.sqs,
            &function,
            Duration::from_secs(30),
        )
        .await?;
        let sqs = sandbox.aws.sqs.clone();
        let esm = tokio::spawn(async move {
            // Runs as long as the stream does, and drains the ingest queue after it.
            let stop = Stop {
                handled: None,
                idle: Duration::from_secs(5),
            };
            mapping.drain(&sqs, &router, stop, |_| {}).await
        });

        let stream_stop = Arc::new(AtomicBool::new(false));
        let nodes: Vec<(String, Vec<String>)> = clusters
            .iter()
            .filter(|(_, c)| c.flavour.is_some())
            .map(|(name, c)| (name.clone(), c.nodes.clone()))
            .collect();
        let stream = tokio::spawn(stream(
            DefaultBus::new(&sandbox.aws),
            nodes,
            every,
            stream_stop.clone(),
        ));
        Ok(Self {
            moto,
            sandbox,
            aws,
            clusters,
            _proxy: proxy,
            _invoke: invoke,
            esm,
            stream_stop,
            stream,
        })
    }

    pub async fn adopt(&self, options: &adopt::Options) -> Result<adopt::Report> {
        adopt::run(&self.aws, options).await
    }

    /// `cluster`'s Karpenter, pointed at `queue` (a helm upgrade).
    pub async fn helm(&mut self, cluster: &str, queue: &str) -> Result<()> {
        self.cluster_mut(cluster)?
            .karpenter
            .as_mut()
            .context("no Karpenter")?
            .point_at(queue)
            .await
    }

    fn cluster_mut(&mut self, cluster: &str) -> Result<&mut Cluster> {
        self.clusters
            .get_mut(cluster)
            .with_context(|| format!("no cluster {cluster}"))
    }

    /// The router's queue for `cluster`.
    pub fn tenant_queue(cluster: &str) -> String {
        format!("karpenter-{cluster}")
    }

    /// One move further for `cluster`: adopt's `--apply`, or the operator's part of the step.
    pub async fn advance(&mut self, cluster: &str) -> Result<Move> {
        let report = self.adopt(&adopt::Options::apply(STACK, cluster)).await?;
        let plan = report
            .cluster(cluster)
            .context("cluster left out of the report")?;
        match &report.outcome {
            Adopted::Finished => Ok(Move::Finished),
            Adopted::Applied { step, did } => {
                let role = self.clusters[cluster].role.clone();
                match step {
                    // moto skips parts of the tenant stack; put them back as AWS would have them.
                    1 | 2 => {
                        self.sandbox
                            .complete_tenant(cluster, role.as_deref())
                            .await?
                    }
                    // A probe takes a moment to reach Karpenter and SQS's metric.
                    4 => tokio::time::sleep(Duration::from_secs(1)).await,
                    _ => {}
                }
                Ok(Move::Applied {
                    step: *step,
                    did: did.clone(),
                })
            }
            Adopted::Refused { step, why } => {
                let at = plan.step(*step);
                let flavour = self.clusters[cluster].flavour;
                let did = match (step, &at.state, flavour) {
                    (3, State::Todo, _) => {
                        let queue = Self::tenant_queue(cluster);
                        self.helm(cluster, &queue).await?;
                        let helm =
                            format!("helm upgrade … --set settings.interruptionQueue={queue}");
                        if plan.rolled_back {
                            self.adopt(&adopt::Options::resume(STACK, cluster)).await?;
                            format!("{helm}; routerctl adopt --cluster {cluster} --resume")
                        } else {
                            helm
                        }
                    }
                    (6 | 7, State::Todo, Some(Flavour::GettingStarted)) => {
                        let (what, which) = match step {
                            6 => (Retire::Rules, "rules"),
                            _ => (Retire::Queue, "queue"),
                        };
                        old_setups::retire_getting_started(&self.aws, cluster, what).await?;
                        format!(
                            "removed the old {which} from stack {} and updated it",
                            old_setups::getting_started_stack(cluster)
                        )
                    }
                    (7, State::Waiting, _) => {
                        let queue = self.clusters[cluster].old_queue.clone().unwrap_or_default();
                        let url = self.sandbox.queue_url(&queue).await?;
                        self.aws.sqs.purge_queue().queue_url(&url).send().await?;
                        format!("aws sqs purge-queue --queue-url {url}")
                    }
                    (1 | 4, State::Waiting, _) => {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        return Ok(Move::Waited {
                            step: *step,
                            why: at.detail.clone(),
                        });
                    }
                    _ => bail!("{cluster} is stuck: {why}"),
                };
                Ok(Move::Operator { step: *step, did })
            }
            Adopted::Planned | Adopted::RolledBack { .. } | Adopted::Resumed => {
                bail!("adopt --apply did not apply")
            }
        }
    }

    /// Stops the stream, lets the router and every Karpenter drain, and checks what each
    /// Karpenter read.
    pub async fn finish(mut self) -> Result<Outcome> {
        self.stream_stop.store(true, Ordering::SeqCst);
        let published = self.stream.await??;
        let drained = self.esm.await??;
        let mut reads = BTreeMap::new();
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for (name, cluster) in self.clusters.iter_mut() {
            for node in &cluster.nodes {
                owner.insert(node.clone(), name.clone());
            }
            if let Some(karpenter) = cluster.karpenter.as_mut() {
                karpenter.stop().await?;
                reads.insert(name.clone(), karpenter.reads());
            }
        }
        let mut missed = Vec::new();
        for event in &published {
            for cluster in &event.clusters {
                let karpenter = self.clusters[cluster].karpenter.as_ref().unwrap();
                let queue = karpenter.reading_at(event.at).unwrap_or_default();
                let read = reads[cluster]
                    .iter()
                    .any(|r| r.id == event.id && r.queue == queue);
                if !read {
                    missed.push(format!(
                        "{cluster}: {} ({}) was sent while its Karpenter read {queue}, which \
                         never received it",
                        event.id,
                        event.kind.label()
                    ));
                }
            }
        }
        // Reads that are not the stream's: adopt's probes (simulate's ids), by cluster and queue.
        let probes = reads
            .iter()
            .flat_map(|(cluster, reads)| {
                reads
                    .iter()
                    .filter(|r| r.id.starts_with("routerctl-"))
                    .map(move |r| (cluster.clone(), r.queue.clone(), r.id.clone()))
            })
            .collect();
        let mut misrouted = Vec::new();
        for (cluster, reads) in &reads {
            for read in reads
                .iter()
                .filter(|r| r.queue == Self::tenant_queue(cluster))
            {
                for instance in &read.instances {
                    if owner.get(instance) != Some(cluster) {
                        misrouted.push(format!(
                            "{} in {}: names {instance} of {}",
                            read.id,
                            read.queue,
                            owner.get(instance).map_or("no cluster", String::as_str)
                        ));
                    }
                }
            }
        }
        let dlq = self.sandbox.base.output("DeadLetterQueueArn")?.to_owned();
        let dlq_url = self.sandbox.queue_url(crate::aws::arn_name(&dlq)).await?;
        let dead_lettered = self
            .aws
            .sqs
            .get_queue_attributes()
            .queue_url(&dlq_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await?
            .attributes()
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)?
                    .parse()
                    .ok()
            })
            .unwrap_or_default();
        let mut kinds: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
        for event in &published {
            for cluster in &event.clusters {
                kinds
                    .entry(cluster.clone())
                    .or_default()
                    .insert(event.kind.label());
            }
        }
        self.moto.stop().await;
        Ok(Outcome {
            published: published.len(),
            kinds,
            missed,
            misrouted,
            dead_lettered,
            handed_back: drained.retried,
            probes,
        })
    }
}

/// What the stream's events became.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub published: usize,
    /// The kinds each cluster had events of.
    pub kinds: BTreeMap<String, BTreeSet<&'static str>>,
    /// Events the queue their cluster's Karpenter read at the time never received.
    pub missed: Vec<String>,
    /// Events in a router queue that name another cluster's instance.
    pub misrouted: Vec<String>,
    pub dead_lettered: u64,
    /// Records the router handed back to the ingest queue.
    pub handed_back: u64,
    /// adopt's probes Karpenter read: (cluster, queue, event id).
    pub probes: Vec<(String, String, String)>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.missed.is_empty() && self.misrouted.is_empty() && self.dead_lettered == 0
    }
}

/// Kinds in the order the stream cycles through them.
const KINDS: [Kind; 5] = [
    Kind::SpotInterruption,
    Kind::RebalanceRecommendation,
    Kind::StateChange,
    Kind::ScheduledChange,
    Kind::CapacityReservationInterruption,
];

/// Publishes one event every `every` until `stop`: each cluster in turn, each kind in turn,
/// alternating nodes; every 7th a Health event naming a node of every cluster.
async fn stream(
    bus: DefaultBus,
    nodes: Vec<(String, Vec<String>)>,
    every: Duration,
    stop: Arc<AtomicBool>,
) -> Result<Vec<Published>> {
    let origin = Origin {
        account: ACCOUNT.to_owned(),
        region: REGION.to_owned(),
    };
    let mut published = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        let (cluster, cluster_nodes) = &nodes[n % nodes.len()];
        let node = &cluster_nodes[(n / nodes.len()) % cluster_nodes.len()];
        let kind = KINDS[(n / nodes.len()) % KINDS.len()];
        let health_for_all = n % 7 == 6;
        let id = match health_for_all {
            true => format!("adopt-{n}-scheduled-change-all"),
            false => format!("adopt-{n}-{}", kind.label()),
        };
        let (event, clusters) = if health_for_all {
            let all: Vec<String> = nodes.iter().map(|(_, nodes)| nodes[0].clone()).collect();
            (
                origin.scheduled_change(&all, &id),
                nodes.iter().map(|(c, _)| c.clone()).collect(),
            )
        } else {
            let event = match kind {
                Kind::SpotInterruption => origin.spot_warning(node, &id),
                Kind::RebalanceRecommendation => origin.rebalance(node, &id),
                Kind::StateChange if n.is_multiple_of(2) => {
                    origin.state_change(node, "stopping", &id)
                }
                Kind::StateChange => origin.state_change(node, "terminated", &id),
                Kind::ScheduledChange => origin.scheduled_change(std::slice::from_ref(node), &id),
                Kind::CapacityReservationInterruption => origin.capacity_reservation(node, &id),
            };
            (event, vec![cluster.clone()])
        };
        bus.put(&event.event).await?;
        published.push(Published {
            id,
            kind: event.kind,
            clusters,
            at: Instant::now(),
        });
        n += 1;
        tokio::time::sleep(every).await;
    }
    Ok(published)
}

/// The demo: the plan, every set-up cluster walked to the end, and what the stream became.
pub async fn run(router_bin: Option<PathBuf>) -> Result<bool> {
    let started = Instant::now();
    println!("Adopting running clusters onto the router while interruptions keep coming");
    let mut estate = Estate::start(router_bin, STREAM_EVERY).await?;
    println!(
        "  ✓ Base stack, two getting-started set-ups, one Terraform-style, a cluster with none; \
         a stream of every kind of event through the default bus ({:.1?})\n",
        started.elapsed()
    );
    let plan = estate.adopt(&adopt::Options::plan(STACK)).await?;
    println!("$ routerctl adopt\n{}", plan.render());
    let walking: Vec<String> = estate
        .clusters
        .iter()
        .filter(|(_, c)| c.flavour.is_some())
        .map(|(name, _)| name.clone())
        .collect();
    let mut done = BTreeSet::new();
    let mut waiting: BTreeMap<String, u8> = BTreeMap::new();
    // Round-robin, so one cluster's wait overlaps another's moves.
    for _ in 0..100 {
        for cluster in &walking {
            if done.contains(cluster) {
                continue;
            }
            let step = estate.advance(cluster).await?;
            // A wait is shown once per step, not once per look.
            match &step {
                Move::Waited { step: n, .. } if waiting.get(cluster) == Some(n) => {}
                Move::Waited { step: n, .. } => {
                    waiting.insert(cluster.clone(), *n);
                    println!("  {cluster:<6} {step}");
                }
                _ => {
                    waiting.remove(cluster);
                    println!("  {cluster:<6} {step}");
                }
            }
            if step == Move::Finished {
                done.insert(cluster.clone());
            }
        }
        if done.len() == walking.len() {
            break;
        }
    }
    let last = estate.adopt(&adopt::Options::plan(STACK)).await?;
    println!("\n$ routerctl adopt\n{}", last.render());
    let outcome = estate.finish().await?;
    println!(
        "{} events during the adoption: {} missed (not received by the queue the cluster's \
         Karpenter read when each was sent), {} in another cluster's queue, {} dead-lettered ({:.1?})",
        outcome.published,
        outcome.missed.len(),
        outcome.misrouted.len(),
        outcome.dead_lettered,
        started.elapsed()
    );
    for line in outcome.missed.iter().chain(&outcome.misrouted).take(20) {
        println!("  ✗ {line}");
    }
    Ok(outcome.passed() && done.len() == walking.len())
}

/// The tenant stack adopt deploys for `cluster` next to the scene's base stack.
pub fn tenant_stack(cluster: &str) -> String {
    stacks::tenant_stack_name(STACK, cluster)
}
