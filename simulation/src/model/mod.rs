//! The model of AWS the router's own code acts on: [`World`] holds the organisation's instances,
//! queues, tenant records and quotas; [`EnvAws`] is one execution environment's view of it, the
//! [`Aws`] seam the router runs against. Each call sleeps its latency on tokio's paused clock,
//! takes its token where AWS throttles it, and answers as AWS answers (error codes included).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use router_core::{
    accounts::Scope,
    aws::{
        CallError, Credentials, DescribeInstances, EntryFailure, EntryResult, Identity,
        InstanceFilter, InstancePage, SendEntry, Session, Tagged, VisibilityEntry, sweep_page,
    },
    event::InstanceId,
    tenancy,
};
use tokio::time::Instant;

mod env;
mod injected;

pub use self::{env::EnvAws, injected::Injected};
use crate::{
    bucket::Bucket,
    ingest::Ingest,
    organisation::Organisation,
    quotas::{self, Latency, Quotas, Rate},
};

/// The wall clock when the simulation starts (the router reads event ages against it).
pub const EPOCH_MS: u64 = 1_795_000_000_000;

/// A copy that reached a cluster's queue.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub body: String,
    /// Index into the organisation's clusters.
    pub cluster: usize,
    pub at: Instant,
}

/// One AWS call the router made, as the model counted it.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub by_action: BTreeMap<&'static str, u64>,
    /// AssumeRole per (environment, account).
    pub assume_role: BTreeMap<(usize, String), u64>,
    /// The router's DescribeInstances per account and region, with when.
    pub router_describe: BTreeMap<(String, String), Vec<Instant>>,
    /// Karpenter's, likewise.
    pub karpenter_describe: BTreeMap<(String, String), Vec<Instant>>,
    pub router_throttled: u64,
    /// The router's DescribeInstances that were sweeps (by tag key), and the ids the others
    /// asked for.
    pub sweep_pages: u64,
    pub ids_looked_up: u64,
    /// Of those, Karpenter nodes'.
    pub node_ids_looked_up: u64,
    pub karpenter_throttled: u64,
    pub tagging_throttled: u64,
    pub sts_throttled: u64,
}

struct State {
    rng: fastrand::Rng,
    ec2: BTreeMap<(String, String), Bucket>,
    tagging: BTreeMap<(String, String), Bucket>,
    sts: Bucket,
    /// Cluster queues by (account, region, name) → cluster index, and their URLs.
    queues: BTreeMap<(String, String, String), usize>,
    urls: HashMap<String, usize>,
    records: BTreeSet<(String, String, String)>,
    arrivals: Vec<Arrival>,
    dead_letters: Vec<(String, String)>,
    counts: Counts,
    issued: u64,
    /// What the run does to the router on purpose ([`Injected`]), and the sends so far.
    injected: Injected,
    sends: u64,
}

/// The organisation's AWS.
pub struct World {
    pub org: Arc<Organisation>,
    /// Each account and region's Karpenter nodes, for a sweep.
    nodes: BTreeMap<(String, String), Vec<InstanceId>>,
    pub quotas: Quotas,
    pub ingest: Arc<Ingest>,
    pub dlq_url: String,
    started: Instant,
    state: Mutex<State>,
}

/// A cluster's queue name, as the router's default template makes it.
pub fn queue_name(cluster: &str) -> String {
    format!("karpenter-{cluster}")
}

pub fn queue_url(account: &str, region: &str, name: &str) -> String {
    format!("https://sqs.{region}.amazonaws.com/{account}/{name}")
}

impl World {
    /// Every cluster onboarded (a tenant queue and its record), quotas full.
    pub fn new(org: Arc<Organisation>, quotas: Quotas, ingest: Arc<Ingest>, seed: u64) -> Self {
        let mut queues = BTreeMap::new();
        let mut urls = HashMap::new();
        let mut records = BTreeSet::new();
        for (i, c) in org.clusters.iter().enumerate() {
            let name = queue_name(&c.name);
            urls.insert(queue_url(&c.account, &c.region, &name), i);
            records.insert((
                c.account.clone(),
                c.region.clone(),
                tenancy::record_name(&name),
            ));
            queues.insert((c.account.clone(), c.region.clone(), name), i);
        }
        let dlq_url = queue_url(&org.hub_account, &org.shape.hub_region, "router-dlq");
        let mut nodes: BTreeMap<(String, String), Vec<InstanceId>> = BTreeMap::new();
        for (id, instance) in &org.instances {
            if instance.cluster.is_some() {
                nodes
                    .entry((instance.account.clone(), instance.region.clone()))
                    .or_default()
                    .push(id.clone());
            }
        }
        let sts = Bucket::new(quotas.assume_role.burst, quotas.assume_role.per_second);
        Self {
            org,
            nodes,
            ingest,
            dlq_url,
            started: Instant::now(),
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(seed ^ 0x5eed),
                ec2: BTreeMap::new(),
                tagging: BTreeMap::new(),
                sts,
                queues,
                urls,
                records,
                arrivals: Vec::new(),
                dead_letters: Vec::new(),
                counts: Counts::default(),
                issued: 0,
                injected: Injected::default(),
                sends: 0,
            }),
            quotas,
        }
    }

    pub fn now_wall(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(EPOCH_MS) + self.started.elapsed()
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    pub fn jitter(&self) -> f64 {
        self.state.lock().unwrap().rng.f64()
    }

    /// A latency drawn from the run's seed.
    pub fn draw_latency(&self, latency: Latency) -> Duration {
        self.draw(latency)
    }

    fn draw(&self, latency: Latency) -> Duration {
        let mut state = self.state.lock().unwrap();
        let span = latency.high.saturating_sub(latency.low);
        latency.low + span.mul_f64(state.rng.f64())
    }

    /// Sleeps a call's latency and the router's CPU for it.
    async fn after(&self, latency: Latency) {
        let cpu = quotas::CPU_PER_CALL.div_f64(self.quotas.cpu_share);
        tokio::time::sleep(self.draw(latency) + cpu).await;
    }

    /// A DescribeInstances by one of the account's Karpenters: takes its token, or is throttled.
    pub fn karpenter_describe(&self, account: &str, region: &str) {
        let mut state = self.state.lock().unwrap();
        let key = (account.to_owned(), region.to_owned());
        let rate = self.quotas.describe_instances;
        let bucket = state
            .ec2
            .entry(key.clone())
            .or_insert_with(|| Bucket::new(rate.burst, rate.per_second));
        if bucket.take() {
            state
                .counts
                .karpenter_describe
                .entry(key)
                .or_default()
                .push(Instant::now());
        } else {
            state.counts.karpenter_throttled += 1;
        }
    }

    /// The lowest level each account-region's EC2 bucket reached.
    pub fn ec2_lowest(&self) -> BTreeMap<(String, String), f64> {
        let state = self.state.lock().unwrap();
        state
            .ec2
            .iter()
            .map(|(k, b)| (k.clone(), b.lowest()))
            .collect()
    }

    pub fn counts(&self) -> Counts {
        self.state.lock().unwrap().counts.clone()
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.state.lock().unwrap().arrivals.clone()
    }

    pub fn dead_letters(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().dead_letters.clone()
    }

    fn count(&self, action: &'static str) {
        *self
            .state
            .lock()
            .unwrap()
            .counts
            .by_action
            .entry(action)
            .or_default() += 1;
    }

    /// Counts `action` and checks the session may act where it names: how every call begins.
    fn begin(&self, action: &'static str, at: &Session) -> Result<(), CallError> {
        self.count(action);
        self.check(at)
    }

    /// The account a session acts in, if its identity may: the function's own role only at home,
    /// a spoke role's credentials only in the account they were issued for.
    fn check(&self, at: &Session) -> Result<(), CallError> {
        let ok = match &at.identity {
            Identity::Home => {
                *at.scope.account == *self.org.hub_account
                    && *at.scope.region == *self.org.shape.hub_region
            }
            Identity::Assumed { credentials, .. } => {
                credentials.access_key_id.split('-').nth(1) == Some(&*at.scope.account)
            }
        };
        if ok {
            Ok(())
        } else {
            Err(CallError::new(
                "AccessDenied",
                format!("{at} may not act in {}", at.scope),
            ))
        }
    }

    fn tagged(&self, scope: &Scope, ids: &[InstanceId]) -> Vec<Tagged> {
        ids.iter()
            .filter_map(|id| {
                let instance = self.org.instances.get(id)?;
                (*instance.account == *scope.account && *instance.region == *scope.region).then(
                    || Tagged {
                        id: id.clone(),
                        tags: self.org.tags(instance),
                    },
                )
            })
            .collect()
    }

    async fn assume_role(&self, env: usize, role_arn: &str) -> Result<Credentials, CallError> {
        self.count("AssumeRole");
        let account = role_arn.split(':').nth(4).unwrap_or_default().to_owned();
        let (revoked, throttled) = {
            let state = self.state.lock().unwrap();
            let revoked = state.injected.revoked.clone();
            (
                revoked
                    .filter(|(a, ..)| *a == account)
                    .map(|(_, f, t)| (f, t)),
                state.injected.throttled,
            )
        };
        if self.within(revoked) {
            self.after(quotas::ASSUME_ROLE).await;
            return Err(CallError::new(
                "AccessDenied",
                format!("not authorized to perform sts:AssumeRole on {role_arn}"),
            ));
        }
        if self.within(throttled) {
            self.after(quotas::THROTTLED).await;
            return Err(CallError::new("Throttling", "Rate exceeded"));
        }
        let allowed = {
            let mut state = self.state.lock().unwrap();
            let ok = state.sts.take();
            if ok {
                *state
                    .counts
                    .assume_role
                    .entry((env, account.clone()))
                    .or_default() += 1;
            } else {
                state.counts.sts_throttled += 1;
            }
            ok
        };
        if !allowed {
            self.after(quotas::THROTTLED).await;
            return Err(CallError::new("Throttling", "Rate exceeded"));
        }
        self.after(quotas::ASSUME_ROLE).await;
        let mut state = self.state.lock().unwrap();
        state.issued += 1;
        Ok(Credentials::new(
            format!("AKIA-{account}-{}", state.issued),
            "secret",
            Some("token".into()),
            Some(self.now_wall() + Duration::from_secs(3600)),
        ))
    }

    async fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> Result<InstancePage, CallError> {
        self.begin("DescribeInstances", at)?;
        let key = scope_key(at);
        let burst = self.within(self.state.lock().unwrap().injected.throttled);
        let allowed = {
            let mut state = self.state.lock().unwrap();
            let ok = !burst && take(&mut state.ec2, &key, self.quotas.describe_instances);
            if ok {
                state
                    .counts
                    .router_describe
                    .entry(key.clone())
                    .or_default()
                    .push(Instant::now());
            } else {
                state.counts.router_throttled += 1;
            }
            ok
        };
        if !allowed {
            self.after(quotas::THROTTLED).await;
            return Err(CallError::new(
                "RequestLimitExceeded",
                "Request limit exceeded.",
            ));
        }
        {
            let mut state = self.state.lock().unwrap();
            match query.filter {
                InstanceFilter::Ids(ids) => {
                    state.counts.ids_looked_up += ids.len() as u64;
                    let nodes = ids
                        .iter()
                        .filter(|id| {
                            self.org
                                .instances
                                .get(*id)
                                .is_some_and(|i| i.cluster.is_some())
                        })
                        .count() as u64;
                    state.counts.node_ids_looked_up += nodes;
                }
                InstanceFilter::TagKey(_) => state.counts.sweep_pages += 1,
            }
        }
        self.after(quotas::DESCRIBE_INSTANCES).await;
        match query.filter {
            InstanceFilter::Ids(ids) => Ok(InstancePage {
                instances: self.tagged(&at.scope, ids),
                next_token: None,
            }),
            // Only Karpenter's nodes carry the managed tag.
            InstanceFilter::TagKey(_) => {
                let nodes = self
                    .nodes
                    .get(&scope_key(at))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let (page, next_token) = sweep_page(nodes, query.next_token);
                Ok(InstancePage {
                    instances: self.tagged(&at.scope, &page),
                    next_token,
                })
            }
        }
    }

    async fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> Result<Vec<Tagged>, CallError> {
        self.begin("GetResources", at)?;
        let key = scope_key(at);
        let burst = self.within(self.state.lock().unwrap().injected.throttled);
        let allowed = {
            let mut state = self.state.lock().unwrap();
            let ok = !burst && take(&mut state.tagging, &key, self.quotas.get_resources);
            if !ok {
                state.counts.tagging_throttled += 1;
            }
            ok
        };
        if !allowed {
            self.after(quotas::THROTTLED).await;
            return Err(CallError::new("ThrottledException", "Rate exceeded"));
        }
        self.after(quotas::GET_RESOURCES).await;
        Ok(self.tagged(&at.scope, ids))
    }

    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.begin("GetQueueUrl", at)?;
        self.after(quotas::SQS_SMALL_CALL).await;
        let key = named_key(at, name);
        if self.state.lock().unwrap().queues.contains_key(&key) {
            Ok(queue_url(&key.0, &key.1, name))
        } else {
            Err(no_queue())
        }
    }

    fn cluster_of_url(&self, url: &str) -> Option<usize> {
        self.state.lock().unwrap().urls.get(url).copied()
    }

    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        self.begin("ListQueueTags", at)?;
        self.after(quotas::SQS_SMALL_CALL).await;
        match self.cluster_of_url(url) {
            Some(c) => Ok(vec![(
                tenancy::TENANT_TAG.to_owned(),
                self.org.clusters[c].name.clone(),
            )]),
            None => Err(no_queue()),
        }
    }

    /// Every member account's direct role exists, with an id derived from its account.
    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.begin("GetRole", at)?;
        self.after(quotas::GET_ROLE).await;
        Ok(direct_role_id(&at.scope.account, name))
    }

    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.begin("GetParameter", at)?;
        self.after(quotas::GET_PARAMETER).await;
        let key = named_key(at, name);
        if self.state.lock().unwrap().records.contains(&key) {
            Ok("onboarded".into())
        } else {
            Err(CallError::new("ParameterNotFound", name))
        }
    }

    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.begin("SendMessageBatch", at)?;
        self.after(quotas::SEND_MESSAGE_BATCH).await;
        let now = Instant::now();
        let lost = {
            let mut state = self.state.lock().unwrap();
            state.sends += 1;
            let n = state.sends;
            state.injected.lost_answers.contains(&n)
        };
        if url == self.dlq_url {
            let mut state = self.state.lock().unwrap();
            for e in entries {
                let reason = e
                    .attributes
                    .iter()
                    .find(|(k, _)| *k == "reason")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                state.dead_letters.push((e.body.to_owned(), reason));
            }
        } else {
            let Some(cluster) = self.cluster_of_url(url) else {
                return Err(no_queue());
            };
            let mut state = self.state.lock().unwrap();
            for e in entries {
                state.arrivals.push(Arrival {
                    body: e.body.to_owned(),
                    cluster,
                    at: now,
                });
            }
        }
        if lost {
            // Stored, but the answer never came back: to the router, a timeout.
            return Err(CallError::new(
                CallError::TIMEOUT,
                "no answer within the attempt timeout",
            ));
        }
        Ok(entries
            .iter()
            .map(|e| EntryResult::Ok {
                id: e.id.to_owned(),
            })
            .collect())
    }

    async fn change_message_visibility_batch(
        &self,
        at: &Session,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.begin("ChangeMessageVisibilityBatch", at)?;
        self.after(quotas::SQS_SMALL_CALL).await;
        Ok(entries
            .iter()
            .map(|e| {
                if self
                    .ingest
                    .change_visibility(e.receipt_handle, Duration::from_secs(e.timeout_secs.into()))
                {
                    EntryResult::Ok {
                        id: e.id.to_owned(),
                    }
                } else {
                    EntryResult::Failed(EntryFailure {
                        id: e.id.to_owned(),
                        code: "ReceiptHandleIsInvalid".into(),
                        message: "stale receipt".into(),
                        sender_fault: true,
                    })
                }
            })
            .collect())
    }
}

/// The (account, region) a session acts in, as the model's maps key it.
fn scope_key(at: &Session) -> (String, String) {
    (at.scope.account.to_string(), at.scope.region.to_string())
}

/// A named resource (queue, parameter) in the session's account and region.
fn named_key(at: &Session, name: &str) -> (String, String, String) {
    let (account, region) = scope_key(at);
    (account, region, name.to_owned())
}

/// SQS's answer for a queue that does not exist.
fn no_queue() -> CallError {
    CallError::new("QueueDoesNotExist", "The specified queue does not exist.")
}

/// A token from the (account, region)'s bucket, made full at `rate` on first use.
fn take(
    buckets: &mut BTreeMap<(String, String), Bucket>,
    key: &(String, String),
    rate: Rate,
) -> bool {
    buckets
        .entry(key.clone())
        .or_insert_with(|| Bucket::new(rate.burst, rate.per_second))
        .take()
}

/// The id of role `name` in `account` (what SQS reports as the `SenderId` of its sends).
pub fn direct_role_id(account: &str, name: &str) -> String {
    format!("AROA{account}{}", name.len())
}
