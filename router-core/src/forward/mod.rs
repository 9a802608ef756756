//! Forward: put messages into SQS queues and say, for each one, what happened to it.
//!
//! The third step of the data path. Messages go to a cluster's Karpenter queue or to the
//! dead-letter queue. A cluster's queue is found and judged once and the answer kept
//! ([`destinations`]: only a queue its tenant stack made is written; a missing queue is lost or
//! not onboarded as the tenant record says), with the event kinds its cluster takes: a copy of a
//! kind it declined is [`Delivery::Declined`], never sent. Sending is planned purely
//! ([`plan_batches`]: per destination, at most 10 entries and 256 KiB per SendMessageBatch) and
//! every destination goes its own way: one whose queue cannot be found or written holds back none
//! of the others.
//!
//! SendMessageBatch can answer 200 and still have failed some entries, so every entry's result is
//! read: entries SQS refused as the sender's fault are [`Delivery::Rejected`], the others that
//! failed are [`Delivery::Failed`] (the handler retries them, [`crate::retry`]), and nothing is
//! [`Delivery::Sent`] unless SQS listed it as successful. A call SQS refuses because the sender may
//! not write the queue (AccessDenied, or a KMS key it may not use) is a configuration error, not a
//! brownout: [`Delivery::Denied`] names the queue, the principal and the fix. Work still running at
//! the deadline is abandoned and reported as [`Delivery::Unfinished`].

mod batch;
mod delivery;
pub mod destinations;
#[cfg(test)]
mod tests;

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use futures_util::{StreamExt, future::BoxFuture, stream::FuturesUnordered};
use tokio::{sync::Semaphore, time::Instant};

use self::destinations::Known;
pub use self::{
    batch::{Destination, MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, Message, plan_batches},
    delivery::{Delivery, Denial},
    destinations::MISSING_QUEUE_RECHECK,
};
use crate::{
    accounts::{Accounts, Place},
    aws::{Aws, EntryResult, SendEntry, Session},
    cache::TtlCache,
    config::QueueNameTemplate,
    event::Kinds,
    resolve::CacheConfig,
};

/// Destinations being found and SendMessageBatch calls in flight at once: enough to send to every
/// cluster of a storm together, few enough not to time out on SQS's (or an emulator's) latency.
const MAX_IN_FLIGHT: usize = 32;

/// A count shared by the concurrent calls of one delivery.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Calls one or more [`Forwarder::deliver`]s made.
#[derive(Debug, Default)]
pub struct ForwardStats {
    pub send_message_batch_calls: Counter,
    pub get_queue_url_calls: Counter,
    /// ListQueueTags and GetQueueAttributes: whose a found queue is ([`crate::tenancy`]).
    pub queue_ownership_calls: Counter,
    /// GetParameter: whether a cluster without a queue is onboarded.
    pub tenant_record_calls: Counter,
}

pub struct Forwarder<A> {
    aws: Arc<A>,
    accounts: Arc<Accounts<A>>,
    queue_names: QueueNameTemplate,
    dead_letter: Option<Arc<str>>,
    /// The function's own role: the sender a tenant queue from before the tenant tag admits at
    /// home.
    router_role_arn: Option<String>,
    ttl: std::time::Duration,
    known: TtlCache<(Place, Arc<str>), Known>,
}

/// A job of one delivery, finished.
enum Step {
    /// Destination `d` was found (its session, URL and the kinds it takes), or why its copies
    /// are not sent.
    Found {
        d: usize,
        found: Result<(Session, Arc<str>, Kinds), Delivery>,
    },
    /// A batch's deliveries.
    Sent {
        batch: Vec<usize>,
        deliveries: Vec<Delivery>,
    },
}

impl<A: Aws> Forwarder<A> {
    pub fn new(
        aws: Arc<A>,
        accounts: Arc<Accounts<A>>,
        queue_names: QueueNameTemplate,
        dead_letter: Option<String>,
        router_role_arn: Option<String>,
        cache: &CacheConfig,
    ) -> Self {
        Self {
            aws,
            accounts,
            queue_names,
            dead_letter: dead_letter.map(Arc::from),
            router_role_arn,
            ttl: cache.ttl,
            known: TtlCache::new(10_000),
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
        let batches = plan_batches(messages);
        let mut destinations: Vec<(&Destination, Vec<Vec<usize>>)> = Vec::new();
        for batch in batches {
            let destination = &messages[batch[0]].destination;
            match destinations.iter_mut().find(|(d, _)| *d == destination) {
                Some((_, of)) => of.push(batch),
                None => destinations.push((destination, vec![batch])),
            }
        }
        // Finding a destination (its calls, when not cached) and sending share one bound.
        let in_flight = Semaphore::new(MAX_IN_FLIGHT);
        let mut jobs: FuturesUnordered<BoxFuture<'_, Step>> = destinations
            .iter()
            .enumerate()
            .map(|(d, (destination, _))| -> BoxFuture<'_, Step> {
                let in_flight = &in_flight;
                Box::pin(async move {
                    let _permit = in_flight.acquire().await;
                    Step::Found {
                        d,
                        found: self.find(destination, stats).await,
                    }
                })
            })
            .collect();
        // Each result is recorded as it comes, so a deadline loses only what was unfinished.
        while let Ok(Some(step)) = tokio::time::timeout_at(deadline, jobs.next()).await {
            match step {
                Step::Found { d, found: Err(why) } => {
                    for &i in destinations[d].1.iter().flatten() {
                        outcomes[i] = why.clone();
                    }
                }
                Step::Found {
                    d,
                    found: Ok((session, url, kinds)),
                } => {
                    let (destination, of) = &destinations[d];
                    for planned in of {
                        // A copy of a kind its cluster declined is answered here, never sent.
                        let mut batch = Vec::with_capacity(planned.len());
                        for &i in planned {
                            match messages[i].kind.filter(|k| !kinds.contains(*k)) {
                                Some(kind) => outcomes[i] = Delivery::Declined { kind },
                                None => batch.push(i),
                            }
                        }
                        if batch.is_empty() {
                            continue;
                        }
                        let (session, url, in_flight) = (session.clone(), url.clone(), &in_flight);
                        jobs.push(Box::pin(async move {
                            let _permit = in_flight.acquire().await;
                            let deliveries = self
                                .send_batch(&session, &url, destination, messages, &batch, stats)
                                .await;
                            Step::Sent { batch, deliveries }
                        }));
                    }
                }
                Step::Sent { batch, deliveries } => {
                    for (i, delivery) in batch.into_iter().zip(deliveries) {
                        outcomes[i] = delivery;
                    }
                }
            }
        }
        outcomes
    }

    /// The session and queue URL of a destination, and the kinds it takes: the cluster's queue
    /// in its own account and region, or the dead-letter queue in the function's own.
    async fn find(
        &self,
        destination: &Destination,
        stats: &ForwardStats,
    ) -> Result<(Session, Arc<str>, Kinds), Delivery> {
        let (place, cluster) = match destination {
            Destination::DeadLetter { home } => {
                let url = self.dead_letter.clone().ok_or_else(|| Delivery::Failed {
                    error: "no DEAD_LETTER_QUEUE_URL configured".into(),
                })?;
                let session = self
                    .accounts
                    .session(home)
                    .await
                    .map_err(Delivery::Unreachable)?;
                return Ok((session, url, Kinds::ALL));
            }
            Destination::Cluster { place, cluster } => (place, cluster),
        };
        let Some(queue) = self.queue_names.queue_name(cluster) else {
            return Err(Delivery::NoTenantQueue {
                queue: format!(
                    "{}{cluster}… (not a valid SQS queue name)",
                    self.queue_names.prefix()
                ),
                foreign: None,
            });
        };
        let session = self
            .accounts
            .session(place)
            .await
            .map_err(Delivery::Unreachable)?;
        let key = (place.clone(), cluster.clone());
        let known = match self.known.get(&key) {
            Some(known) => known,
            None => {
                let known = self
                    .look_up(&session, place, &queue, cluster, stats)
                    .known()
                    .await?;
                self.known
                    .insert(key, known.clone(), known.lifetime(self.ttl));
                known
            }
        };
        known.url(&queue).map(|(url, kinds)| (session, url, kinds))
    }

    /// One SendMessageBatch, and what became of each of its entries.
    async fn send_batch(
        &self,
        session: &Session,
        url: &str,
        destination: &Destination,
        messages: &[Message],
        batch: &[usize],
        stats: &ForwardStats,
    ) -> Vec<Delivery> {
        let ids: Vec<String> = (0..batch.len()).map(|p| p.to_string()).collect();
        let entries: Vec<SendEntry<'_>> = batch
            .iter()
            .zip(&ids)
            .map(|(&i, id)| SendEntry {
                id,
                body: &messages[i].body,
                attributes: &messages[i].attributes,
            })
            .collect();
        stats.send_message_batch_calls.inc();
        let results = match self.aws.send_message_batch(session, url, &entries).await {
            Ok(results) => results,
            Err(e) => {
                let delivery = match destination {
                    Destination::Cluster { place, cluster } if e.is_missing_queue() => {
                        self.lost(session, place, cluster, stats).await
                    }
                    Destination::DeadLetter { .. } if e.is_missing_queue() => {
                        Delivery::QueueMissing {
                            queue: url.to_owned(),
                        }
                    }
                    Destination::Cluster { place, .. }
                    | Destination::DeadLetter { home: place } => {
                        destinations::failed(place, url, "SendMessageBatch", e)
                    }
                };
                return vec![delivery; batch.len()];
            }
        };
        let mut deliveries = vec![
            Delivery::Failed {
                error: "SQS returned no result for the entry".into()
            };
            batch.len()
        ];
        for result in results {
            let (id, delivery) = match result {
                EntryResult::Ok { id } => (id, Delivery::Sent),
                EntryResult::Failed(f) if f.sender_fault => (
                    f.id,
                    Delivery::Rejected {
                        code: f.code,
                        message: f.message,
                    },
                ),
                EntryResult::Failed(f) => (
                    f.id,
                    Delivery::Failed {
                        error: format!("{}: {}", f.code, f.message),
                    },
                ),
            };
            if let Some(p) = id.parse::<usize>().ok().filter(|p| *p < batch.len()) {
                deliveries[p] = delivery;
            }
        }
        deliveries
    }

    /// A known queue that SQS says is gone: forgotten, and judged again by its tenant record.
    async fn lost(
        &self,
        session: &Session,
        place: &Place,
        cluster: &Arc<str>,
        stats: &ForwardStats,
    ) -> Delivery {
        let key = (place.clone(), cluster.clone());
        self.known.remove(&key);
        let Some(queue) = self.queue_names.queue_name(cluster) else {
            return Delivery::Failed {
                error: format!("no valid queue name for {cluster}"),
            };
        };
        match self
            .look_up(session, place, &queue, cluster, stats)
            .missing()
            .await
        {
            Ok(known) => {
                self.known
                    .insert(key, known.clone(), known.lifetime(self.ttl));
                known.url(&queue).err().unwrap_or(Delivery::Failed {
                    // Deleted and made again while the batch was on its way: the queue found now
                    // is known, and the retry writes it.
                    error: format!(
                        "queue {queue} was gone when this batch was sent, and is there again"
                    ),
                })
            }
            Err(delivery) => delivery,
        }
    }

    fn look_up<'a>(
        &'a self,
        session: &'a Session,
        place: &'a Place,
        queue: &'a str,
        cluster: &'a str,
        stats: &'a ForwardStats,
    ) -> destinations::LookUp<'a, A> {
        destinations::LookUp {
            aws: &*self.aws,
            session,
            place,
            queue,
            cluster,
            router_role_arn: self.router_role_arn.as_deref(),
            stats,
        }
    }
}
