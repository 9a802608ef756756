//! aws-world: one model of AWS, for tests that decide in a millisecond what the real thing
//! would: the operator's CLI on it (`routerctl`'s seam answered from its state), the router's
//! decision tests (the router's seam, [`router_core::aws::Aws`], answered by
//! [`router::WorldAws`]), and the organisation's storm (`simulation`, the same `WorldAws` under
//! layers of AWS's quotas, latencies and a seed's faults).
//!
//! The world is built the way an operator builds the real one: stacks deployed from this
//! release's own templates ([`World::deploy`], CloudFormation's part: `deploy.rs`), a Karpenter
//! role made by hand, a subscription confirmed, instances tagged as Karpenter tags them. A test
//! then breaks one thing the way it breaks in an account (a rule disabled, a policy edited, a
//! mapping deleted, a read refused, [`World::edit`]) and sees exactly what follows.
//!
//! What it keeps of AWS's semantics: resources live in an account and region (IAM and KMS keys
//! by ARN); each API answers a missing resource with AWS's error code
//! ([`aws_model::resources::missing`]); AssumeRole is decided by the role's trust policy and a
//! send by the queue's policy, evaluated by [`aws_model::policy`]; SQS turns a queue policy, tags
//! and attributes into GetQueueAttributes' and ListQueueTags' answers, hides what a receive
//! returns and counts it per minute as CloudWatch publishes it, late; a refused read
//! ([`World::refuse`]) answers `AccessDenied` for that API alone. Time is the world's own clock,
//! on tokio's ([`World::advance`]), so a message's age is exact in paused time. Not modelled:
//! pagination (but the router's sweep pages), eventual consistency, each caller's identity
//! policies (refusals stand in for them). Faults, latencies and quotas are layers over it, kept
//! by whoever drives it (the router's decision tests script theirs, [`router::Fault`]; the
//! simulation draws its own from a seed).
//!
//! Nothing here is shipped: routerctl and the router depend on it for their tests only.

mod deploy;
mod eventbridge;
mod make;
pub mod router;
pub mod sqs;
mod sts;
#[cfg(test)]
mod tests;

pub use make::{METRIC_LAG, RULE_CHANGE_DELAY, millis};

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use futures_util::future::BoxFuture;
use serde_json::Value;

use aws_model::policy::Policy;
pub use aws_model::resources::{
    Alarm, ExperimentState, ExperimentTemplate, Function, Invoked, LogEvent, Mapping, Rule, Stack,
    Target, Watched, missing,
};
pub use router_core::aws::{CallError, Capacity, Described};

/// A role as IAM keeps it: documents as JSON.
#[derive(Debug, Clone)]
pub struct ModelRole {
    pub arn: String,
    /// Its unique id (`AROA…`): what SQS reports as the `SenderId` of the role's sends.
    pub id: String,
    pub inline: Vec<(String, Value)>,
    /// Managed policies attached, by ARN.
    pub managed: Vec<String>,
    /// Its permissions boundary's ARN.
    pub boundary: Option<String>,
    pub trust: Value,
}

/// A KMS key as KMS keeps it.
#[derive(Debug, Clone)]
pub struct ModelKey {
    pub arn: String,
    pub policy: Value,
    pub enabled: bool,
    pub aws_managed: bool,
}

/// A queue as SQS keeps it.
#[derive(Debug, Clone, Default)]
pub struct ModelQueue {
    pub url: String,
    /// GetQueueAttributes' names and values (`QueueArn`, `Policy`, …).
    pub attributes: HashMap<String, String>,
    pub tags: BTreeMap<String, String>,
    /// Its messages, as a standard queue keeps them ([`sqs::Messages`]).
    pub messages: sqs::Messages<SystemTime, ModelMessage>,
    /// CloudWatch's AWS/SQS NumberOfMessagesReceived and NumberOfMessagesDeleted, by minute (s
    /// since the epoch).
    pub counted: BTreeMap<u64, (f64, f64)>,
}

/// A message in a queue, as it was sent (SQS's bookkeeping is [`sqs::Held`]'s).
#[derive(Debug, Clone)]
pub struct ModelMessage {
    pub id: String,
    pub body: String,
    /// Its message attributes (name, string value), as sent.
    pub attributes: Vec<(String, String)>,
}

impl ModelMessage {
    /// A message of `body`, without attributes.
    pub fn new(id: String, body: &str) -> Self {
        Self {
            id,
            body: body.to_owned(),
            attributes: Vec::new(),
        }
    }
}

/// An EC2 instance: its state (`running`, `stopping`, …), its tags, and what DescribeInstances
/// says of it besides (its type, zone and how it was bought).
#[derive(Debug, Clone)]
pub struct ModelInstance {
    pub state: String,
    pub tags: Vec<(String, String)>,
    pub described: Described,
}

/// A Logs Insights query definition: its name, query and the log groups it runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelQueryDefinition {
    pub name: String,
    pub query: String,
    pub log_groups: Vec<String>,
}

/// A deployed stack: what DescribeStacks and DescribeStackResources answer.
#[derive(Debug, Clone, Default)]
pub struct ModelStack {
    pub stack: Stack,
    /// The template it was deployed from (GetTemplate).
    pub template: String,
    /// Logical id → physical id.
    pub resources: BTreeMap<String, String>,
}

/// What one account keeps in one region.
#[derive(Debug, Clone, Default)]
pub struct Site {
    pub stacks: BTreeMap<String, ModelStack>,
    /// `Fn::ImportValue`'s names and values.
    pub exports: BTreeMap<String, String>,
    /// By queue name.
    pub queues: BTreeMap<String, ModelQueue>,
    pub parameters: BTreeMap<String, String>,
    /// By (bus name, rule name).
    pub rules: BTreeMap<(String, String), (Rule, Vec<Target>)>,
    /// A rule whose state changed less than [`RULE_CHANGE_DELAY`] ago: until when EventBridge
    /// still delivers by its state before (DescribeRule and ListRules show the new one at once).
    pub rule_lag: BTreeMap<(String, String), (SystemTime, Option<String>)>,
    /// Bus name → its resource policy.
    pub buses: BTreeMap<String, Option<String>>,
    pub functions: BTreeMap<String, Function>,
    /// Function name → its mappings.
    pub mappings: BTreeMap<String, Vec<Mapping>>,
    pub alarms: Vec<Alarm>,
    pub dashboards: BTreeMap<String, String>,
    /// Function name → AWS/Lambda Invocations over the last hour.
    pub invocations: BTreeMap<String, f64>,
    /// Log group → its events (ms since the epoch, message).
    pub logs: BTreeMap<String, Vec<(i64, String)>>,
    /// Logs Insights query definitions by id (what the console's saved queries list).
    pub query_definitions: BTreeMap<String, ModelQueryDefinition>,
    /// Logs Insights queries started, by id: each one's rows (field, value), as GetQueryResults
    /// answers them once complete.
    pub queries: BTreeMap<String, Vec<Vec<(String, String)>>>,
    /// EC2 instances by id.
    pub instances: BTreeMap<String, ModelInstance>,
    /// A rule's tags, by its ARN.
    pub rule_tags: BTreeMap<String, BTreeMap<String, String>>,
    /// FIS: templates by id (their tags, what they select), experiments by id.
    pub experiment_templates: BTreeMap<String, (BTreeMap<String, String>, ExperimentTemplate)>,
    pub experiments: BTreeMap<String, ExperimentState>,
    /// Topic ARN → its subscriptions' ARNs (`PendingConfirmation` until confirmed).
    pub subscriptions: BTreeMap<String, Vec<String>>,
}

/// Everything the world holds.
#[derive(Debug, Clone)]
pub struct State {
    /// The world's clock: its start on tokio's clock (a paused runtime's virtual time), and the
    /// time [`World::advance`] added.
    pub started: tokio::time::Instant,
    pub advanced: Duration,
    /// By (account, region).
    pub sites: BTreeMap<(String, String), Site>,
    /// IAM (global): roles by ARN, managed policies' documents by ARN.
    pub roles: BTreeMap<String, ModelRole>,
    pub policies: BTreeMap<String, Value>,
    /// KMS keys by ARN.
    pub keys: BTreeMap<String, ModelKey>,
    /// Named profiles: the account each acts in.
    pub profiles: BTreeMap<String, String>,
    /// APIs that answer `AccessDenied`, by (account, API name).
    pub refused: BTreeSet<(String, String)>,
    /// What another party does just before an account's next call of an API is answered:
    /// (account, API name, the act), each once ([`World::before_next`]).
    pub before: Vec<(String, String, Interleaved)>,
    /// What each function answers a synchronous invocation with, by (account, region, name):
    /// a function's name is its own only in its account and region ([`World::responder`]).
    pub functions: BTreeMap<(String, String, String), Responder>,
    /// How long after a minute ends CloudWatch has SQS's datapoint of it ([`METRIC_LAG`]
    /// unless a test makes CloudWatch later).
    pub metric_lag: Duration,
}

/// A function's behaviour in the model: its answer to a payload.
#[derive(Clone)]
pub struct Responder(pub Arc<dyn Fn(String) -> BoxFuture<'static, Invoked> + Send + Sync>);

impl Responder {
    /// The function's answer to `payload`.
    pub async fn answer(&self, payload: String) -> Invoked {
        (self.0)(payload).await
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder")
    }
}

/// Another party's act between two of a caller's calls ([`World::before_next`]).
#[derive(Clone)]
pub struct Interleaved(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for Interleaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interleaved")
    }
}

/// One principal's view of the world, in one account and region; clones share the world.
#[derive(Debug, Clone)]
pub struct World {
    state: Arc<Mutex<State>>,
    account: String,
    region: String,
    /// Who calls: an operator, or an assumed role's session.
    caller: String,
}

/// When the world's clock starts: 2026-11-28T00:00:00Z.
const EPOCH: Duration = Duration::from_secs(1_795_824_000);
/// When the world's clock starts, in ms since the Unix epoch.
pub const EPOCH_MS: u64 = EPOCH.as_secs() * 1000;

impl World {
    /// An empty world, seen by an administrator of `account` in `region`.
    pub fn new(account: &str, region: &str) -> Self {
        let state = State {
            started: tokio::time::Instant::now(),
            advanced: Duration::ZERO,
            sites: BTreeMap::new(),
            roles: BTreeMap::new(),
            policies: BTreeMap::new(),
            keys: BTreeMap::new(),
            profiles: BTreeMap::new(),
            refused: BTreeSet::new(),
            before: Vec::new(),
            functions: BTreeMap::new(),
            metric_lag: METRIC_LAG,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            account: account.to_owned(),
            region: region.to_owned(),
            caller: operator(account),
        }
    }

    /// The same world seen by an administrator of another account (same region).
    pub fn at(&self, account: &str) -> Self {
        Self {
            state: self.state.clone(),
            account: account.to_owned(),
            region: self.region.clone(),
            caller: operator(account),
        }
    }

    /// The same world seen in another region.
    pub fn in_region(&self, region: &str) -> Self {
        Self {
            region: region.to_owned(),
            ..self.clone()
        }
    }

    pub fn account(&self) -> &str {
        &self.account
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// Who this view calls as (an operator's role, or an assumed role's session ARN).
    pub fn caller(&self) -> &str {
        &self.caller
    }

    /// The same world seen by `caller` acting in `account` (an assumed role's session).
    pub fn as_caller(&self, account: &str, caller: &str) -> Self {
        Self {
            state: self.state.clone(),
            account: account.to_owned(),
            region: self.region.clone(),
            caller: caller.to_owned(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the world (a test's set-up, or the defect it plants): the whole state, and this
    /// view's site.
    pub fn edit<T>(&self, change: impl FnOnce(&mut State, &str, &str) -> T) -> T {
        let mut state = self.lock();
        change(&mut state, &self.account, &self.region)
    }

    /// This view's site, to change.
    pub fn site<T>(&self, change: impl FnOnce(&mut Site) -> T) -> T {
        let key = (self.account.clone(), self.region.clone());
        let mut state = self.lock();
        change(state.sites.entry(key).or_default())
    }

    pub fn read<T>(&self, look: impl FnOnce(&State, &Site) -> T) -> T {
        let state = self.lock();
        let empty = Site::default();
        let site = state
            .sites
            .get(&(self.account.clone(), self.region.clone()))
            .unwrap_or(&empty);
        look(&state, site)
    }

    /// Lets time pass (tokio's clock passing, paused or not, passes it too).
    pub fn advance(&self, by: Duration) {
        self.lock().advanced += by;
    }

    /// The world's wall clock.
    pub fn clock(&self) -> SystemTime {
        let state = self.lock();
        SystemTime::UNIX_EPOCH + EPOCH + state.started.elapsed() + state.advanced
    }

    /// From now on, `api` (`GetQueueUrl`, `ListTargetsByRule`, …) answers AccessDenied in this
    /// view's account.
    pub fn refuse(&self, api: &str) {
        self.lock()
            .refused
            .insert((self.account.clone(), api.to_owned()));
    }

    /// A profile named `name` whose credentials act in `account`.
    pub fn profile(&self, name: &str, account: &str) {
        self.lock()
            .profiles
            .insert(name.to_owned(), account.to_owned());
    }

    /// A role made outside any stack (Karpenter's controller role, an operator's).
    pub fn put_role(&self, name: &str, inline: Vec<Value>, trust: Value) -> String {
        let arn = format!("arn:aws:iam::{}:role/{name}", self.account);
        let inline = inline
            .into_iter()
            .enumerate()
            .map(|(n, doc)| (format!("policy-{n}"), doc))
            .collect();
        self.lock().roles.insert(
            arn.clone(),
            ModelRole {
                id: role_id(&arn),
                arn: arn.clone(),
                inline,
                managed: Vec::new(),
                boundary: None,
                trust,
            },
        );
        arn
    }

    /// A message sent to queue `name` `ago` before now.
    pub fn send(&self, queue: &str, ago: Duration) {
        let now = self.clock();
        self.site(|site| {
            if let Some(q) = site.queues.get_mut(queue) {
                let id = uuid_like(&format!("{queue}{}", q.messages.len()));
                q.messages.send(ModelMessage::new(id, "{}"), now - ago);
            }
        });
    }

    /// Confirms a subscription to `topic`.
    pub fn subscribe(&self, topic: &str) {
        let arn = format!("{topic}:{}", uuid_like(topic));
        self.site(|site| {
            site.subscriptions
                .entry(topic.to_owned())
                .or_default()
                .push(arn)
        });
    }

    /// Someone else acts (`act`: a colleague, the set-up's own tool, another `adopt`) just
    /// before this view's account's next `api` call is answered: what a caller meets between
    /// two of its calls, as a rule listed by ListRules and deleted before ListTargetsByRule.
    pub fn before_next(&self, api: &str, act: impl Fn() + Send + Sync + 'static) {
        self.lock().before.push((
            self.account.clone(),
            api.to_owned(),
            Interleaved(Arc::new(act)),
        ));
    }

    /// Whether `api` is refused here; its AccessDenied answer. What another party does before
    /// this call ([`World::before_next`]) is done first.
    pub fn gate(&self, api: &str) -> Result<(), CallError> {
        let (refused, before) = {
            let mut state = self.lock();
            let refused = state
                .refused
                .contains(&(self.account.clone(), api.to_owned()));
            let at = state
                .before
                .iter()
                .position(|(account, name, _)| *account == self.account && name == api);
            (refused, at.map(|at| state.before.remove(at).2))
        };
        // Outside the lock: the act calls the world itself.
        if let Some(act) = before {
            (act.0)();
        }
        if refused {
            return Err(CallError::new(
                "AccessDenied",
                format!("User: {} is not authorized to perform: {api}", self.caller),
            ));
        }
        Ok(())
    }

    /// `look` at the queue at `url` in this view's site, without copying its messages.
    pub fn with_queue<T>(
        &self,
        url: &str,
        look: impl FnOnce(&ModelQueue) -> T,
    ) -> Result<T, CallError> {
        let name = url.rsplit('/').next().unwrap_or_default();
        self.read(|_, site| site.queues.get(name).filter(|q| q.url == url).map(look))
            .ok_or_else(|| {
                CallError::new(
                    missing::QUEUE,
                    "The specified queue does not exist for this wsdl version.",
                )
            })
    }
}

fn operator(account: &str) -> String {
    format!("arn:aws:iam::{account}:role/operator")
}

/// A stable stand-in for the ids AWS makes up.
pub fn uuid_like(seed: &str) -> String {
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The unique id IAM gives a role made with this ARN (a stand-in, stable per ARN).
pub fn role_id(arn: &str) -> String {
    format!("AROA{}", uuid_like(arn).to_uppercase())
}

pub fn not_found(what: &str) -> CallError {
    CallError::new(missing::RESOURCE, format!("{what} does not exist."))
}

pub fn policy(source: &str, doc: &Value) -> Result<Policy, String> {
    Policy::from_document(source, doc)
}
