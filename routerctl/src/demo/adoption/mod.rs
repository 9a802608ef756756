//! `routerctl demo --adopt`: clusters that run Karpenter with their own interruption set-ups moved
//! onto the router by `routerctl adopt` while interruptions keep coming, on the local emulator,
//! with AWS's timing kept in.
//!
//! [`Estate`] is the scene, shared with adopt's end-to-end tests: the real base stack; clusters
//! with the set-ups of [`crate::demo::old_setups`] ([`Scene::demo`]: `alpha` with Karpenter's
//! getting-started stack, `beta` with terraform-aws-eks's karpenter module, `gamma` made by hand,
//! `delta` with nodes and no set-up); each set-up cluster's Karpenter reading its old queue
//! ([`local_aws::karpenter`]: 20-s long polls, a leader handover, deletion metrics minutes
//! late); a stream of every kind of event each set-up covers, for those clusters' nodes, through
//! the default bus as AWS runs it ([`local_aws::eventbridge`]: rule changes take effect after
//! [`Scene::rule_delay`]), which feeds the old queues and the router's ingest queue; the router
//! binary behind the local event source mapping, and behind the local Invoke API for adopt's
//! probe. [`Estate::advance`] takes one cluster one move further: adopt's `--apply`, or, where
//! adopt hands the step to the operator, what the operator does (the helm upgrade, the
//! getting-started stack's update with `--stack-template`, Terraform's apply, a purge).
//!
//! [`Estate::finish`] stops the stream and checks every event against the queue its cluster's
//! Karpenter was pointed at when it was sent.

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

use super::old_setups::{self, Flavour};
use crate::{
    adopt::{self, Outcome as Adopted, steps::State},
    demo::sandbox::Sandbox,
};
use aws_model::{aws::Aws, events::Origin, stacks};
use local_aws::{
    esm::{Drained, EventSourceMapping, Stop},
    eventbridge::DefaultBus,
    function::{Function, router_binary},
    invoke_api::InvokeApi,
    karpenter::{Behaviour, Karpenter},
    moto::{ACCOUNT, MotoServer, REGION, karpenter_tags, launch, sdk_config_for},
    proxy::AwsProxy,
};

pub const STACK: &str = "interruption-router";

/// How often the stream sends an event: as often as the emulator keeps up with while adopt reads
/// the account (each event is a ListRules, and a SendMessage per matching target).
pub const STREAM_EVERY: Duration = Duration::from_millis(250);

/// What the scene holds.
#[derive(Debug, Clone)]
pub struct Scene {
    /// Each cluster's name and set-up (none: nodes and no interruption handling).
    pub clusters: Vec<(String, Option<Flavour>)>,
    /// More base stack parameters (QueuePrefix, …).
    pub base_parameters: Vec<(String, String)>,
    pub every: Duration,
    /// How long after a rule state change EventBridge (the stand-in) applies it.
    pub rule_delay: Duration,
    /// Each Karpenter's timing.
    pub karpenter: Behaviour,
}

impl Scene {
    /// The demo's: one cluster of each kind of set-up, and one with none. Rule changes take 5 s
    /// (AWS gives no figure), which adopt's settle, 8 s here, covers.
    pub fn demo() -> Self {
        Self {
            clusters: [
                ("alpha", Some(Flavour::GettingStarted)),
                ("beta", Some(Flavour::TerraformModule)),
                ("gamma", Some(Flavour::ByHand)),
                ("delta", None),
            ]
            .into_iter()
            .map(|(c, f)| (c.to_owned(), f))
            .collect(),
            base_parameters: Vec::new(),
            every: STREAM_EVERY,
            rule_delay: Duration::from_secs(5),
            karpenter: Behaviour::default(),
        }
    }

    /// The settle adopt runs with on this scene: longer than the stand-in's rule delay.
    pub fn settle(&self) -> Duration {
        self.rule_delay + Duration::from_secs(3)
    }
}

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
    /// Step `step` waits on time (a new queue's propagation, a round of evidence).
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
    pub scene: Scene,
    _proxy: AwsProxy,
    _invoke: InvokeApi,
    esm: JoinHandle<Result<Drained>>,
    stream_stop: Arc<AtomicBool>,
    stream: JoinHandle<Result<Vec<Published>>>,
}

impl Estate {
    /// Sets `scene` up and starts the stream.
    pub async fn start(router_bin: Option<PathBuf>, scene: Scene) -> Result<Self> {
        let binary = match router_bin {
            Some(path) => path,
            None => router_binary()?,
        };
        let moto = MotoServer::start().await?;
        let parameters: Vec<(&str, &str)> = scene
            .base_parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let sandbox = Sandbox::deploy_with(&moto, STACK, &[], &parameters).await?;
        let mut clusters = BTreeMap::new();
        for (name, flavour) in &scene.clusters {
            let aws = &sandbox.aws;
            let nodes = launch(&aws.ec2, &karpenter_tags(name), 2).await?;
            let made = match flavour {
                Some(flavour) => Some(old_setups::stand_up(aws, *flavour, name).await?),
                None => None,
            };
            let karpenter = match &made {
                Some(made) => Some(Karpenter::start(aws, &made.queue, scene.karpenter).await?),
                None => None,
            };
            clusters.insert(
                name.clone(),
                Cluster {
                    flavour: *flavour,
                    nodes,
                    old_queue: made.as_ref().map(|m| m.queue.clone()),
                    role: made.map(|m| m.role),
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
        let fed: Vec<Fed> = clusters
            .iter()
            .filter_map(|(name, c)| {
                Some(Fed {
                    cluster: name.clone(),
                    nodes: c.nodes.clone(),
                    kinds: c.flavour?.kinds(),
                })
            })
            .collect();
        let bus = DefaultBus::new(&sandbox.aws, scene.rule_delay).await?;
        let stream = tokio::spawn(stream(bus, fed, scene.every, stream_stop.clone()));
        Ok(Self {
            moto,
            sandbox,
            aws,
            clusters,
            scene,
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

    /// adopt's options for `cluster`, with this scene's settle.
    pub fn apply(&self, cluster: &str) -> adopt::Options {
        adopt::Options::apply(STACK, cluster).settle(self.scene.settle())
    }

    pub fn rollback(&self, cluster: &str) -> adopt::Options {
        adopt::Options::rollback(STACK, cluster).settle(self.scene.settle())
    }

    /// `cluster`'s Karpenter pointed at `queue` (a helm upgrade in its kube-context, or a GitOps
    /// controller setting the value).
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

    /// One move further for `cluster`: what the operator does where adopt's plan hands them the
    /// next step, else adopt's `--apply`.
    pub async fn advance(&mut self, cluster: &str) -> Result<Move> {
        let plan = self.adopt(&adopt::Options::plan_of(STACK, cluster)).await?;
        let at = plan
            .cluster(cluster)
            .context("cluster left out of the plan")?;
        let flavour = self.clusters[cluster].flavour;
        let queue = Self::tenant_queue(cluster);
        if let Some(next) = at.next() {
            let reading = self.clusters[cluster]
                .karpenter
                .as_ref()
                .and_then(|k| k.reading().map(str::to_owned));
            match (next.number, &next.state) {
                // The helm command the plan prints, then --apply (below) starts the check.
                (3, State::Todo) if reading.as_deref() != Some(queue.as_str()) => {
                    self.helm(cluster, &queue).await?;
                    return Ok(Move::Operator {
                        step: 3,
                        did: format!("helm upgrade … --set settings.interruptionQueue={queue}"),
                    });
                }
                (1 | 4, State::Waiting) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    return Ok(Move::Waited {
                        step: next.number,
                        why: next.detail.clone(),
                    });
                }
                (7, State::Waiting) => {
                    let old = self.clusters[cluster].old_queue.clone().unwrap_or_default();
                    let url = self.sandbox.queue_url(&old).await?;
                    self.aws.sqs.purge_queue().queue_url(&url).send().await?;
                    return Ok(Move::Operator {
                        step: 7,
                        did: format!("aws sqs purge-queue --queue-url {url}"),
                    });
                }
                (6 | 7, State::Todo) if flavour != Some(Flavour::ByHand) => {
                    let did = self.retire_with_its_tool(cluster, next.number).await?;
                    return Ok(Move::Operator {
                        step: next.number,
                        did,
                    });
                }
                _ => {}
            }
        }
        // By hand: the operator says so, and adopt deletes what carries no tool's mark.
        let options = match flavour {
            Some(Flavour::ByHand) => self.apply(cluster).delete_hand_made(),
            _ => self.apply(cluster),
        };
        let report = self.adopt(&options).await?;
        match &report.outcome {
            Adopted::Finished => Ok(Move::Finished),
            Adopted::Applied { step, did } => {
                if matches!(step, 1 | 2) {
                    // moto skips parts of the tenant stack; put them back as AWS would have them.
                    let role = self.clusters[cluster].role.clone();
                    self.sandbox
                        .complete_tenant(cluster, role.as_deref())
                        .await?;
                }
                Ok(Move::Applied {
                    step: *step,
                    did: did.clone(),
                })
            }
            Adopted::Refused { why, .. } => bail!("{cluster} is stuck: {why}"),
            other => bail!("adopt --apply did not apply: {other:?}"),
        }
    }

    /// What the tool that made `cluster`'s old set-up does once it no longer declares the rules
    /// (step 6) or the queue (step 7): the getting-started stack updated with adopt's edit of its
    /// template; Terraform's apply deleting what its configuration dropped.
    async fn retire_with_its_tool(&mut self, cluster: &str, step: u8) -> Result<String> {
        match self.clusters[cluster].flavour {
            Some(Flavour::GettingStarted) => {
                let report = self
                    .adopt(&adopt::Options::stack_template(STACK, cluster))
                    .await?;
                let Adopted::Template { stack, edit, .. } = report.outcome else {
                    bail!("--stack-template printed no template: {}", report.render());
                };
                stacks::update(&self.aws.cfn, &stack, &edit.template, &[]).await?;
                Ok(format!(
                    "routerctl adopt --stack-template > {stack}.yaml ({}); aws cloudformation \
                     deploy --stack-name {stack} --template-file {stack}.yaml",
                    edit.summary()
                ))
            }
            _ => {
                let plan = self.adopt(&adopt::Options::plan_of(STACK, cluster)).await?;
                let tool = plan
                    .cluster(cluster)
                    .context("no plan")?
                    .step(step)
                    .detail
                    .clone();
                if step == 6 {
                    let rules = self
                        .aws
                        .events
                        .list_rules()
                        .name_prefix("Karpenter")
                        .send()
                        .await?;
                    // Both Terraform modules tag their rules ClusterName.
                    for rule in rules.rules().iter().filter_map(|r| r.name()) {
                        if !self.rule_tagged_for(rule, cluster).await? {
                            continue;
                        }
                        let targets = self
                            .aws
                            .events
                            .list_targets_by_rule()
                            .rule(rule)
                            .send()
                            .await?;
                        let ids: Vec<String> = targets
                            .targets()
                            .iter()
                            .map(|t| t.id().to_owned())
                            .collect();
                        self.aws
                            .events
                            .remove_targets()
                            .rule(rule)
                            .set_ids(Some(ids))
                            .send()
                            .await?;
                        self.aws.events.delete_rule().name(rule).send().await?;
                    }
                    Ok(format!("terraform apply without the rules ({tool})"))
                } else {
                    let old = self.clusters[cluster].old_queue.clone().unwrap_or_default();
                    let url = self.sandbox.queue_url(&old).await?;
                    self.aws.sqs.delete_queue().queue_url(&url).send().await?;
                    Ok(format!("terraform apply without the queue {old}"))
                }
            }
        }
    }

    async fn rule_tagged_for(&self, rule: &str, cluster: &str) -> Result<bool> {
        let arn = format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/{rule}");
        let tags = self
            .aws
            .events
            .list_tags_for_resource()
            .resource_arn(arn)
            .send()
            .await?;
        Ok(tags
            .tags()
            .iter()
            .any(|t| t.key() == "ClusterName" && t.value() == cluster))
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
        // Reads that are not the stream's: adopt's probes and sentinels, by cluster and queue.
        let adopts = |suffix: bool| {
            reads
                .iter()
                .flat_map(|(cluster, reads)| {
                    reads
                        .iter()
                        .filter(move |r| {
                            r.id.starts_with("routerctl-adopt-")
                                && r.id.ends_with("-sentinel") == suffix
                        })
                        .map(move |r| (cluster.clone(), r.queue.clone(), r.id.clone()))
                })
                .collect::<Vec<_>>()
        };
        let (probes, sentinels) = (adopts(false), adopts(true));
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
        let dlq_url = self
            .sandbox
            .queue_url(aws_model::aws::arn_name(&dlq))
            .await?;
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
        let duplicates = reads
            .iter()
            .map(|(cluster, reads)| {
                let mut seen = BTreeSet::new();
                let twice = reads
                    .iter()
                    .filter(|r| !r.id.starts_with("routerctl-") && !seen.insert((&r.id, &r.queue)))
                    .count();
                (cluster.clone(), twice)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        self.moto.stop().await;
        Ok(Outcome {
            published: published.len(),
            kinds,
            missed,
            misrouted,
            dead_lettered,
            handed_back: drained.retried,
            probes,
            sentinels,
            duplicates,
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
    /// adopt's probes each Karpenter read: (cluster, queue, event id).
    pub probes: Vec<(String, String, String)>,
    /// adopt's sentinels a Karpenter read (it was still on its old queue): (cluster, queue, id).
    pub sentinels: Vec<(String, String, String)>,
    /// Per cluster, events its Karpenter read twice from one queue (two writers into it).
    pub duplicates: BTreeMap<String, usize>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
            && self.misrouted.is_empty()
            && self.dead_lettered == 0
            && self.duplicates.is_empty()
    }
}

/// A cluster the stream sends events about: its nodes, and the kinds its set-up covers.
struct Fed {
    cluster: String,
    nodes: Vec<String>,
    kinds: Vec<Kind>,
}

/// Publishes one event every `every` until `stop`: each cluster in turn, each of its kinds in
/// turn, alternating nodes; every 7th a Health event naming a node of every cluster.
async fn stream(
    bus: DefaultBus,
    fed: Vec<Fed>,
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
        let one = &fed[n % fed.len()];
        let round = n / fed.len();
        let node = &one.nodes[round % one.nodes.len()];
        let kind = one.kinds[round % one.kinds.len()];
        let health_for_all = n % 7 == 6;
        let id = match health_for_all {
            true => format!("adopt-{n}-scheduled-change-all"),
            false => format!("adopt-{n}-{}", kind.label()),
        };
        let (event, clusters) = if health_for_all {
            let all: Vec<String> = fed.iter().map(|f| f.nodes[0].clone()).collect();
            (
                origin.scheduled_change(&all, &id),
                fed.iter().map(|f| f.cluster.clone()).collect(),
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
            (event, vec![one.cluster.clone()])
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
    let mut estate = Estate::start(router_bin, Scene::demo()).await?;
    println!(
        "  ✓ Base stack; Karpenter's getting-started stack, terraform-aws-eks's karpenter module, \
         a set-up made by hand, a cluster with none; a stream of every kind of event through the \
         default bus, whose rule changes take {} s ({:.1?})\n",
        estate.scene.rule_delay.as_secs(),
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
    for _ in 0..1000 {
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
         Karpenter read when each was sent), {} in another cluster's queue, {} read twice, {} \
         dead-lettered ({:.1?})",
        outcome.published,
        outcome.missed.len(),
        outcome.misrouted.len(),
        outcome.duplicates.values().sum::<usize>(),
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
