//! The router's seam ([`router_core::aws::Aws`]) answered by the world: [`WorldAws`] is what the
//! router's decision tests put behind the seam, as the Lambda puts the SDK there.
//!
//! Each call acts as the identity its [`Session`] names: the router's own role at home, or the
//! session of a spoke role the world issued credentials for when AssumeRole passed the role's
//! trust policy. The world answers from its state (EC2's instances and tags, SQS's queues with
//! their tags, policies and messages, SSM's parameters, IAM's roles and their ids), with AWS's
//! codes for what is missing. Over it lies the layer of faults a test scripts ([`Fault`]), and a
//! record of every call.
//!
//! One guard is stricter than AWS: the router's own role answers only at home (its account and
//! region); elsewhere the router must act as a spoke role, and a call made there as itself is
//! refused, where AWS would quietly read the home account instead.

mod faults;
mod function;
mod seam;

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Mutex, MutexGuard},
};

use serde_json::json;

use self::faults::Faults;
pub use self::{
    faults::{Call, Fault, SWEEP},
    function::run_router,
    seam::invalid_receipt,
};
use super::{ModelRole, World, role_id};
use router_core::{
    aws::{CallError, Identity, Session},
    config::{DEFAULT_SPOKE_ROLE_NAME, DIRECT_ROLE_SUFFIX},
    tenancy::{KINDS_TAG, TENANT_TAG, record_name},
};

/// One message a queue holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub body: String,
    pub attributes: Vec<(String, String)>,
}

/// Something that happens in AWS right after a call is answered ([`WorldAws::after_next`]).
type Effect = Box<dyn FnOnce(&WorldAws) + Send>;

/// The world behind the router's seam, with a layer of scripted faults over it.
pub struct WorldAws {
    /// The world as the router's own role sees it at home.
    home: World,
    faults: Mutex<Faults>,
    /// Per action, effects that follow its next answers, in order.
    after: Mutex<BTreeMap<&'static str, VecDeque<Effect>>>,
    /// Credentials issued by AssumeRole (by access key id): the session each acts as.
    sessions: Mutex<BTreeMap<String, World>>,
    /// The draw every retry delay takes (1.0: the longest).
    jitter: f64,
}

/// A queue's URL as SQS makes it.
pub fn url(account: &str, region: &str, name: &str) -> String {
    format!("https://sqs.{region}.amazonaws.com/{account}/{name}")
}

impl WorldAws {
    /// The router as `role_arn` in `world`'s account and region (its home), with the spoke role
    /// that spoke.yaml creates in each of `spokes` trusting it.
    pub fn new(world: &World, role_arn: &str, spokes: &[&str]) -> Self {
        let home = world.as_caller(world.account(), role_arn);
        let aws = Self {
            home,
            faults: Mutex::default(),
            after: Mutex::default(),
            sessions: Mutex::default(),
            jitter: 1.0,
        };
        for account in spokes {
            aws.allow_role(&format!(
                "arn:aws:iam::{account}:role/{DEFAULT_SPOKE_ROLE_NAME}"
            ));
        }
        aws
    }

    /// The world, as the router's own role sees it at home.
    pub fn world(&self) -> &World {
        &self.home
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The world of (account, region), as its administrator sees it.
    fn site(&self, account: &str, region: &str) -> World {
        self.home.at(account).in_region(region)
    }

    /// A role at `arn` whose trust policy admits the router's role (spoke.yaml's spoke role).
    pub fn allow_role(&self, arn: &str) {
        let trust = json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"AWS": self.home.caller()},
                "Action": "sts:AssumeRole",
            }],
        });
        self.home.edit(|state, _, _| {
            state.roles.insert(
                arn.to_owned(),
                ModelRole {
                    id: role_id(arn),
                    arn: arn.to_owned(),
                    inline: Vec::new(),
                    managed: Vec::new(),
                    boundary: None,
                    trust,
                },
            )
        });
    }

    /// The role at `arn` deleted (AssumeRole of it is then refused).
    pub fn forbid_role(&self, arn: &str) {
        self.home.edit(|state, _, _| state.roles.remove(arn));
    }

    /// The name of a member's direct role for this hub's region (spoke.yaml's).
    fn direct_role_arn(&self, account: &str) -> String {
        format!(
            "arn:aws:iam::{account}:role/{DEFAULT_SPOKE_ROLE_NAME}{DIRECT_ROLE_SUFFIX}-{}",
            self.home.region()
        )
    }

    /// `account`'s direct role, with this id (what SQS reports as the SenderId of its sends).
    pub fn direct_role(&self, account: &str, id: &str) {
        let arn = self.direct_role_arn(account);
        self.home.edit(|state, _, _| {
            state.roles.insert(
                arn.clone(),
                ModelRole {
                    id: id.to_owned(),
                    arn,
                    inline: Vec::new(),
                    managed: Vec::new(),
                    boundary: None,
                    trust: json!({"Version": "2012-10-17", "Statement": []}),
                },
            )
        });
    }

    /// `account` without a direct role.
    pub fn delete_direct_role(&self, account: &str) {
        self.forbid_role(&self.direct_role_arn(account));
    }

    /// A Karpenter node of `cluster` in (account, region), tagged as Karpenter tags it.
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

    /// A running instance in (account, region) with these tags.
    pub fn instance(&self, account: &str, region: &str, id: &str, tags: &[(&str, &str)]) {
        self.site(account, region).instance(id, "running", tags);
    }

    /// A Karpenter node of `cluster` launched for its node pool `pool`, of the type, in the zone
    /// and bought as `described` says.
    pub fn node_of(
        &self,
        (account, region): (&str, &str),
        id: &str,
        (cluster, pool): (&str, &str),
        described: crate::Described,
    ) {
        self.site(account, region).instance_described(
            id,
            "running",
            &[
                ("eks:eks-cluster-name", cluster),
                (&format!("kubernetes.io/cluster/{cluster}"), "owned"),
                ("karpenter.sh/nodepool", pool),
            ],
            described,
        );
    }

    /// What a tenant stack makes: `karpenter-<cluster>` tagged for the cluster, and its tenant
    /// record.
    pub fn tenant(&self, account: &str, region: &str, cluster: &str) {
        let name = format!("karpenter-{cluster}");
        self.queue(account, region, &name, &[(TENANT_TAG, cluster)], None);
        self.record(account, region, &name);
    }

    /// A tenant stack that takes only `kinds` (tenant.yaml's `EventKinds`, as its queue's tag).
    pub fn tenant_taking(&self, account: &str, region: &str, cluster: &str, kinds: &str) {
        let name = format!("karpenter-{cluster}");
        let tags = [(TENANT_TAG, cluster), (KINDS_TAG, kinds)];
        self.queue(account, region, &name, &tags, None);
        self.record(account, region, &name);
    }

    /// Sets a queue's tag, as a tenant stack update does (the queue stays).
    pub fn tag_queue(&self, account: &str, region: &str, name: &str, key: &str, value: &str) {
        self.site(account, region).site(|site| {
            site.queues
                .get_mut(name)
                .expect("the queue exists")
                .tags
                .insert(key.to_owned(), value.to_owned())
        });
    }

    /// A queue in (account, region) with these tags and, if given, this policy.
    pub fn queue(
        &self,
        account: &str,
        region: &str,
        name: &str,
        tags: &[(&str, &str)],
        policy: Option<&str>,
    ) {
        let site = self.site(account, region);
        let attributes: Vec<(&str, &str)> = policy.map(|p| ("Policy", p)).into_iter().collect();
        site.create_queue(name, &attributes);
        site.site(|site| {
            let queue = site.queues.get_mut(name).expect("just made");
            for (k, v) in tags {
                queue.tags.insert(k.to_string(), v.to_string());
            }
        });
    }

    /// The tenant record of `queue` (what tenant.yaml writes to SSM).
    pub fn record(&self, account: &str, region: &str, queue: &str) {
        self.site(account, region).site(|site| {
            site.parameters
                .insert(record_name(queue), "onboarded".to_owned())
        });
    }

    pub fn delete_queue(&self, account: &str, region: &str, name: &str) {
        self.site(account, region)
            .site(|site| site.queues.remove(name));
    }

    pub fn delete_record(&self, account: &str, region: &str, queue: &str) {
        self.site(account, region)
            .site(|site| site.parameters.remove(&record_name(queue)));
    }

    /// The next `n` calls of `action` fail with `fault`.
    pub fn fail(&self, action: &'static str, n: usize, fault: Fault) {
        self.faults()
            .scripted
            .entry(action)
            .or_default()
            .extend(std::iter::repeat_n(fault, n));
    }

    /// Right after the next answer to `action` (only GetQueueUrl so far), `effect` changes AWS:
    /// what someone else did between two of the router's reads.
    pub fn after_next(
        &self,
        action: &'static str,
        effect: impl FnOnce(&WorldAws) + Send + 'static,
    ) {
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

    /// Every call of `action` fails with `fault`.
    pub fn break_action(&self, action: &'static str, fault: Fault) {
        self.faults().always.insert(action, fault);
    }

    /// Every SendMessageBatch to queue `name` fails with `fault`.
    pub fn break_queue(&self, name: &str, fault: Fault) {
        self.faults().queues.insert(name.into(), fault);
    }

    /// SendMessageBatch to queue `name` answers again (after [`WorldAws::break_queue`]).
    pub fn mend_queue(&self, name: &str) {
        self.faults().queues.remove(name);
    }

    /// The next `n` entries sent to queue `name` fail with `code`.
    pub fn fail_entries(&self, name: &str, n: usize, code: &str, sender_fault: bool) {
        self.faults()
            .entries
            .insert(name.into(), (n, code.to_owned(), sender_fault));
    }

    /// The bodies in queue `name` of (account, region).
    pub fn bodies(&self, account: &str, region: &str, name: &str) -> Vec<String> {
        self.held(account, region, name)
            .into_iter()
            .map(|m| m.body)
            .collect()
    }

    /// The messages queue `name` of (account, region) holds, oldest first.
    pub fn held(&self, account: &str, region: &str, name: &str) -> Vec<Held> {
        self.site(account, region).site(|site| {
            site.queues
                .get(name)
                .map(|q| {
                    q.messages
                        .iter()
                        .map(|m| Held {
                            body: m.body.clone(),
                            attributes: m.attributes.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    pub fn calls(&self) -> Vec<Call> {
        self.faults().calls.clone()
    }

    pub fn count(&self, action: &str) -> usize {
        self.faults()
            .calls
            .iter()
            .filter(|c| c.action == action)
            .count()
    }

    /// The visibility timeouts set, per receipt handle, in order.
    pub fn visibility(&self) -> Vec<(String, u32)> {
        self.faults().visibility.clone()
    }

    /// Records a call made as `at`, then plays its scripted fault, if any; a call that reaches
    /// the world is answered as the session `at` names.
    async fn call(
        &self,
        action: &'static str,
        kind: Option<&'static str>,
        at: Option<&Session>,
    ) -> Result<World, CallError> {
        let fault = self.faults().take(
            Call {
                action,
                account: at.map(|s| s.scope.account.to_string()).unwrap_or_default(),
                region: at.map(|s| s.scope.region.to_string()).unwrap_or_default(),
            },
            kind,
        );
        let view = match at {
            Some(session) => self.view(session)?,
            None => self.home.clone(),
        };
        if let Some(fault) = fault {
            fault.play().await?;
        }
        Ok(view)
    }

    /// The world as `at` sees it: the router's own role at home, or an issued session in the
    /// account its credentials belong to; a session acting outside its account is refused.
    fn view(&self, at: &Session) -> Result<World, CallError> {
        let (account, region) = (&*at.scope.account, &*at.scope.region);
        match &at.identity {
            Identity::Home
                if account.is_empty()
                    || (account == self.home.account() && region == self.home.region()) =>
            {
                Ok(self.home.clone())
            }
            Identity::Home => Err(CallError::new(
                "AccessDenied",
                format!("the router's own role acting in {}", at.scope),
            )),
            Identity::Assumed { credentials, .. } => {
                let session = self
                    .sessions
                    .lock()
                    .unwrap()
                    .get(&credentials.access_key_id)
                    .cloned()
                    .ok_or_else(|| {
                        CallError::new(
                            "InvalidClientTokenId",
                            "The security token included in the request is invalid.",
                        )
                    })?;
                if session.account() != account {
                    return Err(CallError::new(
                        "AccessDenied",
                        format!(
                            "credentials of {} acting in {}",
                            session.account(),
                            at.scope
                        ),
                    ));
                }
                Ok(session.in_region(region))
            }
        }
    }
}
