//! Storm, baseline, cold start and memory benchmarks of the release router binary against the
//! local emulator. Prints its figures and, with `--write FILE`, writes them (with the criterion
//! micro-benchmarks of the pure core, if they ran first) to FILE. Benchmarks print; they never
//! assert times. The delivery check does assert: every event exactly once in its cluster's queue.
//!
//! Run with `make bench` (builds the release binary first). Options: `--events N` (1000),
//! `--clusters K` (10), `--batch B` (100), `--runs R` (3), `--cold-starts C` (10),
//! `--rss-events M` (10000), `--org-accounts A` (10), `--org-clusters C` (10), `--write FILE`.
//!
//! This file reads the options and runs the benchmarks in turn (`main`): what a storm runs on and
//! what a pass costs are in `storm/passes.rs`, the emulator's own per-call costs in
//! `storm/emulator.rs`, the tables and figures in `storm/figures.rs`, the EC2 brownout row in
//! `storm/brownout.rs`.

use std::{
    path::PathBuf,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, Result, bail, ensure};
use aws_model::events::{Synthetic, rfc3339};
use e2e_tests::{
    organisation::{Organisation, member_places},
    sqs_event,
};
use local_aws::function::{Function, router_binary};

#[path = "storm/brownout.rs"]
mod brownout;
#[path = "storm/emulator.rs"]
mod emulator;
#[path = "storm/figures.rs"]
mod figures;
#[path = "storm/passes.rs"]
mod passes;

use emulator::EmulatorCosts;
use figures::{criterion_rates, criterion_table, machine, ms, spread, storm_table};
use passes::{Estate, Pass, bodies, naive, pass};

/// Nodes per cluster in the organisation storm (accounts × clusters × this = events per storm).
const ORG_NODES: i32 = 10;

struct Options {
    events: usize,
    clusters: usize,
    batch: usize,
    runs: usize,
    cold_starts: usize,
    rss_events: usize,
    org_accounts: usize,
    org_clusters: usize,
    write: Option<PathBuf>,
}

fn options() -> Result<Options> {
    let mut o = Options {
        events: 1000,
        clusters: 10,
        batch: 100,
        runs: 3,
        cold_starts: 10,
        rss_events: 10_000,
        org_accounts: 10,
        org_clusters: 10,
        write: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--events" => o.events = value()?.parse()?,
            "--clusters" => o.clusters = value()?.parse()?,
            "--batch" => o.batch = value()?.parse()?,
            "--runs" => o.runs = value()?.parse()?,
            "--cold-starts" => o.cold_starts = value()?.parse()?,
            "--rss-events" => o.rss_events = value()?.parse()?,
            "--org-accounts" => o.org_accounts = value()?.parse()?,
            "--org-clusters" => o.org_clusters = value()?.parse()?,
            "--write" => o.write = Some(PathBuf::from(value()?)),
            // cargo bench passes --bench; criterion-style filters are not used here.
            "--bench" => {}
            other => bail!("unknown option {other}"),
        }
    }
    ensure!(
        o.events.is_multiple_of(o.clusters),
        "--events must be a multiple of --clusters"
    );
    Ok(o)
}

#[tokio::main]
async fn main() -> Result<()> {
    let o = options()?;
    let binary = router_binary()?;
    ensure!(
        binary.components().any(|c| c.as_os_str() == "release"),
        "benchmark the release build: {} (run `make bench`, which builds it)",
        binary.display()
    );
    let mut report = String::new();
    let mut line = |s: String| {
        println!("{s}");
        report.push_str(&s);
        report.push('\n');
    };

    eprintln!(
        "setting up {} nodes over {} clusters in the emulator…",
        o.events, o.clusters
    );
    let estate = Estate::new(&o).await?;

    // 1. Storm: cold cache (fresh process), warm cache (same process).
    let (mut cold, mut warm, mut baseline) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..o.runs {
        eprintln!("storm run {}/{}…", run + 1, o.runs);
        let router = estate.start_router(&binary).await?;
        let storm = estate.storm(&format!("cold{run}"));
        cold.push(pass(&estate.world, &router, &bodies(&storm), o.batch).await?);
        estate.check_delivery(&storm).await?;
        let storm = estate.storm(&format!("warm{run}"));
        warm.push(pass(&estate.world, &router, &bodies(&storm), o.batch).await?);
        estate.check_delivery(&storm).await?;
        router.stop().await;

        // 2. The naive per-event strategy on the same emulator, same events.
        let storm = estate.storm(&format!("naive{run}"));
        baseline.push(naive(&estate, &storm).await?);
        estate.check_delivery(&storm).await?;
    }

    eprintln!("emulator cost per call…");
    let costs = EmulatorCosts::measure(&estate, &estate.storm("probe")).await?;

    // 3. Cold start: process start to first poll, and the first invocation.
    let mut init = Vec::new();
    let mut first = Vec::new();
    for n in 0..o.cold_starts {
        let router = estate.start_router(&binary).await?;
        init.push(router.init_duration().context("no first poll")?);
        let storm: Vec<Synthetic> = estate
            .storm(&format!("coldstart{n}"))
            .into_iter()
            .take(1)
            .collect();
        let t = Instant::now();
        let outcome = router
            .invoke(
                sqs_event(&[storm[0].body()]).to_string(),
                Duration::from_secs(30),
            )
            .await;
        first.push(t.elapsed());
        ensure!(
            outcome.json().is_some(),
            "cold invocation failed: {outcome:?}"
        );
        router.stop().await;
        estate.check_delivery(&storm).await?;
    }

    // 4. Peak memory after a long storm (events repeat over the nodes, ids unique). The queues are
    //    drained after every round, as the clusters' Karpenters would: moto's SendMessageBatch
    //    slows as a queue grows, and with 10,000 messages left in them it passed the router's 3 s
    //    attempt timeout (the router then handed records back, as it should, and the pass failed).
    eprintln!("memory storm of {} events…", o.rss_events);
    let router = estate.start_router(&binary).await?;
    let mut rss_pass = Pass::default();
    let mut left = o.rss_events;
    for round in 0.. {
        if left == 0 {
            break;
        }
        let mut storm = estate.storm(&format!("rss{round}"));
        storm.truncate(left);
        left -= storm.len();
        rss_pass.add(pass(&estate.world, &router, &bodies(&storm), o.batch).await?);
        estate.check_delivery(&storm).await?;
    }
    let peak_rss = router.peak_rss_kib().context("no VmHWM")?;
    router.stop().await;

    // 5. An organisation: member accounts × clusters with the same names, each account reached
    //    through AssumeRole; a fresh process per run, cold in batches of --batch, warm in one batch.
    eprintln!(
        "organisation storm: {} accounts × {} clusters…",
        o.org_accounts, o.org_clusters
    );
    let (accounts, places) = member_places(o.org_accounts, o.org_clusters);
    let org = Organisation::new(&places, ORG_NODES).await?;
    let served = accounts.join(",");
    let org_env = org.world.router_env(&[
        ("DEAD_LETTER_QUEUE_URL", org.dlq.as_str()),
        ("SERVED_ACCOUNTS", served.as_str()),
    ]);
    let (mut org_cold, mut org_warm, mut assumed) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..o.runs {
        let router = Function::start_ready(&binary, &org_env).await?;
        let cold = format!("orgcold{run}");
        org_cold.push(pass(&org.world, &router, &org.storm(&places, &cold), o.batch).await?);
        org.check_storm(&cold, ORG_NODES as usize).await?;
        let warm = format!("orgwarm{run}");
        let storm = org.storm(&places, &warm);
        org_warm.push(pass(&org.world, &router, &storm, storm.len()).await?);
        org.check_storm(&warm, ORG_NODES as usize).await?;
        router.stop().await;
        assumed.push(
            [&org_cold[run], &org_warm[run]]
                .iter()
                .map(|p| p.calls.get("AssumeRole").copied().unwrap_or_default())
                .sum::<u64>(),
        );
    }

    // 6. The EC2 brownout row: the fault scenarios' storm with real redelivery, side by side.
    let brownout = brownout::measure(o.runs).await?;

    // The report.
    let machine = machine();
    line(format!(
        "# Benchmarks\n\nMeasured {} on {machine}.",
        rfc3339(SystemTime::now())
    ));
    line(format!(
        "Release build of `interruption-router` under a local Lambda Runtime API, against moto through a counting proxy \
         (every call the router makes is counted by action). Storm: {} spot warnings over {} clusters, nodes interleaved \
         across clusters, SQS batches of {} records; {} runs, figures as median (min–max). Every pass is followed by a \
         delivery check: each event exactly once in its cluster's queue, nothing anywhere else.\n",
        o.events, o.clusters, o.batch, o.runs
    ));
    line("## Storm\n".into());
    line(storm_table(&[
        ("batched, cold cache", &cold),
        ("batched, warm cache", &warm),
        ("naive per-event baseline", &baseline),
    ]));
    let calls = |p: &[Pass]| {
        p.last()
            .map(|p| format!("{:?}", p.calls))
            .unwrap_or_default()
    };
    line(format!(
        "\nCalls by action (last run): cold {}; warm {}; naive {}.",
        calls(&cold),
        calls(&warm),
        calls(&baseline)
    ));
    let tagging = |p: &[Pass]| {
        p.iter()
            .map(|p| p.calls.get("GetResources").copied().unwrap_or_default())
            .sum::<u64>()
    };
    line(format!(
        "Tagging API (GetResources) calls in these storms without faults, all runs: cold {}, warm {} \
         (a lookup asks it only when DescribeInstances fails or is later than its recent p95).",
        tagging(&cold),
        tagging(&warm)
    ));
    let (speedup, s0, s1) = spread(
        warm.iter()
            .zip(&baseline)
            .map(|(w, b)| w.events_per_second() / b.events_per_second()),
    );
    line(format!(
        "Batched (warm) throughput is **{speedup:.1}×** the naive baseline ({s0:.1}–{s1:.1}×) on the same emulator and machine."
    ));
    let sequential = costs.sequential_ratio();
    // What the measured ratio says against the sequential one, as the figures have it.
    let against = if speedup > sequential {
        format!(
            "the router's {speedup:.1}× is above it because it sends to the clusters' queues concurrently"
        )
    } else {
        format!(
            "the router's {speedup:.1}× is not above it: sending to the clusters' queues concurrently does \
             not make up for what moto charges per message"
        )
    };
    line(format!(
        "\nWhat the emulator charges per call (median of {} sequential calls through the proxy): \
         DescribeInstances (1 id) {:.1} ms, GetQueueUrl {:.1} ms, SendMessage {:.1} ms, SendMessageBatch (10 entries) {:.1} ms. \
         moto's time grows with the messages in a call, so batching saves calls but less emulator time: sent one \
         after another, a batched event would cost a tenth of a SendMessageBatch against DescribeInstances + \
         GetQueueUrl + SendMessage for a naive one, a ratio of **{sequential:.1}×**; {against}. The call ratio, \
         which the throughput ratio approaches where a call's cost does not grow with its entries, is {:.0}×.",
        EmulatorCosts::SAMPLES,
        ms(costs.describe_one),
        ms(costs.get_queue_url),
        ms(costs.send_message),
        ms(costs.send_message_batch_10),
        spread(baseline.iter().map(Pass::calls_per_event)).0
            / spread(warm.iter().map(Pass::calls_per_event)).0,
    ));
    let (i, i0, i1) = spread(init.iter().map(|d| ms(*d)));
    let (f, f0, f1) = spread(first.iter().map(|d| ms(*d)));
    line(format!(
        "\n## Cold start ({} runs)\n\n| figure | median | min | max |\n|---|---|---|---|\n| process start to first Runtime API poll | {i:.1} ms | {i0:.1} ms | {i1:.1} ms |\n| first invocation (1 spot warning, cold cache: DescribeInstances, GetQueueUrl, ListQueueTags, SendMessageBatch) | {f:.1} ms | {f0:.1} ms | {f1:.1} ms |",
        o.cold_starts
    ));
    line(format!(
        "\n## Memory\n\nPeak RSS (VmHWM) after a {}-event storm ({} invocations, {:.0} events/s, {:.3} calls/event; \
         the queues drained after every {} events, as the clusters' Karpenters would): **{:.1} MiB**.",
        rss_pass.events,
        rss_pass.latencies.len(),
        rss_pass.events_per_second(),
        rss_pass.calls_per_event(),
        o.events,
        peak_rss as f64 / 1024.0
    ));
    let org_events = org_warm.first().map_or(0, |p| p.events);
    line(format!(
        "\n## Organisation: {} member accounts × {} clusters\n\n{org_events} spot warnings per storm, {ORG_NODES} per \
         cluster, the same cluster names in every account; each member account is reached through AssumeRole into its \
         spoke role (moto keeps accounts apart by the credentials it returns), and every queue is checked for exactly \
         its own cluster's events. A fresh router process per run: cold in SQS batches of {}, then warm in one batch of \
         {org_events} (an event source mapping's BatchSize reaches 10,000 with a batching window; with {} clusters, \
         batches of {} would need about one send per event).\n",
        o.org_accounts,
        o.org_clusters,
        o.batch,
        o.org_accounts * o.org_clusters,
        o.batch,
    ));
    line(storm_table(&[
        (&format!("cold, batches of {}", o.batch), &org_cold),
        (&format!("warm, one batch of {org_events}"), &org_warm),
    ]));
    let (a, a0, a1) = spread(assumed.iter().map(|n| *n as f64));
    line(format!(
        "\nAssumeRole calls per router process: {a:.0} ({a0:.0}–{a1:.0}) for {} accounts. Calls by action (last run): \
         cold {}; warm {}.",
        o.org_accounts,
        calls(&org_cold),
        calls(&org_warm)
    ));
    line(brownout::section(&brownout, o.runs));
    let [no_fault, browned, _] = &brownout;
    let (p99_no_fault, p99_brownout) = (no_fault.ages().at(0.99), browned.ages().at(0.99));
    line(format!(
        "\nThe brownout's p99 is **{:+.1} s** from the no-fault p99 ({p99_brownout:.1} s against {p99_no_fault:.1} s).",
        p99_brownout - p99_no_fault
    ));
    line(format!(
        "\n## Pure core (criterion, one core)\n\n{}",
        criterion_table()
    ));
    let slowest_kind = criterion_rates()
        .into_iter()
        .filter(|(id, _)| id.starts_with("classify/"))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((id, rate)) = &slowest_kind {
        line(format!("\nSlowest event kind: {id}, {rate:.0} events/s."));
    }
    let targets = [
        (
            "≤ 0.12 AWS calls/event, warm",
            spread(warm.iter().map(Pass::calls_per_event)).0 <= 0.12,
        ),
        (
            "≤ 0.15 AWS calls/event, cold",
            spread(cold.iter().map(Pass::calls_per_event)).0 <= 0.15,
        ),
        ("batched throughput ≥ 20× naive", speedup >= 20.0),
        ("process start to first poll < 20 ms", i < 20.0),
        (
            "pure core ≥ 200,000 events/s for every event kind",
            slowest_kind.is_some_and(|(_, rate)| rate >= 200_000.0),
        ),
        (
            "peak RSS < 40 MB after 10,000 events",
            (peak_rss as f64 * 1024.0) < 40e6,
        ),
        (
            "organisation: ≤ 0.12 AWS calls/event, warm",
            spread(org_warm.iter().map(Pass::calls_per_event)).0 <= 0.12,
        ),
        (
            "organisation: ≤ 1 AssumeRole per account per router process",
            a1 <= o.org_accounts as f64,
        ),
        (
            "EC2 brownout: p99 delivery age within 0.5 s of the no-fault p99",
            p99_brownout - p99_no_fault <= 0.5,
        ),
        (
            "EC2 brownout: 0 lost, 0 misrouted, 0 later than 120 s",
            brownout
                .iter()
                .all(|s| s.lost() == 0 && s.misrouted() == 0 && s.late() == 0),
        ),
    ];
    line("\n## Targets\n\n| target | met |\n|---|---|".into());
    for (target, met) in targets {
        line(format!(
            "| {target} | {} |",
            if met { "yes" } else { "**no**" }
        ));
    }
    line(format!(
        "\n## Reproduce\n\n`make bench` (release build, then `cargo bench --workspace --bench core` and \
         `cargo bench --workspace --bench storm -- --write BENCHMARKS.md`). Options: `--events {} --clusters {} --batch {} \
         --runs {} --cold-starts {} --rss-events {} --org-accounts {} --org-clusters {}`. The emulator (moto, Python) runs on the same cores as the router, \
         so absolute times are the emulator's; call counts are exact.",
        o.events,
        o.clusters,
        o.batch,
        o.runs,
        o.cold_starts,
        o.rss_events,
        o.org_accounts,
        o.org_clusters
    ));

    if let Some(path) = &o.write {
        // The dated runs kept by hand at the end of the file stay.
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let report = e2e_tests::benchmarks::with_kept(&report, &old);
        std::fs::write(path, &report).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
