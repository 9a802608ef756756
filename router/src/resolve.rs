//! Resolve: which cluster owns each instance.
//!
//! Karpenter tags every instance it launches with its cluster (`eks:eks-cluster-name`,
//! `kubernetes.io/cluster/<name>`) and its node pool (`karpenter.sh/nodepool`). [`TagRules::owner`]
//! turns an instance's tags into an [`Owner`]; it is pure and holds the whole routing policy.
//!
//! [`Resolver`] adds the I/O around it with three properties that keep AWS calls per event low:
//!
//! * a moka cache of instance → owner: ownership never changes during an instance's life, so
//!   positives live long (`CACHE_TTL_SECONDS`), while "not ours" lives briefly
//!   (`NEGATIVE_CACHE_TTL_SECONDS`) because tags can land just after an instance starts;
//! * all misses of one call go to EC2 together, one DescribeInstances per 200 ids. The lookup uses
//!   the `instance-id` filter rather than `InstanceIds`, because one unknown id in `InstanceIds`
//!   fails the whole call with `InvalidInstanceID.NotFound`; with the filter, unknown ids are simply
//!   absent from the answer and their neighbours still resolve;
//! * concurrent misses for the same instance coalesce into one lookup (moka's `try_get_with`).
//!
//! Keys carry the event's [`Scope`] (account, region) so that a cross-account router is a change
//! to [`Resolver::ec2_for`], not to the cache or the callers.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use aws_sdk_ec2::{error::DisplayErrorContext, types::Filter};
use futures_util::{FutureExt, future::join_all};
use moka::{Expiry, future::Cache};

use crate::{
    config::CacheConfig,
    event::{IgnoreReason, InstanceId, Scope},
};

/// One tag key that can name an instance's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterTagKey {
    /// The tag's value is the cluster name (`eks:eks-cluster-name`, `aws:eks:cluster-name`).
    Value(String),
    /// The rest of the key is the cluster name and the value is `owned` or `shared`
    /// (`kubernetes.io/cluster/*`).
    Prefix(String),
}

/// How tags map to an owner: cluster tag keys in priority order, and the tag that marks an
/// instance as Karpenter-managed (`None`: any instance with a cluster tag is routed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRules {
    pub cluster_keys: Vec<ClusterTagKey>,
    pub managed_key: Option<String>,
}

/// Who an instance belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Cluster(Arc<str>),
    /// Not routed: unknown, unmanaged, or without a usable cluster tag.
    NotOurs(IgnoreReason),
}

impl TagRules {
    /// The owner an instance's tags name. The first cluster key (in configured order) that names
    /// exactly one cluster wins. Under a prefix key, `owned` beats `shared`; if several clusters
    /// still tie, that key is skipped rather than guessing, because a wrong guess would hand one
    /// tenant another tenant's instance.
    pub fn owner<'t>(&self, tags: &[(&'t str, &'t str)]) -> Owner {
        if let Some(managed) = &self.managed_key
            && !tags.iter().any(|(k, _)| k == managed)
        {
            return Owner::NotOurs(IgnoreReason::UnmanagedInstance);
        }
        for rule in &self.cluster_keys {
            let found = match rule {
                ClusterTagKey::Value(key) => tags
                    .iter()
                    .find(|(k, v)| k == key && !v.trim().is_empty())
                    .map(|(_, v)| v.trim()),
                ClusterTagKey::Prefix(prefix) => {
                    let named = |wanted: &str| -> HashSet<&'t str> {
                        tags.iter()
                            .filter(|(_, v)| *v == wanted)
                            .filter_map(|(k, _)| k.strip_prefix(prefix.as_str()))
                            .filter(|name| !name.is_empty())
                            .collect()
                    };
                    let owned = named("owned");
                    let candidates = if owned.is_empty() {
                        named("shared")
                    } else {
                        owned
                    };
                    match candidates.len() {
                        1 => candidates.into_iter().next(),
                        _ => None,
                    }
                }
            };
            if let Some(cluster) = found {
                return Owner::Cluster(Arc::from(cluster));
            }
        }
        Owner::NotOurs(IgnoreReason::NoClusterTag)
    }
}

/// An instance as seen from an event's account and region.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub scope: Scope,
    pub instance: InstanceId,
}

/// A lookup that failed after the SDK's own retries: the records that needed it are retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("DescribeInstances failed: {0}")]
pub struct ResolveError(pub String);

/// What [`Resolver::resolve`] found, and what it cost.
#[derive(Debug, Default)]
pub struct Resolution {
    pub owners: HashMap<InstanceKey, Result<Owner, Arc<ResolveError>>>,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub describe_calls: u64,
}

/// EC2 filters take at most 200 values.
pub const MAX_IDS_PER_LOOKUP: usize = 200;

pub struct Resolver {
    ec2: aws_sdk_ec2::Client,
    rules: TagRules,
    cache: Cache<InstanceKey, Owner>,
}

impl Resolver {
    pub fn new(ec2: aws_sdk_ec2::Client, rules: TagRules, cache: &CacheConfig) -> Self {
        let cache = Cache::builder()
            .max_capacity(cache.max_entries)
            .expire_after(OwnerExpiry {
                ttl: cache.ttl,
                negative_ttl: cache.negative_ttl,
            })
            .build();
        Self { ec2, rules, cache }
    }

    /// The EC2 client for a scope. Today every scope is served by the function's own account and
    /// region; serving other accounts means returning an assumed-role client here.
    fn ec2_for(&self, _scope: &Scope) -> &aws_sdk_ec2::Client {
        &self.ec2
    }

    /// Resolves every key, from the cache where possible and otherwise with batched lookups.
    /// A failed lookup fails only the keys it carried.
    pub async fn resolve(&self, keys: impl IntoIterator<Item = InstanceKey>) -> Resolution {
        let mut resolution = Resolution::default();
        let mut misses: Vec<InstanceKey> = Vec::new();
        let mut seen = HashSet::new();
        for key in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            match self.cache.get(&key).await {
                Some(owner) => {
                    resolution.cache_hits += 1;
                    resolution.owners.insert(key, Ok(owner));
                }
                None => misses.push(key),
            }
        }
        resolution.cache_misses = misses.len() as u64;
        if misses.is_empty() {
            return resolution;
        }

        // One shared lookup per (scope, chunk of 200). Each key's cache entry is initialised from
        // its chunk's lookup; a key another task is already looking up waits for that lookup
        // instead, and a chunk whose keys are all being looked up elsewhere is never sent.
        misses.sort();
        let calls = AtomicU64::new(0);
        let mut chunks = Vec::new();
        for group in misses.chunk_by(|a, b| a.scope == b.scope) {
            for chunk in group.chunks(MAX_IDS_PER_LOOKUP) {
                let scope = chunk[0].scope.clone();
                let ids: Vec<InstanceId> = chunk.iter().map(|k| k.instance.clone()).collect();
                let calls = &calls;
                let lookup = async move { self.describe(&scope, &ids, calls).await.map(Arc::new) };
                chunks.push((chunk, lookup.shared()));
            }
        }
        let inits = chunks.iter().flat_map(|(chunk, lookup)| {
            chunk.iter().map(move |key| {
                let lookup = lookup.clone();
                async move {
                    let owner = self
                        .cache
                        .try_get_with_by_ref(key, async move {
                            let owners = lookup.await?;
                            let owner = owners.get(&key.instance).cloned();
                            Ok::<_, ResolveError>(
                                owner.unwrap_or(Owner::NotOurs(IgnoreReason::UnknownInstance)),
                            )
                        })
                        .await;
                    (key.clone(), owner)
                }
            })
        });
        resolution.owners.extend(join_all(inits).await);
        resolution.describe_calls = calls.load(Ordering::Relaxed);
        resolution
    }

    /// One DescribeInstances (more if EC2 pages the answer) for at most 200 ids of one scope.
    async fn describe(
        &self,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &AtomicU64,
    ) -> Result<HashMap<InstanceId, Owner>, ResolveError> {
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(ids.iter().map(|id| id.as_str().to_owned()).collect()))
            .build();
        let mut pages = self
            .ec2_for(scope)
            .describe_instances()
            .filters(filter)
            .into_paginator()
            .send();
        let mut owners = HashMap::with_capacity(ids.len());
        let started = Instant::now();
        while let Some(page) = pages.next().await {
            calls.fetch_add(1, Ordering::Relaxed);
            let page = page.map_err(|e| ResolveError(DisplayErrorContext(&e).to_string()))?;
            for instance in page.reservations().iter().flat_map(|r| r.instances()) {
                let Some(id) = instance.instance_id().and_then(InstanceId::parse) else {
                    continue;
                };
                let tags: Vec<(&str, &str)> = instance
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?, t.value()?)))
                    .collect();
                owners.insert(id, self.rules.owner(&tags));
            }
        }
        tracing::debug!(%scope, ids = ids.len(), found = owners.len(), ms = started.elapsed().as_millis() as u64, "DescribeInstances");
        Ok(owners)
    }
}

struct OwnerExpiry {
    ttl: Duration,
    negative_ttl: Duration,
}

impl Expiry<InstanceKey, Owner> for OwnerExpiry {
    fn expire_after_create(
        &self,
        _key: &InstanceKey,
        owner: &Owner,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(match owner {
            Owner::Cluster(_) => self.ttl,
            Owner::NotOurs(_) => self.negative_ttl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> TagRules {
        crate::config::Config::from_lookup(|_| None).unwrap().tags
    }

    fn cluster(name: &str) -> Owner {
        Owner::Cluster(Arc::from(name))
    }

    #[test]
    fn karpenter_launch_tags_name_the_cluster() {
        let tags = [
            ("eks:eks-cluster-name", "alpha"),
            ("kubernetes.io/cluster/alpha", "owned"),
            ("karpenter.sh/nodepool", "default"),
            ("Name", "alpha-node"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("alpha"));
    }

    #[test]
    fn unmanaged_and_untagged_instances_are_not_ours() {
        // A managed node group instance: cluster tag, no nodepool tag.
        let mng = [
            ("eks:eks-cluster-name", "alpha"),
            ("eks:nodegroup-name", "system"),
        ];
        assert_eq!(
            defaults().owner(&mng),
            Owner::NotOurs(IgnoreReason::UnmanagedInstance)
        );
        assert_eq!(
            defaults().owner(&[]),
            Owner::NotOurs(IgnoreReason::UnmanagedInstance)
        );
        let no_cluster = [("karpenter.sh/nodepool", "default")];
        assert_eq!(
            defaults().owner(&no_cluster),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
    }

    #[test]
    fn empty_managed_key_routes_any_cluster_tagged_instance() {
        let rules = TagRules {
            managed_key: None,
            ..defaults()
        };
        assert_eq!(
            rules.owner(&[("eks:eks-cluster-name", "alpha")]),
            cluster("alpha")
        );
        assert_eq!(rules.owner(&[]), Owner::NotOurs(IgnoreReason::NoClusterTag));
    }

    #[test]
    fn keys_are_tried_in_configured_order() {
        let tags = [
            ("karpenter.sh/nodepool", "p"),
            ("aws:eks:cluster-name", "third"),
            ("kubernetes.io/cluster/second", "owned"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("second"));
        let reversed = TagRules {
            cluster_keys: defaults().cluster_keys.into_iter().rev().collect(),
            ..defaults()
        };
        assert_eq!(reversed.owner(&tags), cluster("third"));
    }

    #[test]
    fn prefix_keys_need_owned_or_shared_and_never_guess() {
        let rules = defaults();
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut tags = vec![("karpenter.sh/nodepool", "p")];
            tags.extend_from_slice(extra);
            rules.owner(&tags)
        };
        assert_eq!(with(&[("kubernetes.io/cluster/a", "shared")]), cluster("a"));
        assert_eq!(
            with(&[("kubernetes.io/cluster/a", "yes")]),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
        assert_eq!(
            with(&[("kubernetes.io/cluster/", "owned")]),
            Owner::NotOurs(IgnoreReason::NoClusterTag)
        );
        assert_eq!(
            with(&[
                ("kubernetes.io/cluster/a", "shared"),
                ("kubernetes.io/cluster/b", "owned")
            ]),
            cluster("b")
        );
        // Two owners under one key: skip it, fall through to the next key.
        let tie = [
            ("kubernetes.io/cluster/a", "owned"),
            ("kubernetes.io/cluster/b", "owned"),
        ];
        assert_eq!(with(&tie), Owner::NotOurs(IgnoreReason::NoClusterTag));
        assert_eq!(
            with(&[tie[0], tie[1], ("aws:eks:cluster-name", "c")]),
            cluster("c")
        );
    }

    #[test]
    fn blank_cluster_values_do_not_count() {
        let tags = [
            ("karpenter.sh/nodepool", "p"),
            ("eks:eks-cluster-name", " "),
            ("aws:eks:cluster-name", "real"),
        ];
        assert_eq!(defaults().owner(&tags), cluster("real"));
    }
}
