//! EventBridge's part: each event crosses its rules to the ingest queue. An event of the hub's
//! own account and region crosses one rule (the base stack's); any other crosses two: the spoke
//! stack's forwarding rule in its own account and region, then the hub bus's rule. Each rule's
//! delivery takes a target invocation from its account's quota in its region, waiting its turn
//! when the quota is spent ("over the quota delivery is delayed, not dropped"), and one hop's
//! latency.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use tokio::time::Instant;

use crate::{
    bucket::Bucket,
    model::World,
    organisation::Event,
    quotas::{self, Rate},
};

pub struct EventBridge {
    world: Arc<World>,
    targets: Mutex<BTreeMap<(String, String), Bucket>>,
}

impl EventBridge {
    pub fn new(world: Arc<World>) -> Arc<Self> {
        Arc::new(Self {
            world,
            targets: Mutex::default(),
        })
    }

    /// Every event at its time; returns once the last has been handed to its rules.
    pub async fn publish(self: &Arc<Self>, events: Arc<Vec<Event>>, start: Instant) {
        for n in 0..events.len() {
            tokio::time::sleep_until(start + events[n].at).await;
            let (bridge, events) = (self.clone(), events.clone());
            tokio::spawn(async move { bridge.deliver(&events[n]).await });
        }
    }

    async fn deliver(&self, event: &Event) {
        let org = &self.world.org;
        let hub = (org.hub_account.clone(), org.shape.hub_region.clone());
        let source = (event.account.clone(), event.region.clone());
        let quotas = &self.world.quotas;
        let mut hops = Vec::with_capacity(2);
        if source != hub {
            hops.push((source, quotas.member_target_invocations));
        }
        hops.push((hub, quotas.hub_target_invocations));
        for (rule, rate) in hops {
            let wait = self.reserve(rule, rate);
            tokio::time::sleep(wait + self.world.draw_latency(quotas::EVENTBRIDGE_HOP)).await;
        }
        self.world
            .ingest
            .push(Arc::from(event.body.as_str()), Arc::from(event.id.as_str()));
    }

    fn reserve(&self, rule: (String, String), rate: Rate) -> std::time::Duration {
        self.targets
            .lock()
            .unwrap()
            .entry(rule)
            .or_insert_with(|| Bucket::new(rate.burst, rate.per_second))
            .reserve()
    }

    /// How far behind each rule's account and region fell (the most it was in debt, in tokens).
    pub fn deepest_debts(&self) -> BTreeMap<(String, String), f64> {
        self.targets
            .lock()
            .unwrap()
            .iter()
            .map(|(k, b)| (k.clone(), -b.lowest()))
            .collect()
    }
}
