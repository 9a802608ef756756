//! Storm, baseline, cold start and memory benchmarks of the release router binary against the
//! local emulator. Prints its figures and, with `--write FILE`, writes them (with the criterion
//! micro-benchmarks of the pure core, if they ran first) to FILE. Benchmarks print; they never
//! assert times. The delivery check does assert: every event exactly once in its cluster's queue.
//!
//! Run with `make bench` (builds the release binary first). Options: `--events N` (1000),
//! `--clusters K` (10), `--batch B` (100), `--runs R` (3), `--cold-starts C` (10),
//! `--rss-events M` (10000), `--org-accounts A` (10), `--org-clusters C` (10), `--write FILE`.

use std::{
    collections::{BTreeMap, HashMap},
    fmt::Write as _,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context, Result, bail, ensure};
use aws_model::events::{Origin, Synthetic, rfc3339};
use e2e_tests::{
    World, karpenter_tags,
    organisation::{Organisation, member_places},
    sqs_event,
};
use local_aws::{
    function::{Function, router_binary},
    moto::{ACCOUNT, REGION},
};

#[path = "storm/brownout.rs"]
mod brownout;

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

/// The emulator with `clusters` queues and `events / clusters` Karpenter nodes per cluster.
struct Estate {
    world: World,
    /// Nodes, interleaved across clusters: node i belongs to cluster i % K.
    nodes: Vec<(String, String)>,
    queues: BTreeMap<String, String>,
}

impl Estate {
    async fn new(o: &Options) -> Result<Self> {
        let world = World::start().await?;
        let mut queues = BTreeMap::new();
        let mut per_cluster = Vec::new();
        for c in 0..o.clusters {
            let cluster = format!("c{c:02}");
            queues.insert(cluster.clone(), world.create_tenant_queue(&cluster).await?);
            per_cluster.push((
                cluster.clone(),
                world
                    .launch_many(&karpenter_tags(&cluster), (o.events / o.clusters) as i32)
                    .await?,
            ));
        }
        let nodes = (0..o.events).map(|i| {
            let (cluster, ids) = &per_cluster[i % o.clusters];
            (ids[i / o.clusters].clone(), cluster.clone())
        });
        Ok(Self {
            nodes: nodes.collect(),
            queues,
            world,
        })
    }

    /// One spot warning per node, with ids unique to `run`.
    fn storm(&self, run: &str) -> Vec<Synthetic> {
        let origin = Origin {
            account: ACCOUNT.into(),
            region: REGION.into(),
        };
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, (node, _))| origin.spot_warning(node, &format!("{run}-{i}")))
            .collect()
    }

    /// Reads every queue and checks it holds exactly the storm's events for its cluster, once.
    async fn check_delivery(&self, storm: &[Synthetic]) -> Result<()> {
        let owner: HashMap<&str, &str> = self
            .nodes
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_str()))
            .collect();
        let mut expected: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in storm {
            expected
                .entry(owner[e.instances[0].as_str()])
                .or_default()
                .push(&e.id);
        }
        for (cluster, url) in &self.queues {
            let mut got: Vec<String> = self
                .world
                .drain(url)
                .await?
                .iter()
                .map(|m| m.json()["id"].as_str().unwrap_or_default().to_owned())
                .collect();
            got.sort();
            let mut want: Vec<String> = expected
                .remove(cluster.as_str())
                .unwrap_or_default()
                .iter()
                .map(|s| s.to_string())
                .collect();
            want.sort();
            if got != want {
                let missing = want.iter().filter(|w| !got.contains(w)).count();
                bail!(
                    "DELIVERY CHECK FAILED for {cluster}: {} received, {} expected, {missing} missing or misrouted",
                    got.len(),
                    want.len()
                );
            }
        }
        Ok(())
    }

    async fn start_router(&self, binary: &Path) -> Result<Function> {
        Function::start_ready(binary, &self.world.router_env(&[])).await
    }
}

/// What one pass of a storm cost.
#[derive(Clone, Default)]
struct Pass {
    events: usize,
    calls: BTreeMap<String, u64>,
    wall: Duration,
    latencies: Vec<Duration>,
}

impl Pass {
    fn calls_per_event(&self) -> f64 {
        self.calls.values().sum::<u64>() as f64 / self.events as f64
    }
    fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64()
    }
    /// Adds `other`'s events, calls, time and latencies to this pass.
    fn add(&mut self, other: Pass) {
        self.events += other.events;
        for (action, n) in other.calls {
            *self.calls.entry(action).or_default() += n;
        }
        self.wall += other.wall;
        self.latencies.extend(other.latencies);
    }
}

/// Sends `bodies` to `router`, as SQS batches of `batch` records, or one direct invocation each,
/// and counts the calls `world`'s proxy saw.
async fn pass(
    world: &World,
    router: &Function,
    bodies: &[String],
    batch: Option<usize>,
) -> Result<Pass> {
    world.proxy.reset_counts();
    let mut latencies = Vec::new();
    let started = Instant::now();
    for chunk in bodies.chunks(batch.unwrap_or(1)) {
        let payload = match batch {
            Some(_) => sqs_event(chunk).to_string(),
            None => chunk[0].clone(),
        };
        let t = Instant::now();
        let outcome = router.invoke(payload, Duration::from_secs(30)).await;
        latencies.push(t.elapsed());
        let ok = match batch {
            Some(_) => outcome
                .json()
                .is_some_and(|r| r["batchItemFailures"].as_array().is_some_and(Vec::is_empty)),
            None => outcome.json().is_some_and(|r| r["outcome"] == "forwarded"),
        };
        if !ok {
            let log = router.stdout_lines();
            let problems: Vec<&String> = log
                .iter()
                .filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\""))
                .collect();
            bail!(
                "the router did not forward everything: {outcome:?}\nits last warnings:\n{:#?}",
                &problems[problems.len().saturating_sub(5)..]
            );
        }
    }
    Ok(Pass {
        events: bodies.len(),
        calls: world.proxy.calls(),
        wall: started.elapsed(),
        latencies,
    })
}

/// The events' bodies, as EventBridge delivers them.
fn bodies(storm: &[Synthetic]) -> Vec<String> {
    storm.iter().map(Synthetic::body).collect()
}

/// The naive per-event strategy: DescribeInstances + GetQueueUrl + SendMessage for every event,
/// no cache, no batching (what a simple per-event router does), through the same proxy.
async fn naive(estate: &Estate, storm: &[Synthetic]) -> Result<Pass> {
    let sdk = local_aws::moto::sdk_config_for(&estate.world.proxy.endpoint()).await;
    let (ec2, sqs) = (
        aws_sdk_ec2::Client::new(&sdk),
        aws_sdk_sqs::Client::new(&sdk),
    );
    estate.world.proxy.reset_counts();
    let mut latencies = Vec::new();
    let started = Instant::now();
    for event in storm {
        let t = Instant::now();
        let out = ec2
            .describe_instances()
            .instance_ids(&event.instances[0])
            .send()
            .await?;
        let tags = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .flat_map(|i| i.tags())
            .collect::<Vec<_>>();
        let cluster = tags
            .iter()
            .find(|t| t.key() == Some("eks:eks-cluster-name"))
            .and_then(|t| t.value())
            .context("untagged")?;
        let url = sqs
            .get_queue_url()
            .queue_name(format!("karpenter-{cluster}"))
            .send()
            .await?;
        sqs.send_message()
            .queue_url(url.queue_url().context("no url")?)
            .message_body(event.body())
            .send()
            .await?;
        latencies.push(t.elapsed());
    }
    Ok(Pass {
        events: storm.len(),
        calls: estate.world.proxy.calls(),
        wall: started.elapsed(),
        latencies,
    })
}

/// What the emulator itself charges per call, measured sequentially through the same proxy: it
/// explains the batched/naive throughput ratio on this emulator, which is far below the call ratio.
struct EmulatorCosts {
    describe_one: Duration,
    get_queue_url: Duration,
    send_message: Duration,
    send_message_batch_10: Duration,
}

impl EmulatorCosts {
    const SAMPLES: usize = 30;

    async fn measure(estate: &Estate, storm: &[Synthetic]) -> Result<Self> {
        let sdk = local_aws::moto::sdk_config_for(&estate.world.proxy.endpoint()).await;
        let (ec2, sqs) = (
            aws_sdk_ec2::Client::new(&sdk),
            aws_sdk_sqs::Client::new(&sdk),
        );
        let (node, cluster) = &estate.nodes[0];
        let queue = &estate.queues[cluster];
        let body = storm[0].body();
        let mut times: [Vec<Duration>; 4] = Default::default();
        for _ in 0..Self::SAMPLES {
            let t = Instant::now();
            ec2.describe_instances().instance_ids(node).send().await?;
            times[0].push(t.elapsed());
            let t = Instant::now();
            sqs.get_queue_url()
                .queue_name(format!("karpenter-{cluster}"))
                .send()
                .await?;
            times[1].push(t.elapsed());
            let t = Instant::now();
            sqs.send_message()
                .queue_url(queue)
                .message_body(&body)
                .send()
                .await?;
            times[2].push(t.elapsed());
            let entries = (0..10)
                .map(|i| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(&body)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let t = Instant::now();
            sqs.send_message_batch()
                .queue_url(queue)
                .set_entries(Some(entries))
                .send()
                .await?;
            times[3].push(t.elapsed());
        }
        // The probe's messages are not part of any storm.
        estate.world.drain(queue).await?;
        let [d, g, m, b] = times.map(|t| percentile(&t, 50));
        Ok(Self {
            describe_one: d,
            get_queue_url: g,
            send_message: m,
            send_message_batch_10: b,
        })
    }

    /// Naive cost per event over batched cost per event (one tenth of a full SendMessageBatch),
    /// with every call made one after another.
    fn sequential_ratio(&self) -> f64 {
        (self.describe_one + self.get_queue_url + self.send_message).as_secs_f64()
            / (self.send_message_batch_10.as_secs_f64() / 10.0)
    }
}

/// A markdown table of storm passes: calls/event, throughput and invocation latency, each as
/// median (min–max) over the runs.
fn storm_table(rows: &[(&str, &Vec<Pass>)]) -> String {
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

fn percentile(values: &[Duration], p: usize) -> Duration {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(((p * v.len()).div_ceil(100)).clamp(1, v.len().max(1)) - 1)
        .copied()
        .unwrap_or_default()
}

/// Median, min and max of a figure over runs.
fn spread(values: impl IntoIterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
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

    // 1. Storm: cold cache (fresh process), warm cache (same process), direct invocations.
    let (mut cold, mut warm, mut direct, mut baseline) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..o.runs {
        eprintln!("storm run {}/{}…", run + 1, o.runs);
        let router = estate.start_router(&binary).await?;
        let storm = estate.storm(&format!("cold{run}"));
        cold.push(pass(&estate.world, &router, &bodies(&storm), Some(o.batch)).await?);
        estate.check_delivery(&storm).await?;
        let storm = estate.storm(&format!("warm{run}"));
        warm.push(pass(&estate.world, &router, &bodies(&storm), Some(o.batch)).await?);
        estate.check_delivery(&storm).await?;
        router.stop().await;

        let router = estate.start_router(&binary).await?;
        let storm = estate.storm(&format!("direct{run}"));
        direct.push(pass(&estate.world, &router, &bodies(&storm), None).await?);
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
        rss_pass.add(pass(&estate.world, &router, &bodies(&storm), Some(o.batch)).await?);
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
        org_cold.push(
            pass(
                &org.world,
                &router,
                &org.storm(&places, &cold),
                Some(o.batch),
            )
            .await?,
        );
        org.check_storm(&cold, ORG_NODES as usize).await?;
        let warm = format!("orgwarm{run}");
        let storm = org.storm(&places, &warm);
        org_warm.push(pass(&org.world, &router, &storm, Some(storm.len())).await?);
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
        ("direct, one event per invocation", &direct),
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
        "Tagging API (GetResources) calls in these storms without faults, all runs: cold {}, warm {}, direct {} \
         (a lookup asks it only when DescribeInstances fails or is later than its recent p95).",
        tagging(&cold),
        tagging(&warm),
        tagging(&direct)
    ));
    let (speedup, s0, s1) = spread(
        warm.iter()
            .zip(&baseline)
            .map(|(w, b)| w.events_per_second() / b.events_per_second()),
    );
    line(format!(
        "Batched (warm) throughput is **{speedup:.1}×** the naive baseline ({s0:.1}–{s1:.1}×) on the same emulator and machine."
    ));
    line(format!(
        "\nWhat the emulator charges per call (median of {} sequential calls through the proxy): \
         DescribeInstances (1 id) {:.1} ms, GetQueueUrl {:.1} ms, SendMessage {:.1} ms, SendMessageBatch (10 entries) {:.1} ms. \
         moto's time grows with the messages in a call, so batching saves calls but little emulator time: sent one \
         after another, a batched event would cost a tenth of a SendMessageBatch against DescribeInstances + \
         GetQueueUrl + SendMessage for a naive one, a ratio of only **{:.1}×**; the router gets past that by sending \
         to the clusters' queues concurrently. The call ratio, which the throughput ratio approaches where a call's \
         cost does not grow with its entries, is {:.0}×.",
        EmulatorCosts::SAMPLES,
        ms(costs.describe_one),
        ms(costs.get_queue_url),
        ms(costs.send_message),
        ms(costs.send_message_batch_10),
        costs.sequential_ratio(),
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
        std::fs::write(path, &report).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn machine() -> String {
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
fn criterion_results() -> Vec<(&'static str, f64, f64)> {
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
fn criterion_rates() -> Vec<(&'static str, f64)> {
    criterion_results()
        .into_iter()
        .map(|(id, ns, events)| (id, events / (ns / 1e9)))
        .collect()
}

fn criterion_table() -> String {
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
