//! Forward: put messages into SQS queues and say, for each one, what happened to it.
//!
//! The third step of the data path. Messages go to a cluster's Karpenter queue (named by
//! `QUEUE_NAME_TEMPLATE`, URL resolved once and cached) or to the dead-letter queue.
//!
//! Queues come and go, and other tools name queues as the router does. A cluster whose queue
//! does not exist and never did, as far as this execution environment has seen, or whose queue
//! the tenant stack did not make ([`crate::tenancy`]: checked once with the URL and cached with
//! it), is not onboarded yet ([`Delivery::NoTenantQueue`]: its own set-up still delivers its
//! events; counted, not paged). One whose queue this environment has
//! used and that is now gone lost it ([`Delivery::QueueMissing`]: dead-lettered, which pages).
//! "Missing" is remembered for [`MISSING_QUEUE_RECHECK`] only, so a tenant queue created while
//! events flow is used within seconds. Sending is
//! planned purely ([`plan_batches`]: per destination, at most 10 entries and 256 KiB per
//! SendMessageBatch) and executed with every batch in flight at once.
//!
//! SendMessageBatch can answer 200 and still have failed some entries, so every entry's result is
//! read: entries SQS failed on its side are retried (a few times, briefly), entries it refused as
//! the sender's fault are reported as [`Delivery::Rejected`], and nothing is reported [`Delivery::Sent`]
//! unless SQS listed it as successful. A call SQS refuses because the sender may not write the
//! queue (AccessDenied, or a KMS key it may not use) is a configuration error, not a brownout:
//! it is reported as [`Delivery::Denied`] with the queue and the principal, so the record can be
//! dead-lettered with that cause instead of retried for minutes. Work still running at the
//! deadline is abandoned and reported as [`Delivery::Unfinished`], so the caller can hand those
//! records back for a retry.

mod batch;
mod delivery;
#[cfg(test)]
mod tests;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use aws_sdk_sqs::{
    error::{DisplayErrorContext, ProvideErrorMetadata},
    types::QueueAttributeName,
};
use futures_util::{StreamExt, stream};
use moka::{Expiry, future::Cache};
use tokio::time::Instant;

use crate::{
    accounts::{Accounts, Clients, Sender},
    config::QueueNameTemplate,
    event::Scope,
    resolve::CacheConfig,
    tenancy::{self, FOREIGN_RECHECK, Ownership},
};

use self::batch::entry;
pub use self::batch::{Destination, MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, Message, plan_batches};
pub use self::delivery::{Delivery, Denial, is_denial};
/// Attempts per entry when SQS fails it on its side (the SDK already retried the call itself).
const ENTRY_ATTEMPTS: u32 = 3;
const ENTRY_RETRY_BASE: Duration = Duration::from_millis(25);
/// Batches in flight at once: enough to send to every cluster of a storm concurrently.
const MAX_IN_FLIGHT: usize = 32;
/// How long "this cluster has no queue" is believed before GetQueueUrl is asked again: long
/// enough to spare SQS one call per batch in a storm, short enough that a queue created while
/// events flow gets them seconds later.
pub const MISSING_QUEUE_RECHECK: Duration = Duration::from_secs(2);
/// How long a queue seen once is remembered as one the cluster had (so its loss pages).
const KNOWN_QUEUE_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// SQS calls one [`Forwarder::deliver`] made.
#[derive(Debug, Default)]
pub struct ForwardStats {
    pub send_message_batch_calls: AtomicU64,
    pub get_queue_url_calls: AtomicU64,
    /// ListQueueTags and GetQueueAttributes: whose a found queue is ([`crate::tenancy`]).
    pub queue_ownership_calls: AtomicU64,
}

#[derive(Debug, Clone)]
enum QueueUrl {
    /// A tenant queue: the router writes it.
    Found(Arc<str>),
    Missing,
    /// A queue with the name that the tenant stack did not make, and why.
    Foreign(Arc<str>),
}

pub struct Forwarder {
    accounts: Arc<Accounts>,
    queue_names: QueueNameTemplate,
    dead_letter: Option<String>,
    /// The function's own role: the sender a tenant queue from before the tenant tag admits at
    /// home.
    router_role_arn: Option<String>,
    urls: Cache<(Scope, Arc<str>), QueueUrl>,
    /// Clusters whose queue this environment has found: losing it pages.
    known: Cache<(Scope, Arc<str>), ()>,
}

impl Forwarder {
    pub fn new(
        accounts: Arc<Accounts>,
        queue_names: QueueNameTemplate,
        dead_letter: Option<String>,
        router_role_arn: Option<String>,
        cache: &CacheConfig,
    ) -> Self {
        let urls = Cache::builder()
            .max_capacity(10_000)
            .expire_after(UrlExpiry { ttl: cache.ttl })
            .build();
        let known = Cache::builder()
            .max_capacity(10_000)
            // Refreshed each time a URL is looked up, so it must outlive a cached URL.
            .time_to_live(KNOWN_QUEUE_HORIZON.max(cache.ttl))
            .build();
        Self {
            accounts,
            queue_names,
            dead_letter,
            router_role_arn,
            urls,
            known,
        }
    }

    pub fn has_dead_letter_queue(&self) -> bool {
        self.dead_letter.is_some()
    }

    /// Sends every message, returning one [`Delivery`] per message, in order.
    pub async fn deliver(
        &self,
        messages: &[Message],
        deadline: Instant,
        stats: &ForwardStats,
    ) -> Vec<Delivery> {
        let mut outcomes = vec![Delivery::Unfinished; messages.len()];
        let mut in_flight = stream::iter(plan_batches(messages))
            .map(|batch| async move {
                let results = self.send_batch(messages, &batch, stats).await;
                (batch, results)
            })
            .buffer_unordered(MAX_IN_FLIGHT);
        // Record each batch as it completes, so a deadline loses only what was really unfinished.
        while let Ok(Some((batch, results))) =
            tokio::time::timeout_at(deadline, in_flight.next()).await
        {
            for (i, delivery) in batch.into_iter().zip(results) {
                outcomes[i] = delivery;
            }
        }
        outcomes
    }

    async fn send_batch(
        &self,
        messages: &[Message],
        batch: &[usize],
        stats: &ForwardStats,
    ) -> Vec<Delivery> {
        let destination = &messages[batch[0]].destination;
        let (clients, url) = match self.url_for(destination, stats).await {
            Ok(found) => found,
            // Why the batch could not start holds for each of its messages.
            Err(why) => return vec![why; batch.len()],
        };
        let client = &clients.sqs;

        let mut results = vec![Delivery::Unfinished; batch.len()];
        let mut pending: Vec<usize> = (0..batch.len()).collect();
        for attempt in 0..ENTRY_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(ENTRY_RETRY_BASE * 2u32.pow(attempt - 1)).await;
            }
            let entries = match pending
                .iter()
                .map(|&p| entry(p, &messages[batch[p]]))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(entries) => entries,
                Err(error) => return vec![Delivery::Failed { error }; batch.len()],
            };
            stats
                .send_message_batch_calls
                .fetch_add(1, Ordering::Relaxed);
            let output = match client
                .send_message_batch()
                .queue_url(url.as_ref())
                .set_entries(Some(entries))
                .send()
                .await
            {
                Ok(output) => output,
                Err(e) => {
                    let delivery = if e
                        .as_service_error()
                        .is_some_and(|s| s.is_queue_does_not_exist())
                    {
                        if let Destination::Cluster { scope, cluster } = destination {
                            self.urls
                                .invalidate(&(scope.clone(), cluster.clone()))
                                .await;
                        }
                        Delivery::QueueMissing {
                            queue: url.to_string(),
                        }
                    } else if let Some(denial) = self.denial(&url, destination, &e) {
                        Delivery::Denied(denial)
                    } else {
                        Delivery::Failed {
                            error: DisplayErrorContext(&e).to_string(),
                        }
                    };
                    for p in pending {
                        results[p] = delivery.clone();
                    }
                    return results;
                }
            };
            let mut answered = vec![false; batch.len()];
            let position = |id: &str| id.parse::<usize>().ok().filter(|p| pending.contains(p));
            for ok in output.successful() {
                if let Some(p) = position(ok.id()) {
                    answered[p] = true;
                    results[p] = Delivery::Sent;
                }
            }
            let mut retry = Vec::new();
            for failed in output.failed() {
                let Some(p) = position(failed.id()) else {
                    continue;
                };
                answered[p] = true;
                let message = failed.message().unwrap_or_default().to_owned();
                results[p] = if failed.sender_fault() {
                    Delivery::Rejected {
                        code: failed.code().to_owned(),
                        message,
                    }
                } else {
                    retry.push(p);
                    Delivery::Failed {
                        error: format!("{}: {message}", failed.code()),
                    }
                };
            }
            // An entry SQS listed neither way was not confirmed: never count it as sent.
            for &p in pending.iter().filter(|&&p| !answered[p]) {
                results[p] = Delivery::Failed {
                    error: "SQS returned no result for the entry".into(),
                };
                retry.push(p);
            }
            if retry.is_empty() {
                break;
            }
            tracing::debug!(attempt, entries = retry.len(), queue = %url, "retrying entries SQS failed on its side");
            pending = retry;
        }
        results
    }

    /// The clients and queue URL of a destination: the cluster's queue in its own account and
    /// region, or the dead-letter queue in the function's own. An error is what each message of
    /// the batch gets.
    async fn url_for(
        &self,
        destination: &Destination,
        stats: &ForwardStats,
    ) -> Result<(Arc<Clients>, Arc<str>), Delivery> {
        let (scope, cluster) = match destination {
            Destination::DeadLetter => {
                let url = self
                    .dead_letter
                    .as_deref()
                    .ok_or_else(|| Delivery::Failed {
                        error: "no DEAD_LETTER_QUEUE_URL configured".into(),
                    })?;
                return Ok((self.accounts.home(), Arc::from(url)));
            }
            Destination::Cluster { scope, cluster } => (scope, cluster),
        };
        let clients = self
            .accounts
            .clients(scope)
            .await
            .map_err(Delivery::Unreachable)?;
        let client = &clients.sqs;
        let Some(name) = self.queue_names.queue_name(cluster) else {
            return Err(Delivery::NoTenantQueue {
                queue: format!(
                    "{}{cluster}… (not a valid SQS queue name)",
                    self.queue_names.prefix()
                ),
                foreign: None,
            });
        };
        let key = (scope.clone(), cluster.clone());
        let url = self
            .urls
            .try_get_with(key.clone(), async {
                stats.get_queue_url_calls.fetch_add(1, Ordering::Relaxed);
                let url = match client.get_queue_url().queue_name(&name).send().await {
                    Ok(out) => match out.queue_url() {
                        Some(url) => url.to_owned(),
                        None => return Ok(QueueUrl::Missing),
                    },
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(|s| s.is_queue_does_not_exist()) =>
                    {
                        return Ok(QueueUrl::Missing);
                    }
                    // Not cached: the next batch asks again.
                    Err(e) => {
                        return Err(match self.denial(&name, destination, &e) {
                            Some(denial) => Delivery::Denied(denial),
                            None => Delivery::Failed {
                                error: format!("GetQueueUrl {name}: {}", DisplayErrorContext(&e)),
                            },
                        });
                    }
                };
                match self.ownership(client, &url, scope, cluster, stats).await? {
                    Ownership::Foreign(why) => {
                        tracing::info!(queue = %name, cluster = %cluster, why = %why, "not a tenant queue: the router does not write it");
                        Ok(QueueUrl::Foreign(Arc::from(why)))
                    }
                    _ => {
                        self.known.insert(key.clone(), ()).await;
                        Ok(QueueUrl::Found(Arc::from(url)))
                    }
                }
            })
            .await;
        match url {
            Ok(QueueUrl::Found(url)) => Ok((clients.clone(), url)),
            Ok(QueueUrl::Missing) if self.known.contains_key(&key) => {
                Err(Delivery::QueueMissing { queue: name })
            }
            Ok(QueueUrl::Missing) => Err(Delivery::NoTenantQueue {
                queue: name,
                foreign: None,
            }),
            Ok(QueueUrl::Foreign(why)) => Err(Delivery::NoTenantQueue {
                queue: name,
                foreign: Some(why.to_string()),
            }),
            Err(why) => Err((*why).clone()),
        }
    }

    /// Whose the queue at `url` is ([`crate::tenancy`]): its tenant tag, else its policy. A
    /// sender that may not read either (a spoke role from before these reads) cannot tell: the
    /// queue is written as before, with a warning, rather than silenced.
    async fn ownership(
        &self,
        client: &aws_sdk_sqs::Client,
        url: &str,
        scope: &Scope,
        cluster: &str,
        stats: &ForwardStats,
    ) -> Result<Ownership, Delivery> {
        let unverifiable = |call: &str, code: &str| {
            tracing::warn!(queue = %url, call, code, "cannot tell whether the tenant stack made this queue: sending as before; grant the sender sqs:ListQueueTags and sqs:GetQueueAttributes on it (update the base or spoke stack)");
            Ok(Ownership::Tenant)
        };
        let failed = |call: &str, e: &dyn std::fmt::Display| {
            Err(Delivery::Failed {
                error: format!("{call} {url}: {e}"),
            })
        };
        stats.queue_ownership_calls.fetch_add(1, Ordering::Relaxed);
        match client.list_queue_tags().queue_url(url).send().await {
            Ok(out) => {
                let tags = out.tags().into_iter().flatten();
                if let Some(settled) =
                    tenancy::by_tag(tags.map(|(k, v)| (k.as_str(), v.as_str())), cluster)
                {
                    return Ok(settled);
                }
            }
            Err(e) => match e.code().filter(|c| is_denial(c)) {
                Some(code) => return unverifiable("ListQueueTags", code),
                None => return failed("ListQueueTags", &DisplayErrorContext(&e)),
            },
        }
        stats.queue_ownership_calls.fetch_add(1, Ordering::Relaxed);
        let policy = match client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::Policy)
            .send()
            .await
        {
            Ok(out) => out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::Policy))
                .cloned(),
            Err(e) => match e.code().filter(|c| is_denial(c)) {
                Some(code) => return unverifiable("GetQueueAttributes", code),
                None => return failed("GetQueueAttributes", &DisplayErrorContext(&e)),
            },
        };
        let sender = match self.accounts.sender(scope) {
            Some(Sender::Spoke { role_arn, .. }) => Some(role_arn),
            _ => self.router_role_arn.clone(),
        };
        Ok(tenancy::by_policy(policy.as_deref(), sender.as_deref()))
    }

    /// `error` as the denial it is when its code says the sender may not write `queue`.
    fn denial(
        &self,
        queue: &str,
        destination: &Destination,
        error: &impl ProvideErrorMetadata,
    ) -> Option<Denial> {
        let code = error.code().filter(|c| is_denial(c))?;
        Some(Denial {
            queue: queue.to_owned(),
            sender: self.sender(destination),
            code: code.to_owned(),
            message: error.message().unwrap_or_default().to_owned(),
        })
    }

    /// Who the router is when it writes `destination`, for messages.
    fn sender(&self, destination: &Destination) -> String {
        let scope = match destination {
            Destination::Cluster { scope, .. } => scope.clone(),
            Destination::DeadLetter => Scope::default(),
        };
        self.accounts
            .sender(&scope)
            .map_or_else(|| "an unknown principal".to_owned(), |s| s.to_string())
    }
}

struct UrlExpiry {
    ttl: Duration,
}

impl Expiry<(Scope, Arc<str>), QueueUrl> for UrlExpiry {
    fn expire_after_create(
        &self,
        _key: &(Scope, Arc<str>),
        url: &QueueUrl,
        _at: std::time::Instant,
    ) -> Option<Duration> {
        Some(match url {
            QueueUrl::Found(_) => self.ttl,
            // Short, so a tenant queue created while events flow is picked up in seconds.
            QueueUrl::Missing => MISSING_QUEUE_RECHECK,
            QueueUrl::Foreign(_) => FOREIGN_RECHECK,
        })
    }
}
