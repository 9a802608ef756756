//! `lab demo --adopt`: clusters that run Karpenter with their own interruption set-ups moved
//! onto the router by `routerctl adopt` while interruptions keep coming, on the local emulator,
//! with AWS's timing kept in.
//!
//! [`Estate`] is the scene, shared with adopt's end-to-end tests: the real base stack; clusters
//! with the set-ups of [`crate::old_setups`] ([`Scene::demo`]: `alpha` with Karpenter's
//! getting-started stack, `beta` with terraform-aws-eks's karpenter module, `gamma` made by hand,
//! `delta` with nodes and no set-up); each set-up cluster's Karpenter reading its old queue
//! ([`local_aws::karpenter`]: 20-s long polls, a leader handover; SQS's counts in CloudWatch minutes
//! late); a stream of every kind of event each set-up covers, for those clusters' nodes, through
//! the default bus as AWS runs it ([`local_aws::eventbridge`]: rule changes take effect after
//! [`Scene::rule_delay`]), which feeds the old queues and the router's ingest queue; the router
//! binary behind the local event source mapping, and behind the local Invoke API for adopt's
//! probe. [`Estate::advance`] takes one cluster one move further: adopt's `--apply`, or, where
//! adopt hands the step to the operator, what the operator does (the helm upgrade, the
//! getting-started stack's update with `--stack-template`, Terraform's apply, a purge);
//! [`Estate::advance_together`] a move for several clusters at once, as an operator adopting them
//! in several terminals would.
//!
//! [`Estate::finish`] stops the stream and checks every event against the queue its cluster's
//! Karpenter was pointed at when it was sent.
//!
//! This file sets the scene up; the stream is in `stream.rs`, the moves ([`Estate::advance`]) in
//! `moves.rs`, the verdict ([`Estate::finish`]) in `verdict.rs`.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    sync::{Arc, atomic::AtomicBool},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tokio::task::JoinHandle;

use aws_clients::aws::Aws;
use aws_model::events::Origin;
use aws_model::stacks;
use local_aws::{
    esm::{Drained, EventSourceMapping, Stop},
    eventbridge::DefaultBus,
    function::{Function, router_binary},
    invoke_api::InvokeApi,
    karpenter::{Behaviour, Karpenter},
    moto::{ACCOUNT, MotoServer, REGION, karpenter_tags, launch, sdk_config_for},
    proxy::AwsProxy,
};

use super::old_setups::{self, Flavour};
use crate::sandbox::Sandbox;
use routerctl::adopt;

mod moves;
mod stream;
mod verdict;

pub use stream::Published;
use stream::{Fed, stream};

pub const STACK: &str = "interruption-router";

/// How often the stream sends an event: two a second puts several of each cluster's events inside
/// any window adopt must cover (EventBridge's rule delay, 5 s in the demo). Each event is a dozen
/// emulator requests downstream (the bus's deliveries, the mapping's receives, every Karpenter's
/// reads and deletes); at four a second the scenes of `make test` kept both cores busy on them.
pub const STREAM_EVERY: Duration = Duration::from_millis(500);

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
    /// How long after a minute ends SQS's datapoints for it reach CloudWatch.
    pub metric_delay: Duration,
    /// The clusters run in this member account and region, connected to the hub by a spoke
    /// stack ([`Member`]); `None`: in the hub's own account and region.
    pub member: Option<Member>,
}

/// A member account and region the scene's clusters run in: the base stack serves it through its
/// central bus (CentralBus=Enabled, ServedAccounts=`<account>`), spoke.yaml there forwards its
/// default bus's events to that bus, and adopt works there with the member's credentials.
#[derive(Debug, Clone)]
pub struct Member {
    pub account: String,
    pub region: String,
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
            rule_delay: aws_model::timing::RULE_CHANGE_DELAY,
            karpenter: Behaviour::default(),
            metric_delay: aws_model::timing::SQS_METRIC_LAG,
            member: None,
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
    /// Clients in the clusters' account and region: `aws` at the hub, the member's otherwise.
    pub site: Aws,
    pub clusters: BTreeMap<String, Cluster>,
    pub scene: Scene,
    _proxy: AwsProxy,
    _invoke: InvokeApi,
    /// The router's process, for its logs in the verdict.
    router: Arc<Function>,
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
        moto.set_sqs_metric_delay(scene.metric_delay).await?;
        let parameters: Vec<(&str, &str)> = scene
            .base_parameters
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut parameters = parameters;
        let served = scene.member.as_ref().map(|m| m.account.clone());
        if let Some(account) = &served {
            parameters.extend([
                ("CentralBus", "Enabled"),
                ("ServedAccounts", account.as_str()),
            ]);
        }
        let sandbox = Sandbox::deploy_with(&moto, STACK, &[], &parameters).await?;
        let site = match &scene.member {
            None => sandbox.aws.clone(),
            Some(member) => deploy_spoke(&moto, &sandbox, member).await?,
        };
        let mut clusters = BTreeMap::new();
        for (name, flavour) in &scene.clusters {
            let aws = &site;
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
        let drained_by = router.clone();
        let esm = tokio::spawn(async move {
            // Runs as long as the stream does, and drains the ingest queue after it.
            let stop = Stop {
                handled: None,
                idle: Duration::from_secs(5),
            };
            mapping.drain(&sqs, &drained_by, stop, |_| {}).await
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
        let bus = DefaultBus::new(&site, scene.rule_delay).await?;
        // A member's default bus forwards to the hub's central bus (spoke.yaml's rules), whose
        // rules deliver to the ingest queue.
        let bus = match sandbox.base.output("HubEventBusArn").ok() {
            Some(arn) if scene.member.is_some() => {
                let name = aws_model::arn::arn_name_after_slash(arn);
                let central = DefaultBus::on_bus(&sandbox.aws, name, scene.rule_delay).await?;
                bus.forwarding_to(arn, Arc::new(central))
            }
            _ => bus,
        };
        let origin = match &scene.member {
            Some(member) => Origin {
                account: member.account.clone(),
                region: member.region.clone(),
            },
            None => Origin {
                account: ACCOUNT.to_owned(),
                region: REGION.to_owned(),
            },
        };
        let stream = tokio::spawn(stream(bus, origin, fed, scene.every, stream_stop.clone()));
        Ok(Self {
            moto,
            sandbox,
            aws,
            site,
            clusters,
            scene,
            _proxy: proxy,
            _invoke: invoke,
            router,
            esm,
            stream_stop,
            stream,
        })
    }

    /// adopt with the hub's clients and the site's (in a member, with `--account` and the spoke
    /// stack, as an operator with the member's profile runs it).
    pub async fn adopt(&self, options: &adopt::Options) -> Result<adopt::Report> {
        let options = match &self.scene.member {
            Some(member) if options.member.is_none() => options.clone().in_member(
                &member.account,
                routerctl::verify::DEFAULT_SPOKE_STACK,
                &format!(
                    " --account {} --profile <{}'s profile> --region {} --hub-region {}",
                    member.account, member.account, member.region, REGION
                ),
            ),
            _ => options.clone(),
        };
        adopt::run_at(&self.aws, &self.site, &options).await
    }

    /// The URL of the site's queue `name`.
    pub async fn site_queue_url(&self, name: &str) -> Result<String> {
        aws_clients::aws::queue_url(&self.site.sqs, name).await
    }

    /// What moto skips of `cluster`'s tenant stack, as [`Sandbox::complete_tenant`] puts it
    /// back, in the site's account.
    pub async fn complete_tenant(&self, cluster: &str, karpenter_role: Option<&str>) -> Result<()> {
        if self.scene.member.is_none() {
            return self.sandbox.complete_tenant(cluster, karpenter_role).await;
        }
        let stack = stacks::tenant_stack_name(STACK, cluster);
        let tenant = aws_clients::deployed::Rendered::of(&self.site, &stack).await?;
        crate::sandbox::put_queue_policy(
            &self.site,
            &tenant,
            "InterruptionQueuePolicy",
            "InterruptionQueue",
        )
        .await?;
        if let Some(karpenter) = karpenter_role {
            crate::sandbox::rewrite_role_policies_as_json(&self.site.iam, karpenter).await?;
        }
        Ok(())
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
    /// The dead-letter queue's messages by reason (see [`Estate::finish`]).
    pub dead_lettered: BTreeMap<String, usize>,
    /// Each dead letter's reason, clusters and detail.
    pub dead_letter_details: Vec<String>,
    /// Records the router handed back to the ingest queue.
    pub handed_back: u64,
    /// adopt's probes each Karpenter read: (cluster, queue, event id).
    pub probes: Vec<(String, String, String)>,
    /// adopt's sentinels a Karpenter read (it was still on its old queue): (cluster, queue, id).
    pub sentinels: Vec<(String, String, String)>,
    /// Per cluster, events its Karpenter read twice from one queue (two writers into it).
    pub duplicates: BTreeMap<String, usize>,
    /// The router's log lines at WARN or ERROR: what a failed verdict is read with.
    pub router_warnings: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
            && self.misrouted.is_empty()
            && self.dead_lettered.is_empty()
            && self.duplicates.is_empty()
    }
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
    // A move for each at once, so one cluster's wait overlaps another's moves and waits.
    for _ in 0..1000 {
        let now: Vec<&str> = walking
            .iter()
            .filter(|c| !done.contains(*c))
            .map(String::as_str)
            .collect();
        let made = estate.advance_together(&now).await?;
        for (cluster, step) in now.into_iter().map(str::to_owned).zip(made) {
            // A wait is shown once per step, not once per look.
            match &step {
                Move::Waited { step: n, .. } if waiting.get(&cluster) == Some(n) => {}
                Move::Waited { step: n, .. } => {
                    waiting.insert(cluster.clone(), *n);
                    println!("  {cluster:<6} {step}");
                }
                _ => {
                    waiting.remove(&cluster);
                    println!("  {cluster:<6} {step}");
                }
            }
            if step == Move::Finished {
                done.insert(cluster);
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
        outcome.dead_lettered.values().sum::<usize>(),
        started.elapsed()
    );
    for (reason, n) in &outcome.dead_lettered {
        println!("  ✗ {n} dead-lettered: {reason}");
    }
    for line in outcome.missed.iter().chain(&outcome.misrouted).take(20) {
        println!("  ✗ {line}");
    }
    Ok(outcome.passed() && done.len() == walking.len())
}

/// spoke.yaml in `member`'s account and region, forwarding to the sandbox's central bus and trusting
/// its router role (as a StackSet deploys it); clients acting there, as moto hands them out for
/// the spoke role.
async fn deploy_spoke(moto: &MotoServer, sandbox: &Sandbox, member: &Member) -> Result<Aws> {
    let role = interruption_router::config::DEFAULT_SPOKE_ROLE_NAME;
    let site = Aws::new(
        &local_aws::moto::sdk_config_as(moto.endpoint(), &member.account, &member.region, role)
            .await?,
    )?;
    aws_clients::stacks::create(
        &site.cfn,
        routerctl::verify::DEFAULT_SPOKE_STACK,
        stacks::SPOKE_TEMPLATE,
        &[
            ("HubEventBusArn", sandbox.base.output("HubEventBusArn")?),
            ("RouterRoleArn", sandbox.router_role_arn()?),
        ],
    )
    .await?;
    Ok(site)
}

/// The tenant stack adopt deploys for `cluster` next to the scene's base stack.
pub fn tenant_stack(cluster: &str) -> String {
    stacks::tenant_stack_name(STACK, cluster)
}
