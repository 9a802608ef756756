//! Outcome: how one record ended, and the rules that decide it from its deliveries.
//!
//! Each record ends in exactly one [`Outcome`]: [`Finished`] (forwarded, ignored, or
//! dead-lettered with a [`DeadLetterReason`]), or [`Outcome::Failed`], handed back for another
//! try. A permanent failure goes to the dead-letter queue, and so does a transient one on the
//! record's last receive.

use std::fmt;

use crate::{event::IgnoreReason, forward::Delivery};

/// How one record ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Finished(Finished),
    /// Not done; hand it back for a retry.
    Failed(Failure),
}

/// A record done with: nothing about it changes after this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finished {
    /// Delivered to every owning cluster's queue.
    Forwarded,
    /// Well formed, but nothing to deliver.
    Ignored(IgnoreReason),
    /// Failed permanently; the original payload is in the dead-letter queue with this reason.
    DeadLettered(DeadLetterReason),
}

impl Outcome {
    pub const FORWARDED: Outcome = Outcome::Finished(Finished::Forwarded);

    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Finished(Finished::Forwarded) => "forwarded",
            Outcome::Finished(Finished::Ignored(_)) => "ignored",
            Outcome::Finished(Finished::DeadLettered(_)) => "dead-lettered",
            Outcome::Failed(_) => "failed",
        }
    }

    pub fn ignored(reason: IgnoreReason) -> Self {
        Outcome::Finished(Finished::Ignored(reason))
    }

    pub fn dead_lettered(reason: DeadLetterReason) -> Self {
        Outcome::Finished(Finished::DeadLettered(reason))
    }
}

/// A transient failure: what was still failing when the record's retries ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub cause: Cause,
    pub detail: String,
}

impl Failure {
    pub fn new(cause: Cause, detail: impl Into<String>) -> Self {
        Self {
            cause,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What kind of transient failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// Every lookup path failed for one of the record's instances.
    Lookup,
    /// A copy could not be sent (SQS failed, or GetQueueUrl did).
    Send,
    /// The record's account could not be reached (its spoke role could not be assumed).
    AccountUnreachable,
    /// The invocation's deadline came first.
    Deadline,
    /// Failed permanently, and the dead-letter queue did not confirm taking it (or there is none).
    NotKept,
    /// The router does not know its own account yet, so it routes nothing (fails closed).
    HomeUnknown,
    /// SQS refused the sender: a configuration error, retried only for the grace IAM and queue
    /// policies need to propagate after a deploy.
    AccessDenied,
    /// A direct delivery's sender could not be checked (GetRole failed): never routed unchecked.
    SenderUnchecked,
}

impl Cause {
    /// The reason a record failing this way carries into the DLQ on its last receive.
    pub fn dead_letter_reason(self) -> DeadLetterReason {
        match self {
            Cause::AccountUnreachable => DeadLetterReason::AccountUnreachable,
            Cause::AccessDenied => DeadLetterReason::AccessDenied,
            _ => DeadLetterReason::RetriesExhausted,
        }
    }
}

/// The `reason` attribute on a dead-lettered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterReason {
    Malformed,
    QueueMissing,
    Rejected,
    /// The event's account is not one the router serves (`SERVED_ACCOUNTS`).
    AccountNotServed,
    /// The event's account could not be reached on any try.
    AccountUnreachable,
    /// SQS refused the router's principal for the cluster's queue (policy, IAM or KMS key).
    AccessDenied,
    /// A record of the direct queue not sent by the direct role of the account it names
    /// ([`crate::direct`]).
    ForeignSender,
    /// Still failing transiently on its last receive.
    RetriesExhausted,
}

impl DeadLetterReason {
    /// Every reason, as docs/operating.md's table of them lists them.
    pub const ALL: [DeadLetterReason; 8] = [
        DeadLetterReason::Malformed,
        DeadLetterReason::QueueMissing,
        DeadLetterReason::Rejected,
        DeadLetterReason::AccountNotServed,
        DeadLetterReason::AccountUnreachable,
        DeadLetterReason::AccessDenied,
        DeadLetterReason::ForeignSender,
        DeadLetterReason::RetriesExhausted,
    ];

    pub fn label(self) -> &'static str {
        match self {
            DeadLetterReason::Malformed => "malformed",
            DeadLetterReason::QueueMissing => "queue-missing",
            DeadLetterReason::Rejected => "rejected",
            DeadLetterReason::AccountNotServed => "account-not-served",
            DeadLetterReason::AccountUnreachable => "account-unreachable",
            DeadLetterReason::AccessDenied => "access-denied",
            DeadLetterReason::ForeignSender => "foreign-sender",
            DeadLetterReason::RetriesExhausted => "retries-exhausted",
        }
    }
}

impl fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A permanent failure to dead-letter: reason, detail, clusters affected.
pub type Permanent = (DeadLetterReason, String, String);

/// The outcome of a record whose copies were planned, one `(cluster, delivery)` each, or the
/// permanent failure to dead-letter. Transient beats permanent: a record is retried while
/// anything might still help, and dead-lettered only once nothing can.
pub fn forward_outcome<'a>(
    copies: impl IntoIterator<Item = (&'a str, &'a Delivery)>,
    ignored: IgnoreReason,
) -> Result<Outcome, Permanent> {
    let mut permanent: Option<(DeadLetterReason, String)> = None;
    let mut clusters = Vec::new();
    // Whether any copy was planned, sent, or found its cluster not onboarded.
    let (mut planned, mut sent, mut not_onboarded) = (false, false, false);
    for (cluster, delivery) in copies {
        planned = true;
        match delivery {
            Delivery::Sent => sent = true,
            Delivery::Failed { error } => {
                return Ok(Outcome::Failed(Failure::new(
                    Cause::Send,
                    format!("sending to {cluster}: {error}"),
                )));
            }
            Delivery::Unreachable(e) => {
                return Ok(Outcome::Failed(Failure::new(
                    Cause::AccountUnreachable,
                    e.to_string(),
                )));
            }
            // A failure like the others until its grace is over (the handler decides, as it
            // knows when the record was first received).
            Delivery::Denied(denial) => {
                return Ok(Outcome::Failed(Failure::new(
                    Cause::AccessDenied,
                    format!("{cluster}: {denial}"),
                )));
            }
            Delivery::Unfinished => {
                return Ok(Outcome::Failed(Failure::new(
                    Cause::Deadline,
                    format!("deadline reached before sending to {cluster}"),
                )));
            }
            // Not onboarded: nothing to deliver there, and nothing lost (its own set-up has it).
            Delivery::NoTenantQueue { .. } => not_onboarded = true,
            // Declined by its cluster's choice of kinds: nothing is lost.
            Delivery::Declined { .. } => {}
            Delivery::QueueMissing { queue } => {
                permanent.get_or_insert((
                    DeadLetterReason::QueueMissing,
                    format!(
                        "queue {queue} of cluster {cluster} does not exist, but its tenant record does: it was deleted outside its tenant stack"
                    ),
                ));
                clusters.push(cluster.to_owned());
            }
            Delivery::Rejected { code, message } => {
                permanent.get_or_insert((
                    DeadLetterReason::Rejected,
                    format!("SQS refused the message for {cluster}: {code}: {message}"),
                ));
                clusters.push(cluster.to_owned());
            }
        }
    }
    match permanent {
        Some((reason, detail)) => Err((reason, detail, clusters.join(","))),
        None if !planned => Ok(Outcome::ignored(ignored)),
        None if !sent && not_onboarded => Ok(Outcome::ignored(IgnoreReason::NoTenantQueue)),
        None if !sent => Ok(Outcome::ignored(IgnoreReason::KindDeclined)),
        None => Ok(Outcome::FORWARDED),
    }
}

/// The outcome of a record whose original was sent to the dead-letter queue.
pub fn dead_letter_outcome(delivery: &Delivery, reason: DeadLetterReason) -> Outcome {
    match delivery {
        Delivery::Sent => Outcome::dead_lettered(reason),
        other => Outcome::Failed(Failure::new(
            Cause::NotKept,
            format!("{reason}, and the dead-letter queue did not take it: {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_forwarded_only_when_every_copy_was_sent() {
        let of = |deliveries: &[Delivery]| {
            let copies: Vec<(&str, &Delivery)> =
                ["a", "b"].into_iter().zip(deliveries.iter()).collect();
            forward_outcome(copies, IgnoreReason::UnknownInstance)
        };
        assert_eq!(
            of(&[Delivery::Sent, Delivery::Sent]),
            Ok(Outcome::FORWARDED)
        );
        assert!(matches!(
            of(&[Delivery::Sent, Delivery::Unfinished]),
            Ok(Outcome::Failed(Failure {
                cause: Cause::Deadline,
                ..
            }))
        ));
        let missing = Delivery::QueueMissing {
            queue: "karpenter-b".into(),
        };
        match of(&[Delivery::Sent, missing.clone()]) {
            Err((DeadLetterReason::QueueMissing, detail, clusters)) => {
                assert!(detail.contains("karpenter-b"), "{detail}");
                assert_eq!(clusters, "b");
            }
            other => panic!("{other:?}"),
        }
        // Transient beats permanent: retry first, dead-letter only once nothing else can help.
        assert!(matches!(
            of(&[
                Delivery::Failed {
                    error: "503".into()
                },
                missing
            ]),
            Ok(Outcome::Failed(Failure {
                cause: Cause::Send,
                ..
            }))
        ));
        assert_eq!(
            forward_outcome([], IgnoreReason::UnmanagedInstance),
            Ok(Outcome::ignored(IgnoreReason::UnmanagedInstance))
        );
        // A cluster not onboarded: nothing to deliver there, nothing to page about; its
        // neighbour's copy makes the record forwarded.
        let not_onboarded = Delivery::NoTenantQueue {
            queue: "karpenter-b".into(),
            foreign: None,
        };
        assert_eq!(
            of(&[not_onboarded.clone(), not_onboarded.clone()]),
            Ok(Outcome::ignored(IgnoreReason::NoTenantQueue))
        );
        assert_eq!(
            of(&[Delivery::Sent, not_onboarded.clone()]),
            Ok(Outcome::FORWARDED)
        );
        // A kind its cluster declined: counted, not dead-lettered, not retried.
        let declined = Delivery::Declined {
            kind: crate::event::Kind::ScheduledChange,
        };
        assert_eq!(
            of(&[declined.clone(), declined.clone()]),
            Ok(Outcome::ignored(IgnoreReason::KindDeclined))
        );
        assert_eq!(
            of(&[declined.clone(), not_onboarded]),
            Ok(Outcome::ignored(IgnoreReason::NoTenantQueue))
        );
        assert_eq!(of(&[Delivery::Sent, declined]), Ok(Outcome::FORWARDED));
    }

    #[test]
    fn an_unreachable_account_is_its_own_reason_on_the_last_receive() {
        assert_eq!(
            Cause::AccountUnreachable.dead_letter_reason(),
            DeadLetterReason::AccountUnreachable
        );
        assert_eq!(
            Cause::AccessDenied.dead_letter_reason(),
            DeadLetterReason::AccessDenied
        );
        assert_eq!(DeadLetterReason::AccessDenied.label(), "access-denied");
        for cause in [
            Cause::Lookup,
            Cause::Send,
            Cause::Deadline,
            Cause::NotKept,
            Cause::HomeUnknown,
        ] {
            assert_eq!(
                cause.dead_letter_reason(),
                DeadLetterReason::RetriesExhausted
            );
        }
    }
}
