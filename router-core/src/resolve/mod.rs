//! Resolve: which cluster owns each instance.
//!
//! The second step of the data path. [`tags`] holds the policy (tags → owner, pure), [`lookup`]
//! the two AWS paths that read an instance's tags, [`hedge`] when to use which, and [`Resolver`]
//! what keeps lookups few and answers coming while AWS fails:
//!
//! * a cache of instance → owner: ownership never changes during an instance's life, so
//!   positives live long (`CACHE_TTL_SECONDS`), while "not ours" lives briefly
//!   (`NEGATIVE_CACHE_TTL_SECONDS`) because tags can land just after an instance starts;
//! * a sweep per account and region: the first miss there also asks
//!   DescribeInstances for every instance with the managed tag (`karpenter.sh/nodepool`: every
//!   Karpenter node of the account and region, 1,000 a page, at most [`SWEEP_MAX_PAGES`]) and keeps
//!   every owner it finds, so an organisation's storm costs each execution environment about two
//!   EC2 calls per account instead of one per batch per account; swept again on a miss after
//!   `SWEEP_INTERVAL_SECONDS` (600; 0 never sweeps). It is made once the invocation's records are delivered, before it answers
//!   ([`Resolver::sweep_pending`]: Lambda freezes an environment that has answered);
//! * every other miss of a place goes out together, at most 200 ids per lookup
//!   ([`Resolver::chunk`]): what a sweep did not find (launched since, or not Karpenter's);
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

mod answers;
pub mod hedge;
pub mod lookup;
pub mod tags;

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, atomic::Ordering},
    time::Duration,
};

use futures_util::future::{Either, join_all};
use tokio::time::Instant;

use self::hedge::{Ec2Health, Raced, race};
pub use self::{
    answers::{About, Found, InstanceKey, LookupStats, Resolution, ResolveError},
    hedge::{HedgeDelay, LookupConfig},
    lookup::{LookupCalls, MAX_ARNS_PER_GET_RESOURCES, MAX_IDS_PER_DESCRIBE, Path},
    tags::{ClusterTagKey, Owner, TagRules},
};
use crate::{
    accounts::{Accounts, Place, Scope},
    aws::{Aws, CallError, Session},
    cache::TtlCache,
    event::{IgnoreReason, InstanceId},
};

/// How long a positive answer stays available as a stale answer after it stopped being fresh.
pub const LAST_KNOWN_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);
/// A sweep that failed is not tried again for this long.
pub const SWEEP_RETRY: Duration = Duration::from_secs(30);
/// Pages a sweep reads at most (1,000 instances each): a larger fleet is looked up per id past
/// them.
pub const SWEEP_MAX_PAGES: usize = 3;

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
    /// A scope swept this recently is not swept again: its misses are instances launched since
    /// (or not Karpenter's), which per-id lookups answer. Zero: never sweep.
    pub sweep_every: Duration,
}

/// An answer, the path that gave it (it decides how long the answer is kept) and until when it
/// is fresh.
#[derive(Debug, Clone)]
struct Known {
    found: Found,
    fresh_until: Instant,
}

/// One chunk's lookup. An id missing from `answers` was not found on `path`, unless `unasked`
/// says it could not be asked there (then its lookup failed, with that error).
#[derive(Debug)]
struct Looked {
    answers: HashMap<InstanceId, Found>,
    path: Path,
    unasked: Option<Arc<ResolveError>>,
}

pub struct Resolver<A> {
    aws: Arc<A>,
    accounts: Arc<Accounts<A>>,
    rules: TagRules,
    config: CacheConfig,
    /// Owners by (scope, instance): whoever asks, an instance's owner is the same.
    known: TtlCache<(Scope, InstanceId), Known>,
    /// Scopes swept (or being swept) lately (`true`), or whose sweep failed lately (`false`).
    swept: TtlCache<Scope, bool>,
    /// Sweeps decided in this invocation, not yet made ([`Resolver::sweep_pending`]).
    pending: Mutex<Vec<Place>>,
    ec2: Arc<Ec2Health>,
}

fn cache_key(key: &InstanceKey) -> (Scope, InstanceId) {
    (key.place.scope.clone(), key.instance.clone())
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
            swept: TtlCache::new(10_000),
            pending: Mutex::default(),
            ec2: Arc::new(Ec2Health::new(lookup)),
        }
    }

    /// Splits `keys` into fresh answers and misses (each key once).
    pub fn cached(
        &self,
        keys: impl IntoIterator<Item = InstanceKey>,
    ) -> (Vec<(InstanceKey, Found)>, Vec<InstanceKey>) {
        let now = Instant::now();
        let mut hits = Vec::new();
        let mut misses = Vec::new();
        let mut seen = HashSet::new();
        for key in keys {
            if !seen.insert(key.clone()) {
                continue;
            }
            match self
                .known
                .get(&cache_key(&key))
                .filter(|k| now < k.fresh_until)
            {
                Some(known) => hits.push((key, known.found)),
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
    ) -> Vec<(InstanceKey, Result<Found, Arc<ResolveError>>)> {
        let Some(first) = chunk.first() else {
            return Vec::new();
        };
        self.start_sweep(&first.place, stats);
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
                    (Some(found), _) => {
                        self.keep(key, found, looked.path);
                        Ok(found.clone())
                    }
                    (None, None) => {
                        let unknown = Found::only(Owner::NotOurs(IgnoreReason::UnknownInstance));
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
    ) -> Result<Found, Arc<ResolveError>> {
        let last = self
            .known
            .get(&cache_key(key))
            .filter(|k| matches!(k.found.owner, Owner::Cluster(_)));
        match last {
            Some(known) => {
                stats.stale_answers.fetch_add(1, Ordering::Relaxed);
                if let Owner::Cluster(cluster) = &known.found.owner {
                    tracing::info!(scope = %key.place.scope, instance = %key.instance, cluster = %cluster, %error, "every lookup failed: serving the last known owner");
                }
                Ok(known.found)
            }
            None => Err(error.clone()),
        }
    }

    /// The first lookup of a scope in a while also sweeps it: every Karpenter node of its account
    /// and region, each owner kept for the lookups that follow. Decided here, made by
    /// [`Resolver::sweep_pending`] once the invocation's records are delivered. Not while EC2 is
    /// suspected, without a managed tag to sweep by, or after a recent sweep (or a recent failure
    /// to sweep).
    fn start_sweep(&self, place: &Place, stats: &LookupStats) {
        let scope = &place.scope;
        if self.rules.managed_key.is_none()
            || self.config.sweep_every.is_zero()
            || self.swept.get(scope).is_some()
            || self.ec2.suspected(scope)
        {
            return;
        }
        self.swept
            .insert(scope.clone(), true, self.config.sweep_every);
        stats.sweeps.fetch_add(1, Ordering::Relaxed);
        self.pending
            .lock()
            .expect("pending sweeps")
            .push(place.clone());
    }

    /// Makes the sweeps this invocation decided on, all at once, until `by`. After the records'
    /// deliveries, so a sweep never delays them; before the invocation answers, because Lambda
    /// freezes an execution environment once it has answered and a call left running would stall
    /// mid-flight and fail on thaw. A sweep still running at `by` is stopped and tried again
    /// after [`SWEEP_RETRY`].
    pub async fn sweep_pending(&self, by: Instant, stats: &LookupStats) {
        let places = std::mem::take(&mut *self.pending.lock().expect("pending sweeps"));
        join_all(places.iter().map(|place| async move {
            if tokio::time::timeout_at(by, self.sweep(place, stats)).await.is_err() {
                self.swept.insert(place.scope.clone(), false, SWEEP_RETRY);
                tracing::warn!(scope = %place.scope, "sweep unfinished when the invocation had to answer: stopped");
            }
        }))
        .await;
    }

    async fn sweep(&self, place: &Place, stats: &LookupStats) {
        let scope = &place.scope;
        let Some(tag) = self.rules.managed_key.as_deref() else {
            return;
        };
        let Ok(session) = self.accounts.session(place).await else {
            // No credentials yet (AssumeRole throttled, say): the scope's next miss, which needs
            // them too, decides the sweep again.
            self.swept.remove(scope);
            return;
        };
        let started = Instant::now();
        match lookup::sweep(
            &*self.aws,
            &session,
            &self.rules,
            tag,
            SWEEP_MAX_PAGES,
            &stats.calls,
        )
        .await
        {
            Ok(found) => {
                self.ec2.answered(scope, started.elapsed());
                for (id, found) in found {
                    self.keep_as((scope.clone(), id), &found, Path::DescribeInstances);
                }
            }
            Err(error) => {
                let suspected = self.ec2.failed(scope);
                self.swept.insert(scope.clone(), false, SWEEP_RETRY);
                tracing::warn!(%scope, %error, suspected, "sweep failed: looking up per instance");
            }
        }
    }

    fn keep(&self, key: &InstanceKey, found: &Found, path: Path) {
        self.keep_as(cache_key(key), found, path);
    }

    /// Keeps an answer for as long as what it says can be trusted.
    fn keep_as(&self, key: (Scope, InstanceId), found: &Found, path: Path) {
        let owner = &found.owner;
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
            found: found.clone(),
            fresh_until: Instant::now() + fresh_for,
        };
        self.known.insert(key, known, kept_for);
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
        let mut record = |key: InstanceKey, answer: Result<Found, Arc<ResolveError>>| {
            if let Ok(found) = &answer {
                resolution.about.insert(key.clone(), found.about.clone());
            }
            resolution.owners.insert(key, answer.map(|f| f.owner));
        };
        for (key, found) in hits {
            record(key, Ok(found));
        }
        let chunks = Self::chunk(misses);
        let looked = join_all(chunks.iter().map(|chunk| self.look_up(chunk, &stats))).await;
        for (key, answer) in looked.into_iter().flatten() {
            record(key, answer);
        }
        self.sweep_pending(Instant::now() + crate::retry::DELIVER_WINDOW, &stats)
            .await;
        resolution.describe_calls = stats.calls.describe_instances.load(Ordering::Relaxed);
        resolution.get_resources_calls = stats.calls.get_resources.load(Ordering::Relaxed);
        resolution.hedged = stats.hedged.into_inner();
        resolution.stale_answers = stats.stale_answers.into_inner();
        resolution.sweeps = stats.sweeps.into_inner();
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
            |answers: &HashMap<InstanceId, Found>| ids.iter().all(|id| answers.contains_key(id));
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
            // Complete, or EC2 failed. What the Tagging API did not list (untagged, or not
            // indexed yet after a launch) only EC2 can tell, and it failed: those ids fail for
            // now and are retried, as while EC2 is suspected, never taken as not ours (an id it
            // listed takes its answer first).
            Raced::Hedge { answer, primary } => {
                let unasked = primary.map(|ec2_error| {
                    Arc::new(both_failed(
                        [Path::DescribeInstances, Path::GetResources],
                        [ec2_error, not_listed()],
                    ))
                });
                Ok(Looked {
                    answers: answer,
                    path: Path::GetResources,
                    unasked,
                })
            }
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
                return Ok(Looked {
                    answers,
                    path: Path::GetResources,
                    unasked: unasked.map(|e| {
                        Arc::new(both_failed(
                            [Path::GetResources, Path::DescribeInstances],
                            [not_listed(), e],
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
    ) -> impl Future<Output = Result<HashMap<InstanceId, Found>, CallError>> + use<A> {
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
    ) -> Result<HashMap<InstanceId, Found>, CallError> {
        let result = lookup::get_resources(&*self.aws, session, &self.rules, ids, calls).await;
        if let Err(error) = &result {
            tracing::warn!(scope = %session.scope, path = Path::GetResources.label(), ids = ids.len(), %error, "lookup path failed");
        }
        result
    }
}

/// Why an id the Tagging API answered without is not resolved by that answer.
fn not_listed() -> CallError {
    CallError::new("Unlisted", "not listed by the Tagging API")
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
