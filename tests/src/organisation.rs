//! An organisation on the emulator: the hub account plus member accounts, each with clusters of
//! Karpenter nodes and their queues, in the accounts and regions the clusters live in. Shared by
//! the multi-account tests (tests/tests/accounts.rs) and the storm benchmark's organisation row.
//!
//! A cluster is a [`Place`]: (account, region, name). Member accounts are set up with the
//! credentials AssumeRole returns for their spoke role, which moto uses to isolate accounts, so
//! what a test reads back from a member's queue really is in that member's account.

use std::collections::{BTreeMap, HashMap, hash_map::Entry};

use anyhow::{Result, ensure};
use serde_json::{Value, json};

use crate::{Received, World, drain, ec2_event, karpenter_tags};
use local_aws::moto::{self, ACCOUNT, REGION};

/// The role name the router assumes in a member account (spoke.yaml's default).
pub const SPOKE_ROLE: &str = "interruption-router-spoke";

/// A cluster's place: (account, region, name).
pub type Place = (&'static str, &'static str, &'static str);

/// Clients acting in one account and region.
struct Site {
    config: aws_config::SdkConfig,
    ec2: aws_sdk_ec2::Client,
    sqs: aws_sdk_sqs::Client,
}

/// The hub world plus member sites, their clusters' queues and instances, and the router's
/// dead-letter queue (in the hub).
pub struct Organisation {
    pub world: World,
    sites: HashMap<(&'static str, &'static str), Site>,
    pub queues: BTreeMap<Place, String>,
    /// Instance id → the place of its cluster.
    pub owner: HashMap<String, Place>,
    pub dlq: String,
}

impl Organisation {
    /// Creates each place's queue (`karpenter-<name>`) and `nodes_per_cluster` tagged instances
    /// in its account and region.
    pub async fn new(places: &[Place], nodes_per_cluster: i32) -> Result<Self> {
        let world = World::start().await?;
        let mut sites = HashMap::new();
        let mut queues = BTreeMap::new();
        let mut owner = HashMap::new();
        for place @ (account, region, cluster) in places.iter().copied() {
            if let Entry::Vacant(slot) = sites.entry((account, region)) {
                let config = if (account, region) == (ACCOUNT, REGION) {
                    world.moto.sdk_config().await
                } else {
                    moto::sdk_config_as(world.moto.endpoint(), account, region, SPOKE_ROLE).await?
                };
                slot.insert(Site {
                    ec2: aws_sdk_ec2::Client::new(&config),
                    sqs: aws_sdk_sqs::Client::new(&config),
                    config,
                });
            }
            let site = &sites[&(account, region)];
            let url = moto::create_tenant_queue(&site.config, cluster).await?;
            queues.insert(place, url);
            for id in moto::launch(&site.ec2, &karpenter_tags(cluster), nodes_per_cluster).await? {
                owner.insert(id, place);
            }
        }
        let dlq = world.create_queue("interruption-router-dlq").await?;
        Ok(Self {
            world,
            sites,
            queues,
            owner,
            dlq,
        })
    }

    /// The instances of `place`'s cluster, sorted.
    pub fn nodes(&self, place: Place) -> Vec<&str> {
        let mut ids: Vec<&str> = self
            .owner
            .iter()
            .filter(|(_, p)| **p == place)
            .map(|(id, _)| id.as_str())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// One spot warning per node of every place, interleaved so that consecutive events belong
    /// to different clusters and accounts; event ids are `<pass>-<account>-<cluster>-<n>`.
    pub fn storm(&self, places: &[Place], pass: &str) -> Vec<String> {
        let nodes: Vec<Vec<&str>> = places.iter().map(|p| self.nodes(*p)).collect();
        let per_cluster = nodes.iter().map(Vec::len).max().unwrap_or_default();
        let mut bodies = Vec::new();
        for n in 0..per_cluster {
            for (place, nodes) in places.iter().zip(&nodes) {
                let Some(node) = nodes.get(n) else { continue };
                let id = format!("{pass}-{}-{}-{n}", place.0, place.2);
                bodies.push(
                    event_in(
                        place.0,
                        place.1,
                        "spot-interruption-warning.json",
                        node,
                        &id,
                    )
                    .to_string(),
                );
            }
        }
        bodies
    }

    /// Waits, at most `patience`, until the emulator answers the largest call a cold router makes
    /// (a DescribeInstances of a whole account's fleet, as its sweep is) in every account within
    /// `within`; whether it did. moto answers one call at a time, so on a machine busy with other
    /// suites that call can outlast the router's attempt timeout, and a count of calls made then
    /// says how busy the machine was, not what the router does.
    pub async fn wait_for_a_prompt_emulator(
        &self,
        within: std::time::Duration,
        patience: std::time::Duration,
    ) -> Result<bool> {
        let start = std::time::Instant::now();
        loop {
            let mut slowest = std::time::Duration::ZERO;
            for site in self.sites.values() {
                let asked = std::time::Instant::now();
                site.ec2.describe_instances().send().await?;
                slowest = slowest.max(asked.elapsed());
            }
            if slowest <= within {
                return Ok(true);
            }
            if start.elapsed() >= patience {
                return Ok(false);
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }

    /// Every message in every cluster queue, by place (read and deleted, as Karpenter would).
    pub async fn drain_all(&self) -> Result<BTreeMap<Place, Vec<Value>>> {
        let mut all = BTreeMap::new();
        for (place, url) in &self.queues {
            let site = &self.sites[&(place.0, place.1)];
            let messages = drain(&site.sqs, url).await?;
            all.insert(*place, messages.iter().map(Received::json).collect());
        }
        Ok(all)
    }

    /// Drains every queue and checks that each holds exactly `per_cluster` events of `pass`, all
    /// of its own cluster (by the ids [`Organisation::storm`] gives).
    pub async fn check_storm(&self, pass: &str, per_cluster: usize) -> Result<()> {
        for (place, messages) in self.drain_all().await? {
            ensure!(
                messages.len() == per_cluster,
                "{place:?} received {} events of {pass}, expected {per_cluster}",
                messages.len()
            );
            let prefix = format!("{pass}-{}-{}-", place.0, place.2);
            for m in messages {
                let id = m["id"].as_str().unwrap_or_default();
                ensure!(id.starts_with(&prefix), "{place:?} received {id}");
            }
        }
        Ok(())
    }
}

/// `accounts` member accounts (`100000000001`, …) × `clusters` clusters (`c0`, … the same names in
/// every account), all in the emulator's region: the accounts, and every place.
pub fn member_places(accounts: usize, clusters: usize) -> (Vec<&'static str>, Vec<Place>) {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let accounts: Vec<&'static str> = (1..=accounts)
        .map(|n| leak(format!("{:012}", 100_000_000_000 + n)))
        .collect();
    let clusters: Vec<&'static str> = (0..clusters).map(|c| leak(format!("c{c}"))).collect();
    let places = accounts
        .iter()
        .flat_map(|a| clusters.iter().map(move |c| (*a, REGION, *c)))
        .collect();
    (accounts, places)
}

/// `name`'s fixture for `instance`, as the EventBridge of `account`/`region` delivers it.
pub fn event_in(account: &str, region: &str, name: &str, instance: &str, id: &str) -> Value {
    let mut event = ec2_event(name, instance, id);
    event["account"] = json!(account);
    event["region"] = json!(region);
    event["resources"] = json!([format!(
        "arn:aws:ec2:{region}:{account}:instance/{instance}"
    )]);
    event
}
