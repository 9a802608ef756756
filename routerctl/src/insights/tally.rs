//! What `routerctl insights` answers, as one pure piece: the three Logs Insights queries base.yaml
//! ships ([`POOLS`], [`DELAYS`], [`LATE`]), what each computes from the router's interruption
//! records ([`answer`]: what the model of Logs Insights answers with, and what the lab's demo
//! computes from the records its router printed), and the report built from each hub's answers
//! ([`Insights::from_answers`]: merged across regions, filtered by cluster, sorted, rendered).
//!
//! On AWS the queries run in Logs Insights and only their answers come back; where Logs Insights
//! cannot run (the emulator, the model of AWS) [`answer`] stands in for it, so every step after
//! the query is the same code whichever computed the answer.

use std::collections::BTreeMap;

use router_core::{event::Kind, insight::InterruptionRecord, metrics::LATE_AFTER_MS};
use serde::Serialize;

/// Forwarded interruptions by cluster, kind, node pool, instance type, zone and capacity type.
pub const POOLS: &str = "filter record = \"interruption\" and outcome = \"forwarded\"
| stats count(*) as interruptions by account, region, cluster, kind, node_pool, instance_type, zone, capacity_type
| sort interruptions desc";

/// Each cluster's delivery delay: deliveries, p50, p99 and the longest.
pub const DELAYS: &str = "filter record = \"interruption\" and outcome = \"forwarded\"
| stats count(*) as delivered, pct(delay_ms, 50) as p50_ms, pct(delay_ms, 99) as p99_ms, max(delay_ms) as max_ms by account, region, cluster
| sort p99_ms desc";

/// Deliveries later than [`LATE_AFTER_MS`] (a spot warning's two minutes), latest first.
pub const LATE: &str = "filter record = \"interruption\" and outcome = \"forwarded\" and delay_ms > 120000
| fields account, region, cluster, kind, instance, node_pool, instance_type, zone, event_time, delay_ms
| sort delay_ms desc
| limit 1000";

/// The rows [`LATE`] returns at most.
pub const LATE_LIMIT: usize = 1000;

/// The three queries, by the name base.yaml's query definitions give them after the stack's.
pub const QUERIES: [(&str, &str); 3] = [
    ("interruptions-by-pool", POOLS),
    ("delivery-delay-by-cluster", DELAYS),
    ("late-deliveries", LATE),
];

/// A result row as Logs Insights answers it: each field's value, as text.
pub type Row = BTreeMap<String, String>;

/// The same query, whatever its line breaks and indentation (a dashboard writes it on one line).
pub fn same_query(a: &str, b: &str) -> bool {
    let words = |q: &str| q.split_whitespace().collect::<Vec<_>>().join(" ");
    words(a) == words(b)
}

/// What Logs Insights answers to `query`, one of [`QUERIES`], over `records`; `None` for any
/// other query (nothing else is modelled).
pub fn answer(query: &str, records: &[InterruptionRecord]) -> Option<Vec<Row>> {
    let forwarded: Vec<&InterruptionRecord> = records
        .iter()
        .filter(|r| r.outcome == "forwarded")
        .collect();
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    if same_query(query, POOLS) {
        let mut counts: BTreeMap<[String; 8], u64> = BTreeMap::new();
        for r in &forwarded {
            let key = [
                text(&r.account),
                text(&r.region),
                text(&r.cluster),
                text(&r.kind),
                r.node_pool.clone(),
                r.instance_type.clone(),
                r.zone.clone(),
                r.capacity_type.clone(),
            ];
            *counts.entry(key).or_default() += 1;
        }
        let mut rows: Vec<(u64, Row)> = counts
            .into_iter()
            .map(|(key, n)| {
                let mut row = row(&POOL_KEY, key);
                row.insert("interruptions".into(), n.to_string());
                (n, row)
            })
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        return Some(rows.into_iter().map(|(_, r)| r).collect());
    }
    if same_query(query, DELAYS) {
        let mut delays: BTreeMap<[String; 3], Vec<u64>> = BTreeMap::new();
        for r in &forwarded {
            let key = [text(&r.account), text(&r.region), text(&r.cluster)];
            delays
                .entry(key)
                .or_default()
                .extend(r.delay_ms.iter().copied());
        }
        let mut rows: Vec<(u64, Row)> = delays
            .into_iter()
            .map(|(key, mut ms)| {
                ms.sort_unstable();
                let p99 = percentile(&ms, 99);
                let mut row = row(&["account", "region", "cluster"], key);
                row.insert("delivered".into(), ms.len().to_string());
                row.insert("p50_ms".into(), percentile(&ms, 50).to_string());
                row.insert("p99_ms".into(), p99.to_string());
                row.insert(
                    "max_ms".into(),
                    ms.last().copied().unwrap_or_default().to_string(),
                );
                (p99, row)
            })
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        return Some(rows.into_iter().map(|(_, r)| r).collect());
    }
    if same_query(query, LATE) {
        let mut late: Vec<&&InterruptionRecord> = forwarded
            .iter()
            .filter(|r| r.delay_ms.is_some_and(|d| d > LATE_AFTER_MS))
            .collect();
        late.sort_by_key(|l| std::cmp::Reverse(l.delay_ms));
        return Some(
            late.into_iter()
                .take(LATE_LIMIT)
                .map(|r| {
                    row(
                        &LATE_FIELDS,
                        [
                            text(&r.account),
                            text(&r.region),
                            text(&r.cluster),
                            text(&r.kind),
                            text(&r.instance),
                            r.node_pool.clone(),
                            r.instance_type.clone(),
                            r.zone.clone(),
                            text(&r.event_time),
                            r.delay_ms.unwrap_or_default().to_string(),
                        ],
                    )
                })
                .collect(),
        );
    }
    None
}

const POOL_KEY: [&str; 8] = [
    "account",
    "region",
    "cluster",
    "kind",
    "node_pool",
    "instance_type",
    "zone",
    "capacity_type",
];

const LATE_FIELDS: [&str; 10] = [
    "account",
    "region",
    "cluster",
    "kind",
    "instance",
    "node_pool",
    "instance_type",
    "zone",
    "event_time",
    "delay_ms",
];

fn row<const N: usize>(names: &[&str; N], values: [String; N]) -> Row {
    names
        .iter()
        .map(|n| n.to_string())
        .zip(values)
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// The nearest-rank percentile of `sorted` (0 when empty).
pub fn percentile(sorted: &[u64], p: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One hub's answers to the three queries: the region its log group is in, and each query's rows.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    pub hub: String,
    pub pools: Vec<Row>,
    pub delays: Vec<Row>,
    pub late: Vec<Row>,
}

impl Answers {
    /// What Logs Insights would answer over `records`, the router's records in hub `hub`.
    pub fn of(hub: &str, records: &[InterruptionRecord]) -> Self {
        let run = |query| answer(query, records).expect("one of the queries");
        Self {
            hub: hub.to_owned(),
            pools: run(POOLS),
            delays: run(DELAYS),
            late: run(LATE),
        }
    }
}

/// Forwarded interruptions of one pool: cluster, kind, node pool, type, zone and capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Pool {
    pub account: String,
    pub region: String,
    pub cluster: String,
    pub kind: String,
    pub node_pool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub interruptions: u64,
}

/// One cluster's delivery delay, as the hub that serves it measured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delay {
    /// The region of the hub whose log group holds the records.
    pub hub: String,
    pub account: String,
    pub region: String,
    pub cluster: String,
    pub delivered: u64,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
    /// Deliveries later than [`LATE_AFTER_MS`].
    pub late: u64,
    /// `late` is [`LATE_LIMIT`] because the query stopped there: there may be more.
    pub late_capped: bool,
}

/// One delivery later than [`LATE_AFTER_MS`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Late {
    pub hub: String,
    pub account: String,
    pub region: String,
    pub cluster: String,
    pub kind: String,
    pub instance: String,
    pub node_pool: String,
    pub instance_type: String,
    pub zone: String,
    pub event_time: String,
    pub delay_ms: u64,
}

/// The report: the most reclaimed pools across the hubs, each cluster's delay, the late
/// deliveries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Insights {
    pub pools: Vec<Pool>,
    pub delays: Vec<Delay>,
    pub late: Vec<Late>,
}

/// A field of a row: its text, or an error naming the query and the field.
fn field<'r>(row: &'r Row, name: &str, query: &str) -> Result<&'r str, String> {
    row.get(name).map(String::as_str).ok_or_else(|| {
        format!(
            "a row of the {query} query has no {name:?} field ({row:?}): the log group holds \
             records of another shape; is it the router's (RouterLogGroup)?"
        )
    })
}

/// A number Logs Insights wrote (`12`, `812.5`), rounded to the millisecond.
fn number(row: &Row, name: &str, query: &str) -> Result<u64, String> {
    let text = field(row, name, query)?;
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .map(|n| n.round() as u64)
        .ok_or_else(|| format!("the {query} query's {name} is {text:?}, not a number"))
}

impl Insights {
    /// The report from each hub's answers: pools summed across hubs, each cluster's delay as
    /// its hub measured it with its late deliveries counted, only `clusters`' rows when any are
    /// named; the pools most reclaimed first, the clusters latest first.
    pub fn from_answers(answers: &[Answers], clusters: &[String]) -> Result<Self, String> {
        let wanted = |row: &Row| {
            clusters.is_empty()
                || row
                    .get("cluster")
                    .is_some_and(|c| clusters.iter().any(|w| w == c))
        };
        let text = |row: &Row, name: &str| row.get(name).cloned().unwrap_or_default();
        let mut pools: BTreeMap<[String; 8], u64> = BTreeMap::new();
        let mut delays = Vec::new();
        let mut late = Vec::new();
        for hub in answers {
            for row in hub.pools.iter().filter(|r| wanted(r)) {
                let key = POOL_KEY.map(|name| text(row, name));
                *pools.entry(key).or_default() += number(row, "interruptions", "pools")?;
            }
            let mut late_by_cluster: BTreeMap<[String; 3], u64> = BTreeMap::new();
            for row in hub.late.iter().filter(|r| wanted(r)) {
                let key = ["account", "region", "cluster"].map(|name| text(row, name));
                *late_by_cluster.entry(key).or_default() += 1;
                late.push(Late {
                    hub: hub.hub.clone(),
                    account: text(row, "account"),
                    region: text(row, "region"),
                    cluster: text(row, "cluster"),
                    kind: text(row, "kind"),
                    instance: text(row, "instance"),
                    node_pool: text(row, "node_pool"),
                    instance_type: text(row, "instance_type"),
                    zone: text(row, "zone"),
                    event_time: text(row, "event_time"),
                    delay_ms: number(row, "delay_ms", "late")?,
                });
            }
            let capped = hub.late.len() >= LATE_LIMIT;
            for row in hub.delays.iter().filter(|r| wanted(r)) {
                let key = ["account", "region", "cluster"].map(|name| text(row, name));
                let late = late_by_cluster.get(&key).copied().unwrap_or_default();
                delays.push(Delay {
                    hub: hub.hub.clone(),
                    account: key[0].clone(),
                    region: key[1].clone(),
                    cluster: key[2].clone(),
                    delivered: number(row, "delivered", "delays")?,
                    p50_ms: number(row, "p50_ms", "delays")?,
                    p99_ms: number(row, "p99_ms", "delays")?,
                    max_ms: number(row, "max_ms", "delays")?,
                    late,
                    late_capped: capped && late > 0,
                });
            }
        }
        let mut pools: Vec<Pool> = pools
            .into_iter()
            .map(|(k, interruptions)| {
                let [
                    account,
                    region,
                    cluster,
                    kind,
                    node_pool,
                    instance_type,
                    zone,
                    capacity_type,
                ] = k;
                Pool {
                    account,
                    region,
                    cluster,
                    kind,
                    node_pool,
                    instance_type,
                    zone,
                    capacity_type,
                    interruptions,
                }
            })
            .collect();
        pools.sort_by(|a, b| b.interruptions.cmp(&a.interruptions).then(a.cmp(b)));
        let cluster_key = |d: &Delay| (d.account.clone(), d.region.clone(), d.cluster.clone());
        delays.sort_by(|a, b| {
            b.p99_ms
                .cmp(&a.p99_ms)
                .then_with(|| cluster_key(a).cmp(&cluster_key(b)))
        });
        late.sort_by_key(|l| std::cmp::Reverse(l.delay_ms));
        Ok(Self {
            pools,
            delays,
            late,
        })
    }

    /// How many forwarded interruptions the pools hold.
    pub fn interruptions(&self) -> u64 {
        self.pools.iter().map(|p| p.interruptions).sum()
    }

    /// The two tables (and the late deliveries, when there are any), as the terminal shows them.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "most reclaimed pools (forwarded interruptions per cluster, node pool, instance type and \
             zone; by kind: spot warning, rebalance recommendation, state change, capacity \
             reservation warning, Health scheduled change)\n",
        );
        if self.pools.is_empty() {
            out += "  none in the window\n";
        } else {
            let header = [
                "total",
                "spot",
                "rebal",
                "state",
                "cr",
                "health",
                "account",
                "region",
                "cluster",
                "node pool",
                "type",
                "zone",
                "capacity",
            ];
            // One row per pool of a cluster, its kinds in columns, most reclaimed first.
            let mut by_pool: BTreeMap<[&str; 7], [u64; 5]> = BTreeMap::new();
            for p in &self.pools {
                let key = [
                    p.account.as_str(),
                    &p.region,
                    &p.cluster,
                    &p.node_pool,
                    &p.instance_type,
                    &p.zone,
                    &p.capacity_type,
                ];
                let kinds = by_pool.entry(key).or_default();
                if let Some(k) = Kind::ALL.iter().position(|k| k.label() == p.kind) {
                    kinds[k] += p.interruptions;
                }
            }
            let mut pools: Vec<([&str; 7], [u64; 5])> = by_pool.into_iter().collect();
            pools.sort_by_key(|(_, kinds)| std::cmp::Reverse(kinds.iter().sum::<u64>()));
            let rows: Vec<Vec<String>> = pools
                .iter()
                .map(|(key, kinds)| {
                    let mut row = vec![kinds.iter().sum::<u64>().to_string()];
                    row.extend(kinds.iter().map(u64::to_string));
                    row.extend(key.iter().map(|s| s.to_string()));
                    row
                })
                .collect();
            out += &table(&header, &rows, &[0, 1, 2, 3, 4, 5]);
        }
        out += &format!(
            "\ndelivery delay per cluster (the event's time to the cluster's queue; late: over {} s)\n",
            LATE_AFTER_MS / 1000
        );
        if self.delays.is_empty() {
            out += "  none in the window\n";
        } else {
            let header = [
                "account",
                "region",
                "cluster",
                "delivered",
                "p50 ms",
                "p99 ms",
                "max ms",
                "late",
                "hub",
            ];
            let rows: Vec<Vec<String>> = self
                .delays
                .iter()
                .map(|d| {
                    vec![
                        d.account.clone(),
                        d.region.clone(),
                        d.cluster.clone(),
                        d.delivered.to_string(),
                        d.p50_ms.to_string(),
                        d.p99_ms.to_string(),
                        d.max_ms.to_string(),
                        format!("{}{}", if d.late_capped { "≥" } else { "" }, d.late),
                        d.hub.clone(),
                    ]
                })
                .collect();
            out += &table(&header, &rows, &[3, 4, 5, 6, 7]);
        }
        if !self.late.is_empty() {
            out += "\nlate deliveries, latest first\n";
            let header = [
                "delay ms",
                "account",
                "region",
                "cluster",
                "kind",
                "instance",
                "node pool",
                "type",
                "zone",
                "event time",
            ];
            let rows: Vec<Vec<String>> = self
                .late
                .iter()
                .map(|l| {
                    vec![
                        l.delay_ms.to_string(),
                        l.account.clone(),
                        l.region.clone(),
                        l.cluster.clone(),
                        l.kind.clone(),
                        l.instance.clone(),
                        l.node_pool.clone(),
                        l.instance_type.clone(),
                        l.zone.clone(),
                        l.event_time.clone(),
                    ]
                })
                .collect();
            out += &table(&header, &rows, &[0]);
        }
        out
    }
}

/// Columns padded to their widest cell, two spaces apart, those of `right` right-aligned.
fn table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let width: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([header[c].chars().count()])
                .max()
                .unwrap_or_default()
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut text = String::from(" ");
        for (c, cell) in cells.iter().enumerate() {
            let pad = " ".repeat(width[c] - cell.chars().count());
            text.push(' ');
            match right.contains(&c) {
                true => text += &format!("{pad}{cell}"),
                false => text += &format!("{cell}{pad}"),
            }
            text.push(' ');
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out += &line(row.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests;
