//! The demo's result: per cluster what was expected, received and misrouted, with end-to-end
//! latency; the router's AWS calls per event; the insights table's comparison; and the table
//! `lab demo` prints of them.

use std::{collections::BTreeMap, time::Duration};

use crate::insights;

/// One cluster's line of the result table.
#[derive(Debug, Default, Clone)]
pub struct ClusterReport {
    pub expected: usize,
    pub received: usize,
    pub duplicates: usize,
    pub misrouted: usize,
    pub missing: usize,
    pub latencies_ms: Vec<u64>,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub clusters: BTreeMap<String, ClusterReport>,
    pub published: usize,
    pub distractors: usize,
    pub distractors_delivered: usize,
    pub dead_lettered: usize,
    pub router_calls: BTreeMap<String, u64>,
    pub router_records: u64,
    pub invocations: u64,
    pub invocation_times: Vec<Duration>,
    /// The insights table from the router's records, and how it compares with what was sent.
    pub insights: insights::Outcome,
}

impl Report {
    pub fn lost(&self) -> usize {
        self.clusters.values().map(|c| c.missing).sum()
    }

    /// Messages in a queue naming an instance of another cluster (distractors included).
    pub fn misrouted(&self) -> usize {
        self.clusters.values().map(|c| c.misrouted).sum()
    }

    pub fn passed(&self) -> bool {
        self.lost() == 0
            && self.misrouted() == 0
            && self.dead_lettered == 0
            && self.insights.matches()
    }

    pub fn calls_per_event(&self) -> f64 {
        self.router_calls.values().sum::<u64>() as f64 / self.router_records.max(1) as f64
    }
}

pub(crate) fn print_report(report: &Report, took: Duration) {
    println!();
    println!(
        "  latency: arrival in the ingest queue -> arrival in the cluster's queue (batching window included)"
    );
    println!(
        "  {:<10} {:>8} {:>8} {:>10} {:>8} {:>10} {:>9} {:>9}",
        "cluster", "expected", "received", "misrouted", "missing", "duplicates", "p50 ms", "p99 ms"
    );
    for (cluster, line) in &report.clusters {
        let mut l = line.latencies_ms.clone();
        l.sort_unstable();
        println!(
            "  {:<10} {:>8} {:>8} {:>10} {:>8} {:>10} {:>9} {:>9}",
            cluster,
            line.expected,
            line.received,
            line.misrouted,
            line.missing,
            line.duplicates,
            percentile(&l, 50),
            percentile(&l, 99)
        );
    }
    println!(
        "  distractors (managed node group, untagged): {} sent, {} delivered anywhere (must be 0)",
        report.distractors, report.distractors_delivered
    );
    let calls: Vec<String> = report
        .router_calls
        .iter()
        .map(|(a, n)| format!("{a} {n}"))
        .collect();
    println!(
        "  router AWS calls: {} for {} records in {} invocations = {:.3} per event ({})",
        report.router_calls.values().sum::<u64>(),
        report.router_records,
        report.invocations,
        report.calls_per_event(),
        calls.join(", ")
    );
    let mut times: Vec<u64> = report
        .invocation_times
        .iter()
        .map(|d| d.as_millis() as u64)
        .collect();
    times.sort_unstable();
    println!(
        "  router invocation time: p50 {} ms, p99 {} ms (debug build, emulator on the same cores)",
        percentile(&times, 50),
        percentile(&times, 99)
    );
    println!("  dead-letter queue: {} messages", report.dead_lettered);
    println!();
    insights::print(&report.insights);
    println!();
    let expected: usize = report.clusters.values().map(|c| c.expected).sum();
    if report.passed() {
        println!(
            "PASS: {expected} deliveries to {} clusters, 0 lost, 0 misrouted, {:.3} AWS calls per event, in {:.1?}",
            report.clusters.len(),
            report.calls_per_event(),
            took
        );
    } else {
        println!(
            "FAIL: {} lost, {} misrouted, {} dead-lettered of {expected} expected deliveries, {} insights counts not what was sent",
            report.lost(),
            report.misrouted(),
            report.dead_lettered,
            report.insights.differences.len()
        );
    }
}

fn percentile(sorted: &[u64], p: usize) -> String {
    if sorted.is_empty() {
        return "-".into();
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1].to_string()
}
