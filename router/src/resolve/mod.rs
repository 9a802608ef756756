//! Resolve: which cluster owns each instance.
//!
//! The second step of the data path. [`tags`] holds the policy (tags → owner, pure), [`lookup`]
//! the two AWS paths that read an instance's tags, and [`Resolver`] what keeps lookups few and
//! answers coming while AWS fails:
//!
//! * a moka cache of instance → owner: ownership never changes during an instance's life, so
//!   positives live long (`CACHE_TTL_SECONDS`), while "not ours" lives briefly
//!   (`NEGATIVE_CACHE_TTL_SECONDS`) because tags can land just after an instance starts;
//! * every miss of a scope goes out together, at most 200 ids per lookup ([`Resolver::chunk`]);
//!   concurrent misses for the same instance share one lookup (moka's `try_get_with`);
//! * DescribeInstances first; when it fails, GetResources, which does not share EC2's throttle.
//!   After an EC2 failure the scope asks GetResources first for [`EC2_COOLDOWN`], so a throttled
//!   EC2 is not hammered by the router while every Karpenter of the account needs it;
//! * stale-if-error: an instance's owner never changes and instance ids are never reused, so when
//!   every path fails, the last owner seen (kept for [`LAST_KNOWN_HORIZON`] after its positive
//!   entry expired) is still a correct answer, and is served (and counted) instead of a failure.
//!
//! Keys carry the event's [`Scope`]: lookups run in the instance's own account and region, with
//! the clients [`Accounts`] hands out.

pub mod lookup;
pub mod tags;

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use futures_util::{FutureExt, future::join_all};
use moka::{Expiry, future::Cache};

pub use self::{
    lookup::{LookupCalls, MAX_ARNS_PER_GET_RESOURCES, MAX_IDS_PER_DESCRIBE, Path},
    tags::{ClusterTagKey, Owner, TagRules},
};
use crate::{
    accounts::{Accounts, Clients, Unreachable},
    event::{IgnoreReason, InstanceId, Scope},
};

/// How long a scope asks GetResources first after DescribeInstances failed there.
pub const EC2_COOLDOWN: Duration = Duration::from_secs(30);
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
    pub calls: LookupCalls,
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
    ec2_failed_at: Mutex<HashMap<Scope, Instant>>,
}

impl Resolver {
    pub fn new(accounts: Arc<Accounts>, rules: TagRules, cache: &CacheConfig) -> Self {
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
            ec2_failed_at: Mutex::default(),
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
        let lookup = async move {
            self.look_up_ids(&scope, &ids, &stats.calls)
                .await
                .map(Arc::new)
        }
        .shared();
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
        resolution.describe_calls = stats.calls.describe_instances.into_inner();
        resolution.get_resources_calls = stats.calls.get_resources.into_inner();
        resolution.stale_answers = stats.stale_answers.into_inner();
        resolution
    }

    /// One lookup of `ids`, all of `scope`: the path EC2's recent health says to try first, then
    /// the other.
    async fn look_up_ids(
        &self,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &LookupCalls,
    ) -> Result<Looked, ResolveError> {
        let clients = self.accounts.clients(scope).await?;
        let [first, second] = if self.ec2_troubled(scope) {
            [Path::GetResources, Path::DescribeInstances]
        } else {
            [Path::DescribeInstances, Path::GetResources]
        };
        let first_error = match self.via(first, &clients, scope, ids, calls).await {
            Ok(mut answers) => {
                if first == Path::GetResources {
                    // GetResources does not list untagged instances and may lag a launch: the
                    // few ids it left out are worth one DescribeInstances call even now.
                    let unlisted: Vec<InstanceId> = ids
                        .iter()
                        .filter(|id| !answers.contains_key(*id))
                        .cloned()
                        .collect();
                    if !unlisted.is_empty()
                        && let Ok(found) = self.via_ec2(&clients, scope, &unlisted, calls).await
                    {
                        answers.extend(found);
                    }
                }
                return Ok(Looked {
                    answers,
                    path: first,
                });
            }
            Err(e) => e,
        };
        match self.via(second, &clients, scope, ids, calls).await {
            Ok(answers) => Ok(Looked {
                answers,
                path: second,
            }),
            Err(second_error) => Err(ResolveError::Failed(format!(
                "{}: {first_error}; {}: {second_error}",
                first.label(),
                second.label()
            ))),
        }
    }

    async fn via(
        &self,
        path: Path,
        clients: &Clients,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &LookupCalls,
    ) -> Result<HashMap<InstanceId, Answer>, String> {
        match path {
            Path::DescribeInstances => self.via_ec2(clients, scope, ids, calls).await,
            Path::GetResources => self.via_tagging(clients, scope, ids, calls).await,
        }
    }

    /// DescribeInstances (one call per chunk); records EC2's health for the scope.
    async fn via_ec2(
        &self,
        clients: &Clients,
        scope: &Scope,
        ids: &[InstanceId],
        calls: &LookupCalls,
    ) -> Result<HashMap<InstanceId, Answer>, String> {
        let result = lookup::describe_instances(&clients.ec2, &self.rules, ids, calls).await;
        self.ec2_answered(scope, result.is_ok());
        match result {
            Ok(owners) => Ok(Self::answers(owners, Path::DescribeInstances)),
            Err(e) => {
                tracing::warn!(%scope, path = Path::DescribeInstances.label(), ids = ids.len(), error = %e, "lookup path failed");
                Err(e)
            }
        }
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

    fn ec2_troubled(&self, scope: &Scope) -> bool {
        self.ec2_failed_at
            .lock()
            .unwrap()
            .get(scope)
            .is_some_and(|at| at.elapsed() < EC2_COOLDOWN)
    }

    fn ec2_answered(&self, scope: &Scope, ok: bool) {
        let mut failed_at = self.ec2_failed_at.lock().unwrap();
        if ok {
            failed_at.remove(scope);
        } else {
            failed_at.insert(scope.clone(), Instant::now());
        }
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
