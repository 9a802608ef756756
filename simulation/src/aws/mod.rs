//! The organisation's AWS: the one model of AWS ([`aws_world`]) with the organisation deployed
//! into it, and the simulation's layers over it.
//!
//! The model keeps what AWS keeps and decides what AWS decides: each account's instances and
//! their tags, its tenant queues with their tags and messages, the tenant records in SSM, the
//! spoke roles whose trust policy AssumeRole is judged by, the direct roles' ids, the
//! dead-letter queue, and which session may act where ([`WorldAws`], the same model the router's
//! decision tests run on). Over it lie what only a storm needs, each a layer an execution
//! environment's calls pass through first ([`EnvAws`], `layer.rs`):
//!
//! - **quotas**: the token buckets of EC2's DescribeInstances (shared with each account's
//!   Karpenters), the Tagging API and STS, per account and region as AWS meters them;
//! - **latencies**: each call's drawn from the run's seed, plus the router's CPU for it;
//! - **faults** ([`Injected`]): throttling bursts, a spoke role revoked and restored, answers
//!   lost after a send was stored;
//! - **counts**: what the router asked, by action, account and time, and what arrived where.
//!
//! The ingest and direct queues are the mapping's ([`crate::ingest`]): a hand-back's
//! ChangeMessageVisibilityBatch goes to them.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use aws_world::router::{WorldAws, url};
use router_core::event::InstanceId;
use tokio::time::Instant;

mod injected;
mod layer;

pub use self::{injected::Injected, layer::EnvAws};
use crate::{
    bucket::Bucket,
    ingest::Ingest,
    organisation::Organisation,
    quotas::{self, Latency, Quotas},
};

/// The router's role in the hub (base.yaml's), as the spoke roles' trust policies name it.
const ROUTER_ROLE: &str = "interruption-router";

/// A copy that reached a cluster's queue.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub body: String,
    /// Index into the organisation's clusters.
    pub cluster: usize,
    pub at: Instant,
}

/// One AWS call the router made, as the layers counted it.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub by_action: BTreeMap<&'static str, u64>,
    /// AssumeRole per (environment, account).
    pub assume_role: BTreeMap<(usize, String), u64>,
    /// The router's DescribeInstances per account and region, with when.
    pub router_describe: BTreeMap<(String, String), Vec<Instant>>,
    /// Karpenter's, likewise.
    pub karpenter_describe: BTreeMap<(String, String), Vec<Instant>>,
    pub router_throttled: u64,
    /// The router's DescribeInstances that were sweeps (by tag key), and the ids the others
    /// asked for.
    pub sweep_pages: u64,
    pub ids_looked_up: u64,
    /// Of those, Karpenter nodes'.
    pub node_ids_looked_up: u64,
    pub karpenter_throttled: u64,
    pub tagging_throttled: u64,
    pub sts_throttled: u64,
}

/// What the layers keep: the seed's draws, the buckets, the faults and the counts.
struct Layers {
    rng: fastrand::Rng,
    ec2: BTreeMap<(String, String), Bucket>,
    tagging: BTreeMap<(String, String), Bucket>,
    sts: Bucket,
    counts: Counts,
    /// Every copy the model stored in a cluster's queue (a tenant queue deleted later takes its
    /// messages with it; its Karpenter had read them by then).
    arrivals: Vec<Arrival>,
    injected: Injected,
    sends: u64,
}

/// The organisation's AWS: the model, and the layers over it.
pub struct World {
    pub org: Arc<Organisation>,
    pub quotas: Quotas,
    pub ingest: Arc<Ingest>,
    pub dlq_url: String,
    /// The one model, as the router's role in the hub sees it.
    model: WorldAws,
    /// Each cluster's queue URL → its index.
    clusters_by_url: HashMap<String, usize>,
    /// The ingest and direct queues' URLs (the mapping's).
    mapping_urls: [String; 2],
    started: Instant,
    layers: Mutex<Layers>,
}

/// A cluster's queue name, as the router's default template makes it.
pub fn queue_name(cluster: &str) -> String {
    format!("karpenter-{cluster}")
}

/// The id IAM gives a member's direct role in the model (what SQS reports as the `SenderId` of
/// its sends, and GetRole answers).
pub fn direct_role_id(account: &str, name: &str) -> String {
    format!("AROA{account}{}", name.len())
}

impl World {
    /// The organisation deployed into the model: every cluster onboarded (a tenant queue and its
    /// record), each account's spoke role trusting the router and its direct role, the hub's
    /// dead-letter queue, every instance tagged as its owner tags it; quotas full.
    pub fn new(org: Arc<Organisation>, quotas: Quotas, ingest: Arc<Ingest>, seed: u64) -> Self {
        let (hub, region) = (&org.hub_account, &org.shape.hub_region);
        let model = aws_world::World::new(hub, region);
        let role = format!("arn:aws:iam::{hub}:role/{ROUTER_ROLE}");
        let accounts: Vec<&str> = org.accounts.iter().map(String::as_str).collect();
        let model = WorldAws::new(&model, &role, &accounts);
        let direct = org.direct_role_name();
        for account in &org.accounts {
            model.direct_role(account, &direct_role_id(account, &direct));
        }
        for (id, instance) in &org.instances {
            let tags = org.tags(instance);
            let tags: Vec<(&str, &str)> =
                tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            model.instance(&instance.account, &instance.region, id.as_str(), &tags);
        }
        let mut clusters_by_url = HashMap::new();
        for (i, c) in org.clusters.iter().enumerate() {
            model.tenant(&c.account, &c.region, &c.name);
            clusters_by_url.insert(url(&c.account, &c.region, &queue_name(&c.name)), i);
        }
        model.queue(hub, region, "router-dlq", &[], None);
        let dlq_url = url(hub, region, "router-dlq");
        let mapping_urls = [org.ingest_queue_arn(), org.direct_queue_arn()]
            .map(|arn| url(hub, region, arn.rsplit(':').next().unwrap_or_default()));
        let sts = Bucket::new(quotas.assume_role.burst, quotas.assume_role.per_second);
        Self {
            org,
            ingest,
            dlq_url,
            model,
            clusters_by_url,
            mapping_urls,
            started: Instant::now(),
            layers: Mutex::new(Layers {
                rng: fastrand::Rng::with_seed(seed ^ 0x5eed),
                ec2: BTreeMap::new(),
                tagging: BTreeMap::new(),
                sts,
                counts: Counts::default(),
                arrivals: Vec::new(),
                injected: Injected::default(),
                sends: 0,
            }),
            quotas,
        }
    }

    /// The one model under the layers, as the router's role in the hub sees it.
    pub fn model(&self) -> &WorldAws {
        &self.model
    }

    /// The wall clock: the model's.
    pub fn now_wall(&self) -> SystemTime {
        self.model.world().clock()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn jitter(&self) -> f64 {
        self.layers().rng.f64()
    }

    fn layers(&self) -> std::sync::MutexGuard<'_, Layers> {
        self.layers.lock().unwrap()
    }

    /// A latency drawn from the run's seed.
    pub fn draw_latency(&self, latency: Latency) -> Duration {
        let mut layers = self.layers();
        let span = latency.high.saturating_sub(latency.low);
        latency.low + span.mul_f64(layers.rng.f64())
    }

    /// Sleeps a call's latency and the router's CPU for it.
    async fn after(&self, latency: Latency) {
        let cpu = quotas::CPU_PER_CALL.div_f64(self.quotas.cpu_share);
        tokio::time::sleep(self.draw_latency(latency) + cpu).await;
    }

    /// A DescribeInstances by one of the account's Karpenters: takes its token, or is throttled.
    pub fn karpenter_describe(&self, account: &str, region: &str) {
        let mut layers = self.layers();
        let key = (account.to_owned(), region.to_owned());
        let rate = self.quotas.describe_instances;
        let bucket = layers
            .ec2
            .entry(key.clone())
            .or_insert_with(|| Bucket::new(rate.burst, rate.per_second));
        if bucket.take() {
            layers
                .counts
                .karpenter_describe
                .entry(key)
                .or_default()
                .push(Instant::now());
        } else {
            layers.counts.karpenter_throttled += 1;
        }
    }

    /// The lowest level each account-region's EC2 bucket reached.
    pub fn ec2_lowest(&self) -> BTreeMap<(String, String), f64> {
        let layers = self.layers();
        layers
            .ec2
            .iter()
            .map(|(k, b)| (k.clone(), b.lowest()))
            .collect()
    }

    pub fn counts(&self) -> Counts {
        self.layers().counts.clone()
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.layers().arrivals.clone()
    }

    /// What the dead-letter queue holds: each body with its `reason` attribute.
    pub fn dead_letters(&self) -> Vec<(String, String)> {
        let (hub, region) = (&self.org.hub_account, &self.org.shape.hub_region);
        self.model
            .held(hub, region, "router-dlq")
            .into_iter()
            .map(|m| {
                let reason = m
                    .attributes
                    .iter()
                    .find(|(k, _)| k == "reason")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                (m.body, reason)
            })
            .collect()
    }

    /// The ids of `ids` that are Karpenter nodes.
    fn nodes_among(&self, ids: &[InstanceId]) -> u64 {
        ids.iter()
            .filter(|id| {
                self.org
                    .instances
                    .get(*id)
                    .is_some_and(|i| i.cluster.is_some())
            })
            .count() as u64
    }

    /// Cluster `c`'s tenant queue and record, as its tenant stack makes them (`true`) or as its
    /// deletion leaves them (`false`).
    pub fn set_tenant(&self, c: usize, onboarded: bool) {
        let cluster = &self.org.clusters[c];
        if onboarded {
            self.model
                .tenant(&cluster.account, &cluster.region, &cluster.name);
        } else {
            let name = queue_name(&cluster.name);
            self.model
                .delete_queue(&cluster.account, &cluster.region, &name);
            self.model
                .delete_record(&cluster.account, &cluster.region, &name);
        }
    }

    /// Cluster `c`'s queue alone: deleted by hand while its tenant record stands (lost), or back.
    pub fn set_queue(&self, c: usize, exists: bool) {
        let cluster = &self.org.clusters[c];
        let name = queue_name(&cluster.name);
        if exists {
            let tags = [(router_core::tenancy::TENANT_TAG, cluster.name.as_str())];
            self.model
                .queue(&cluster.account, &cluster.region, &name, &tags, None);
        } else {
            self.model
                .delete_queue(&cluster.account, &cluster.region, &name);
        }
    }
}

#[cfg(test)]
mod tests;
