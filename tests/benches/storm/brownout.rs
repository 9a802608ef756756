//! The "EC2 brownout" row: the fault scenarios' storm (`e2e_tests::fault_storm`) run with the
//! release router, side by side without faults, under the brownout (every DescribeInstances
//! failing for 30 s plus 10 % of every call failing at random), and under the brownout alone
//! (no random faults), which tells what EC2 costs from what the random SQS faults cost. Delivery
//! ages are pooled over the runs of each scenario.

use std::{collections::BTreeMap, fmt::Write as _};

use anyhow::Result;
use e2e_tests::fault_storm::{
    Ages, CLUSTERS, EVENTS_PER_SECOND, OUTAGE, RANDOM_RATE, Run, Storm, ec2_brownout,
};
use local_aws::proxy::{Fault, FaultPlan};

/// Spot warnings per storm, as in `make test`'s fault scenarios.
pub const EVENTS: usize = 300;

/// One scenario's runs.
pub struct Scenario {
    pub label: &'static str,
    pub runs: Vec<Run>,
}

impl Scenario {
    pub fn ages(&self) -> Ages {
        Ages::of(
            self.runs
                .iter()
                .flat_map(|r| r.ages_where(|_| true))
                .collect(),
        )
    }

    fn sum(&self, f: impl Fn(&Run) -> usize) -> usize {
        self.runs.iter().map(f).sum()
    }

    fn calls(&self) -> BTreeMap<String, u64> {
        let mut calls = BTreeMap::new();
        for run in &self.runs {
            for (action, n) in &run.calls {
                *calls.entry(action.clone()).or_default() += n;
            }
        }
        calls
    }

    pub fn calls_per_event(&self) -> f64 {
        self.calls().values().sum::<u64>() as f64 / self.sum(|r| r.events).max(1) as f64
    }

    pub fn lost(&self) -> usize {
        self.sum(|r| r.lost.len() + r.dead_lettered.values().sum::<usize>())
    }

    pub fn misrouted(&self) -> usize {
        self.sum(|r| r.misrouted.len())
    }

    pub fn late(&self) -> usize {
        self.ages().late()
    }

    fn action(&self, action: &str) -> u64 {
        self.calls().get(action).copied().unwrap_or_default()
    }
}

/// No faults, the brownout, the brownout alone: `runs` storms each, in turn.
pub async fn measure(runs: usize) -> Result<[Scenario; 3]> {
    let mut scenarios = [
        Scenario {
            label: "no faults",
            runs: Vec::new(),
        },
        Scenario {
            label: "EC2 brownout + 10 % random faults",
            runs: Vec::new(),
        },
        Scenario {
            label: "EC2 brownout alone",
            runs: Vec::new(),
        },
    ];
    for run in 0..runs {
        let seed = 20_261_123 + run as u64;
        let plans = [
            FaultPlan::none(),
            ec2_brownout(seed),
            FaultPlan::none().with_window(
                "DescribeInstances",
                std::time::Duration::ZERO..OUTAGE,
                Fault::Unavailable,
            ),
        ];
        for (scenario, plan) in scenarios.iter_mut().zip(plans) {
            eprintln!(
                "EC2 brownout row, run {}/{runs}: {}…",
                run + 1,
                scenario.label
            );
            let storm = Storm::new(EVENTS).await?;
            scenario.runs.push(storm.run(scenario.label, plan).await?);
        }
    }
    Ok(scenarios)
}

/// The section of the report.
pub fn section(scenarios: &[Scenario; 3], runs: usize) -> String {
    let mut text = format!(
        "\n## EC2 brownout\n\n{EVENTS} spot warnings over {CLUSTERS} clusters at {EVENTS_PER_SECOND}/s into an ingest queue \
         with the base stack's settings, drained by a local event source mapping with five execution environments (cold \
         routers, real redelivery); {runs} runs per scenario, delivery ages (ingest queue → cluster queue) pooled over \
         them. The brownout: every DescribeInstances failing (503) for the first {} s, and {:.0} % of every call \
         (DescribeInstances, GetResources, GetQueueUrl, SendMessageBatch, ChangeMessageVisibilityBatch) failing at \
         random (503, 500, throttling, reset, a 2-s slow answer, a partly failed batch).\n\n\
         | scenario | p50 s | p99 s | max s | later than 120 s | lost | misrouted | AWS calls / event | DescribeInstances | GetResources |\n\
         |---|---|---|---|---|---|---|---|---|---|",
        OUTAGE.as_secs(),
        RANDOM_RATE * 100.0
    );
    for s in scenarios {
        let ages = s.ages();
        let _ = write!(
            text,
            "\n| {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {:.3} | {} | {} |",
            s.label,
            ages.at(0.5),
            ages.at(0.99),
            ages.at(1.0),
            s.late(),
            s.lost(),
            s.misrouted(),
            s.calls_per_event(),
            s.action("DescribeInstances"),
            s.action("GetResources"),
        );
    }
    text
}
