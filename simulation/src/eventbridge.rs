//! EventBridge's part: each event crosses its rules to the ingest queue. An event of the hub's
//! own account and region crosses one rule (the base stack's). Any other crosses two with
//! [`Topology::Forwarded`] (today's templates): the spoke stack's forwarding rule in its own
//! account and region, then the hub bus's rule. With [`Topology::Direct`] a member account's rule
//! in the hub's region targets the hub's ingest queue itself (EventBridge user guide, "Sending
//! events to an AWS service in another account": same Region only, an execution role in the
//! sender's account): one rule, on the member's own quota. Each rule's delivery takes a target
//! invocation from its account's quota in its region, waiting its turn when the quota is spent
//! ("over the quota delivery is delayed, not dropped"), and one hop's latency.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use tokio::time::Instant;

use crate::{
    aws::{World, direct_role_id},
    bucket::Bucket,
    organisation::Event,
    quotas::{self, Rate},
};

/// How a member account's events reach the hub's ingest queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// The member's rule forwards to the hub bus, whose rule targets the ingest queue.
    Forwarded,
    /// In the hub's region, the member's rule targets the ingest queue; elsewhere as
    /// [`Topology::Forwarded`].
    Direct,
}

/// Target invocations per (account, region), and rules crossed, over the run.
#[derive(Default)]
struct Used {
    invocations: BTreeMap<(String, String), usize>,
    hops: usize,
}

pub struct EventBridge {
    world: Arc<World>,
    topology: Topology,
    targets: Mutex<BTreeMap<(String, String), Bucket>>,
    used: Mutex<Used>,
}

impl EventBridge {
    pub fn new(world: Arc<World>, topology: Topology) -> Arc<Self> {
        Arc::new(Self {
            world,
            topology,
            targets: Mutex::default(),
            used: Mutex::default(),
        })
    }

    /// Target invocations each account spent in each region.
    pub fn invocations(&self) -> BTreeMap<(String, String), usize> {
        self.used.lock().unwrap().invocations.clone()
    }

    /// Rules crossed, over every event delivered.
    pub fn hops(&self) -> usize {
        self.used.lock().unwrap().hops
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
        let direct = self.topology == Topology::Direct && source.1 == hub.1 && source != hub;
        if source == hub {
            hops.push((hub, quotas.hub_target_invocations));
        } else if direct {
            hops.push((source, quotas.member_target_invocations));
        } else {
            hops.push((source, quotas.member_target_invocations));
            hops.push((hub, quotas.hub_target_invocations));
        }
        {
            let mut used = self.used.lock().unwrap();
            used.hops += hops.len();
            for (rule, _) in &hops {
                *used.invocations.entry(rule.clone()).or_default() += 1;
            }
        }
        for (rule, rate) in hops {
            let wait = self.reserve(rule, rate);
            tokio::time::sleep(wait + self.world.draw_latency(quotas::EVENTBRIDGE_HOP)).await;
        }
        // A direct rule sends as the member's direct role, which SQS names as the sender and the
        // router checks (router-core/src/direct.rs).
        let sender = direct.then(|| {
            let role = org.direct_role_name();
            Arc::from(format!("{}:events", direct_role_id(&event.account, &role)))
        });
        self.world.ingest.push_from(
            Arc::from(event.body.as_str()),
            Arc::from(event.id.as_str()),
            sender,
        );
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

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::Topology;
    use crate::{
        esm::Mapping,
        faults::shape,
        organisation::Organisation,
        quotas::Quotas,
        run::{Setup, run},
    };

    fn played(org: &Arc<Organisation>, topology: Topology) -> crate::run::Outcome {
        played_at(org, topology, 18_750.0)
    }

    fn played_at(
        org: &Arc<Organisation>,
        topology: Topology,
        hub_per_second: f64,
    ) -> crate::run::Outcome {
        let setup = Setup {
            seed: 7,
            quotas: Quotas::defaults(hub_per_second),
            mapping: Mapping::base_stack(),
            router_vars: Vec::new(),
            drain_limit: Duration::from_secs(600),
            topology,
        };
        run(org.clone(), &setup)
    }

    /// Forwarded: a member's event spends one invocation in its account and region and one of the
    /// hub's. Direct, in the hub's region: only the member's own; elsewhere as forwarded. The hub
    /// account's own events spend one of its own either way. Nothing lost either way.
    #[test]
    fn direct_rules_spend_the_members_quota_only_in_the_hubs_region() {
        let org = Arc::new(Organisation::new(shape(), 7));
        let hub = (org.hub_account.clone(), org.shape.hub_region.clone());
        let count = |region: &str, members: bool| {
            org.events
                .iter()
                .filter(|e| e.region == region && (e.account != org.hub_account) == members)
                .count()
        };
        let (home, away) = (org.shape.hub_region.clone(), org.shape.storm_region.clone());
        let forwarded = played(&org, Topology::Forwarded);
        let direct = played(&org, Topology::Direct);
        for o in [&forwarded, &direct] {
            assert_eq!((o.lost, o.misrouted), (0, 0));
        }
        let all_but_hub_home = org.events.len() - count(&home, false);
        assert_eq!(forwarded.invocations[&hub], org.events.len());
        assert_eq!(
            forwarded.hops_per_event,
            (org.events.len() + all_but_hub_home) as f64 / org.events.len() as f64
        );
        // Direct: the hub's rules carry its own events and the other region's members'.
        assert_eq!(
            direct.invocations[&hub],
            count(&home, false) + count(&away, true) + count(&away, false)
        );
        assert!(direct.hops_per_event < forwarded.hops_per_event);
        let member = org.accounts[1].clone();
        let member_home = org
            .events
            .iter()
            .filter(|e| e.account == member && e.region == home)
            .count();
        assert_eq!(direct.invocations[&(member, home)], member_home);
    }

    /// Over its quota a rule's deliveries wait their turn, never dropped: at 2 invocations a
    /// second the hub's rules fall behind (the deepest backlog is many events deep, the rules'
    /// p99 many seconds), at 18,750 they never do; nothing is lost either way.
    #[test]
    fn over_the_quota_deliveries_wait_and_none_is_dropped() {
        let org = Arc::new(Organisation::new(shape(), 7));
        let roomy = played(&org, Topology::Forwarded);
        let tight = played_at(&org, Topology::Forwarded, 2.0);
        for o in [&roomy, &tight] {
            assert_eq!((o.lost, o.misrouted), (0, 0));
        }
        assert_eq!(roomy.deepest_target_debt, 0.0);
        assert!(
            roomy.eventbridge.p99 < Duration::from_secs(1),
            "{:?}",
            roomy.eventbridge
        );
        assert!(
            tight.deepest_target_debt > 10.0,
            "{}",
            tight.deepest_target_debt
        );
        assert!(
            tight.eventbridge.p99 > Duration::from_secs(5),
            "{:?}",
            tight.eventbridge
        );
    }
}
