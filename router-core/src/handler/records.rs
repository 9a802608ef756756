//! The states a record of a batch goes through, one type per step, so a step can only make the
//! moves it is for and a finished record stays finished:
//!
//! ```text
//!   admit ─▶ Admitted ─┬─ Done(Finished) ───────────────────────────────┐
//!                      ├─ DeadLetter ─────────────────┐                  │
//!                      ├─ Failed ─────────────┐       │                  │
//!                      └─ Routing ─ deliver ─ settle ─▶ Settled ─ give up ─ keep ─▶ Kept ─ hand back ─▶ Outcome
//!                          Resolving ─▶ Sending        (Done | DeadLetter | Failed)   (Done | Failed)
//! ```
//!
//! A record being routed holds its event and its [`Place`]; while its owners are being found it
//! is [`Progress::Resolving`], and once every instance's owner is known it is
//! [`Progress::Sending`], one [`Copy`] per owning cluster, each with what became of it.

use std::{
    collections::{BTreeMap, btree_map::Entry as MapEntry},
    sync::Arc,
};

use super::{
    Record,
    outcome::{Cause, DeadLetterReason, Failure, Finished, Outcome, forward_outcome},
};
use crate::{
    accounts::Place,
    event::{self, IgnoreReason, InstanceId, Interruption, Kind},
    forward::{Delivery, Destination, Message},
    resolve::{Found, InstanceKey, Owner, ResolveError},
};

/// Longest `detail` attribute put on a dead-lettered message.
const MAX_DETAIL: usize = 1024;

/// A record, what it is about (for its log lines) and its state at this step.
pub(super) struct Entry<'r, S> {
    pub record: &'r Record<'r>,
    pub subject: Subject,
    pub state: S,
}

impl<'r, S> Entry<'r, S> {
    /// The same record at the next step.
    pub fn next<T>(self, step: impl FnOnce(S) -> T) -> Entry<'r, T> {
        Entry {
            record: self.record,
            subject: self.subject,
            state: step(self.state),
        }
    }
}

/// What a record's log lines and interruption records say it is about: empty fields for a body
/// that is not an event.
#[derive(Debug, Clone, Default)]
pub(super) struct Subject {
    pub event_id: String,
    pub kind: &'static str,
    pub instances: String,
    pub account: String,
    pub region: String,
    /// The event's own `time`.
    pub time: Option<String>,
    /// The instances the event names, in its order.
    pub ids: Vec<InstanceId>,
    /// What the lookups answered for each (its owner and what they told of it).
    pub found: BTreeMap<InstanceId, Found>,
    /// What became of each instance's copy, once one did.
    pub fates: BTreeMap<InstanceId, Fate>,
}

/// What became of an instance's copy: delivered to its cluster at a time (ms since the epoch),
/// or not sent, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fate {
    Delivered { cluster: Arc<str>, at_ms: i64 },
    NotSent(IgnoreReason),
}

impl Subject {
    pub fn of(event: &Interruption, place: Option<&Place>) -> Self {
        Self {
            event_id: event.id.clone().unwrap_or_default(),
            kind: event.kind.label(),
            instances: join(&event.instances),
            account: place
                .map(|p| p.scope.account.to_string())
                .or_else(|| event.origin.account.as_deref().map(str::to_owned))
                .unwrap_or_default(),
            region: place
                .map(|p| p.scope.region.to_string())
                .or_else(|| event.origin.region.as_deref().map(str::to_owned))
                .unwrap_or_default(),
            time: event.time.clone(),
            ids: event.instances.clone(),
            ..Self::default()
        }
    }

    /// A copy of the record reached `cluster` at `at_ms`, or was not sent for `reason`.
    pub fn copy(&mut self, instances: &[InstanceId], fate: &Fate) {
        for id in instances {
            self.fates.insert(id.clone(), fate.clone());
        }
    }
}

/// After admission.
pub(super) enum Admitted {
    Done(Finished),
    DeadLetter(DeadLetter),
    Failed(Failure),
    Routing(Routing),
}

/// After delivery, once each routed record's deliveries are judged.
pub(super) enum Settled {
    Done(Finished),
    DeadLetter(DeadLetter),
    Failed(Failure),
}

/// After the dead-letter queue took (or did not take) what was bound for it.
pub(super) enum Kept {
    Done(Finished),
    Failed(Failure),
}

impl Kept {
    pub fn outcome(self) -> Outcome {
        match self {
            Kept::Done(finished) => Outcome::Finished(finished),
            Kept::Failed(failure) => Outcome::Failed(failure),
        }
    }
}

/// A record bound for the dead-letter queue.
pub(super) struct DeadLetter {
    pub reason: DeadLetterReason,
    pub detail: String,
    /// The clusters that could not take it, when that is why.
    pub clusters: Option<String>,
}

impl DeadLetter {
    pub fn new(reason: DeadLetterReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
            clusters: None,
        }
    }
}

/// A record being delivered.
pub(super) struct Routing {
    pub event: Arc<Interruption>,
    pub place: Place,
    pub progress: Progress,
}

pub(super) enum Progress {
    /// The owners found so far, and the last failure of a lookup the record still waits for.
    Resolving {
        owners: BTreeMap<InstanceId, Owner>,
        failure: Option<Failure>,
    },
    /// Every owner is known: one copy per owning cluster (none if no cluster owns an instance;
    /// then `ignored` says why).
    Sending {
        copies: Vec<Copy>,
        ignored: IgnoreReason,
    },
}

/// One cluster's copy of a record, and what became of it.
pub(super) struct Copy {
    pub cluster: Arc<str>,
    /// The instances this copy names: the cluster's own (a Health event's copy names no other
    /// cluster's).
    pub instances: Vec<InstanceId>,
    pub message: Message,
    pub delivery: Delivery,
}

/// A copy of a routed record: record `r`'s copy `c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CopyRef {
    pub r: usize,
    pub c: usize,
}

impl Routing {
    pub fn new(event: Arc<Interruption>, place: Place) -> Self {
        Self {
            event,
            place,
            progress: Progress::Resolving {
                owners: BTreeMap::new(),
                failure: None,
            },
        }
    }

    /// The instance keys this record still needs owners for.
    pub fn wanted(&self) -> impl Iterator<Item = InstanceKey> + '_ {
        let owners = match &self.progress {
            Progress::Resolving { owners, .. } => Some(owners),
            Progress::Sending { .. } => None,
        };
        self.event
            .instances
            .iter()
            .filter(move |id| owners.is_some_and(|o| !o.contains_key(*id)))
            .map(|id| InstanceKey {
                place: self.place.clone(),
                instance: id.clone(),
            })
    }

    /// Takes a lookup's answer for one of its instances.
    pub fn answer(&mut self, id: &InstanceId, result: &Result<Found, Arc<ResolveError>>) {
        let Progress::Resolving { owners, failure } = &mut self.progress else {
            return;
        };
        match result {
            Ok(found) => {
                owners.insert(id.clone(), found.owner.clone());
            }
            Err(error) => {
                let cause = match **error {
                    ResolveError::Unreachable(_) => Cause::AccountUnreachable,
                    ResolveError::Failed(_) => Cause::Lookup,
                };
                *failure = Some(Failure::new(cause, error.to_string()));
            }
        }
    }

    /// Once every owner is known: one copy per owning cluster, the original body, or for a
    /// Health event the copy naming only that cluster's instances. Returns how many copies, or
    /// `None` while an owner is still unknown.
    pub fn plan(&mut self, body: &str) -> Option<Result<usize, event::Malformed>> {
        let Progress::Resolving { owners, .. } = &self.progress else {
            return None;
        };
        if !self
            .event
            .instances
            .iter()
            .all(|id| owners.contains_key(id))
        {
            return None;
        }
        let mut by_cluster: BTreeMap<Arc<str>, Vec<InstanceId>> = BTreeMap::new();
        let mut ignored = None;
        for id in &self.event.instances {
            match owners.get(id) {
                Some(Owner::Cluster(cluster)) => match by_cluster.entry(cluster.clone()) {
                    MapEntry::Vacant(v) => {
                        v.insert(vec![id.clone()]);
                    }
                    MapEntry::Occupied(mut o) => o.get_mut().push(id.clone()),
                },
                Some(Owner::NotOurs(reason)) => {
                    ignored.get_or_insert(*reason);
                }
                None => {}
            }
        }
        let mut copies = Vec::with_capacity(by_cluster.len());
        for (cluster, ids) in by_cluster {
            let body = match self.event.kind {
                Kind::ScheduledChange => match event::health_body_for(body, &ids) {
                    Ok(body) => body,
                    Err(malformed) => return Some(Err(malformed)),
                },
                _ => body.to_owned(),
            };
            copies.push(Copy {
                message: Message {
                    destination: Destination::Cluster {
                        place: self.place.clone(),
                        cluster: cluster.clone(),
                    },
                    body,
                    attributes: Vec::new(),
                    kind: Some(self.event.kind),
                },
                cluster,
                instances: ids,
                delivery: Delivery::Unfinished,
            });
        }
        let planned = copies.len();
        self.progress = Progress::Sending {
            copies,
            ignored: ignored.unwrap_or(IgnoreReason::UnknownInstance),
        };
        Some(Ok(planned))
    }

    /// Step 3: the record's outcome from its deliveries, or its permanent failure.
    pub fn settle(self) -> Settled {
        match self.progress {
            Progress::Resolving { failure, .. } => Settled::Failed(failure.unwrap_or_else(|| {
                Failure::new(
                    Cause::Deadline,
                    "deadline reached before the instance lookup finished",
                )
            })),
            Progress::Sending { copies, ignored } => {
                let deliveries = copies.iter().map(|c| (&*c.cluster, &c.delivery));
                match forward_outcome(deliveries, ignored) {
                    Ok(Outcome::Finished(finished)) => Settled::Done(finished),
                    Ok(Outcome::Failed(failure)) => Settled::Failed(failure),
                    Err((reason, detail, clusters)) => Settled::DeadLetter(DeadLetter {
                        reason,
                        detail,
                        clusters: Some(clusters),
                    }),
                }
            }
        }
    }
}

impl Admitted {
    /// Steps 2 to 3 for the records that were not routed: nothing changes.
    pub fn settle(self) -> Settled {
        match self {
            Admitted::Done(finished) => Settled::Done(finished),
            Admitted::DeadLetter(d) => Settled::DeadLetter(d),
            Admitted::Failed(f) => Settled::Failed(f),
            Admitted::Routing(routing) => routing.settle(),
        }
    }
}

/// The original payload, bound for the dead-letter queue with its reason.
/// The dead letter's attribute naming the queue its record came from: the ingest or the direct
/// queue's ARN, or [`INVOKED`] for a record handed to the function directly. A replay carries it
/// back ([`Record::replay_of`]), so a replayed direct delivery is judged by its sender again.
pub const SOURCE_ATTRIBUTE: &str = "source";
/// The dead letter's attribute holding its record's `SenderId`, when SQS named one.
pub const SENDER_ATTRIBUTE: &str = "sender";
/// The `source` of a dead letter whose record was handed to the function directly.
pub const INVOKED: &str = "invoke";

pub(super) fn dead_letter_message(record: &Record<'_>, d: &DeadLetter, home: &Place) -> Message {
    let mut attributes = vec![
        ("reason", d.reason.label().to_owned()),
        ("detail", truncate(&d.detail, MAX_DETAIL).to_owned()),
        (
            SOURCE_ATTRIBUTE,
            record.source_queue().unwrap_or(INVOKED).to_owned(),
        ),
    ];
    if let Some(sender) = record.sender_id {
        attributes.push((SENDER_ATTRIBUTE, sender.to_owned()));
    }
    if let Some(clusters) = &d.clusters {
        attributes.push(("clusters", clusters.clone()));
    }
    Message {
        destination: Destination::DeadLetter { home: home.clone() },
        body: record.body.to_owned(),
        attributes,
        kind: None,
    }
}

pub(super) fn join(ids: &[InstanceId]) -> String {
    ids.iter()
        .map(InstanceId::as_str)
        .collect::<Vec<_>>()
        .join(",")
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
