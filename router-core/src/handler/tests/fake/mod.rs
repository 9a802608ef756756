//! A fake AWS behind the seam: accounts and regions of tagged instances, queues (with tags,
//! policies and the messages sent to them), tenant records, spoke roles, and faults scripted per
//! action. It answers as AWS does where the router reads the answer: the error codes, a missing
//! queue or parameter, per-entry batch results, AccessDenied for a caller acting in the wrong
//! account. Time is tokio's (the tests pause it); the wall clock follows it.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::time::Instant;

use crate::{
    accounts::Scope,
    aws::{
        Aws, CallError, Credentials, DescribeInstances, EntryFailure, EntryResult, Identity,
        InstanceFilter, InstancePage, SendEntry, Session, Tagged, VisibilityEntry, sweep_page,
    },
    event::InstanceId,
    retry::ATTEMPT_TIMEOUT,
    tenancy::TENANT_TAG,
};

mod seam;

pub const HUB: &str = "111111111111";
pub const MEMBER: &str = "222222222222";
pub const REGION: &str = "us-east-1";
pub const OTHER_REGION: &str = "eu-west-1";
/// The wall clock at the start of a test.
pub const EPOCH_MS: u64 = 1_790_000_000_000;

/// Faults scripted for this (`fail(SWEEP, …)`) apply to sweeps (DescribeInstances by tag key)
/// before any scripted for DescribeInstances itself.
pub const SWEEP: &str = "Sweep";

/// What a scripted call does instead of answering.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Fails with this AWS error.
    Error(CallError),
    /// Gives no answer: the SDK's attempt timeout ends it ([`ATTEMPT_TIMEOUT`], then `Timeout`).
    Hang,
    /// Answers after this long.
    Slow(Duration),
}

impl Fault {
    pub fn code(code: &str) -> Self {
        Fault::Error(CallError::new(code, format!("the fake says {code}")))
    }
}

/// One message a queue holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub body: String,
    pub attributes: Vec<(String, String)>,
}

#[derive(Debug, Default)]
pub struct Queue {
    pub url: String,
    pub tags: Vec<(String, String)>,
    pub policy: Option<String>,
    pub messages: Vec<Held>,
}

/// A call the router made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub action: &'static str,
    pub account: String,
    pub region: String,
}

/// An instance's tags.
type Tags = Vec<(String, String)>;

#[derive(Default)]
struct World {
    /// By (account, region).
    instances: BTreeMap<(String, String), BTreeMap<InstanceId, Tags>>,
    queues: BTreeMap<(String, String, String), Queue>,
    parameters: BTreeSet<(String, String, String)>,
    /// Roles AssumeRole succeeds for.
    roles: BTreeSet<String>,
    /// Per account, its direct role's id (GetRole).
    direct_roles: BTreeMap<String, String>,
    /// Scripted faults per action, consumed in order; `always` ones apply to every call.
    faults: BTreeMap<&'static str, VecDeque<Fault>>,
    always: BTreeMap<&'static str, Fault>,
    /// Entries SendMessageBatch fails, per queue name: how many more, the code, sender fault.
    entry_faults: BTreeMap<String, (usize, String, bool)>,
    /// Queues every SendMessageBatch to which fails so.
    broken_queues: BTreeMap<String, Fault>,
    calls: Vec<Call>,
    visibility: Vec<(String, u32)>,
    issued: u64,
}

/// Something that happens in AWS right after a call is answered ([`FakeAws::after_next`]).
type Effect = Box<dyn FnOnce(&FakeAws) + Send>;

pub struct FakeAws {
    world: Mutex<World>,
    /// Per action, effects that follow its next answers, in order.
    after: Mutex<BTreeMap<&'static str, VecDeque<Effect>>>,
    started: Instant,
    jitter: f64,
}

impl FakeAws {
    /// An empty AWS in which the hub's spoke role exists in `MEMBER` (and the hub, for its other
    /// regions).
    pub fn new() -> Self {
        let fake = Self {
            world: Mutex::default(),
            after: Mutex::default(),
            started: Instant::now(),
            jitter: 1.0,
        };
        for account in [HUB, MEMBER] {
            fake.allow_role(&format!(
                "arn:aws:iam::{account}:role/interruption-router-spoke"
            ));
        }
        fake
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap()
    }

    pub fn allow_role(&self, arn: &str) {
        self.world().roles.insert(arn.to_owned());
    }

    /// `account`'s direct role, with this id (what SQS reports as the SenderId of its sends).
    pub fn direct_role(&self, account: &str, id: &str) {
        self.world()
            .direct_roles
            .insert(account.to_owned(), id.to_owned());
    }

    /// `account` without a direct role.
    pub fn delete_direct_role(&self, account: &str) {
        self.world().direct_roles.remove(account);
    }

    pub fn forbid_role(&self, arn: &str) {
        self.world().roles.remove(arn);
    }

    /// A Karpenter node of `cluster` in (account, region).
    pub fn node(&self, account: &str, region: &str, id: &str, cluster: &str) {
        self.instance(
            account,
            region,
            id,
            &[
                ("eks:eks-cluster-name", cluster),
                (&format!("kubernetes.io/cluster/{cluster}"), "owned"),
                ("karpenter.sh/nodepool", "default"),
            ],
        );
    }

    pub fn instance(&self, account: &str, region: &str, id: &str, tags: &[(&str, &str)]) {
        self.world()
            .instances
            .entry((account.into(), region.into()))
            .or_default()
            .insert(
                InstanceId::parse(id).expect("an instance id"),
                tags.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
    }

    /// A tenant stack: `karpenter-<cluster>` tagged for the cluster, and its tenant record.
    pub fn tenant(&self, account: &str, region: &str, cluster: &str) {
        let name = format!("karpenter-{cluster}");
        self.queue(account, region, &name, &[(TENANT_TAG, cluster)], None);
        self.record(account, region, &name);
    }

    /// A tenant stack that takes only `kinds` (tenant.yaml's `EventKinds`, as its queue's tag).
    pub fn tenant_taking(&self, account: &str, region: &str, cluster: &str, kinds: &str) {
        let name = format!("karpenter-{cluster}");
        let tags = [(TENANT_TAG, cluster), (crate::tenancy::KINDS_TAG, kinds)];
        self.queue(account, region, &name, &tags, None);
        self.record(account, region, &name);
    }

    /// Sets a queue's tag, as a tenant stack update does (the queue stays).
    pub fn tag_queue(&self, account: &str, region: &str, name: &str, key: &str, value: &str) {
        let mut world = self.world();
        let queue = world
            .queues
            .get_mut(&(account.into(), region.into(), name.into()))
            .expect("the queue exists");
        queue.tags.retain(|(k, _)| k != key);
        queue.tags.push((key.to_owned(), value.to_owned()));
    }

    pub fn queue(
        &self,
        account: &str,
        region: &str,
        name: &str,
        tags: &[(&str, &str)],
        policy: Option<&str>,
    ) {
        self.world().queues.insert(
            (account.into(), region.into(), name.into()),
            Queue {
                url: url(account, region, name),
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                policy: policy.map(str::to_owned),
                messages: Vec::new(),
            },
        );
    }

    pub fn record(&self, account: &str, region: &str, queue: &str) {
        self.world().parameters.insert((
            account.into(),
            region.into(),
            crate::tenancy::record_name(queue),
        ));
    }

    pub fn delete_queue(&self, account: &str, region: &str, name: &str) {
        self.world()
            .queues
            .remove(&(account.into(), region.into(), name.into()));
    }

    pub fn delete_record(&self, account: &str, region: &str, queue: &str) {
        self.world().parameters.remove(&(
            account.into(),
            region.into(),
            crate::tenancy::record_name(queue),
        ));
    }

    /// The next `n` calls of `action` fail with `fault`.
    pub fn fail(&self, action: &'static str, n: usize, fault: Fault) {
        self.world()
            .faults
            .entry(action)
            .or_default()
            .extend(std::iter::repeat_n(fault, n));
    }

    /// Right after the next answer to `action` (only GetQueueUrl so far), `effect` changes AWS:
    /// what someone else did between two of the router's reads.
    pub fn after_next(&self, action: &'static str, effect: impl FnOnce(&FakeAws) + Send + 'static) {
        self.after
            .lock()
            .unwrap()
            .entry(action)
            .or_default()
            .push_back(Box::new(effect));
    }

    /// Applies the effect scripted to follow this answer to `action`, if any.
    fn answered(&self, action: &'static str) {
        let effect = self
            .after
            .lock()
            .unwrap()
            .get_mut(action)
            .and_then(VecDeque::pop_front);
        if let Some(effect) = effect {
            effect(self);
        }
    }

    /// Every call of `action` fails with `fault`, until [`FakeAws::heal`].
    pub fn break_action(&self, action: &'static str, fault: Fault) {
        self.world().always.insert(action, fault);
    }

    /// Every SendMessageBatch to queue `name` fails with `fault`.
    pub fn break_queue(&self, name: &str, fault: Fault) {
        self.world().broken_queues.insert(name.into(), fault);
    }

    /// The next `n` entries sent to queue `name` fail with `code`.
    pub fn fail_entries(&self, name: &str, n: usize, code: &str, sender_fault: bool) {
        self.world()
            .entry_faults
            .insert(name.into(), (n, code.to_owned(), sender_fault));
    }

    /// The bodies in queue `name` of (account, region).
    pub fn bodies(&self, account: &str, region: &str, name: &str) -> Vec<String> {
        self.held(account, region, name)
            .into_iter()
            .map(|m| m.body)
            .collect()
    }

    pub fn held(&self, account: &str, region: &str, name: &str) -> Vec<Held> {
        self.world()
            .queues
            .get(&(account.into(), region.into(), name.into()))
            .map(|q| q.messages.clone())
            .unwrap_or_default()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.world().calls.clone()
    }

    pub fn count(&self, action: &str) -> usize {
        self.world()
            .calls
            .iter()
            .filter(|c| c.action == action)
            .count()
    }

    /// The visibility timeouts set, per receipt handle, in order.
    pub fn visibility(&self) -> Vec<(String, u32)> {
        self.world().visibility.clone()
    }

    /// Records a call made as `at`, then applies its scripted fault, if any.
    async fn call(&self, action: &'static str, at: Option<&Session>) -> Result<(), CallError> {
        self.call_as(action, None, at).await
    }

    /// [`FakeAws::call`], where a fault scripted for `kind` (a [`SWEEP`]) comes before the
    /// action's own.
    async fn call_as(
        &self,
        action: &'static str,
        kind: Option<&'static str>,
        at: Option<&Session>,
    ) -> Result<(), CallError> {
        let fault = {
            let mut world = self.world();
            world.calls.push(Call {
                action,
                account: at.map(|s| s.scope.account.to_string()).unwrap_or_default(),
                region: at.map(|s| s.scope.region.to_string()).unwrap_or_default(),
            });
            let scripted = kind
                .and_then(|k| world.faults.get_mut(k).and_then(VecDeque::pop_front))
                .or_else(|| world.faults.get_mut(action).and_then(VecDeque::pop_front));
            scripted.or_else(|| world.always.get(action).cloned())
        };
        if let Some(session) = at {
            check_identity(session)?;
        }
        match fault {
            None => Ok(()),
            Some(Fault::Error(e)) => Err(e),
            Some(Fault::Hang) => {
                tokio::time::sleep(ATTEMPT_TIMEOUT).await;
                Err(CallError::new(
                    CallError::TIMEOUT,
                    "no answer within the attempt timeout",
                ))
            }
            Some(Fault::Slow(d)) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
        }
    }

    fn key(at: &Session, name: &str) -> (String, String, String) {
        (
            at.scope.account.to_string(),
            at.scope.region.to_string(),
            name.to_owned(),
        )
    }

    fn queue_named_by(&self, at: &Session, url: &str) -> Option<(String, String, String)> {
        let world = self.world();
        world
            .queues
            .iter()
            .find(|((a, r, _), q)| {
                q.url == url && **a == *at.scope.account && **r == *at.scope.region
            })
            .map(|(k, _)| k.clone())
    }
}

/// The fake's credentials name the account they act in: a caller in another account is refused,
/// as IAM would refuse a role of one account acting on another's resources.
fn check_identity(at: &Session) -> Result<(), CallError> {
    match &at.identity {
        Identity::Home if &*at.scope.account == HUB && &*at.scope.region == REGION => Ok(()),
        Identity::Home if at.scope.account.is_empty() => Ok(()),
        Identity::Home => Err(CallError::new(
            "AccessDenied",
            format!("the router's own role acting in {}", at.scope),
        )),
        Identity::Assumed { credentials, .. } => {
            let account = credentials
                .access_key_id
                .split('-')
                .nth(1)
                .unwrap_or_default();
            if account == &*at.scope.account {
                Ok(())
            } else {
                Err(CallError::new(
                    "AccessDenied",
                    format!("credentials of {account} acting in {}", at.scope),
                ))
            }
        }
    }
}

pub fn url(account: &str, region: &str, name: &str) -> String {
    format!("https://sqs.{region}.amazonaws.com/{account}/{name}")
}

impl FakeAws {
    fn tagged(&self, scope: &Scope, ids: &[InstanceId]) -> Vec<Tagged> {
        let world = self.world();
        let Some(known) = world
            .instances
            .get(&(scope.account.to_string(), scope.region.to_string()))
        else {
            return Vec::new();
        };
        ids.iter()
            .filter_map(|id| {
                Some(Tagged {
                    id: id.clone(),
                    tags: known.get(id)?.clone(),
                })
            })
            .collect()
    }
}

fn missing_queue() -> CallError {
    CallError::new("QueueDoesNotExist", "The specified queue does not exist.")
}
