//! The organisation and its worst day: accounts, regions, clusters and their nodes, and the
//! events an Availability Zone's Spot reclaim sends, on top of a background of state changes
//! from instances no cluster owns. Everything is drawn from one seed.

use std::{collections::BTreeMap, time::Duration};

use router_core::event::InstanceId;
use serde_json::json;

/// One EKS cluster: (account, region, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    pub account: String,
    pub region: String,
    pub name: String,
}

/// An instance and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub account: String,
    pub region: String,
    /// The cluster index of a Karpenter node; `None` for an instance no cluster owns.
    pub cluster: Option<usize>,
}

/// The kinds of events the scenario sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sent {
    Rebalance,
    Warning,
    ShuttingDown,
    Terminated,
    /// A state change of an instance no cluster owns.
    Background,
}

impl Sent {
    pub fn label(self) -> &'static str {
        match self {
            Sent::Rebalance => "rebalance",
            Sent::Warning => "warning",
            Sent::ShuttingDown => "shutting-down",
            Sent::Terminated => "terminated",
            Sent::Background => "background",
        }
    }
}

/// One event as it enters its account's default bus.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Duration,
    pub id: String,
    pub kind: Sent,
    pub instance: InstanceId,
    pub account: String,
    pub region: String,
    pub body: String,
}

/// What an organisation is made of.
#[derive(Debug, Clone)]
pub struct Shape {
    pub accounts: usize,
    pub clusters_per_account: usize,
    pub regions: Vec<String>,
    pub hub_region: String,
    /// The region the reclaim hits, and how many of its Karpenter nodes.
    pub storm_region: String,
    /// Nodes reclaimed in each region the storm hits.
    pub storm_nodes: usize,
    /// A second region reclaimed at the same time, as many nodes again: the worst day for one
    /// hub serving both.
    pub second_storm_region: Option<String>,
    /// Warnings spread over this window, front-loaded (half in its first quarter).
    pub storm_window: Duration,
    /// State changes per second, organisation-wide, from instances no cluster owns.
    pub background_per_second: f64,
    /// How long the background runs before the storm: the hub has been serving the
    /// organisation for a while when the storm comes (its environments warm, as in a real day).
    pub lead_in: Duration,
    /// How long the background runs from the storm on (it covers the storm and its state
    /// changes).
    pub duration: Duration,
}

impl Shape {
    /// The issue's organisation: 100 accounts of 10 clusters in 3 regions; 20,000 nodes of one
    /// region reclaimed within 60 s.
    pub fn issue() -> Self {
        Self {
            accounts: 100,
            clusters_per_account: 10,
            regions: vec!["us-east-1".into(), "us-west-2".into(), "eu-west-1".into()],
            hub_region: "us-east-1".into(),
            storm_region: "us-west-2".into(),
            storm_nodes: 20_000,
            second_storm_region: None,
            storm_window: Duration::from_secs(60),
            background_per_second: 20.0,
            lead_in: Duration::from_secs(120),
            duration: Duration::from_secs(240),
        }
    }

    /// The issue's organisation on a worse day: the same reclaim in eu-west-1 as in us-west-2,
    /// at the same time.
    pub fn two_regions() -> Self {
        Self {
            second_storm_region: Some("eu-west-1".into()),
            ..Self::issue()
        }
    }

    /// Every region the storm hits.
    pub fn storm_regions(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.storm_region).chain(self.second_storm_region.as_ref())
    }
}

pub struct Organisation {
    pub shape: Shape,
    pub hub_account: String,
    pub accounts: Vec<String>,
    pub clusters: Vec<Cluster>,
    pub instances: BTreeMap<InstanceId, Instance>,
    pub events: Vec<Event>,
}

pub fn account_id(n: usize) -> String {
    format!("{:012}", 100_000_000_000 + n)
}

fn instance_id(n: u64) -> InstanceId {
    InstanceId::parse(&format!("i-{n:017x}")).expect("a valid id")
}

impl Organisation {
    /// The organisation of `shape` and its storm, drawn from `seed`.
    pub fn new(shape: Shape, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let accounts: Vec<String> = (0..shape.accounts).map(account_id).collect();
        let hub_account = accounts[0].clone();
        let mut clusters = Vec::new();
        for account in &accounts {
            for c in 0..shape.clusters_per_account {
                clusters.push(Cluster {
                    account: account.clone(),
                    region: shape.regions[c % shape.regions.len()].clone(),
                    name: format!("cluster-{c}"),
                });
            }
        }
        let mut instances = BTreeMap::new();
        let mut events = Vec::new();
        let mut next_id: u64 = 1;
        let mut n = 0;
        for region in shape.storm_regions() {
            let in_storm: Vec<usize> = (0..clusters.len())
                .filter(|&c| clusters[c].region == *region)
                .collect();
            for k in 0..shape.storm_nodes {
                let cluster = in_storm[k % in_storm.len()];
                let id = instance_id(next_id);
                next_id += 1;
                let c = &clusters[cluster];
                instances.insert(
                    id.clone(),
                    Instance {
                        account: c.account.clone(),
                        region: c.region.clone(),
                        cluster: Some(cluster),
                    },
                );
                // Front-loaded, as a reclaim is: half the warnings in the first quarter of the
                // window.
                let u = rng.f64();
                let warning = shape.lead_in + shape.storm_window.mul_f64(u * u);
                let rebalance = warning.saturating_sub(Duration::from_secs_f64(rng.f64() * 10.0));
                let shutting = warning + Duration::from_secs(120);
                let terminated = shutting + Duration::from_secs_f64(10.0 + rng.f64() * 30.0);
                for (at, kind) in [
                    (rebalance, Sent::Rebalance),
                    (warning, Sent::Warning),
                    (shutting, Sent::ShuttingDown),
                    (terminated, Sent::Terminated),
                ] {
                    events.push(event(at, kind, &id, &c.account, &c.region, n));
                }
                n += 1;
            }
        }
        // Instances no cluster owns (an Auto Scaling group's, a batch job's), stopping or
        // terminating throughout, in every account and region.
        let span = shape.lead_in + shape.duration;
        let background = (shape.background_per_second * span.as_secs_f64() / 2.0) as usize;
        for n in 0..background {
            let account = &accounts[rng.usize(..accounts.len())];
            let region = &shape.regions[rng.usize(..shape.regions.len())];
            let id = instance_id(next_id);
            next_id += 1;
            instances.insert(
                id.clone(),
                Instance {
                    account: account.clone(),
                    region: region.clone(),
                    cluster: None,
                },
            );
            let first = span.mul_f64(rng.f64());
            let second = first + Duration::from_secs_f64(5.0 + rng.f64() * 25.0);
            for (k, at) in [first, second].into_iter().enumerate() {
                events.push(background_event(at, &id, account, region, n, k));
            }
        }
        events.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Self {
            shape,
            hub_account,
            accounts,
            clusters,
            instances,
            events,
        }
    }

    /// The same organisation and day as one of regional hubs sees it: a hub (the base stack,
    /// in the hub account) in every region, each serving the clusters of its own region; this is
    /// `region`'s. EventBridge's, Lambda's, STS's and EC2's quotas are per account and Region, so
    /// the other regions' hubs share nothing with it: they and their events are left out.
    pub fn regional_hub(&self, region: &str) -> Self {
        let region = region.to_owned();
        Self {
            shape: Shape {
                hub_region: region.clone(),
                storm_region: region.clone(),
                second_storm_region: None,
                ..self.shape.clone()
            },
            hub_account: self.hub_account.clone(),
            accounts: self.accounts.clone(),
            clusters: self.clusters.clone(),
            instances: self.instances.clone(),
            events: self
                .events
                .iter()
                .filter(|e| e.region == region)
                .cloned()
                .collect(),
        }
    }

    /// The tags an instance carries: Karpenter's for a node, an Auto Scaling group's otherwise.
    pub fn tags(&self, instance: &Instance) -> Vec<(String, String)> {
        match instance.cluster {
            Some(c) => {
                let name = &self.clusters[c].name;
                vec![
                    ("eks:eks-cluster-name".into(), name.clone()),
                    (format!("kubernetes.io/cluster/{name}"), "owned".into()),
                    ("karpenter.sh/nodepool".into(), "default".into()),
                ]
            }
            None => vec![("aws:autoscaling:groupName".into(), "batch".into())],
        }
    }
}

pub(crate) fn envelope(
    id: &str,
    detail_type: &str,
    account: &str,
    region: &str,
    instance: &InstanceId,
    detail: serde_json::Value,
) -> String {
    json!({
        "version": "0", "id": id, "detail-type": detail_type, "source": "aws.ec2",
        "account": account, "time": "2026-11-26T12:00:00Z", "region": region,
        "resources": [format!("arn:aws:ec2:{region}:{account}:instance/{instance}")],
        "detail": detail,
    })
    .to_string()
}

fn event(
    at: Duration,
    kind: Sent,
    id: &InstanceId,
    account: &str,
    region: &str,
    n: usize,
) -> Event {
    let event_id = format!("storm-{n}-{}", kind.label());
    let body = match kind {
        Sent::Rebalance => envelope(
            &event_id,
            "EC2 Instance Rebalance Recommendation",
            account,
            region,
            id,
            json!({"instance-id": id.as_str()}),
        ),
        Sent::Warning => envelope(
            &event_id,
            "EC2 Spot Instance Interruption Warning",
            account,
            region,
            id,
            json!({"instance-id": id.as_str(), "instance-action": "terminate"}),
        ),
        Sent::ShuttingDown | Sent::Terminated | Sent::Background => envelope(
            &event_id,
            "EC2 Instance State-change Notification",
            account,
            region,
            id,
            json!({"instance-id": id.as_str(), "state": if kind == Sent::ShuttingDown { "shutting-down" } else { "terminated" }}),
        ),
    };
    Event {
        at,
        id: event_id,
        kind,
        instance: id.clone(),
        account: account.into(),
        region: region.into(),
        body,
    }
}

fn background_event(
    at: Duration,
    id: &InstanceId,
    account: &str,
    region: &str,
    n: usize,
    k: usize,
) -> Event {
    let event_id = format!("background-{n}-{k}");
    let state = if k == 0 { "stopping" } else { "stopped" };
    Event {
        at,
        body: envelope(
            &event_id,
            "EC2 Instance State-change Notification",
            account,
            region,
            id,
            json!({"instance-id": id.as_str(), "state": state}),
        ),
        id: event_id,
        kind: Sent::Background,
        instance: id.clone(),
        account: account.into(),
        region: region.into(),
    }
}

impl Organisation {
    /// An organisation given as it is (no storm drawn): the hub's account and region, the
    /// clusters, and every instance with its owner. [`crate::replay`] plays batches against it.
    pub fn of(
        hub_account: &str,
        hub_region: &str,
        clusters: Vec<Cluster>,
        instances: BTreeMap<InstanceId, Instance>,
    ) -> Self {
        let mut accounts: Vec<String> = clusters.iter().map(|c| c.account.clone()).collect();
        accounts.sort();
        accounts.dedup();
        let mut regions: Vec<String> = clusters.iter().map(|c| c.region.clone()).collect();
        regions.sort();
        regions.dedup();
        Self {
            shape: Shape {
                accounts: accounts.len(),
                regions,
                hub_region: hub_region.to_owned(),
                storm_nodes: 0,
                ..Shape::issue()
            },
            hub_account: hub_account.to_owned(),
            accounts,
            clusters,
            instances,
            events: Vec::new(),
        }
    }
}

/// The names base.yaml and spoke.yaml give the organisation's router resources: what the model
/// of AWS creates and the mapping and the rules name.
impl Organisation {
    /// The hub's ingest queue (base.yaml's `<stack>-ingest`).
    pub fn ingest_queue_arn(&self) -> String {
        format!(
            "arn:aws:sqs:{}:{}:interruption-router-ingest",
            self.shape.hub_region, self.hub_account
        )
    }

    /// The hub's direct queue (base.yaml's `<stack>-direct`), which member rules write themselves.
    pub fn direct_queue_arn(&self) -> String {
        format!(
            "arn:aws:sqs:{}:{}:interruption-router-direct",
            self.shape.hub_region, self.hub_account
        )
    }

    /// The direct role's name in a member account (spoke.yaml's default, for the hub's region).
    pub fn direct_role_name(&self) -> String {
        format!(
            "{}{}-{}",
            router_core::config::DEFAULT_SPOKE_ROLE_NAME,
            router_core::config::DIRECT_ROLE_SUFFIX,
            self.shape.hub_region
        )
    }
}
