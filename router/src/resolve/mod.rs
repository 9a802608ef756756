//! Resolve: which cluster owns each instance.
//!
//! The second step of the data path. [`tags`] holds the policy (tags → owner, pure), [`lookup`]
//! the two AWS paths that read an instance's tags, [`hedge`] when to use which, and [`Resolver`]
//! what keeps lookups few and answers coming while AWS fails:
//!
//! * a cache of instance → owner: ownership never changes during an instance's life, so
//!   positives live long (`CACHE_TTL_SECONDS`), while "not ours" lives briefly
//!   (`NEGATIVE_CACHE_TTL_SECONDS`) because tags can land just after an instance starts;
//! * every miss of a place goes out together, at most 200 ids per lookup ([`Resolver::chunk`]);
//! * DescribeInstances first, hedged: when it fails or is later than its recent p95, GetResources
//!   (which does not share EC2's throttle) is asked too and the first answer that stands is used.
//!   After consecutive EC2 failures the scope asks GetResources first for a while, so a throttled
//!   EC2 is not hammered by the router while every Karpenter of the account needs it ([`hedge`]);
//! * stale-if-error: an instance's owner never changes and instance ids are never reused, so when
//!   every path fails, the last owner seen (kept for [`LAST_KNOWN_HORIZON`] after its positive
//!   answer stopped being fresh) is still AWS's answer, and is served (and counted) instead of a
//!   failure.
//!
//! Lookups run in the instance's own account and region, as the sender [`Accounts`] names there.

pub mod hedge;
pub mod lookup;
pub mod tags;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures_util::future::{Either, join_all};
use tokio::time::Instant;

use self::hedge::{Ec2Health, Raced, race};
pub use self::{
    hedge::{HedgeDelay, LookupConfig},
    lookup::{LookupCalls, MAX_ARNS_PER_GET_RESOURCES, MAX_IDS_PER_DESCRIBE, Path},
    tags::{ClusterTagKey, Owner, TagRules},
};
use crate::{
    accounts::{Accounts, Place, Unreachable},
    aws::{Aws, CallError, Session},
    cache::TtlCache,
    event::{IgnoreReason, InstanceId},
};

/// How long a positive answer stays available as a stale answer after it stopped being fresh.
pub const LAST_KNOWN_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long the resolver (and the forwarder's queue destinations) trust an answer;
/// `Config::cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// How long "instance i-… belongs to cluster c" is trusted. Ownership never changes during an
    /// instance's life, so this only bounds memory for instances that are long gone.
    pub ttl: Duration,
    /// How long "not ours" is trusted: short, because tags may land just after launch.
    pub negative_ttl: Duration,
    pub max_entries: u64,
}

/// An instance as seen from the place its event was admitted into.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub place: Place,
    pub instance: InstanceId,
}

/// A lookup that failed on every path: transient, the records that needed it are retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Unreachable(#[from] Unreachable),
    #[error("instance lookup failed: {0}")]
    Failed(String),
}

/// Counters of one or more lookups.
#[derive(Debug, Default)]
pub struct LookupStats {
    /// Shared with the DescribeInstances calls a hedge outran, which run on to their end.
    pub calls: Arc<LookupCalls>,
    /// Lookups that asked the Tagging API because EC2 failed or was late (not those that asked
    /// it first while EC2 was suspected).
    pub hedged: AtomicU64,
    /// Answers served from an expired entry because every lookup path failed.
    pub stale_answers: AtomicU64,
}

/// What [`Resolver::resolve`] found, and what it cost.
#[derive(Debug, Default)]
pub struct Resolution {
    pub owners: HashMap<InstanceKey, Result<Owner, Arc<ResolveError>>>,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub describe_calls: u64,
    pub get_resources_calls: u64,
    pub hedged: u64,
    pub stale_answers: u64,
}

/// An answer, the path that gave it (it decides how long the answer is kept) and until when it
/// is fresh.
#[derive(Debug, Clone)]
struct Known {
    owner: Owner,
    fresh_until: Instant,
}

/// One chunk's lookup. An id missing from `answers` was not found on `path`, unless `unasked`
/// says it could not be asked there (then its lookup failed, with that error).
#[derive(Debug)]
struct Looked {
    answers: HashMap<InstanceId, Owner>,
    path: Path,
    unasked: Option<Arc<ResolveError>>,
}

pub struct Resolver<A> {
    aws: Arc<A>,
    accounts: Arc<Accounts<A>>,
    rules: TagRules,
    config: CacheConfig,
    known: TtlCache<InstanceKey, Known>,
    ec2: Arc<Ec2Health>,
}

impl<A: Aws> Resolver<A> {
    pub fn new(
        aws: Arc<A>,
        accounts: Arc<Accounts<A>>,
        rules: TagRules,
        cache: &CacheConfig,
        lookup: LookupConfig,
    ) -> Self {
        Self {
            aws,
            accounts,
            rules,
            config: *cache,
            known: TtlCache::new(cache.max_entries as usize),
            ec2: Arc::new(Ec2Health::new(lookup)),
        }
    }

    /// Splits `keys` into fresh answers and misses (each key once).
    pub fn cached(
        &self,
        keys: impl IntoIterator<Item = InstanceKey>,
    ) -> (Vec<(InstanceKey, Owner)>, Vec<InstanceKey>) {
        let now = Instant::now();
        let mut hits = Vec::new();
        let mut misses = Vec::new();
        let mut seen = HashSet::new();
        for key in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            match self.known.get(&key).filter(|k| now < k.fresh_until) {
                Some(known) => hits.push((key, known.owner)),
                None => misses.push(key),
            }
        }
        (hits, misses)
    }

    /// Groups misses into lookups: one place each, at most [`MAX_IDS_PER_DESCRIBE`] ids, in a
    /// stable order.
    pub fn chunk(mut misses: Vec<InstanceKey>) -> Vec<Vec<InstanceKey>> {
        misses.sort();
        misses.dedup();
        let mut chunks = Vec::new();
        for group in misses.chunk_by(|a, b| a.place == b.place) {
            chunks.extend(group.chunks(MAX_IDS_PER_DESCRIBE).map(<[_]>::to_vec));
        }
        chunks
    }

    /// Looks up one chunk (keys of one place) and keeps each answer. A key every path failed
    /// for gets its last known owner if there is one, else the error.
    pub async fn look_up(
        &self,
        chunk: &[InstanceKey],
        stats: &LookupStats,
    ) -> Vec<(InstanceKey, Result<Owner, Arc<ResolveError>>)> {
        let Some(first) = chunk.first() else {
            return Vec::new();
        };
        let ids: Vec<InstanceId> = chunk.iter().map(|k| k.instance.clone()).collect();
        let looked = self
            .look_up_ids(&first.place, &ids, stats)
            .await
            .unwrap_or_else(|error| Looked {
                answers: HashMap::new(),
                path: Path::DescribeInstances,
                unasked: Some(Arc::new(error)),
            });
        chunk
            .iter()
            .map(|key| {
                let owner = match (looked.answers.get(&key.instance), &looked.unasked) {
                    (Some(owner), _) => {
                        self.keep(key, owner, looked.path);
                        Ok(owner.clone())
                    }
                    (None, None) => {
                        let unknown = Owner::NotOurs(IgnoreReason::UnknownInstance);
                        self.keep(key, &unknown, looked.path);
                        Ok(unknown)
                    }
                    (None, Some(error)) => self.last_known(key, error, stats),
                };
                (key.clone(), owner)
            })
            .collect()
    }

    /// Stale-if-error: the last owner seen for `key`, if any, else the lookup's error.
    fn last_known(
        &self,
        key: &InstanceKey,
        error: &Arc<ResolveError>,
        stats: &LookupStats,
    ) -> Result<Owner, Arc<ResolveError>> {
        let last = self.known.get(key).and_then(|k| match k.owner {
            Owner::Cluster(c) => Some(c),
            Owner::NotOurs(_) => None,
        });
        match last {
            Some(cluster) => {
                stats.stale_answers.fetch_add(1, Ordering::Relaxed);
                tracing::info!(scope = %key.place.scope, instance = %key.instance, cluster = %cluster, %error, "every lookup failed: serving the last known owner");
                Ok(Owner::Cluster(cluster))
            }
            None => Err(error.clone()),
        }
    }

    /// Keeps an answer for as long as what it says can be trusted.
    fn keep(&self, key: &InstanceKey, owner: &Owner, path: Path) {
        let fresh_for = match (owner, path) {
            (Owner::Cluster(_), _) => self.config.ttl,
            // GetResources leaves out untagged and unknown instances alike, and may lag a launch:
            // such an answer is used once, never kept.
            (Owner::NotOurs(IgnoreReason::UnknownInstance), Path::GetResources) => Duration::ZERO,
            (Owner::NotOurs(_), _) => self.config.negative_ttl,
        };
        let kept_for = match owner {
            Owner::Cluster(_) => fresh_for + LAST_KNOWN_HORIZON,
            Owner::NotOurs(_) => fresh_for,
        };
        let known = Known {
            owner: owner.clone(),
            fresh_until: Instant::now() + fresh_for,
        };
        self.known.insert(key.clone(), known, kept_for);
    }

    /// Resolves every key at once: the cache, then every chunk's lookup. (The handler interleaves
    /// these steps with sending; this is the whole of it for tests and benchmarks.)
    pub async fn resolve(&self, keys: impl IntoIterator<Item = InstanceKey>) -> Resolution {
        let (hits, misses) = self.cached(keys);
        let stats = LookupStats::default();
        let mut resolution = Resolution {
            cache_hits: hits.len() as u64,
            cache_misses: misses.len() as u64,
            ..Default::default()
        };
        resolution
            .owners
            .extend(hits.into_iter().map(|(k, o)| (k, Ok(o))));
        let chunks = Self::chunk(misses);
        let looked = join_all(chunks.iter().map(|chunk| self.look_up(chunk, &stats))).await;
        resolution.owners.extend(looked.into_iter().flatten());
        resolution.describe_calls = stats.calls.describe_instances.load(Ordering::Relaxed);
        resolution.get_resources_calls = stats.calls.get_resources.load(Ordering::Relaxed);
        resolution.hedged = stats.hedged.into_inner();
        resolution.stale_answers = stats.stale_answers.into_inner();
        resolution
    }

    /// One lookup of `ids`, all of `place`: hedged from EC2 to the Tagging API, or the Tagging
    /// API first while EC2 is suspected.
    async fn look_up_ids(
        &self,
        place: &Place,
        ids: &[InstanceId],
        stats: &LookupStats,
    ) -> Result<Looked, ResolveError> {
        let session = self.accounts.session(place).await?;
        let scope = &place.scope;
        if self.ec2.suspected(scope) {
            return self.tagging_first(&session, ids, stats).await;
        }
        let hedge_after = match self.ec2.hedge_delay(scope) {
            Some(delay) => Either::Left(tokio::time::sleep(delay)),
            None => Either::Right(std::future::pending()),
        };
        let hedge = async {
            stats.hedged.fetch_add(1, Ordering::Relaxed);
            self.via_tagging(&session, ids, &stats.calls).await
        };
        let every_id =
            |answers: &HashMap<InstanceId, Owner>| ids.iter().all(|id| answers.contains_key(id));
        match race(
            self.describe(&session, ids, &stats.calls),
            hedge,
            hedge_after,
            every_id,
        )
        .await
        {
            Raced::Primary { answer, .. } => Ok(Looked {
                answers: answer,
                path: Path::DescribeInstances,
                unasked: None,
            }),
            Raced::Hedge { answer, .. } => Ok(Looked {
                answers: answer,
                path: Path::GetResources,
                unasked: None,
            }),
            Raced::BothFailed { primary, hedge } => Err(both_failed(
                [Path::DescribeInstances, Path::GetResources],
                [primary, hedge],
            )),
        }
    }

    /// While EC2 is suspected: GetResources, then DescribeInstances for the ids it did not list
    /// (untagged, or not yet indexed after a launch), or for all of them if it failed, but only as
    /// a probe ([`Ec2Health::may_probe`]); otherwise what is still unknown fails, to be retried.
    async fn tagging_first(
        &self,
        session: &Session,
        ids: &[InstanceId],
        stats: &LookupStats,
    ) -> Result<Looked, ResolveError> {
        let spared = || {
            CallError::new(
                "Ec2Suspected",
                format!(
                    "not asked: EC2 is suspected in {} and was probed less than {} s ago",
                    session.scope,
                    hedge::PROBE_INTERVAL.as_secs()
                ),
            )
        };
        let tagging_error = match self.via_tagging(session, ids, &stats.calls).await {
            Ok(mut answers) => {
                let unlisted: Vec<InstanceId> = ids
                    .iter()
                    .filter(|id| !answers.contains_key(*id))
                    .cloned()
                    .collect();
                // What the Tagging API did not list (untagged, or not indexed yet) only EC2 can
                // tell: asked if a probe is due, else those ids fail for now and are retried.
                let unasked = if unlisted.is_empty() {
                    None
                } else if !self.ec2.may_probe(&session.scope) {
                    Some(spared())
                } else {
                    match self.describe(session, &unlisted, &stats.calls).await {
                        Ok(found) => {
                            answers.extend(found);
                            return Ok(Looked {
                                answers,
                                path: Path::DescribeInstances,
                                unasked: None,
                            });
                        }
                        Err(ec2_error) => Some(ec2_error),
                    }
                };
                let unlisted = CallError::new("Unlisted", "not listed by the Tagging API");
                return Ok(Looked {
                    answers,
                    path: Path::GetResources,
                    unasked: unasked.map(|e| {
                        Arc::new(both_failed(
                            [Path::GetResources, Path::DescribeInstances],
                            [unlisted, e],
                        ))
                    }),
                });
            }
            Err(e) => e,
        };
        if !self.ec2.may_probe(&session.scope) {
            return Err(both_failed(
                [Path::GetResources, Path::DescribeInstances],
                [tagging_error, spared()],
            ));
        }
        match self.describe(session, ids, &stats.calls).await {
            Ok(answers) => Ok(Looked {
                answers,
                path: Path::DescribeInstances,
                unasked: None,
            }),
            Err(ec2_error) => Err(both_failed(
                [Path::GetResources, Path::DescribeInstances],
                [tagging_error, ec2_error],
            )),
        }
    }

    /// DescribeInstances (one call per chunk), as a task of its own: a call the hedge outran
    /// runs on to its end, so EC2's health learns its latency, or its failure or timeout.
    fn describe(
        &self,
        session: &Session,
        ids: &[InstanceId],
        calls: &Arc<LookupCalls>,
    ) -> impl Future<Output = Result<HashMap<InstanceId, Owner>, CallError>> + use<A> {
        let (aws, rules, health) = (self.aws.clone(), self.rules.clone(), self.ec2.clone());
        let (session, ids, calls) = (session.clone(), ids.to_vec(), calls.clone());
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let result = lookup::describe_instances(&*aws, &session, &rules, &ids, &calls).await;
            match &result {
                Ok(_) => health.answered(&session.scope, started.elapsed()),
                Err(error) => {
                    let suspected = health.failed(&session.scope);
                    tracing::warn!(scope = %session.scope, path = Path::DescribeInstances.label(), ids = ids.len(), %error, suspected, "lookup path failed");
                }
            }
            result
        });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(CallError::new(
                    "TaskEnded",
                    format!("the DescribeInstances task ended: {e}"),
                ))
            })
        }
    }

    async fn via_tagging(
        &self,
        session: &Session,
        ids: &[InstanceId],
        calls: &LookupCalls,
    ) -> Result<HashMap<InstanceId, Owner>, CallError> {
        let result = lookup::get_resources(&*self.aws, session, &self.rules, ids, calls).await;
        if let Err(error) = &result {
            tracing::warn!(scope = %session.scope, path = Path::GetResources.label(), ids = ids.len(), %error, "lookup path failed");
        }
        result
    }
}

fn both_failed(paths: [Path; 2], errors: [CallError; 2]) -> ResolveError {
    ResolveError::Failed(format!(
        "{}: {}; {}: {}",
        paths[0].label(),
        errors[0],
        paths[1].label(),
        errors[1]
    ))
}
