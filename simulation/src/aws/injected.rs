//! What a run does to the router on purpose ([`crate::faults`]): the faults its calls meet in
//! the layer over the model ([`Injected`]). The tenancy changes a run makes at their time (a
//! tenant stack deleted or created, a queue deleted by hand while its record stands) are changes
//! to the model itself ([`World::set_tenant`], [`World::set_queue`]).

use std::{collections::BTreeSet, time::Duration};

use super::World;

/// Faults the layer plays on the router, drawn from a run's seed ([`crate::faults`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    /// SendMessageBatch calls (numbered from 1 across the run) whose answer is lost after the
    /// model stored the messages: the router sees a timeout and sends again.
    pub lost_answers: BTreeSet<u64>,
    /// From, to (after the start): EC2, the Tagging API and STS throttle every call.
    pub throttled: Option<(Duration, Duration)>,
    /// An account whose spoke role refuses AssumeRole (AccessDenied) from, to.
    pub revoked: Option<(String, Duration, Duration)>,
}

impl World {
    /// The faults this run plays from now on.
    pub fn inject(&self, injected: Injected) {
        self.layers().injected = injected;
    }

    /// Whether `window` (from, to after the start) holds now.
    pub(super) fn within(&self, window: Option<(Duration, Duration)>) -> bool {
        let at = self.started.elapsed();
        window.is_some_and(|(from, to)| from <= at && at < to)
    }
}
