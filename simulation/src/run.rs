//! One run: the organisation's storm through EventBridge, the ingest queue, the event source
//! mapping and the router's own code in its execution environments, on tokio's paused clock
//! (minutes of storm in seconds, the same outcome for the same seed), then what came of it.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::{Duration, Instant as WallInstant},
};

use router_core::config::Config;
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    aws::{Counts, World},
    esm::{Esm, Mapping, Pool, Usage},
    eventbridge::{EventBridge, Topology},
    ingest::Ingest,
    karpenter,
    organisation::{Organisation, Sent},
    plan::{Plan, Trace, event_id},
    quotas::Quotas,
};

/// What a run is.
#[derive(Debug, Clone)]
pub struct Setup {
    pub seed: u64,
    pub quotas: Quotas,
    pub mapping: Mapping,
    /// The router's environment beyond what base.yaml sets.
    pub router_vars: Vec<(String, String)>,
    /// Give up this long after the last event.
    pub drain_limit: Duration,
    /// How member accounts' events reach the ingest queue.
    pub topology: Topology,
}

/// Ages of one kind of event, from the moment its source bus had it to its cluster's queue.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ages {
    pub count: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Ages {
    fn of(mut ages: Vec<Duration>) -> Self {
        ages.sort_unstable();
        let at = |q: f64| {
            ages.get(((ages.len() as f64 * q).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or_default()
        };
        Self {
            count: ages.len(),
            p50: at(0.50),
            p99: at(0.99),
            max: ages.last().copied().unwrap_or_default(),
        }
    }
}

/// The router's and Karpenter's DescribeInstances in one account and region.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ec2Use {
    pub router_calls: usize,
    /// The most calls in any 10-s window, per second.
    pub router_peak_per_second: f64,
    pub karpenter_calls: usize,
    pub karpenter_peak_per_second: f64,
    /// The fewest tokens the bucket held.
    pub lowest_tokens: f64,
}

/// What came of a run.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub events: usize,
    pub by_kind: BTreeMap<Sent, Ages>,
    /// Expected deliveries that never arrived (and were not dead-lettered with a reason).
    pub lost: usize,
    pub misrouted: usize,
    /// Copies that arrived more than once.
    pub duplicates: usize,
    pub dead_lettered: BTreeMap<String, usize>,
    pub redriven: usize,
    /// Events the router forwarded that no cluster owns.
    pub background_forwarded: usize,
    /// The rules' part of each event's age: source bus to ingest queue.
    pub eventbridge: Ages,
    pub usage: Usage,
    pub environments: usize,
    pub counts: Counts,
    /// AssumeRole calls per (environment, account), at most.
    pub most_assume_role_per_account: u64,
    /// Per account and region of the storm region.
    pub ec2: BTreeMap<(String, String), Ec2Use>,
    pub calls_per_event: f64,
    pub virtual_time: Duration,
    pub wall_time: Duration,
    pub deepest_target_debt: f64,
    /// The most events sent in any 10-s window, per second (what the hub's rules must carry).
    pub peak_events_per_second: f64,
    /// Target invocations each account spent in each region.
    pub invocations: BTreeMap<(String, String), usize>,
    /// Rules an event crossed, on average.
    pub hops_per_event: f64,
    /// The hub's account and region.
    pub hub: (String, String),
}

/// Runs the storm of `org` as `setup` says.
pub fn run(org: Arc<Organisation>, setup: &Setup) -> Outcome {
    let wall = WallInstant::now();
    let mut outcome = paused(play(org, setup, &Plan::default())).0;
    outcome.wall_time = wall.elapsed();
    outcome
}

/// Runs the storm of `org` with the faults of `plan` ([`crate::faults`]): what it left.
pub fn run_faulted(org: Arc<Organisation>, setup: &Setup, plan: &Plan) -> Trace {
    paused(play(org, setup, plan)).1
}

/// `run` to its end on one thread, on tokio's paused clock.
fn paused<T>(run: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
        .block_on(run)
}

/// The tenancy changes of `plan`, each at its time after `start`.
async fn change_tenancy(world: Arc<World>, plan: Plan, start: Instant) {
    let mut changes: Vec<(Duration, usize, &str)> = [
        plan.deleted.map(|(c, at)| (at, c, "deleted")),
        plan.lost.map(|(c, at)| (at, c, "lost")),
        plan.created.map(|(c, at)| (at, c, "created")),
    ]
    .into_iter()
    .flatten()
    .collect();
    changes.sort();
    for (at, c, change) in changes {
        tokio::time::sleep_until(start + at).await;
        match change {
            "deleted" => world.set_tenant(c, false),
            "lost" => world.set_queue(c, false),
            _ => world.set_tenant(c, true),
        }
    }
}

async fn play(org: Arc<Organisation>, setup: &Setup, plan: &Plan) -> (Outcome, Trace) {
    let ingest = Arc::new(Ingest::new(Duration::from_secs(180), 20));
    let world = Arc::new(World::new(
        org.clone(),
        setup.quotas.clone(),
        ingest.clone(),
        setup.seed,
    ));
    let dlq = world.dlq_url.clone();
    let direct = org.direct_queue_arn();
    let config = Config::from_lookup(|name| {
        setup
            .router_vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or(match name {
                "DEAD_LETTER_QUEUE_URL" => Some(dlq.clone()),
                "MAX_RECEIVE_COUNT" => Some("20".into()),
                "SERVED_ACCOUNTS" => Some("*".into()),
                // As base.yaml sets it with CentralBus=Enabled.
                "DIRECT_QUEUE_ARN" => Some(direct.clone()),
                _ => None,
            })
    })
    .expect("the router's configuration");
    let pool = Arc::new(Pool::new(world.clone(), config));
    let esm = Esm::new(world.clone(), pool.clone(), setup.mapping);
    let bridge = EventBridge::new(world.clone(), setup.topology);
    let events = Arc::new(org.events.clone());
    let start = Instant::now();
    let last = events.last().map(|e| e.at).unwrap_or_default();
    world.inject(plan.injected.clone());
    esm.kill(plan.kills.iter().copied());
    ingest.deliver_twice(plan.twice.iter().map(|id| Arc::from(id.as_str())));
    if let Some((c, _)) = plan.created {
        world.set_tenant(c, false);
    }
    let tenancy = tokio::spawn(change_tenancy(world.clone(), plan.clone(), start));

    let mapping = tokio::spawn({
        let esm = esm.clone();
        async move { esm.run().await }
    });
    let karpenters = tokio::spawn(karpenter::run(
        world.clone(),
        start,
        last + Duration::from_secs(60),
    ));
    bridge.publish(events.clone(), start).await;
    // Until every event is in and out of the ingest queue, or the limit.
    let give_up = start + last + setup.drain_limit;
    let mut quiet = 0;
    while Instant::now() < give_up {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let entered = ingest.entered().len();
        quiet = if ingest.is_empty() && entered >= events.len() {
            quiet + 1
        } else {
            0
        };
        if quiet >= 5 {
            break;
        }
    }
    let virtual_time = start.elapsed();
    esm.stop();
    let _ = mapping.await;
    karpenters.abort();
    let _ = karpenters.await;
    tenancy.abort();
    let trace = Trace {
        arrivals: world
            .arrivals()
            .iter()
            .map(|a| (event_id(&a.body), a.cluster, a.at.duration_since(start)))
            .collect(),
        dead_letters: world
            .dead_letters()
            .iter()
            .map(|(body, reason)| (event_id(body), reason.clone()))
            .collect(),
        redriven: ingest.redriven().iter().map(|id| id.to_string()).collect(),
        killed: esm.usage().killed,
    };
    let outcome = judge(
        &org,
        &world,
        &ingest,
        &esm,
        &pool,
        &bridge,
        start,
        virtual_time,
    );
    (outcome, trace)
}

#[allow(clippy::too_many_arguments)]
fn judge(
    org: &Organisation,
    world: &World,
    ingest: &Ingest,
    esm: &Esm,
    pool: &Pool,
    bridge: &EventBridge,
    start: Instant,
    virtual_time: Duration,
) -> Outcome {
    let by_id: HashMap<&str, &crate::organisation::Event> =
        org.events.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut arrived: HashMap<String, Vec<(usize, Instant)>> = HashMap::new();
    let mut misrouted = 0;
    let mut background_forwarded = 0;
    for arrival in world.arrivals() {
        let body: Value = serde_json::from_str(&arrival.body).unwrap_or_default();
        let id = body["id"].as_str().unwrap_or_default().to_owned();
        let Some(event) = by_id.get(id.as_str()) else {
            misrouted += 1;
            continue;
        };
        match org.instances.get(&event.instance).and_then(|i| i.cluster) {
            Some(owner) if owner == arrival.cluster => {}
            Some(_) => misrouted += 1,
            None => background_forwarded += 1,
        }
        arrived
            .entry(id)
            .or_default()
            .push((arrival.cluster, arrival.at));
    }
    let mut dead_lettered: BTreeMap<String, usize> = BTreeMap::new();
    let mut dead_ids = std::collections::HashSet::new();
    for (body, reason) in world.dead_letters() {
        *dead_lettered.entry(reason).or_default() += 1;
        let body: Value = serde_json::from_str(&body).unwrap_or_default();
        dead_ids.insert(body["id"].as_str().unwrap_or_default().to_owned());
    }
    let mut ages: BTreeMap<Sent, Vec<Duration>> = BTreeMap::new();
    let mut lost = 0;
    let mut duplicates = 0;
    for event in &org.events {
        if event.kind == Sent::Background {
            continue;
        }
        match arrived.get(&event.id) {
            Some(copies) => {
                duplicates += copies.len() - 1;
                let first = copies.iter().map(|(_, at)| *at).min().expect("one");
                let age = first.saturating_duration_since(start + event.at);
                ages.entry(event.kind).or_default().push(age);
            }
            None if dead_ids.contains(&event.id) => {}
            None => lost += 1,
        }
    }
    let entered = ingest.entered();
    let eventbridge = Ages::of(
        org.events
            .iter()
            .filter_map(|e| {
                entered
                    .get(e.id.as_str())
                    .map(|at| at.saturating_duration_since(start + e.at))
            })
            .collect(),
    );
    let counts = world.counts();
    let lowest = world.ec2_lowest();
    let mut ec2 = BTreeMap::new();
    for (key, lowest_tokens) in lowest {
        if key.1 != org.shape.storm_region {
            continue;
        }
        let router = counts
            .router_describe
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let karpenter = counts
            .karpenter_describe
            .get(&key)
            .cloned()
            .unwrap_or_default();
        ec2.insert(
            key,
            Ec2Use {
                router_calls: router.len(),
                router_peak_per_second: peak_rate(&router),
                karpenter_calls: karpenter.len(),
                karpenter_peak_per_second: peak_rate(&karpenter),
                lowest_tokens,
            },
        );
    }
    let router_calls: u64 = counts.by_action.values().sum();
    Outcome {
        events: org.events.len(),
        by_kind: ages.into_iter().map(|(k, v)| (k, Ages::of(v))).collect(),
        lost,
        misrouted,
        duplicates,
        dead_lettered,
        redriven: ingest.redriven().len(),
        background_forwarded,
        eventbridge,
        usage: esm.usage(),
        environments: pool.environments(),
        most_assume_role_per_account: counts.assume_role.values().copied().max().unwrap_or(0),
        counts,
        ec2,
        calls_per_event: router_calls as f64 / org.events.len().max(1) as f64,
        virtual_time,
        wall_time: Duration::ZERO,
        peak_events_per_second: peak_rate(
            &org.events.iter().map(|e| start + e.at).collect::<Vec<_>>(),
        ),
        deepest_target_debt: bridge.deepest_debts().values().copied().fold(0.0, f64::max),
        invocations: bridge.invocations(),
        hops_per_event: bridge.hops() as f64 / org.events.len().max(1) as f64,
        hub: (org.hub_account.clone(), org.shape.hub_region.clone()),
    }
}

/// The most calls in any 10-s window, per second.
fn peak_rate(times: &[Instant]) -> f64 {
    let window = Duration::from_secs(10);
    let mut most = 0;
    let mut from = 0;
    for to in 0..times.len() {
        while times[to].duration_since(times[from]) >= window {
            from += 1;
        }
        most = most.max(to - from + 1);
    }
    most as f64 / window.as_secs_f64()
}
