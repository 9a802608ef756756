//! The insights table the demo's scenes print at their end: what `routerctl insights` would
//! answer, computed from the interruption records the router printed (what Lambda would have
//! sent to its log group) by the same pure piece (`routerctl::insights::tally`) that stands in
//! for Logs Insights on the model of AWS, and checked against what the lab sent: per cluster,
//! kind and node pool, every count equal; and per instance type, zone and capacity type, no more
//! than was sent, the rest recorded `unknown`. That is what the router records when the hedged
//! Tagging API answered a lookup before DescribeInstances (docs/operating.md: GetResources returns
//! tags only), which it does for about one cold lookup in twenty when EC2 is well, and more when
//! the emulator is slow: a check that demanded every type would fail on the router's design.
//!
//! The lab knows what it launched: each cluster's nodes cycle through [`NODES`], node pools of
//! the types, zones and capacity types Karpenter would launch for them.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use aws_model::events::Synthetic;
use interruption_router::insight::{InterruptionRecord, UNKNOWN};
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

    /// Interruptions counted without a type, zone or capacity type.
    pub fn undescribed(&self) -> u64 {
        counted(&self.insights)
            .iter()
            .filter(|(key, _)| undescribed(key))
            .map(|(_, n)| n)
            .sum()
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
    Outcome {
        insights,
        records: records.len(),
        differences: differences(sent, &counted),
    }
}

/// A key's cluster, kind and node pool (its first five fields), with the rest `*`.
fn pool_of(key: &[String; 8]) -> [String; 8] {
    let mut pool = key.clone();
    pool[5..].fill_with(|| "*".to_owned());
    pool
}

/// A key the router recorded without a description (the Tagging API's answer).
fn undescribed(key: &[String; 8]) -> bool {
    key[5..].iter().all(|field| field == UNKNOWN)
}

/// Where `counted` is not what `sent` allows: per cluster, kind and pool the totals (keys ending
/// `* * *`), and per described key no more than was sent.
fn differences(sent: &Counts, counted: &Counts) -> Vec<([String; 8], u64, u64)> {
    let totals = |counts: &Counts| {
        let mut totals = Counts::new();
        for (key, n) in counts {
            *totals.entry(pool_of(key)).or_default() += n;
        }
        totals
    };
    let (sent_totals, counted_totals) = (totals(sent), totals(counted));
    let pools: BTreeSet<&[String; 8]> = sent_totals.keys().chain(counted_totals.keys()).collect();
    let get = |counts: &Counts, key: &[String; 8]| counts.get(key).copied().unwrap_or_default();
    let mut differences: Vec<_> = pools
        .into_iter()
        .map(|k| (k.clone(), get(&sent_totals, k), get(&counted_totals, k)))
        .filter(|(_, s, c)| s != c)
        .collect();
    differences.extend(
        counted
            .iter()
            .filter(|(key, n)| !undescribed(key) && **n > get(sent, key))
            .map(|(key, n)| (key.clone(), get(sent, key), *n)),
    );
    differences
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
            "  insights: {} forwarded interruptions, each count equal to what the lab sent per cluster, kind and pool; per type and zone, {} `unknown` where the Tagging API answered the lookup",
            outcome.insights.interruptions(),
            outcome.undescribed()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cluster: &str, pool: &str, instance_type: &str, zone: &str) -> [String; 8] {
        let capacity = if instance_type == UNKNOWN {
            UNKNOWN
        } else {
            "spot"
        };
        [
            "1",
            "r",
            cluster,
            "spot-interruption",
            pool,
            instance_type,
            zone,
            capacity,
        ]
        .map(str::to_owned)
    }

    #[test]
    fn a_count_the_tagging_api_left_undescribed_matches_and_nothing_else_does() {
        let sent = Counts::from([
            (key("alpha", "default", "m7i.large", "ra"), 2),
            (key("alpha", "batch", "c6i.2xlarge", "rc"), 1),
        ]);
        let hedged = Counts::from([
            (key("alpha", "default", "m7i.large", "ra"), 1),
            (key("alpha", "default", UNKNOWN, UNKNOWN), 1),
            (key("alpha", "batch", "c6i.2xlarge", "rc"), 1),
        ]);
        assert_eq!(differences(&sent, &hedged), []);
        assert_eq!(differences(&sent, &sent), []);

        let one_lost = Counts::from([(key("alpha", "default", UNKNOWN, UNKNOWN), 2)]);
        assert_eq!(
            differences(&sent, &one_lost),
            [(pool_of(&key("alpha", "batch", "", "")), 1, 0)],
            "the batch pool's interruption is missing"
        );
        let wrong_type = Counts::from([
            (key("alpha", "default", "m7i.large", "ra"), 1),
            (key("alpha", "default", "m7i.large", "rb"), 1),
            (key("alpha", "batch", "c6i.2xlarge", "rc"), 1),
        ]);
        assert_eq!(
            differences(&sent, &wrong_type),
            [(key("alpha", "default", "m7i.large", "rb"), 0, 1)],
            "a described count must be one that was sent"
        );
        let other_pool = Counts::from([
            (key("alpha", "default", "m7i.large", "ra"), 2),
            (key("alpha", "system", UNKNOWN, UNKNOWN), 1),
        ]);
        assert_eq!(
            differences(&sent, &other_pool).len(),
            2,
            "{:?}",
            differences(&sent, &other_pool)
        );
    }
}
