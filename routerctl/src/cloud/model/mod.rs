//! A model of AWS that answers [`Cloud`] as AWS does, for tests that decide in a millisecond what
//! verify judges of a deployment.
//!
//! The world is built the way an operator builds the real one: stacks deployed from this
//! release's own templates ([`World::deploy`], CloudFormation's part: `deploy.rs`), a Karpenter
//! role made by hand, a subscription confirmed. A test then breaks one thing the way it breaks
//! in an account (a rule disabled, a policy edited, a mapping deleted, a read refused,
//! [`World::edit`]) and sees exactly that check fail with its fix.
//!
//! What it keeps of AWS's semantics: resources live in an account and region (IAM and KMS keys
//! by ARN); each API answers a missing resource with AWS's error code ([`super::missing`]);
//! AssumeRole is decided by the role's trust policy, evaluated by [`aws_model::policy`]; SQS
//! turns a queue policy, tags and attributes into GetQueueAttributes' and ListQueueTags' answers;
//! a refused read ([`World::refuse`]) answers `AccessDenied` for that API alone. Time is the
//! world's own clock ([`World::advance`]), so a message's age is exact. Not modelled (nothing
//! verify reads depends on them): pagination, eventual consistency, the operator's own IAM
//! permissions for each read (refusals stand in for them).

mod deploy;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, SystemTime},
};

use serde_json::Value;

use super::{
    Alarm, CallError, Cloud, Function, Key, Mapping, Message, Reach, Role, RoleError, Rule, Stack,
    Target, missing,
};
use aws_model::{
    aws::{arn_account, arn_name_after_slash},
    policy::{Policy, Principal, Request, evaluate},
};

/// A role as IAM keeps it: documents as JSON.
#[derive(Debug, Clone)]
pub struct ModelRole {
    pub arn: String,
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
    /// When each message in it was sent.
    pub sent: Vec<SystemTime>,
}

/// A deployed stack: what DescribeStacks and DescribeStackResources answer.
#[derive(Debug, Clone, Default)]
pub struct ModelStack {
    pub stack: Stack,
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
    /// Bus name → its resource policy.
    pub buses: BTreeMap<String, Option<String>>,
    pub functions: BTreeMap<String, Function>,
    /// Function name → its mappings.
    pub mappings: BTreeMap<String, Vec<Mapping>>,
    pub alarms: Vec<Alarm>,
    pub dashboards: BTreeMap<String, String>,
    /// Function name → AWS/Lambda Invocations over the last hour.
    pub invocations: BTreeMap<String, f64>,
    /// Log groups holding the router's metric documents.
    pub documents: BTreeSet<String>,
    /// Topic ARN → its subscriptions' ARNs (`PendingConfirmation` until confirmed).
    pub subscriptions: BTreeMap<String, Vec<String>>,
}

/// Everything the world holds.
#[derive(Debug, Clone)]
pub struct State {
    pub now: SystemTime,
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

impl World {
    /// An empty world, seen by an administrator of `account` in `region`.
    pub fn new(account: &str, region: &str) -> Self {
        let state = State {
            now: SystemTime::UNIX_EPOCH + EPOCH,
            sites: BTreeMap::new(),
            roles: BTreeMap::new(),
            policies: BTreeMap::new(),
            keys: BTreeMap::new(),
            profiles: BTreeMap::new(),
            refused: BTreeSet::new(),
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

    fn lock(&self) -> MutexGuard<'_, State> {
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

    fn read<T>(&self, look: impl FnOnce(&State, &Site) -> T) -> T {
        let state = self.lock();
        let empty = Site::default();
        let site = state
            .sites
            .get(&(self.account.clone(), self.region.clone()))
            .unwrap_or(&empty);
        look(&state, site)
    }

    /// Lets time pass.
    pub fn advance(&self, by: Duration) {
        self.lock().now += by;
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
        let now = self.lock().now;
        self.site(|site| {
            if let Some(q) = site.queues.get_mut(queue) {
                q.sent.push(now - ago);
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

    /// Whether `api` is refused here; its AccessDenied answer.
    fn gate(&self, api: &str) -> Result<(), CallError> {
        let refused = self
            .lock()
            .refused
            .contains(&(self.account.clone(), api.to_owned()));
        if refused {
            return Err(CallError::new(
                "AccessDenied",
                format!("User: {} is not authorized to perform: {api}", self.caller),
            ));
        }
        Ok(())
    }

    fn queue_named(&self, url: &str) -> Result<ModelQueue, CallError> {
        let name = url.rsplit('/').next().unwrap_or_default();
        self.read(|_, site| site.queues.get(name).cloned())
            .filter(|q| q.url == url)
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
fn uuid_like(seed: &str) -> String {
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn not_found(what: &str) -> CallError {
    CallError::new(missing::RESOURCE, format!("{what} does not exist."))
}

fn policy(source: &str, doc: &Value) -> Result<Policy, String> {
    Policy::parse(source, &doc.to_string())
}

impl Cloud for World {
    fn region(&self) -> &str {
        &self.region
    }

    fn now(&self) -> SystemTime {
        self.lock().now
    }

    async fn caller(&self) -> Result<(String, String), CallError> {
        self.gate("GetCallerIdentity")?;
        Ok((self.account.clone(), self.caller.clone()))
    }

    async fn reach(&self, reach: Reach<'_>) -> Result<Self, CallError> {
        match reach {
            Reach::Profile(name) => {
                let account = self.lock().profiles.get(name).cloned().ok_or_else(|| {
                    CallError::new(
                        "ProfileNotFound",
                        format!("the config profile ({name}) could not be found"),
                    )
                })?;
                Ok(self.at(&account))
            }
            Reach::Assume { role_arn, session } => {
                let trust = self.lock().roles.get(role_arn).map(|r| r.trust.clone());
                let denied = || {
                    CallError::new(
                        "AccessDenied",
                        format!(
                            "AssumeRole {role_arn}: User: {} is not authorized to perform: \
                             sts:AssumeRole on resource: {role_arn}",
                            self.caller
                        ),
                    )
                };
                let trust = trust.ok_or_else(denied)?;
                let trust = policy("trust policy", &trust).map_err(|_| denied())?;
                let context = [("aws:PrincipalArn", self.caller.as_str())];
                let decision = evaluate(
                    std::slice::from_ref(&trust),
                    &Request {
                        principal: Principal::Aws(&self.caller),
                        action: "sts:AssumeRole",
                        resource: role_arn,
                        context: &context,
                    },
                );
                if !decision.is_allowed() {
                    return Err(denied());
                }
                let account = arn_account(role_arn).unwrap_or_default().to_owned();
                Ok(Self {
                    state: self.state.clone(),
                    region: self.region.clone(),
                    caller: format!(
                        "arn:aws:sts::{account}:assumed-role/{}/{session}",
                        arn_name_after_slash(role_arn)
                    ),
                    account,
                })
            }
        }
    }

    async fn stack(&self, name: &str) -> Result<Stack, CallError> {
        self.gate("DescribeStacks")?;
        self.read(|_, site| site.stacks.get(name).map(|s| s.stack.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::STACK,
                    format!("Stack with id {name} does not exist"),
                )
            })
    }

    async fn stack_resources(&self, stack: &str) -> Result<BTreeMap<String, String>, CallError> {
        self.gate("DescribeStackResources")?;
        self.read(|_, site| site.stacks.get(stack).map(|s| s.resources.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::STACK,
                    format!("Stack with id {stack} does not exist"),
                )
            })
    }

    async fn stack_of(&self, physical_id: &str) -> Option<String> {
        self.gate("DescribeStackResources").ok()?;
        self.read(|_, site| {
            site.stacks
                .iter()
                .find(|(_, s)| s.resources.values().any(|p| p == physical_id))
                .map(|(name, _)| name.clone())
        })
    }

    async fn queue_url(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetQueueUrl")?;
        self.read(|_, site| site.queues.get(name).map(|q| q.url.clone()))
            .ok_or_else(|| {
                CallError::new(
                    missing::QUEUE,
                    "The specified queue does not exist for this wsdl version.",
                )
            })
    }

    async fn queue_attributes(&self, url: &str) -> Result<HashMap<String, String>, CallError> {
        self.gate("GetQueueAttributes")?;
        let queue = self.queue_named(url)?;
        let mut attributes = queue.attributes.clone();
        attributes.insert(
            "ApproximateNumberOfMessages".to_owned(),
            queue.sent.len().to_string(),
        );
        Ok(attributes)
    }

    async fn queue_tags(&self, url: &str) -> Result<BTreeMap<String, String>, CallError> {
        self.gate("ListQueueTags")?;
        Ok(self.queue_named(url)?.tags)
    }

    async fn queue_urls(&self, prefix: &str) -> Result<Vec<String>, CallError> {
        self.gate("ListQueues")?;
        Ok(self.read(|_, site| {
            site.queues
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(_, q)| q.url.clone())
                .collect()
        }))
    }

    async fn peek(&self, url: &str) -> Result<Vec<Message>, CallError> {
        self.gate("ReceiveMessage")?;
        let queue = self.queue_named(url)?;
        Ok(queue
            .sent
            .iter()
            .take(10)
            .map(|sent| Message {
                sent_ms: sent
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_millis() as u64),
            })
            .collect())
    }

    async fn parameter(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetParameter")?;
        self.read(|_, site| site.parameters.get(name).cloned())
            .ok_or_else(|| CallError::new(missing::PARAMETER, ""))
    }

    async fn rule(&self, name: &str, bus: Option<&str>) -> Result<Rule, CallError> {
        self.gate("DescribeRule")?;
        if name.contains('|') {
            return Err(CallError::new(
                "ValidationException",
                format!(
                    "1 validation error detected: Value '{name}' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+"
                ),
            ));
        }
        let key = (bus.unwrap_or("default").to_owned(), name.to_owned());
        self.read(|_, site| site.rules.get(&key).map(|(rule, _)| rule.clone()))
            .ok_or_else(|| not_found(&format!("Rule {name}")))
    }

    async fn targets(&self, rule: &str, bus: Option<&str>) -> Result<Vec<Target>, CallError> {
        self.gate("ListTargetsByRule")?;
        let key = (bus.unwrap_or("default").to_owned(), rule.to_owned());
        self.read(|_, site| site.rules.get(&key).map(|(_, targets)| targets.clone()))
            .ok_or_else(|| not_found(&format!("Rule {rule}")))
    }

    async fn bus_policy(&self, bus: &str) -> Result<Option<String>, CallError> {
        self.gate("DescribeEventBus")?;
        self.read(|_, site| site.buses.get(bus).cloned())
            .ok_or_else(|| not_found(&format!("Event bus {bus}")))
    }

    async fn function(&self, name: &str) -> Result<Function, CallError> {
        self.gate("GetFunctionConfiguration")?;
        self.read(|_, site| site.functions.get(name).cloned())
            .ok_or_else(|| not_found(&format!("Function not found: {name}")))
    }

    async fn mappings(&self, function: &str) -> Result<Vec<Mapping>, CallError> {
        self.gate("ListEventSourceMappings")?;
        Ok(self.read(|_, site| site.mappings.get(function).cloned().unwrap_or_default()))
    }

    async fn role(&self, arn: &str) -> Result<Role, RoleError> {
        let name = arn_name_after_slash(arn);
        let read = "run verify with a principal allowed iam:GetRole, iam:ListRolePolicies, \
                    iam:GetRolePolicy, iam:ListAttachedRolePolicies, iam:GetPolicy and \
                    iam:GetPolicyVersion"
            .to_owned();
        self.gate("GetRole")
            .map_err(|e| (format!("GetRole {name}: {e}"), read.clone()))?;
        let state = self.lock();
        let role = state.roles.get(arn).ok_or_else(|| {
            (
                format!("GetRole {name}: NoSuchEntity: The role with name {name} cannot be found."),
                read.clone(),
            )
        })?;
        let mut identity = Vec::new();
        for (policy_name, doc) in &role.inline {
            identity.push(
                policy(&format!("inline policy {policy_name}"), doc)
                    .map_err(|e| (e, read.clone()))?,
            );
        }
        for managed in &role.managed {
            let doc = state.policies.get(managed).ok_or_else(|| {
                (
                    format!("GetPolicy {managed}: NoSuchEntity: Policy {managed} was not found."),
                    read.clone(),
                )
            })?;
            let source = format!("managed policy {}", arn_name_after_slash(managed));
            identity.push(policy(&source, doc).map_err(|e| (e, read.clone()))?);
        }
        let boundary = match &role.boundary {
            Some(arn) => Some(
                state
                    .policies
                    .get(arn)
                    .ok_or_else(|| (format!("GetPolicy {arn}: NoSuchEntity"), read.clone()))
                    .and_then(|doc| {
                        policy(
                            &format!("managed policy {}", arn_name_after_slash(arn)),
                            doc,
                        )
                        .map_err(|e| (e, read.clone()))
                    })?,
            ),
            None => None,
        };
        Ok(Role::new(
            arn,
            identity,
            boundary,
            policy(&format!("trust policy of {name}"), &role.trust),
        ))
    }

    async fn key(&self, id: &str) -> Result<Key, String> {
        self.gate("DescribeKey")
            .map_err(|e| format!("DescribeKey {id}: {e}"))?;
        let state = self.lock();
        let key = state
            .keys
            .values()
            .find(|k| k.arn == id || k.arn.ends_with(&format!(":key/{id}")))
            .ok_or_else(|| {
                format!("DescribeKey {id}: NotFoundException: Key '{id}' does not exist")
            })?;
        Ok(Key {
            arn: key.arn.clone(),
            aws_managed: key.aws_managed,
            disabled: (!key.enabled).then(|| "Disabled".to_owned()),
            policy: policy(&format!("key policy of {}", key.arn), &key.policy)?,
        })
    }

    async fn alarms_named(&self, prefix: &str) -> Result<Vec<Alarm>, CallError> {
        self.gate("DescribeAlarms")?;
        Ok(self.read(|_, site| {
            site.alarms
                .iter()
                .filter(|a| a.name.starts_with(prefix))
                .cloned()
                .collect()
        }))
    }

    async fn alarms_for_metric(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
    ) -> Result<Vec<Alarm>, CallError> {
        self.gate("DescribeAlarmsForMetric")?;
        Ok(self.read(|_, site| {
            site.alarms
                .iter()
                .filter(|a| {
                    a.metric.as_ref().is_some_and(|w| {
                        w.namespace == namespace
                            && w.metric == metric
                            && w.function.as_deref() == Some(function)
                    })
                })
                .cloned()
                .collect()
        }))
    }

    async fn dashboard(&self, name: &str) -> Result<String, CallError> {
        self.gate("GetDashboard")?;
        self.read(|_, site| site.dashboards.get(name).cloned())
            .ok_or_else(|| not_found(&format!("Dashboard {name}")))
    }

    async fn metric_sum(
        &self,
        namespace: &str,
        metric: &str,
        function: &str,
        _since: SystemTime,
        _until: SystemTime,
    ) -> Result<f64, CallError> {
        self.gate("GetMetricStatistics")?;
        if (namespace, metric) != ("AWS/Lambda", "Invocations") {
            return Ok(0.0);
        }
        Ok(self.read(|_, site| site.invocations.get(function).copied().unwrap_or(0.0)))
    }

    async fn log_matches(
        &self,
        group: &str,
        _pattern: &str,
        _since: SystemTime,
        _until: SystemTime,
    ) -> Result<bool, CallError> {
        self.gate("FilterLogEvents")?;
        Ok(self.read(|_, site| site.documents.contains(group)))
    }

    async fn subscriptions(&self, topic: &str) -> Result<Vec<String>, CallError> {
        self.gate("ListSubscriptionsByTopic")?;
        Ok(self.read(|_, site| site.subscriptions.get(topic).cloned().unwrap_or_default()))
    }
}
