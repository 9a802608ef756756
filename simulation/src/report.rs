//! The organisation storm's figures as BENCHMARKS.md carries them.

use std::{fmt::Write as _, path::PathBuf, sync::Arc, time::Duration};

use anyhow::{Context, Result};

use crate::{
    organisation::{Organisation, Sent, Shape},
    quotas::MODEL,
    run::{Outcome, Setup, run},
    scenarios::{Day, Scenario, scenarios},
};

const BEGIN: &str = "<!-- organisation-storm -->";
const END: &str = "<!-- /organisation-storm -->";

/// The targets the issue sets.
pub const WARNING_P99: Duration = Duration::from_secs(5);
pub const WARNING_MAX: Duration = Duration::from_secs(30);
/// The router's share of an account's DescribeInstances refill.
pub const EC2_SHARE: f64 = 0.10;

struct Options {
    seed: u64,
    write: Option<PathBuf>,
    /// Overrides the base stack's MaximumConcurrency (to explore; `make bench` leaves it).
    max_concurrency: Option<usize>,
    /// Runs only the scenarios whose name contains this.
    only: Option<String>,
}

fn options() -> Result<Options> {
    let mut o = Options {
        seed: 20_261_126,
        write: None,
        max_concurrency: None,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--seed" => o.seed = value()?.parse()?,
            "--write" => o.write = Some(PathBuf::from(value()?)),
            "--max-concurrency" => o.max_concurrency = Some(value()?.parse()?),
            "--only" => o.only = Some(value()?),
            // cargo bench passes --bench to every bench target.
            "--bench" => {}
            other => anyhow::bail!(
                "unknown option {other}: --seed N, --write FILE, --max-concurrency N, --only TEXT"
            ),
        }
    }
    Ok(o)
}

/// One run's result, as the tables show it.
pub struct Ran {
    pub name: String,
    pub setup: Setup,
    pub judged: bool,
    pub outcome: Outcome,
}

pub fn main() -> Result<()> {
    let o = options()?;
    eprintln!("drawing the organisation (seed {})…", o.seed);
    let org = Arc::new(Organisation::new(Shape::issue(), o.seed));
    let two = Arc::new(Organisation::new(Shape::two_regions(), o.seed));
    let mut results = Vec::new();
    for Scenario {
        name,
        mut setup,
        day,
        hubs,
        judged,
    } in scenarios(o.seed)
    {
        if o.only
            .as_ref()
            .is_some_and(|only| !name.contains(only.as_str()))
        {
            continue;
        }
        if let Some(n) = o.max_concurrency {
            setup.mapping.max_concurrency = Some(n);
        }
        eprintln!("organisation storm: {name}…");
        let day = match day {
            Day::OneRegion => &org,
            Day::TwoRegions => &two,
        };
        let served = match hubs.region() {
            None => day.clone(),
            Some(region) => Arc::new(day.regional_hub(region)),
        };
        let outcome = run(served, &setup);
        eprintln!(
            "  {} events in {:.0} s of virtual time, {:.1} s of wall time",
            outcome.events,
            outcome.virtual_time.as_secs_f64(),
            outcome.wall_time.as_secs_f64()
        );
        results.push(Ran {
            name,
            setup,
            judged,
            outcome,
        });
    }
    let section = render(&org, &results);
    println!("{section}");
    if let Some(path) = o.write {
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        let block = format!("{BEGIN}\n{section}{END}\n");
        let new = match (old.find(BEGIN), old.find(END)) {
            (Some(b), Some(e)) if b < e => {
                format!(
                    "{}{block}{}",
                    &old[..b],
                    &old[e + END.len()..].trim_start_matches('\n')
                )
            }
            _ => format!("{}\n{block}", old.trim_end()),
        };
        std::fs::write(&path, new).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The router's busiest account's peak rate, Karpenter's, and the fewest tokens any bucket held.
fn ec2_extremes(o: &Outcome) -> (f64, f64, f64) {
    let router = o
        .ec2
        .values()
        .map(|e| e.router_peak_per_second)
        .fold(0.0, f64::max);
    let karpenter = o
        .ec2
        .values()
        .map(|e| e.karpenter_peak_per_second)
        .fold(0.0, f64::max);
    let lowest = o
        .ec2
        .values()
        .map(|e| e.lowest_tokens)
        .fold(f64::INFINITY, f64::min);
    (router, karpenter, lowest)
}

/// The targets a run missed, each with by how much.
pub fn misses(setup: &Setup, o: &Outcome) -> Vec<String> {
    let mut missed = Vec::new();
    let warnings = o.by_kind.get(&Sent::Warning).cloned().unwrap_or_default();
    if warnings.count == 0 {
        missed.push("no warning arrived".to_owned());
    }
    if warnings.p99 > WARNING_P99 {
        missed.push(format!(
            "warnings p99 {} s > {} s",
            s(warnings.p99),
            WARNING_P99.as_secs()
        ));
    }
    if warnings.max > WARNING_MAX {
        missed.push(format!(
            "warnings max {} s > {} s",
            s(warnings.max),
            WARNING_MAX.as_secs()
        ));
    }
    let dead: usize = o.dead_lettered.values().sum();
    if dead > 0 {
        missed.push(format!("{dead} dead-lettered"));
    }
    if o.lost > 0 || o.misrouted > 0 {
        missed.push(format!("{} lost, {} misrouted", o.lost, o.misrouted));
    }
    let (worst_router, _, _) = ec2_extremes(o);
    let refill = setup.quotas.describe_instances.per_second;
    if worst_router > EC2_SHARE * refill {
        missed.push(format!(
            "EC2 {:.0} % of refill > {:.0} %",
            100.0 * worst_router / refill,
            100.0 * EC2_SHARE
        ));
    }
    if o.most_assume_role_per_account > 1 {
        missed.push(format!(
            "AssumeRole {} times for one account in one environment",
            o.most_assume_role_per_account
        ));
    }
    missed
}

fn s(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

/// The section: the scenario, one row per run, where the rules spent their quotas, EC2 per
/// account, the model.
pub fn render(org: &Organisation, results: &[Ran]) -> String {
    let shape = &org.shape;
    let first = results.first();
    let mut out = String::new();
    let _ = writeln!(out, "## Organisation storm (simulated)\n");
    let _ = writeln!(
        out,
        "The router's own code (handler, batch states, resolve, forward, through its `Aws` seam) \
         against a model of AWS, in virtual time (tokio's paused clock; seed {}): {} clusters \
         ({} per account) in {} accounts and {} regions. An Availability Zone reclaim hits {} \
         Karpenter nodes in {} within {} s: a rebalance recommendation, a warning, then \
         shutting-down and terminated state changes each; beside it, from {} s before the storm \
         (the hub warm, as on any day), {} state changes a second, organisation-wide, from \
         instances no cluster owns. {} events in all. On the two-region day the same reclaim hits \
         {} too, at the same time. The base stack's mapping (BatchSize {}, batching window {} s, \
         MaximumConcurrency {}) unless a run says otherwise. Run with `make bench` \
         (`cargo run --profile bench -p simulation --bin organisation-storm`).\n",
        first.map_or(0, |r| r.setup.seed),
        org.clusters.len(),
        shape.clusters_per_account,
        shape.accounts,
        shape.regions.len(),
        shape.storm_nodes,
        shape.storm_region,
        shape.storm_window.as_secs(),
        shape.lead_in.as_secs(),
        shape.background_per_second,
        org.events.len(),
        Shape::two_regions().second_storm_region.unwrap_or_default(),
        first.map_or(0, |r| r.setup.mapping.batch_size),
        first.map_or(0, |r| r.setup.mapping.batching_window.as_secs()),
        first
            .and_then(|r| r.setup.mapping.max_concurrency)
            .map_or("unset".to_owned(), |n| n.to_string()),
    );
    let _ = writeln!(
        out,
        "With one hub the base stack runs in {} and every other account and region forwards to \
         its bus (two rules per member event: the member's, then the hub bus's). With regional \
         hubs a base stack runs in every region, in the hub account, and serves its own region's \
         clusters: \"forwarded\", a member's rules forward to its region's hub bus as spoke.yaml's \
         do today (a SpokeRoleName per region); otherwise a member account's rules in that region \
         target the hub's ingest queue directly (an execution role in the member account; EventBridge allows it within one \
         Region; a what-if: spoke.yaml does not offer direct rules yet, and docs/many-accounts.md \
         says why). EventBridge's, Lambda's, STS's and EC2's quotas are per account and Region, so \
         one region's hub shares none with another's: a regional run is that hub with its \
         region's events. The quota in a run's name is the hub region's EventBridge \
         target-invocation quota; a member account's is 2,250/s.\n",
        shape.hub_region,
    );
    let _ = writeln!(
        out,
        "| run | warnings p50 / p99 / max s | all events p99 s | EventBridge p99 s (deepest target backlog) | lost | misrouted | dead-lettered | environments | AWS calls / event | AssumeRole per account per environment, at most | targets met | wall time s |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let o = &r.outcome;
        let warnings = o.by_kind.get(&Sent::Warning).cloned().unwrap_or_default();
        let all_p99 = o.by_kind.values().map(|a| a.p99).max().unwrap_or_default();
        let dead: usize = o.dead_lettered.values().sum();
        let verdict = if r.judged {
            let misses = misses(&r.setup, o);
            if misses.is_empty() {
                "yes".to_owned()
            } else {
                format!("**no**: {}", misses.join("; "))
            }
        } else {
            "(not judged)".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {} / {} / {} | {} | {} ({:.0}) | {} | {} | {dead} | {} | {:.3} | {} | {verdict} | {:.1} |",
            r.name,
            s(warnings.p50),
            s(warnings.p99),
            s(warnings.max),
            s(all_p99),
            s(o.eventbridge.p99),
            o.deepest_target_debt,
            o.lost,
            o.misrouted,
            o.environments,
            o.calls_per_event,
            o.most_assume_role_per_account,
            o.wall_time.as_secs_f64(),
        );
    }
    let _ = writeln!(
        out,
        "\nAt its peak the organisation sent, per second (10-s window), to the hub of each run:\n"
    );
    let _ = writeln!(
        out,
        "| run | events/s to its hub | rules per event | the hub account's invocations in its region | the busiest member account's, in one region | (account, Region) quotas spent |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in results {
        let o = &r.outcome;
        let hub = o.invocations.get(&o.hub).copied().unwrap_or(0);
        let member = o
            .invocations
            .iter()
            .filter(|((account, _), _)| *account != o.hub.0)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.2} | {hub} | {member} | {} |",
            r.name,
            o.peak_events_per_second,
            o.hops_per_event,
            o.invocations.len(),
        );
    }
    let wall: f64 = results
        .iter()
        .map(|r| r.outcome.wall_time.as_secs_f64())
        .sum();
    let _ = writeln!(
        out,
        "\nThe {} runs took {wall:.0} s of wall time in all, {} (target: under 2 minutes); every \
         figure but wall time is the same on every run and build for the seed.",
        results.len(),
        if cfg!(debug_assertions) {
            "in a debug build"
        } else {
            "optimised"
        }
    );
    let _ = writeln!(
        out,
        "\nEC2 DescribeInstances in each run's storm region ({} but for eu-west-1's hub), per account (each account's bucket refills {}/s, shared with its Karpenters; the router's target is at most {:.0} % of it):\n",
        org.shape.storm_region,
        first.map_or(0.0, |r| r.setup.quotas.describe_instances.per_second),
        100.0 * EC2_SHARE
    );
    let _ = writeln!(
        out,
        "| run | router calls | of them sweep pages | ids looked up (Karpenter nodes) | router's busiest account, peak 10-s rate /s | share of refill | Karpenter's busiest, /s | fewest tokens left | throttled: router / Karpenter |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let o = &r.outcome;
        let refill = r.setup.quotas.describe_instances.per_second;
        let (worst_router, worst_karpenter, lowest) = ec2_extremes(o);
        let calls: usize = o.ec2.values().map(|e| e.router_calls).sum();
        let _ = writeln!(
            out,
            "| {} | {calls} | {} | {} ({}) | {worst_router:.1} | {:.0} % | {worst_karpenter:.1} | {lowest:.0} of {} | {} / {} |",
            r.name,
            o.counts.sweep_pages,
            o.counts.ids_looked_up,
            o.counts.node_ids_looked_up,
            100.0 * worst_router / refill,
            r.setup.quotas.describe_instances.burst,
            o.counts.router_throttled,
            o.counts.karpenter_throttled,
        );
    }
    let _ = writeln!(out, "\nThe router's calls by action (every region):\n");
    for r in results {
        let _ = writeln!(out, "- {}: {:?}", r.name, r.outcome.counts.by_action);
    }
    let _ = writeln!(
        out,
        "\nTargets: every warning delivered, p99 ≤ {} s, max ≤ {} s; 0 lost, 0 misrouted; the router's DescribeInstances ≤ {:.0} % of each account's refill; AssumeRole at most once per account per environment.\n",
        WARNING_P99.as_secs(),
        WARNING_MAX.as_secs(),
        100.0 * EC2_SHARE
    );
    let _ = writeln!(out, "### What the model holds\n");
    let _ = writeln!(out, "| part | modelled as | source |");
    let _ = writeln!(out, "|---|---|---|");
    for (part, how, source) in MODEL {
        let _ = writeln!(out, "| {part} | {how} | {source} |");
    }
    out
}
