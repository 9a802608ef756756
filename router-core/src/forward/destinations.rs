//! Destinations: the queue a cluster's copies go to, whether the router may write it, and what a
//! missing one means.
//!
//! For (place, cluster) the router asks, once, and keeps the answer for as long as it holds:
//!
//! 1. GetQueueUrl of the cluster's queue name (`QUEUE_NAME_TEMPLATE`);
//! 2. found: whose is it ([`crate::tenancy`]: its tenant tag, else its policy). The tenant stack's
//!    queue is the destination for `CACHE_TTL_SECONDS`, with the event kinds its tags say the
//!    cluster takes (so a changed choice is used within that time, the queue kept); another
//!    tool's is not written, and the cluster counts as not onboarded for [`FOREIGN_RECHECK`];
//! 3. missing: the tenant record ([`crate::tenancy::record_name`]) says whether the cluster is
//!    onboarded. Record, and still no queue when asked again: the queue was lost
//!    (`queue-missing`, dead-lettered, pages); a queue there now was made in between, and is
//!    judged as in step 2.
//!    Neither: not onboarded (counted per cluster). Both are believed for
//!    [`MISSING_QUEUE_RECHECK`] only, so a tenant stack deployed while events flow is used
//!    within seconds.
//!
//! A send that finds a known queue gone (SendMessageBatch: `QueueDoesNotExist`) forgets it and
//! asks step 3 again. So every execution environment, warm or cold, answers the same from what is
//! in AWS now, never from what it happened to see before.

use std::{sync::Arc, time::Duration};

use super::{Delivery, Denial, ForwardStats};
use crate::{
    accounts::Place,
    aws::{Aws, CallError, Session},
    event::Kinds,
    tenancy::{self, FOREIGN_RECHECK, Ownership},
};

/// How long "this cluster has no queue" is believed before GetQueueUrl is asked again: long
/// enough to spare SQS one call per batch in a storm, short enough that a queue created while
/// events flow gets them seconds later.
pub const MISSING_QUEUE_RECHECK: Duration = Duration::from_secs(2);

/// What is known of one cluster's queue.
#[derive(Debug, Clone)]
pub(super) enum Known {
    /// The tenant stack's queue: the router writes it the kinds its cluster takes.
    Tenant { url: Arc<str>, kinds: Kinds },
    /// No queue, and no tenant record: not onboarded.
    Absent,
    /// No queue, but its tenant record stands: lost.
    Lost,
    /// A queue with the name that the tenant stack did not make, and why (or why the router
    /// cannot tell whether the cluster is onboarded).
    NotTenant(Arc<str>),
}

impl Known {
    /// How long the answer holds.
    pub(super) fn lifetime(&self, ttl: Duration) -> Duration {
        match self {
            Known::Tenant { .. } => ttl,
            Known::Absent | Known::Lost => MISSING_QUEUE_RECHECK,
            Known::NotTenant(_) => FOREIGN_RECHECK,
        }
    }

    /// The destination's URL and the kinds it takes, or why its copies are not sent.
    pub(super) fn url(&self, queue: &str) -> Result<(Arc<str>, Kinds), Delivery> {
        match self {
            Known::Tenant { url, kinds } => Ok((url.clone(), *kinds)),
            Known::Absent => Err(Delivery::NoTenantQueue {
                queue: queue.to_owned(),
                foreign: None,
            }),
            Known::Lost => Err(Delivery::QueueMissing {
                queue: queue.to_owned(),
            }),
            Known::NotTenant(why) => Err(Delivery::NoTenantQueue {
                queue: queue.to_owned(),
                foreign: Some(why.to_string()),
            }),
        }
    }
}

/// One cluster's queue being found and judged (steps 1-3 above).
pub(super) struct LookUp<'a, A> {
    pub aws: &'a A,
    pub session: &'a Session,
    pub place: &'a Place,
    pub queue: &'a str,
    pub cluster: &'a str,
    /// The function's own role: the sender at home ([`crate::tenancy::by_policy`]).
    pub router_role_arn: Option<&'a str>,
    pub stats: &'a ForwardStats,
}

impl<A: Aws> LookUp<'_, A> {
    /// Finds the queue and judges it. `Err` is a transient failure or a denial, not kept.
    pub(super) async fn known(&self) -> Result<Known, Delivery> {
        match self.url().await? {
            Some(url) => self.judge(url).await,
            None => self.missing().await,
        }
    }

    /// A cluster without a queue: lost if its tenant record stands, else not onboarded.
    ///
    /// A tenant stack makes its record after its queue (the record's name is read from the
    /// queue) and deletes it before, so a record found after GetQueueUrl said "no queue" may mean
    /// the stack was created between the two reads: the queue is asked for once more, and only a
    /// queue still missing beside a record is lost. Without that second read, a stack deployed
    /// while events flow could dead-letter (and page about) its first seconds of events.
    pub(super) async fn missing(&self) -> Result<Known, Delivery> {
        let Self { queue, stats, .. } = *self;
        stats.tenant_record_calls.inc();
        match self
            .aws
            .get_parameter(self.session, &tenancy::record_name(queue))
            .await
        {
            Ok(_) => match self.url().await? {
                Some(url) => self.judge(url).await,
                None => Ok(Known::Lost),
            },
            Err(e) if e.is_missing_parameter() => Ok(Known::Absent),
            // A sender from before the records (a spoke stack not yet updated) cannot read them.
            // Counting the cluster as not onboarded pages nobody for clusters that never were;
            // the warning and `routerctl verify` name the missing permission.
            Err(e) if e.is_denial() => {
                tracing::warn!(queue, code = %e.code, "cannot read the tenant record, so a missing queue counts as not onboarded: grant the sender ssm:GetParameter on it (update the base or spoke stack)");
                Ok(Known::NotTenant(Arc::from(format!(
                    "it has no queue and its tenant record {} could not be read ({})",
                    tenancy::record_name(queue),
                    e.code
                ))))
            }
            Err(e) => Err(Delivery::Failed {
                error: format!("GetParameter {}: {e}", tenancy::record_name(queue)),
            }),
        }
    }

    /// GetQueueUrl: the queue's URL, or `None` when SQS says it does not exist.
    async fn url(&self) -> Result<Option<String>, Delivery> {
        self.stats.get_queue_url_calls.inc();
        match self.aws.get_queue_url(self.session, self.queue).await {
            Ok(url) => Ok(Some(url)),
            Err(e) if e.is_missing_queue() => Ok(None),
            Err(e) => Err(failed(self.place, self.queue, "GetQueueUrl", e)),
        }
    }

    /// A found queue: the tenant stack's is written; another tool's is not.
    async fn judge(&self, url: String) -> Result<Known, Delivery> {
        let Self { queue, cluster, .. } = *self;
        let sender = match &self.place.sender {
            crate::accounts::Sender::Spoke { role_arn, .. } => Some(role_arn.as_str()),
            crate::accounts::Sender::Home => self.router_role_arn,
        };
        Ok(
            match ownership(self.aws, self.session, &url, cluster, sender, self.stats).await? {
                (Ownership::Foreign(why), _) => {
                    tracing::info!(queue, cluster, why = %why, "not a tenant queue: the router does not write it");
                    Known::NotTenant(Arc::from(why))
                }
                (Ownership::Tenant | Ownership::LegacyTenant, kinds) => Known::Tenant {
                    url: Arc::from(url),
                    kinds,
                },
            },
        )
    }
}

/// Whose the queue at `url` is ([`crate::tenancy`]): its tenant tag, else its policy; and the
/// kinds its tags say the cluster takes (all of them for a queue the tags do not settle). A
/// sender that may not read either (a spoke role from before these reads) cannot tell: the queue
/// is written as before, every kind, with a warning, rather than silenced.
async fn ownership<A: Aws>(
    aws: &A,
    session: &Session,
    url: &str,
    cluster: &str,
    sender: Option<&str>,
    stats: &ForwardStats,
) -> Result<(Ownership, Kinds), Delivery> {
    let unverifiable = |call: &str, code: &str| {
        tracing::warn!(queue = %url, call, code, "cannot tell whether the tenant stack made this queue: sending as before; grant the sender sqs:ListQueueTags and sqs:GetQueueAttributes on it (update the base or spoke stack)");
        Ok((Ownership::Tenant, Kinds::ALL))
    };
    let failed = |call: &str, e: &CallError| {
        Err(Delivery::Failed {
            error: format!("{call} {url}: {e}"),
        })
    };
    stats.queue_ownership_calls.inc();
    match aws.list_queue_tags(session, url).await {
        Ok(tags) => {
            let tags = || tags.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            if let Some(settled) = tenancy::by_tag(tags(), cluster) {
                let kinds = tenancy::kinds_by_tag(tags()).unwrap_or_else(|(all, why)| {
                    tracing::warn!(queue = %url, cluster, why = %why, "sending every kind: fix the tag with the tenant stack's EventKinds");
                    all
                });
                return Ok((settled, kinds));
            }
        }
        Err(e) if e.is_denial() => return unverifiable("ListQueueTags", &e.code),
        Err(e) => return failed("ListQueueTags", &e),
    }
    stats.queue_ownership_calls.inc();
    let policy = match aws.get_queue_policy(session, url).await {
        Ok(policy) => policy,
        Err(e) if e.is_denial() => return unverifiable("GetQueueAttributes", &e.code),
        Err(e) => return failed("GetQueueAttributes", &e),
    };
    Ok((tenancy::by_policy(policy.as_deref(), sender), Kinds::ALL))
}

/// A failed call as what its copies get: a denial (with who was refused and the fix), or a
/// transient failure.
pub(super) fn failed(place: &Place, queue: &str, call: &str, error: CallError) -> Delivery {
    if error.is_denial() {
        Delivery::Denied(Denial {
            queue: queue.to_owned(),
            sender: place.sender.to_string(),
            code: error.code,
            message: error.message,
        })
    } else {
        Delivery::Failed {
            error: format!("{call} {queue}: {error}"),
        }
    }
}
