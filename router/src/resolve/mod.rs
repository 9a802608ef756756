//! Resolve: which cluster owns each instance.
//!
//! The second step of the data path. [`tags`] holds the policy (tags → owner, pure), [`lookup`]
//! the two AWS paths that read an instance's tags, [`hedge`] when to use which, and [`Resolver`]
//! what keeps lookups few and answers coming while AWS fails:
//!
//! * a moka cache of instance → owner: ownership never changes during an instance's life, so
//!   positives live long (`CACHE_TTL_SECONDS`), while "not ours" lives briefly
//!   (`NEGATIVE_CACHE_TTL_SECONDS`) because tags can land just after an instance starts;
//! * every miss of a scope goes out together, at most 200 ids per lookup ([`Resolver::chunk`]);
//!   concurrent misses for the same instance share one lookup (moka's `try_get_with`);
//! * DescribeInstances first, hedged: when it fails or is later than its recent p95, GetResources
//!   (which does not share EC2's throttle) is asked too and the first answer that stands is used.
//!   After consecutive EC2 failures the scope asks GetResources first for a while, so a throttled
//!   EC2 is not hammered by the router while every Karpenter of the account needs it ([`hedge`]);
//! * stale-if-error: an instance's owner never changes and instance ids are never reused, so when
//!   every path fails, the last owner seen (kept for [`LAST_KNOWN_HORIZON`] after its positive
//!   entry expired) is still a correct answer, and is served (and counted) instead of a failure.
//!
//! Keys carry the event's [`Scope`]: lookups run in the instance's own account and region, with
//! the clients [`Accounts`] hands out.

pub mod hedge;
pub mod lookup;
pub mod tags;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures_util::{
    FutureExt,
    future::{Either, join_all},
};
use moka::{Expiry, future::Cache};

use self::hedge::{Ec2Health, Raced, race};
pub use self::{
    hedge::{HedgeDelay, LookupConfig},
    lookup::{LookupCalls, MAX_ARNS_PER_GET_RESOURCES, MAX_IDS_PER_DESCRIBE, Path},
    tags::{ClusterTagKey, Owner, TagRules},
};
use crate::{
    accounts::{Accounts, Clients, Unreachable},
    event::{IgnoreReason, InstanceId, Scope},
};

/// How long a positive answer stays available as a stale answer after it expired.
pub const LAST_KNOWN_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long the resolver (and the forwarder's queue URLs) trust an answer; `Config::cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// How long "instance i-… belongs to cluster c" is trusted. Ownership never changes during an
    /// instance's life, so this only bounds memory for instances that are long gone.
    pub ttl: Duration,
    /// How long "not ours" is trusted: short, because tags may land just after launch.
    pub negative_ttl: Duration,
    pub max_entries: u64,
}

/// An instance as seen from an event's account and region.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub scope: Scope,
    pub instance: InstanceId,
}

/// A lookup that failed on every path, after the SDK's own retries: transient, the records that
/// needed it are retried.
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

/// A cached answer, and the path that gave it (it decides how long the answer is kept).
#[derive(Debug, Clone)]
struct Answer {
    owner: Owner,
    path: Path,
}

/// One chunk's lookup, shared by the keys it answers. An id missing from `answers` was not found
/// on `path`.
#[derive(Debug)]
struct Looked {
    answers: HashMap<InstanceId, Answer>,
    path: Path,
}

pub struct Resolver {
    accounts: Arc<Accounts>,
    rules: TagRules,
    fresh: Cache<InstanceKey, Answer>,
    last_known: Cache<InstanceKey, Arc<str>>,
    ec2: Arc<Ec2Health>,
}

impl Resolver {
    pub fn new(
        accounts: Arc<Accounts>,
        rules: TagRules,
        cache: &CacheConfig,
        lookup: LookupConfig,
    ) -> Self {
        let fresh = Cache::builder()
            .max_capacity(cache.max_entries)
            .expire_after(AnswerExpiry {
                ttl: cache.ttl,
                negative_ttl: cache.negative_ttl,
            })
            .build();
        let last_known = Cache::builder()
            .max_capacity(cache.max_entries)
            .time_to_live(cache.ttl + LAST_KNOWN_HORIZON)
            .build();
        Self {
            accounts,
            rules,
            fresh,
            last_known,
            ec2: Arc::new(Ec2Health::new(lookup)),
        }
    }

    /// Splits `keys` into cache answers and misses (each key once).
    pub async fn cached(
        &self,
        keys: impl IntoIterator<Item = InstanceKey>,
    ) -> (Vec<(InstanceKey, Owner)>, Vec<InstanceKey>) {
        let mut hits = Vec::new();
        let mut misses = Vec::new();
        let mut seen = HashSet::new();
        for key in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            match self.fresh.get(&key).await {
                Some(answer) => hits.push((key, answer.owner)),
                None => misses.push(key),
            }
        }
        (hits, misses)
    }

    /// Groups misses into lookups: one scope each, at most [`MAX_IDS_PER_DESCRIBE`] ids.
    pub fn chunk(mut misses: Vec<InstanceKey>) -> Vec<Vec<InstanceKey>> {
        misses.sort();
        misses.dedup();
        let mut chunks = Vec::new();
        for group in misses.chunk_by(|a, b| a.scope == b.scope) {
            chunks.extend(group.chunks(MAX_IDS_PER_DESCRIBE).map(<[_]>::to_vec));
        }
        chunks
    }

    /// Looks up one chunk (keys of one scope). Each key's cache entry is initialised from the
    /// chunk's lookup; a key another task is already looking up waits for that lookup instead.
    /// A key every path failed for gets its last known owner if there is one, else the error.
    pub async fn look_up(
        &self,
        chunk: &[InstanceKey],
        stats: &LookupStats,
    ) -> Vec<(InstanceKey, Result<Owner, Arc<ResolveError>>)> {
        let Some(first) = chunk.first() else {
            return Vec::new();
        };
        let scope = first.scope.clone();
        let ids: Vec<InstanceId> = chunk.iter().map(|k| k.instance.clone()).collect();
        let lookup =
            async move { self.look_up_ids(&scope, &ids, stats).await.map(Arc::new) }.shared();
        let answers = chunk.iter().map(|key| {
            let lookup = lookup.clone();
            async move {
                let answer = self
                    .fresh
                    .try_get_with_by_ref(key, async move {
                        let looked = lookup.await?;
                        let answer = looked.answers.get(&key.instance).cloned().unwrap_or(Answer {
                            owner: Owner::NotOurs(IgnoreReason::UnknownInstance),
                            path: looked.path,
                        });
                        if let Owner::Cluster(cluster) = &answer.owner {
                            self.last_known.insert(key.clone(), cluster.clone()).await;
                        }
                        Ok::<_, ResolveError>(answer)
                    })
                    .await;
                let owner = match answer {
                    Ok(answer) => Ok(answer.owner),
                    Err(error) => match self.last_known.get(key).await {
                        Some(cluster) => {
                            stats.stale_answers.fetch_add(1, Ordering::Relaxed);
                            tracing::info!(scope = %key.scope, instance = %key.instance, cluster = %cluster, %error, "every lookup failed: serving the last known owner");
                            Ok(Owner::Cluster(cluster))
                        }
                        None => Err(error),
                    },
                };
                (key.clone(), owner)
            }
        });
        join_all(answers).await
    }

    /// Resolves every key at once: the cache, then every chunk's lookup. (The handler interleaves
    /// these steps with sending; this is the whole of it for tests and benchmarks.)
    pub async fn resolve(&self, keys: impl IntoIterator<Item = InstanceKey>) -> Resolution {
        let (hits, misses) = self.cached(keys).await;
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

    /// One lookup of `ids`, all of `scope`: hedged from EC2 to the Tagging API, or the Tagging
    /// API first while EC2 is suspected.
    async fn look_up_ids(
        &self,
        scope: &Scope,
        ids: &[InstanceId],
        stats: &LookupStats,
    ) -> Result<Looked, ResolveError> {
        let clients = self.accounts.clients(scope).await?;
        if self.ec2.suspected(scope) {
            return self.tagging_first(&clients, scope, ids, stats).await;
        }
        let hedge_after = match self.ec2.hedge_delay(scope) {
            Some(delay) => Either::Left(tokio::time::sleep(delay)),
            None => Either::Right(std::future::pending()),
        };
        let hedge = async {
            stats.hedged.fetch_add(1, Ordering::Relaxed);
            self.via_tagging(&clients, scope, ids, &stats.calls).await
        };
        let every_id =
            |answers: &HashMap<InstanceId, Answer>| ids.iter().all(|id| answers.contains_key(id));
        match race(
            self.describe(&clients, scope, ids, &stats.calls),
            hedge,
            hedge_after,
            every_id,
        )
        .await
        {
            Raced::Primary { answer, .. } => Ok(Looked {
                answers: answer,
                path: Path::DescribeInstances,
            }),
            Raced::Hedge { answer, .. } => Ok(Looked {
                answers: answer,
                path: Path::GetResources,
            }),
            Raced::BothFailed { primary, hedge } => Err(Self::both_failed(
                [Path::DescribeInstances, Path::GetResources],
                [primary, hedge],
            )),
        }
    }

    /// While EC2 is suspected: GetResources, then DescribeInstances for the ids it did not list
    /// (untagged, or not yet indexed after a launch), or for all of them if it failed.
    async fn tagging_first(
        &self,
        clients: &Clients,
        scope: &Scope,
        ids: &[InstanceId],
        stats: &LookupStats,
    ) -> Result<Looked, ResolveError> {
        let tagging_error = match self.via_tagging(clients, scope, ids, &stats.calls).await {
            Ok(mut answers) => {
                let unlisted: Vec<InstanceId> = ids
                    .iter()
                    .filter(|id| !answers.contains_key(*id))
                    .cloned()
                    .collect();
                if !unlisted.is_empty()
                    && let Ok(found) = self.describe(clients, scope, &unlisted, &stats.calls).await
                {
                    answers.extend(found);
                }
                return Ok(Looked {
                    answers,
                    path: Path::GetResources,
                });
            }
            Err(e) => e,
        };
        match self.describe(clients, scope, ids, &stats.calls).await {
            Ok(answers) => Ok(Looked {
                answers,
                path: Path::DescribeInstances,
            }),
            Err(ec2_error) => Err(Self::both_failed(
                [Path::GetResources, Path::DescribeInstances],
                [tagging_error, ec2_error],
            )),
        }
    }

    fn both_failed(paths: [Path; 2], errors: [String; 2]) -> ResolveError {
        ResolveError::Failed(format!(
            "{}: {}; {}: {}",
            paths[0].label(),
            errors[0],
            paths[1].label(),
            errors[1]
        ))
    }

    /// DescribeInstances (one call per chunk), as a task of its own: a call the hedge outran
    /// runs on to its end, so EC2's health learns its latency, or its failure or timeout. With
    /// hedging on, each call is one attempt (the hedge is the retry); with it off, the SDK's.
    fn describe(
        &self,
        clients: &Clients,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &Arc<LookupCalls>,
    ) -> impl Future<Output = Result<HashMap<InstanceId, Answer>, String>> + use<> {
        let (ec2, rules, health) = (clients.ec2.clone(), self.rules.clone(), self.ec2.clone());
        let (scope, ids, calls) = (scope.clone(), ids.to_vec(), calls.clone());
        let sdk_retries = health.config().hedge == HedgeDelay::Off;
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let result = lookup::describe_instances(&ec2, &rules, &ids, &calls, sdk_retries).await;
            match &result {
                Ok(_) => health.answered(&scope, started.elapsed()),
                Err(error) => {
                    let suspected = health.failed(&scope);
                    tracing::warn!(%scope, path = Path::DescribeInstances.label(), ids = ids.len(), %error, suspected, "lookup path failed");
                }
            }
            result.map(|owners| Self::answers(owners, Path::DescribeInstances))
        });
        task.map(|joined| {
            joined.unwrap_or_else(|e| Err(format!("the DescribeInstances task ended: {e}")))
        })
    }

    /// GetResources, 100 ARNs per call.
    async fn via_tagging(
        &self,
        clients: &Clients,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &LookupCalls,
    ) -> Result<HashMap<InstanceId, Answer>, String> {
        let mut owners = HashMap::with_capacity(ids.len());
        for part in ids.chunks(MAX_ARNS_PER_GET_RESOURCES) {
            match lookup::get_resources(&clients.tagging, &self.rules, scope, part, calls).await {
                Ok(found) => owners.extend(found),
                Err(e) => {
                    tracing::warn!(%scope, path = Path::GetResources.label(), ids = ids.len(), error = %e, "lookup path failed");
                    return Err(e);
                }
            }
        }
        Ok(Self::answers(owners, Path::GetResources))
    }

    fn answers(owners: HashMap<InstanceId, Owner>, path: Path) -> HashMap<InstanceId, Answer> {
        owners
            .into_iter()
            .map(|(id, owner)| (id, Answer { owner, path }))
            .collect()
    }
}

struct AnswerExpiry {
    ttl: Duration,
    negative_ttl: Duration,
}

impl Expiry<InstanceKey, Answer> for AnswerExpiry {
    fn expire_after_create(
        &self,
        _key: &InstanceKey,
        answer: &Answer,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(match (&answer.owner, answer.path) {
            (Owner::Cluster(_), _) => self.ttl,
            // GetResources leaves out untagged and unknown instances alike, and may lag a launch:
            // such an answer is used once, never kept.
            (Owner::NotOurs(IgnoreReason::UnknownInstance), Path::GetResources) => Duration::ZERO,
            (Owner::NotOurs(_), _) => self.negative_ttl,
        })
    }
}
