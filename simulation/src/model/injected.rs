//! What a run does to the router on purpose ([`crate::faults`]): the faults calls meet
//! ([`Injected`]), and the tenancy changes a run makes at their time (a tenant stack deleted or
//! created, a queue deleted by hand while its record stands).

use std::{collections::BTreeSet, time::Duration};

use router_core::tenancy;

use super::{World, queue_name, queue_url};

/// Faults the world plays on the router, drawn from a run's seed ([`crate::faults`]); the
/// tenancy changes (a tenant stack deleted or created, a queue lost) are [`World`] methods a run
/// calls at their time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    /// SendMessageBatch calls (numbered from 1 across the run) whose answer is lost after the
    /// messages were stored: the router sees a timeout and sends again.
    pub lost_answers: BTreeSet<u64>,
    /// From, to (after the start): EC2, the Tagging API and STS throttle every call.
    pub throttled: Option<(Duration, Duration)>,
    /// An account whose spoke role refuses AssumeRole (AccessDenied) from, to.
    pub revoked: Option<(String, Duration, Duration)>,
}

impl World {
    /// The faults this run plays from now on.
    pub fn inject(&self, injected: Injected) {
        self.state.lock().unwrap().injected = injected;
    }

    /// Whether `window` (from, to after the start) holds now.
    pub(super) fn within(&self, window: Option<(Duration, Duration)>) -> bool {
        let at = self.started.elapsed();
        window.is_some_and(|(from, to)| from <= at && at < to)
    }

    /// Cluster `c`'s tenant queue and record, as its tenant stack makes them (`true`) or as its
    /// deletion leaves them (`false`).
    pub fn set_tenant(&self, c: usize, onboarded: bool) {
        self.set_queue(c, onboarded);
        let cluster = &self.org.clusters[c];
        let record = (
            cluster.account.clone(),
            cluster.region.clone(),
            tenancy::record_name(&queue_name(&cluster.name)),
        );
        let mut state = self.state.lock().unwrap();
        if onboarded {
            state.records.insert(record);
        } else {
            state.records.remove(&record);
        }
    }

    /// Cluster `c`'s queue alone: deleted by hand while its tenant record stands (lost), or back.
    pub fn set_queue(&self, c: usize, exists: bool) {
        let cluster = &self.org.clusters[c];
        let name = queue_name(&cluster.name);
        let url = queue_url(&cluster.account, &cluster.region, &name);
        let key = (cluster.account.clone(), cluster.region.clone(), name);
        let mut state = self.state.lock().unwrap();
        if exists {
            state.queues.insert(key, c);
            state.urls.insert(url, c);
        } else {
            state.queues.remove(&key);
            state.urls.remove(&url);
        }
    }
}
