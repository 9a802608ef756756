//! The insights table the demo's scenes print at their end: what `routerctl insights` would
//! answer, computed from the interruption records the router printed (what Lambda would have
//! sent to its log group) by the same pure piece (`routerctl::insights::tally`) that stands in
//! for Logs Insights on the model of AWS, and checked against what the lab sent: per cluster,
//! kind, node pool, instance type and zone, every count equal.
//!
//! The lab knows what it launched: each cluster's nodes cycle through [`NODES`], node pools of
//! the types, zones and capacity types Karpenter would launch for them.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use aws_model::events::Synthetic;
use interruption_router::insight::InterruptionRecord;
use local_aws::{function::Function, moto::Placement};
use routerctl::insights::tally::{Answers, Insights};

/// What the lab launches for a cluster's node `n`: (node pool, instance type, zone letter, spot),
/// in turn. Capacity reservations are not launched: the emulator has none.
pub const NODES: [(&str, &str, char, bool); 4] = [
    ("default", "m7i.large", 'a', true),
    ("default", "m7i.large", 'b', true),
    ("batch", "c6i.2xlarge", 'c', true),
    ("system", "m6i.xlarge", 'a', false),
];

/// (account, region, cluster).
pub type Place = (String, String, String);

/// A node as the lab launched it.
#[derive(Debug, Clone)]
pub struct Launched {
    pub place: Place,
    pub pool: &'static str,
    pub instance_type: &'static str,
    pub zone: String,
    pub capacity: &'static str,
}

impl Launched {
    /// Node `n` of the cluster at `place`, as [`NODES`] has it.
    pub fn nth(place: &Place, n: usize) -> Self {
        let (pool, instance_type, zone, spot) = NODES[n % NODES.len()];
        Self {
            place: place.clone(),
            pool,
            instance_type,
            zone: format!("{}{zone}", place.1),
            capacity: if spot { "spot" } else { "on-demand" },
        }
    }

    /// How RunInstances launches it.
    pub fn placement(&self) -> Placement<'_> {
        Placement {
            instance_type: self.instance_type,
            zone: Some(&self.zone),
            spot: self.capacity == "spot",
        }
    }

    /// Its tags as Karpenter tags a node of its pool.
    pub fn tags(&self) -> Vec<(String, String)> {
        let cluster = &self.place.2;
        vec![
            ("eks:eks-cluster-name".into(), cluster.clone()),
            (format!("kubernetes.io/cluster/{cluster}"), "owned".into()),
            ("karpenter.sh/nodepool".into(), self.pool.into()),
        ]
    }
}

/// (account, region, cluster, kind, pool, type, zone, capacity type) → interruptions.
pub type Counts = BTreeMap<[String; 8], u64>;

/// What the lab sent, as the pools table must count it: each instance of each event, in the
/// cluster it must reach.
pub fn sent<'e>(
    events: impl IntoIterator<Item = (&'e Synthetic, &'e BTreeSet<Place>)>,
    launched: &BTreeMap<String, Launched>,
) -> Counts {
    let mut counts = Counts::new();
    for (event, places) in events {
        for instance in &event.instances {
            let Some(node) = launched.get(instance) else {
                continue;
            };
            if !places.contains(&node.place) {
                continue;
            }
            let key = [
                node.place.0.clone(),
                node.place.1.clone(),
                node.place.2.clone(),
                event.kind.label().to_owned(),
                node.pool.to_owned(),
                node.instance_type.to_owned(),
                node.zone.clone(),
                node.capacity.to_owned(),
            ];
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// What the insights table counts.
pub fn counted(insights: &Insights) -> Counts {
    insights
        .pools
        .iter()
        .map(|p| {
            let key = [
                &p.account,
                &p.region,
                &p.cluster,
                &p.kind,
                &p.node_pool,
                &p.instance_type,
                &p.zone,
                &p.capacity_type,
            ]
            .map(|s| s.to_owned());
            (key, p.interruptions)
        })
        .collect()
}

/// The insights of a scene, and how they compare with what it sent.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub insights: Insights,
    /// Records read from the router's output (every outcome).
    pub records: usize,
    /// Where the table and what was sent differ: (key, sent, counted).
    pub differences: Vec<([String; 8], u64, u64)>,
}

impl Outcome {
    pub fn matches(&self) -> bool {
        self.differences.is_empty()
    }
}

/// The router's records from the environments' output (the lines Lambda's log filter keeps),
/// once they hold `forwarded` forwarded ones or a few seconds have passed (a process's last
/// lines reach the lab a moment after its invocation answered).
pub async fn records(functions: &[&Function], forwarded: u64) -> Vec<InterruptionRecord> {
    let read = || -> Vec<InterruptionRecord> {
        functions
            .iter()
            .flat_map(|f| f.stdout_lines())
            .filter_map(|line| InterruptionRecord::from_line(&line))
            .collect()
    };
    for _ in 0..50 {
        let records = read();
        if records.iter().filter(|r| r.outcome == "forwarded").count() as u64 >= forwarded {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    read()
}

/// The table from `records` of the hub in `hub`, and its differences from `sent`.
pub fn outcome(hub: &str, records: &[InterruptionRecord], sent: &Counts) -> Outcome {
    let insights = Insights::from_answers(&[Answers::of(hub, records)], &[])
        .expect("answers computed from records are complete");
    let counted = counted(&insights);
    let keys: BTreeSet<&[String; 8]> = sent.keys().chain(counted.keys()).collect();
    let differences = keys
        .into_iter()
        .filter_map(|k| {
            let (s, c) = (
                sent.get(k).copied().unwrap_or_default(),
                counted.get(k).copied().unwrap_or_default(),
            );
            (s != c).then(|| (k.clone(), s, c))
        })
        .collect();
    Outcome {
        insights,
        records: records.len(),
        differences,
    }
}

/// Prints the table, and whether it counts what was sent.
pub fn print(outcome: &Outcome) {
    println!(
        "  insights: what `routerctl insights` answers, from the router's {} interruption records",
        outcome.records
    );
    for line in outcome.insights.render().lines() {
        println!("  {line}");
    }
    if outcome.matches() {
        println!(
            "  insights: {} forwarded interruptions, each count equal to what the lab sent per cluster, kind, pool, type and zone",
            outcome.insights.interruptions()
        );
    } else {
        for (key, sent, counted) in &outcome.differences {
            println!(
                "  insights: {} sent {sent}, recorded {counted}",
                key.join(" ")
            );
        }
    }
}
