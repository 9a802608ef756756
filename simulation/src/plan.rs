//! The faults of one seeded run ([`Plan`]), drawn from its seed, and what the run left behind
//! ([`Trace`]): what [`crate::run`] plays and [`crate::faults`] judges. Apart from both, so that
//! neither file imports the other.

use std::{collections::BTreeSet, time::Duration};

use serde_json::Value;

use crate::{
    aws::Injected,
    organisation::{Organisation, Sent},
};

/// The faults of one run, drawn from its seed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub injected: Injected,
    /// Invocations (numbered from 1) whose execution environment dies mid-batch.
    pub kills: BTreeSet<usize>,
    /// Events SQS holds twice.
    pub twice: BTreeSet<String>,
    /// A tenant stack deleted: (cluster, when after the start).
    pub deleted: Option<(usize, Duration)>,
    /// A queue deleted by hand, its tenant record left standing.
    pub lost: Option<(usize, Duration)>,
    /// A tenant stack created mid-storm (the cluster not onboarded before).
    pub created: Option<(usize, Duration)>,
}

impl Plan {
    /// The faults `seed` draws for `org`: each kind with some chance, at times and on clusters
    /// drawn too; the tenancy changes on distinct clusters that have events.
    pub fn draw(seed: u64, org: &Organisation) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0xfa17_5eed);
        let mut plan = Plan::default();
        let storm_starts = org.shape.lead_in;
        let window = |rng: &mut fastrand::Rng, most: u64| {
            let from = storm_starts + Duration::from_secs(rng.u64(0..=25));
            (from, from + Duration::from_secs(rng.u64(5..=most)))
        };
        for _ in 0..rng.usize(0..=2) {
            plan.kills.insert(rng.usize(1..=40));
        }
        for _ in 0..rng.usize(0..=3) {
            plan.injected.lost_answers.insert(rng.u64(1..=80));
        }
        let owned: Vec<&str> = org
            .events
            .iter()
            .filter(|e| e.kind != Sent::Background)
            .map(|e| e.id.as_str())
            .collect();
        for _ in 0..rng.usize(0..=5) {
            plan.twice
                .insert(owned[rng.usize(..owned.len())].to_owned());
        }
        if rng.bool() {
            plan.injected.throttled = Some(window(&mut rng, 20));
        }
        if rng.bool() {
            // A member account: the hub's own is reached without a spoke role.
            let account = org.accounts[rng.usize(1..org.accounts.len())].clone();
            let (from, to) = window(&mut rng, 60);
            plan.injected.revoked = Some((account, from, to));
        }
        let mut with_events: Vec<usize> = (0..org.clusters.len())
            .filter(|c| {
                org.shape.storm_regions().any(|r| *r == org.clusters[*c].region)
                    // The revoked account's clusters are judged by that fault alone.
                    && plan
                        .injected
                        .revoked
                        .as_ref()
                        .is_none_or(|(a, ..)| *a != org.clusters[*c].account)
            })
            .collect();
        rng.shuffle(&mut with_events);
        let mut next = || with_events.pop();
        let at = |rng: &mut fastrand::Rng| storm_starts + Duration::from_secs(rng.u64(0..=30));
        if rng.bool() {
            plan.deleted = next().map(|c| (c, at(&mut rng)));
        }
        if rng.bool() {
            plan.lost = next().map(|c| (c, at(&mut rng)));
        }
        if rng.bool() {
            plan.created = next().map(|c| (c, at(&mut rng)));
        }
        plan
    }
}

/// What a run left behind, for [`crate::faults::judge`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// (event id, cluster, when after the start) of every copy that reached a cluster's queue.
    pub arrivals: Vec<(String, usize, Duration)>,
    /// (event id, reason) of every dead letter the router wrote.
    pub dead_letters: Vec<(String, String)>,
    /// Events SQS moved to the dead-letter queue on its own, without a reason.
    pub redriven: Vec<String>,
    /// Invocations whose environment was killed.
    pub killed: u64,
}

/// The event id of a message body.
pub(crate) fn event_id(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap_or_default()["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
