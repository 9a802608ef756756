//! One execution environment's view of the organisation's AWS: the router's [`Aws`] seam, each
//! call passed through the simulation's layers (its quota's token, its fault, its latency, its
//! count) and then answered by the one model ([`WorldAws`](aws_world::router::WorldAws)), which
//! decides what AWS decides: whether the session may act there, what exists, what a send stores.

use std::{sync::Arc, time::SystemTime};

use router_core::{
    aws::{
        Aws, CallError, Credentials, DescribeInstances, EntryResult, InstanceFilter, InstancePage,
        SendEntry, Session, Tagged, VisibilityEntry,
    },
    event::InstanceId,
};
use tokio::time::Instant;

use aws_world::router::invalid_receipt;

use super::{Arrival, World};
use crate::{bucket::Bucket, quotas};

/// One execution environment's seam onto the [`World`].
pub struct EnvAws {
    pub env: usize,
    pub world: Arc<World>,
}

/// The (account, region) a session acts in, as the layers key their buckets.
fn scope_key(at: &Session) -> (String, String) {
    (at.scope.account.to_string(), at.scope.region.to_string())
}

fn throttled(code: &str, message: &str) -> CallError {
    CallError::new(code, message)
}

impl World {
    fn count(&self, action: &'static str) {
        *self.layers().counts.by_action.entry(action).or_default() += 1;
    }

    /// A call no quota of the storm's meters: counted, then its latency.
    async fn unmetered(&self, action: &'static str, latency: quotas::Latency) {
        self.count(action);
        self.after(latency).await;
    }

    /// Whether a throttling burst ([`super::Injected::throttled`]) holds now.
    fn bursting(&self) -> bool {
        let window = self.layers().injected.throttled;
        self.within(window)
    }

    /// A token from `pick`'s (account, region) bucket, made full at `rate` on first use: `false`
    /// when AWS throttles the call (a burst, or the bucket empty).
    fn token(
        &self,
        key: &(String, String),
        rate: quotas::Rate,
        pick: fn(&mut super::Layers) -> &mut std::collections::BTreeMap<(String, String), Bucket>,
    ) -> bool {
        let burst = self.bursting();
        let mut layers = self.layers();
        !burst
            && pick(&mut layers)
                .entry(key.clone())
                .or_insert_with(|| Bucket::new(rate.burst, rate.per_second))
                .take()
    }
}

impl Aws for EnvAws {
    fn now(&self) -> SystemTime {
        self.world.now_wall()
    }

    fn jitter(&self) -> f64 {
        self.world.jitter()
    }

    async fn assume_role(&self, role_arn: &str) -> Result<Credentials, CallError> {
        let w = &self.world;
        w.count("AssumeRole");
        let account = role_arn.split(':').nth(4).unwrap_or_default().to_owned();
        let (revoked, burst) = {
            let layers = w.layers();
            let revoked = layers.injected.revoked.clone();
            (
                revoked
                    .filter(|(a, ..)| *a == account)
                    .map(|(_, f, t)| (f, t)),
                layers.injected.throttled,
            )
        };
        if w.within(revoked) {
            w.after(quotas::ASSUME_ROLE).await;
            return Err(CallError::new(
                "AccessDenied",
                format!("not authorized to perform sts:AssumeRole on {role_arn}"),
            ));
        }
        let allowed = !w.within(burst) && {
            let mut layers = w.layers();
            let ok = layers.sts.take();
            if ok {
                *layers
                    .counts
                    .assume_role
                    .entry((self.env, account))
                    .or_default() += 1;
            } else {
                layers.counts.sts_throttled += 1;
            }
            ok
        };
        if !allowed {
            w.after(quotas::THROTTLED).await;
            return Err(throttled("Throttling", "Rate exceeded"));
        }
        w.after(quotas::ASSUME_ROLE).await;
        w.model.assume_role(role_arn).await
    }

    async fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> Result<InstancePage, CallError> {
        let w = &self.world;
        w.count("DescribeInstances");
        let key = scope_key(at);
        let allowed = w.token(&key, w.quotas.describe_instances, |l| &mut l.ec2);
        {
            let mut layers = w.layers();
            if allowed {
                let now = Instant::now();
                layers
                    .counts
                    .router_describe
                    .entry(key)
                    .or_default()
                    .push(now);
            } else {
                layers.counts.router_throttled += 1;
            }
        }
        if !allowed {
            w.after(quotas::THROTTLED).await;
            return Err(throttled("RequestLimitExceeded", "Request limit exceeded."));
        }
        let nodes = match query.filter {
            InstanceFilter::Ids(ids) => Some((ids.len() as u64, w.nodes_among(ids))),
            InstanceFilter::TagKey(_) => None,
        };
        {
            let mut layers = w.layers();
            match nodes {
                Some((ids, nodes)) => {
                    layers.counts.ids_looked_up += ids;
                    layers.counts.node_ids_looked_up += nodes;
                }
                None => layers.counts.sweep_pages += 1,
            }
        }
        w.after(quotas::DESCRIBE_INSTANCES).await;
        w.model.describe_instances(at, query).await
    }

    async fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> Result<Vec<Tagged>, CallError> {
        let w = &self.world;
        w.count("GetResources");
        let allowed = w.token(&scope_key(at), w.quotas.get_resources, |l| &mut l.tagging);
        if !allowed {
            w.layers().counts.tagging_throttled += 1;
            w.after(quotas::THROTTLED).await;
            return Err(throttled("ThrottledException", "Rate exceeded"));
        }
        w.after(quotas::GET_RESOURCES).await;
        w.model.get_resources(at, ids).await
    }

    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world
            .unmetered("GetQueueUrl", quotas::SQS_SMALL_CALL)
            .await;
        self.world.model.get_queue_url(at, name).await
    }

    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        self.world
            .unmetered("ListQueueTags", quotas::SQS_SMALL_CALL)
            .await;
        self.world.model.list_queue_tags(at, url).await
    }

    async fn get_queue_policy(&self, at: &Session, url: &str) -> Result<Option<String>, CallError> {
        self.world
            .unmetered("GetQueueAttributes", quotas::SQS_SMALL_CALL)
            .await;
        self.world.model.get_queue_policy(at, url).await
    }

    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world.unmetered("GetRole", quotas::GET_ROLE).await;
        self.world.model.get_role_id(at, name).await
    }

    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world
            .unmetered("GetParameter", quotas::GET_PARAMETER)
            .await;
        self.world.model.get_parameter(at, name).await
    }

    /// Sent as the model stores it; every copy stored in a cluster's queue is an arrival. An
    /// answer the run loses ([`super::Injected::lost_answers`]) reaches the router as a timeout,
    /// the messages stored all the same.
    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let w = &self.world;
        w.unmetered("SendMessageBatch", quotas::SEND_MESSAGE_BATCH)
            .await;
        let lost = {
            let mut layers = w.layers();
            layers.sends += 1;
            let n = layers.sends;
            layers.injected.lost_answers.contains(&n)
        };
        let results = w.model.send_message_batch(at, url, entries).await?;
        if let Some(&cluster) = w.clusters_by_url.get(url) {
            let now = Instant::now();
            let mut layers = w.layers();
            for (entry, result) in entries.iter().zip(&results) {
                if matches!(result, EntryResult::Ok { .. }) {
                    layers.arrivals.push(Arrival {
                        body: entry.body.to_owned(),
                        cluster,
                        at: now,
                    });
                }
            }
        }
        if lost {
            return Err(CallError::new(
                CallError::TIMEOUT,
                "no answer within the attempt timeout",
            ));
        }
        Ok(results)
    }

    /// A hand-back: the mapping's queues are the simulation's ([`crate::ingest`]).
    async fn change_message_visibility_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        let w = &self.world;
        w.unmetered("ChangeMessageVisibilityBatch", quotas::SQS_SMALL_CALL)
            .await;
        if !w.mapping_urls.iter().any(|u| u == url) {
            return w
                .model
                .change_message_visibility_batch(at, url, entries)
                .await;
        }
        Ok(entries
            .iter()
            .map(|e| {
                let hidden = std::time::Duration::from_secs(e.timeout_secs.into());
                if w.ingest.change_visibility(e.receipt_handle, hidden) {
                    EntryResult::Ok {
                        id: e.id.to_owned(),
                    }
                } else {
                    invalid_receipt(e)
                }
            })
            .collect())
    }
}
