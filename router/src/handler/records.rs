//! What each record of a batch becomes, as pure functions of what routing found: which lookups
//! it waits on, the copies it needs (one per cluster, Health events split), the answer once they
//! are sent, its settled state (step 3 of [`super::route`]), and its dead letter with a reason.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::SystemTime,
};

use super::{
    Record,
    outcome::{Cause, DeadLetterReason, Failure, Outcome, forward_outcome},
};
use crate::{
    event::{self, IgnoreReason, InstanceId, Interruption, Kind},
    forward::{Delivery, Destination, Message},
    resolve::{InstanceKey, Owner, ResolveError},
};

/// One record on its way.
pub(super) struct Entry<'r> {
    pub record: &'r Record<'r>,
    /// What it asks to deliver, when it is an interruption.
    pub interruption: Option<Interruption>,
    pub state: State,
}

pub(super) enum State {
    Decided(Outcome),
    DeadLetter(DeadLetter),
    Routing(Routing),
}

/// A record bound for the dead-letter queue.
pub(super) struct DeadLetter {
    pub reason: DeadLetterReason,
    pub detail: String,
    /// The clusters that could not take it, when that is why.
    pub clusters: Option<String>,
}

/// A record being delivered: the owners found so far, then one copy per owning cluster.
#[derive(Default)]
pub(super) struct Routing {
    pub(super) owners: HashMap<InstanceId, Owner>,
    /// The last failure of a lookup this record still waits for.
    pub(super) unresolved: Option<Failure>,
    pub(super) planned: bool,
    pub(super) copies: Vec<Message>,
    pub(super) deliveries: Vec<Delivery>,
}

/// Longest `detail` attribute put on a dead-lettered message.
const MAX_DETAIL: usize = 1024;

/// Every instance key of the records being routed, with the records that need it.
pub(super) fn keys_by_record(entries: &[Entry<'_>]) -> HashMap<InstanceKey, Vec<usize>> {
    let mut waiting: HashMap<InstanceKey, Vec<usize>> = HashMap::new();
    for (r, entry) in entries.iter().enumerate() {
        let (State::Routing(_), Some(interruption)) = (&entry.state, &entry.interruption) else {
            continue;
        };
        for id in &interruption.instances {
            let key = InstanceKey {
                scope: interruption.scope.clone(),
                instance: id.clone(),
            };
            let records = waiting.entry(key).or_default();
            if records.last() != Some(&r) {
                records.push(r);
            }
        }
    }
    waiting
}

/// Gives each waiting record the owners found; returns the keys whose lookup failed.
pub(super) fn answer(
    entries: &mut [Entry<'_>],
    waiting: &HashMap<InstanceKey, Vec<usize>>,
    answers: impl IntoIterator<Item = (InstanceKey, Result<Owner, Arc<ResolveError>>)>,
) -> Vec<InstanceKey> {
    let mut failed = Vec::new();
    for (key, result) in answers {
        let Some(records) = waiting.get(&key) else {
            continue;
        };
        for &r in records {
            let State::Routing(routing) = &mut entries[r].state else {
                continue;
            };
            match &result {
                Ok(owner) => {
                    routing.owners.insert(key.instance.clone(), owner.clone());
                }
                Err(error) => {
                    let cause = match **error {
                        ResolveError::Unreachable(_) => Cause::AccountUnreachable,
                        ResolveError::Failed(_) => Cause::Lookup,
                    };
                    routing.unresolved = Some(Failure::new(cause, error.to_string()));
                }
            }
        }
        if result.is_err() {
            failed.push(key);
        }
    }
    failed
}

/// One copy per owning cluster: the original body, or for a Health event the copy naming only
/// that cluster's instances.
pub(super) fn plan_copies(
    interruption: &Interruption,
    body: &str,
    routing: &mut Routing,
) -> Result<(), event::Malformed> {
    routing.planned = true;
    routing.unresolved = None;
    let mut by_cluster: BTreeMap<Arc<str>, Vec<InstanceId>> = BTreeMap::new();
    for id in &interruption.instances {
        if let Some(Owner::Cluster(cluster)) = routing.owners.get(id) {
            by_cluster
                .entry(cluster.clone())
                .or_default()
                .push(id.clone());
        }
    }
    for (cluster, ids) in by_cluster {
        let body = match interruption.kind {
            Kind::ScheduledChange => event::health_body_for(body, &ids)?,
            _ => body.to_owned(),
        };
        routing.copies.push(Message {
            destination: Destination::Cluster {
                scope: interruption.scope.clone(),
                cluster,
            },
            body,
            attributes: Vec::new(),
        });
    }
    routing.deliveries = vec![Delivery::Unfinished; routing.copies.len()];
    Ok(())
}

/// Step 3: each routed record's outcome from its deliveries, or its permanent failure.
pub(super) fn settle(entries: &mut [Entry<'_>]) {
    for entry in entries.iter_mut() {
        let State::Routing(routing) = &entry.state else {
            continue;
        };
        let unresolved = (!routing.planned).then(|| {
            routing.unresolved.clone().unwrap_or_else(|| {
                Failure::new(
                    Cause::Deadline,
                    "deadline reached before the instance lookup finished",
                )
            })
        });
        let ignored = routing.owners.values().find_map(|o| match o {
            Owner::NotOurs(reason) => Some(*reason),
            Owner::Cluster(_) => None,
        });
        entry.state = match forward_outcome(
            &routing.copies,
            &routing.deliveries,
            unresolved.as_ref(),
            ignored.or(Some(IgnoreReason::UnknownInstance)),
        ) {
            Ok(outcome) => State::Decided(outcome),
            Err((reason, detail, clusters)) => State::DeadLetter(DeadLetter {
                reason,
                detail,
                clusters: Some(clusters),
            }),
        };
    }
}

/// The original payload, bound for the dead-letter queue with its reason.
pub(super) fn dead_letter_message(record: &Record<'_>, d: &DeadLetter) -> Message {
    let mut attributes = vec![
        ("reason", d.reason.label().to_owned()),
        ("detail", truncate(&d.detail, MAX_DETAIL).to_owned()),
    ];
    if let Some(clusters) = &d.clusters {
        attributes.push(("clusters", clusters.clone()));
    }
    Message {
        destination: Destination::DeadLetter,
        body: record.body.to_owned(),
        attributes,
    }
}

pub(super) fn unix_millis(t: SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("abc", 10), "abc");
    }
}
