//! The runs `make bench` makes, and what each one plays: which day (the storm in one region or
//! in two at once), which hubs serve it (one, or a hub per region whose members' rules target
//! its ingest queue directly), the hub region's EventBridge quota and the event source mapping.

use std::time::Duration;

use crate::{esm::Mapping, eventbridge::Topology, quotas::Quotas, run::Setup};

/// Which storm a run plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Day {
    /// [`crate::organisation::Shape::issue`]: one region's reclaim.
    OneRegion,
    /// [`crate::organisation::Shape::two_regions`]: the same reclaim in a second region too.
    TwoRegions,
}

/// Which hubs serve the organisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hubs {
    /// One base stack, in the organisation's hub region; every other region forwards to it.
    One,
    /// A base stack per region, each serving its own region
    /// ([`crate::organisation::Organisation::regional_hub`]), whose members' rules target its
    /// ingest queue directly: the run is this region's hub.
    Regional(&'static str),
    /// The same hubs with today's spoke stacks: members' rules forward to their region's hub bus.
    RegionalForwarded(&'static str),
}

impl Hubs {
    /// The region whose hub a regional run is.
    pub fn region(self) -> Option<&'static str> {
        match self {
            Hubs::One => None,
            Hubs::Regional(r) | Hubs::RegionalForwarded(r) => Some(r),
        }
    }
}

pub struct Scenario {
    pub name: String,
    pub setup: Setup,
    pub day: Day,
    pub hubs: Hubs,
    /// Whether the targets are judged on it (the base stack's defaults), or it explores.
    pub judged: bool,
}

/// The base stack's mapping, with a change.
fn mapping(change: impl FnOnce(&mut Mapping)) -> Mapping {
    let mut m = Mapping::base_stack();
    change(&mut m);
    m
}

/// The runs: the base stack's mapping with one hub and with regional hubs, in an 18,750/s and a
/// 750/s hub region, on the one-region day and the two-region day (judged); then what another
/// MaximumConcurrency, BatchSize or batching window would do (explored).
pub fn scenarios(seed: u64) -> Vec<Scenario> {
    let run =
        |name: &str, targets: f64, mapping: Mapping, day: Day, hubs: Hubs, judged: bool| Scenario {
            name: name.to_owned(),
            setup: Setup {
                seed,
                quotas: Quotas::defaults(targets),
                mapping,
                router_vars: Vec::new(),
                drain_limit: Duration::from_secs(1_200),
                topology: match hubs {
                    Hubs::One | Hubs::RegionalForwarded(_) => Topology::Forwarded,
                    Hubs::Regional(_) => Topology::Direct,
                },
            },
            day,
            hubs,
            judged,
        };
    let base = Mapping::base_stack;
    let (one, two) = (Day::OneRegion, Day::TwoRegions);
    let (hub, storm, second, forwarded) = (
        Hubs::One,
        Hubs::Regional("us-west-2"),
        Hubs::Regional("eu-west-1"),
        Hubs::RegionalForwarded("us-west-2"),
    );
    vec![
        run("one hub, 18,750/s", 18_750.0, base(), one, hub, true),
        run("one hub, 750/s", 750.0, base(), one, hub, true),
        run(
            "regional hubs, forwarded, 18,750/s",
            18_750.0,
            base(),
            one,
            forwarded,
            true,
        ),
        run(
            "regional hubs, forwarded, 750/s",
            750.0,
            base(),
            one,
            forwarded,
            true,
        ),
        run(
            "regional hubs, 18,750/s",
            18_750.0,
            base(),
            one,
            storm,
            true,
        ),
        run("regional hubs, 750/s", 750.0, base(), one, storm, true),
        run(
            "two regions: one hub, 18,750/s",
            18_750.0,
            base(),
            two,
            hub,
            true,
        ),
        run("two regions: one hub, 750/s", 750.0, base(), two, hub, true),
        run(
            "two regions: regional hubs, forwarded, 18,750/s, us-west-2's",
            18_750.0,
            base(),
            two,
            forwarded,
            true,
        ),
        run(
            "two regions: regional hubs, 750/s, us-west-2's",
            750.0,
            base(),
            two,
            storm,
            true,
        ),
        run(
            "two regions: regional hubs, 750/s, eu-west-1's",
            750.0,
            base(),
            two,
            second,
            true,
        ),
        run(
            "one hub, 18,750/s, MaximumConcurrency 10",
            18_750.0,
            mapping(|m| m.max_concurrency = Some(10)),
            one,
            hub,
            false,
        ),
        run(
            "one hub, 18,750/s, no MaximumConcurrency",
            18_750.0,
            mapping(|m| m.max_concurrency = None),
            one,
            hub,
            false,
        ),
        run(
            "regional hubs, 750/s, BatchSize 10, no batching window",
            750.0,
            mapping(|m| {
                m.batch_size = 10;
                m.batching_window = Duration::ZERO;
            }),
            one,
            storm,
            false,
        ),
        run(
            "regional hubs, 750/s, BatchSize 50",
            750.0,
            mapping(|m| m.batch_size = 50),
            one,
            storm,
            false,
        ),
        run(
            "regional hubs, 750/s, BatchSize 200",
            750.0,
            mapping(|m| m.batch_size = 200),
            one,
            storm,
            false,
        ),
        run(
            "regional hubs, 750/s, BatchSize 500",
            750.0,
            mapping(|m| m.batch_size = 500),
            one,
            storm,
            false,
        ),
        run(
            "regional hubs, 750/s, BatchSize 100, batching window 5 s",
            750.0,
            mapping(|m| m.batching_window = Duration::from_secs(5)),
            one,
            storm,
            false,
        ),
        run(
            "regional hubs, 750/s, MaximumConcurrency 10",
            750.0,
            mapping(|m| m.max_concurrency = Some(10)),
            one,
            storm,
            false,
        ),
    ]
}
