//! What became of one copy: delivered, no tenant queue, denied (and whether the denial is the
//! queue's policy or a missing permission), or failed for a retry.

use crate::{accounts::Unreachable, event::Kind};

/// What happened to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The cluster's queue is gone while its tenant stack's record stands (the queue was deleted
    /// by hand), or the DLQ is: lost, and someone must know.
    QueueMissing {
        queue: String,
    },
    /// The cluster is not onboarded: it has neither a queue nor a tenant record (its tenant stack
    /// was never deployed, or was deleted on purpose), no valid queue name exists for it, or the
    /// queue with its name is not the tenant stack's (`foreign` says why).
    NoTenantQueue {
        queue: String,
        foreign: Option<String>,
    },
    /// The cluster's tenant stack declined this kind of event (its `EventKinds`): not sent, and
    /// nothing lost.
    Declined {
        kind: Kind,
    },
    /// SQS refused the entry as the sender's fault; sending it again would fail again.
    Rejected {
        code: String,
        message: String,
    },
    /// Failed after retries; worth trying again later.
    Failed {
        error: String,
    },
    /// SQS refused the call because `sender` may not write `queue` (or use its KMS key): a
    /// configuration error. `fix` says what to change.
    Denied(Denial),
    /// The cluster's account could not be reached (its spoke role could not be assumed).
    Unreachable(Unreachable),
    /// Not done when the deadline came.
    Unfinished,
}

/// A call SQS refused as not allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub queue: String,
    /// Who the router was ([`crate::accounts::Sender`], as text).
    pub sender: String,
    pub code: String,
    pub message: String,
}

impl Denial {
    /// What to change, by the kind of denial.
    pub fn fix(&self) -> &'static str {
        if self.code.to_ascii_lowercase().contains("kms") {
            "the queue's KMS key policy must let the sender use kms:GenerateDataKey and \
             kms:Decrypt, or the queue must use SSE-SQS (SqsManagedSseEnabled), as tenant.yaml does"
        } else {
            "the queue policy must allow the sender sqs:SendMessage: deploy the cluster's tenant \
             stack with BaseStackName set to the stack that connects its region (the base stack in \
             the router's own region, the spoke stack anywhere else); `routerctl verify` names \
             what is missing"
        }
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SQS denied writing {} as {} ({}: {}). Fix: {}",
            self.queue,
            self.sender,
            self.code,
            self.message,
            self.fix()
        )
    }
}
