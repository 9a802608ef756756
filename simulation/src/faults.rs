//! The storm as a test: the organisation's storm at a reduced scale, played over many seeds, each
//! with faults drawn from its seed, and judged against what must hold whatever happens.
//!
//! The faults ([`Plan`]) are the ones production brings, each as AWS and Lambda have it:
//!
//! * an execution environment killed mid-batch: Lambda reports an invocation error, so every
//!   record of the batch waits out its visibility timeout (180 s) and comes back, whatever the
//!   router had already sent ([`crate::esm::Esm::kill`]);
//! * a response lost after a successful send: the messages are stored, the router sees a timeout
//!   and sends again ([`crate::aws::Injected::lost_answers`]);
//! * a duplicate delivery: SQS holds an event twice ([`crate::ingest::Ingest::deliver_twice`]);
//! * a throttling burst: EC2, the Tagging API and STS throttle every call for a while;
//! * a tenant stack deleted mid-storm (queue and record: the cluster leaves on purpose), a queue
//!   deleted by hand while its record stands (lost: it must page), a tenant stack created
//!   mid-storm (a cluster onboarded while events flow);
//! * a spoke role revoked and restored (AssumeRole refused for a while).
//!
//! What must hold after every run ([`judge`]): nothing lost (each event of an onboarded cluster
//! reaches its queue, or the dead-letter queue with the reason that pages for it), nothing
//! misrouted and no copy in another tenant's queue, every lost queue pages (`queue-missing`),
//! nothing pages for a cluster that was not onboarded or left on purpose, and nothing reaches the
//! dead-letter queue without its reason (SQS's own redrive). Copies may arrive twice: Karpenter
//! takes an interruption at least once, as SQS delivers it.
//!
//! A failing seed is replayed alone with `SIM_SEED=<seed> cargo test -p simulation --lib
//! faults::tests::one_seed -- --nocapture`; `make soak SEEDS=<n>` plays as many as wanted.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
    time::Duration,
};

pub use crate::plan::{Plan, Trace};
use crate::{
    esm::Mapping,
    organisation::{Organisation, Shape},
    quotas::Quotas,
    run::{self, Setup},
};

/// How long the normal path takes at most, from an event entering its bus to the router acting
/// on it (two EventBridge hops, the batching window, the router's calls): an event this far
/// before or after a tenancy change is judged by the tenancy before or after it.
const SETTLE: Duration = Duration::from_secs(10);

/// The reduced organisation the seeded runs play: four accounts of three clusters in two
/// regions, 24 nodes of one region reclaimed within 20 s, and a background of state changes
/// from instances no cluster owns.
pub fn shape() -> Shape {
    Shape {
        accounts: 4,
        clusters_per_account: 3,
        regions: vec!["us-east-1".into(), "us-west-2".into()],
        hub_region: "us-east-1".into(),
        storm_region: "us-west-2".into(),
        storm_nodes: 24,
        second_storm_region: None,
        storm_window: Duration::from_secs(20),
        background_per_second: 1.0,
        lead_in: Duration::from_secs(20),
        duration: Duration::from_secs(60),
    }
}

/// What each event may become under `plan`, and what a run made of it: every violation, in
/// words.
pub fn judge(org: &Organisation, plan: &Plan, trace: &Trace) -> Vec<String> {
    let mut violations = Vec::new();
    let mut arrived: HashMap<&str, Vec<usize>> = HashMap::new();
    for (id, cluster, _) in &trace.arrivals {
        arrived.entry(id.as_str()).or_default().push(*cluster);
    }
    let mut dead: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (id, reason) in &trace.dead_letters {
        dead.entry(id.as_str()).or_default().insert(reason.as_str());
    }
    let revoked = plan.injected.revoked.as_ref().map(|(a, ..)| a.as_str());
    let mut lost_queue_pages = 0;
    let mut lost_queue_events_after = 0;
    for event in &org.events {
        let copies = arrived.get(event.id.as_str()).cloned().unwrap_or_default();
        let reasons = dead.get(event.id.as_str()).cloned().unwrap_or_default();
        let owner = org.instances.get(&event.instance).and_then(|i| i.cluster);
        let Some(owner) = owner else {
            // An instance no cluster owns: never forwarded; dead-lettered only when its account
            // could not be reached to look it up.
            if !copies.is_empty() {
                violations.push(format!(
                    "{} (an instance no cluster owns) reached {:?}",
                    event.id, copies
                ));
            }
            let allowed = if revoked == Some(event.account.as_str()) {
                &["account-unreachable"][..]
            } else {
                &[][..]
            };
            for reason in &reasons {
                if !allowed.contains(reason) {
                    violations.push(format!(
                        "{} (an instance no cluster owns) dead-lettered {reason}",
                        event.id
                    ));
                }
            }
            continue;
        };
        for cluster in &copies {
            if *cluster != owner {
                violations.push(format!(
                    "{} of cluster {owner} ({}) reached cluster {cluster}'s queue ({}): misrouted",
                    event.id, org.clusters[owner].name, org.clusters[*cluster].name
                ));
            }
        }
        let delivered = copies.contains(&owner);
        let before = |at: Duration| event.at + SETTLE < at;
        let after = |at: Duration| event.at > at + SETTLE;
        // (must arrive, dead-letter reasons allowed), by what the plan did to its cluster.
        let (must_arrive, allowed): (bool, &[&str]) = match plan {
            Plan {
                created: Some((c, at)),
                ..
            } if *c == owner => (after(*at), &[]),
            Plan {
                deleted: Some((c, _)),
                ..
            } if *c == owner => (false, &[]),
            Plan {
                lost: Some((c, at)),
                ..
            } if *c == owner => {
                if after(*at) {
                    lost_queue_events_after += 1;
                    if reasons.contains("queue-missing") {
                        lost_queue_pages += 1;
                    } else {
                        violations.push(format!(
                            "{} of {} came after its queue was lost and did not page \
                             (queue-missing): {reasons:?}, {} copies",
                            event.id,
                            org.clusters[owner].name,
                            copies.len()
                        ));
                    }
                }
                (
                    before(*at) && !reasons.contains("queue-missing"),
                    &["queue-missing"],
                )
            }
            _ if revoked == Some(event.account.as_str()) => (
                !reasons.contains("account-unreachable"),
                &["account-unreachable"],
            ),
            _ => (true, &[]),
        };
        if must_arrive && !delivered {
            violations.push(format!(
                "{} ({}) of cluster {} never reached its queue (dead letters {reasons:?}): lost",
                event.id,
                event.kind.label(),
                org.clusters[owner].name
            ));
        }
        for reason in &reasons {
            if !allowed.contains(reason) {
                violations.push(format!(
                    "{} of cluster {} dead-lettered {reason}: it pages for what is not wrong",
                    event.id, org.clusters[owner].name
                ));
            }
        }
    }
    if lost_queue_events_after > 0 && lost_queue_pages == 0 {
        violations.push("the lost queue never paged".to_owned());
    }
    for id in &trace.redriven {
        violations.push(format!(
            "{id} reached the dead-letter queue by SQS's redrive, without its reason"
        ));
    }
    violations
}

/// One seeded run: its plan, what it left, and every violation.
pub struct Verdict {
    pub seed: u64,
    pub plan: Plan,
    pub trace: Trace,
    pub violations: Vec<String>,
}

impl Verdict {
    /// The report of a failing seed, with the command that replays it.
    pub fn report(&self) -> String {
        format!(
            "seed {} failed ({} violations):\n  {}\nplan: {:?}\nreplay: SIM_SEED={} cargo test -p \
             simulation --lib faults::tests::one_seed -- --nocapture",
            self.seed,
            self.violations.len(),
            self.violations
                .iter()
                .take(12)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n  "),
            self.plan,
            self.seed
        )
    }
}

/// Plays `seed`: the reduced organisation, its faults, and the verdict.
pub fn play(seed: u64) -> Verdict {
    // Every third seed the reclaim hits the hub's region too, at the same time.
    let shape = Shape {
        second_storm_region: seed.is_multiple_of(3).then(|| "us-east-1".to_owned()),
        ..shape()
    };
    let org = Arc::new(Organisation::new(shape, seed));
    let plan = Plan::draw(seed, &org);
    let setup = Setup {
        seed,
        quotas: Quotas::defaults(18_750.0),
        mapping: Mapping::base_stack(),
        router_vars: Vec::new(),
        // Past a killed batch's 180-s visibility, and the hand-backs of a revoked account.
        drain_limit: Duration::from_secs(1_200),
        // Both ways to the ingest queue, drawn from the seed.
        topology: if seed.is_multiple_of(2) {
            crate::eventbridge::Topology::Direct
        } else {
            crate::eventbridge::Topology::Forwarded
        },
    };
    let trace = run::run_faulted(org.clone(), &setup, &plan);
    let violations = judge(&org, &plan, &trace);
    Verdict {
        seed,
        plan,
        trace,
        violations,
    }
}

/// How many of each fault `verdicts` played: evidence the seeds cover them all.
pub fn coverage(verdicts: &[Verdict]) -> BTreeMap<&'static str, usize> {
    let mut seen = BTreeMap::new();
    for v in verdicts {
        let p = &v.plan;
        for (name, played) in [
            ("an environment killed", v.trace.killed > 0),
            ("an answer lost", !p.injected.lost_answers.is_empty()),
            ("a duplicate delivery", !p.twice.is_empty()),
            ("a throttling burst", p.injected.throttled.is_some()),
            ("a spoke role revoked", p.injected.revoked.is_some()),
            ("a tenant stack deleted", p.deleted.is_some()),
            ("a queue lost", p.lost.is_some()),
            ("a tenant stack created", p.created.is_some()),
        ] {
            *seen.entry(name).or_default() += usize::from(played);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SIM_SEEDS` seeds (100 by default) from `SIM_SEED_BASE` (0): all must hold.
    #[test]
    fn every_seed_holds_whatever_faults_it_draws() {
        let count: u64 = std::env::var("SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(100);
        let base: u64 = std::env::var("SIM_SEED_BASE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let verdicts: Vec<Verdict> = (base..base + count).map(play).collect();
        let failed: Vec<String> = verdicts
            .iter()
            .filter(|v| !v.violations.is_empty())
            .map(Verdict::report)
            .collect();
        assert!(failed.is_empty(), "{}", failed.join("\n\n"));
        let covered = coverage(&verdicts);
        println!("{count} seeds, each fault played by: {covered:?}");
        if count >= 100 {
            for (fault, runs) in &covered {
                assert!(*runs >= 5, "only {runs} seeds played {fault}: {covered:?}");
            }
        }
    }

    /// One seed, as a failure's report names it (`SIM_SEED`).
    /// A seed is a run: played twice, it draws the same faults and leaves the same trace, every
    /// arrival in the same order at the same virtual instant, every dead letter and redrive, the
    /// same kills. Six seeds cover both topologies and the double storm.
    #[test]
    fn a_seed_replays_bit_for_bit() {
        for seed in 0..6 {
            let (first, second) = (play(seed), play(seed));
            assert_eq!(first.plan, second.plan, "seed {seed}'s faults");
            assert!(
                !first.trace.arrivals.is_empty(),
                "seed {seed} delivered nothing"
            );
            assert!(
                first.trace == second.trace,
                "seed {seed} played twice differs: {}",
                first_difference(&first.trace, &second.trace)
            );
        }
    }

    /// Where two traces part, for the failure message.
    fn first_difference(a: &Trace, b: &Trace) -> String {
        if let Some((n, (x, y))) = a
            .arrivals
            .iter()
            .zip(&b.arrivals)
            .enumerate()
            .find(|(_, (x, y))| x != y)
        {
            return format!("arrival {n}: {x:?} then {y:?}");
        }
        format!(
            "{} and {} arrivals; dead letters {:?} / {:?}; redriven {:?} / {:?}; killed {} / {}",
            a.arrivals.len(),
            b.arrivals.len(),
            a.dead_letters,
            b.dead_letters,
            a.redriven,
            b.redriven,
            a.killed,
            b.killed
        )
    }

    #[test]
    fn one_seed() {
        let Some(seed) = std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) else {
            return;
        };
        let verdict = play(seed);
        println!(
            "seed {seed}: plan {:?}; {} arrivals, {} dead letters, {} killed",
            verdict.plan,
            verdict.trace.arrivals.len(),
            verdict.trace.dead_letters.len(),
            verdict.trace.killed
        );
        assert!(verdict.violations.is_empty(), "{}", verdict.report());
    }

    fn org() -> Organisation {
        Organisation::new(shape(), 1)
    }

    fn owned_event(org: &Organisation, cluster: usize) -> &crate::organisation::Event {
        org.events
            .iter()
            .find(|e| org.instances[&e.instance].cluster == Some(cluster) && e.at > SETTLE * 10)
            .expect("an event of the cluster")
    }

    /// The judge itself: a clean trace holds; each kind of violation is seen.
    #[test]
    fn the_judge_sees_a_loss_a_misroute_a_page_for_nothing_and_a_silent_lost_queue() {
        let org = org();
        let plan = Plan::default();
        let all: Vec<(String, usize, Duration)> = org
            .events
            .iter()
            .filter_map(|e| {
                let c = org.instances[&e.instance].cluster?;
                Some((e.id.clone(), c, e.at))
            })
            .collect();
        let clean = Trace {
            arrivals: all.clone(),
            ..Trace::default()
        };
        assert_eq!(judge(&org, &plan, &clean), Vec::<String>::new());

        let storm: Vec<usize> = (0..org.clusters.len())
            .filter(|c| org.clusters[*c].region == "us-west-2")
            .collect();
        let (a, b) = (storm[0], storm[1]);
        let event = owned_event(&org, a);
        let without = |id: &str| Trace {
            arrivals: all.iter().filter(|x| x.0 != id).cloned().collect(),
            ..Trace::default()
        };
        let lost = judge(&org, &plan, &without(&event.id));
        assert!(lost.iter().any(|v| v.contains("lost")), "{lost:?}");

        let mut misrouted = clean.clone();
        misrouted.arrivals.push((event.id.clone(), b, event.at));
        let seen = judge(&org, &plan, &misrouted);
        assert!(seen.iter().any(|v| v.contains("misrouted")), "{seen:?}");

        let mut paged = clean.clone();
        paged
            .dead_letters
            .push((event.id.clone(), "queue-missing".into()));
        let seen = judge(&org, &plan, &paged);
        assert!(seen.iter().any(|v| v.contains("pages for")), "{seen:?}");

        // Its queue lost before the event: it must page, and here it did not.
        let lost_queue = Plan {
            lost: Some((a, Duration::ZERO)),
            ..Plan::default()
        };
        let seen = judge(&org, &lost_queue, &without(&event.id));
        assert!(seen.iter().any(|v| v.contains("did not page")), "{seen:?}");
        // A cluster not yet onboarded when its event came: absent, no page: holds.
        let created = Plan {
            created: Some((a, event.at + SETTLE * 2)),
            ..Plan::default()
        };
        let seen = judge(&org, &created, &without(&event.id));
        assert_eq!(seen, Vec::<String>::new());
    }
}
