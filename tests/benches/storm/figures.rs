//! The figures as printed and written: the markdown table of storm passes, percentiles and
//! spreads over runs, the machine they ran on, and the criterion micro-benchmarks' results.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::Duration,
};

use super::passes::Pass;

/// A markdown table of storm passes: calls/event, throughput and invocation latency, each as
/// median (min–max) over the runs.
pub fn storm_table(rows: &[(&str, &Vec<Pass>)]) -> String {
    let mut table = String::from(
        "| pass | AWS calls / event | events / s | invocation p50 ms | invocation p99 ms |\n|---|---|---|---|---|",
    );
    for (label, passes) in rows {
        let (c, c0, c1) = spread(passes.iter().map(Pass::calls_per_event));
        let (r, r0, r1) = spread(passes.iter().map(Pass::events_per_second));
        let (p50, p50a, p50b) = spread(passes.iter().map(|p| ms(percentile(&p.latencies, 50))));
        let (p99, p99a, p99b) = spread(passes.iter().map(|p| ms(percentile(&p.latencies, 99))));
        let _ = write!(
            table,
            "\n| {label} | {c:.3} ({c0:.3}–{c1:.3}) | {r:.0} ({r0:.0}–{r1:.0}) | {p50:.1} ({p50a:.1}–{p50b:.1}) | {p99:.1} ({p99a:.1}–{p99b:.1}) |"
        );
    }
    table
}

pub fn percentile(values: &[Duration], p: usize) -> Duration {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(((p * v.len()).div_ceil(100)).clamp(1, v.len().max(1)) - 1)
        .copied()
        .unwrap_or_default()
}

/// Median, min and max of a figure over runs.
pub fn spread(values: impl IntoIterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or("unknown memory".into(), |kb| {
            format!("{:.0} GiB", kb as f64 / 1024.0 / 1024.0)
        });
    let rustc = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "{cpu}, {cores} cores, {memory}, {rustc}, moto {}",
        local_aws::moto::MOTO_VERSION
    )
}

/// The criterion results of `cargo bench --bench core`, if they are there: (id, ns per iteration,
/// events per iteration).
pub fn criterion_results() -> Vec<(&'static str, f64, f64)> {
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"));
    [
        ("classify/spot-interruption", 1.0),
        ("classify/rebalance-recommendation", 1.0),
        ("classify/state-change", 1.0),
        ("classify/capacity-reservation", 1.0),
        ("classify/scheduled-change", 1.0),
        ("classify/ignored-state", 1.0),
        ("batch/sqs-100", 100.0),
        ("scheduled-change/classify-only", 1.0),
        ("scheduled-change/split-only", 1.0),
    ]
    .into_iter()
    .filter_map(|(id, events)| {
        let path = target.join("criterion").join(id).join("new/estimates.json");
        let ns = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["mean"]["point_estimate"].as_f64())?;
        Some((id, ns, events))
    })
    .collect()
}

/// Events per second of each criterion benchmark.
pub fn criterion_rates() -> Vec<(&'static str, f64)> {
    criterion_results()
        .into_iter()
        .map(|(id, ns, events)| (id, events / (ns / 1e9)))
        .collect()
}

pub fn criterion_table() -> String {
    let results = criterion_results();
    if results.is_empty() {
        return "(not run: `cargo bench --workspace --bench core` first)".into();
    }
    let mut table = String::from("| benchmark | time per iteration | events/s |\n|---|---|---|\n");
    for (id, ns, events) in results {
        let _ = writeln!(
            table,
            "| {id} | {:.2} µs | {:.0} |",
            ns / 1000.0,
            events / (ns / 1e9)
        );
    }
    table.push_str("\nParse + classify + plan (Health events: + split), per event; `batch/sqs-100` includes deserialising the SQS event.");
    table
}
