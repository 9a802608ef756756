//! What an account and region run today, found by what the resources do rather than by their
//! names: the Karpenter clusters (instances carrying the managed tag), the default-bus rules whose
//! patterns select Karpenter's kinds and whose targets are SQS queues (each rule matched as
//! EventBridge would against an event of each kind), the Karpenter controller roles that may read
//! those queues and the cluster each role serves (its `eks:DescribeCluster` grant on
//! `cluster/<name>`, as Karpenter's controller policy has it), and which stack made each resource.
//! The router's own rules and queues are told apart by the base stack, its tenant queues by what
//! the router itself reads ([`router_core::tenancy`]: the tenant tag, or a policy that
//! admits the router alone). A queue that only carries a tenant queue's name (EKS Blueprints
//! names its own `karpenter-<cluster>`) is an old set-up like any other.
//!
//! The readers are verify's where verify has one (the base stack, a queue, a role, a tenant
//! queue's policy); what is new here is listing the default bus and the roles.

mod clusters;
mod controllers;
mod owners;
mod rules;

use crate::deployment::{Base, Queue, load_queue};
use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result};
use router_core::{
    config::QueueNameTemplate,
    event::{Kind, rfc3339_unix_millis},
    tenancy::{self, Ownership},
};

pub(crate) use self::controllers::Controller;
pub use self::owners::{Owner, Tool};
use self::{
    clusters::{clusters_of, karpenter_nodes, named_after},
    controllers::controller_roles,
    owners::StackOwners,
    rules::{interruption_rules, rule_tags},
};
use super::{
    connect::Connection,
    evidence::{EVIDENCE_TAG, Round, VERIFIED_TAG},
};
use crate::cloud::{Cloud, moves::Moves};
use aws_model::arn::arn_name;

/// A default-bus rule that sends Karpenter's kinds to a queue the router does not own.
#[derive(Debug, Clone)]
pub struct OldRule {
    pub name: String,
    pub arn: String,
    pub enabled: bool,
    pub kinds: Vec<Kind>,
    /// The target id of the old queue in this rule.
    pub target_id: String,
    /// The rule's other targets (ARNs): disabling or deleting it would cut them off too.
    pub other_targets: Vec<String>,
    pub owner: Owner,
}

/// How a queue was tied to a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tie {
    /// A Karpenter controller role that may read the queue, and DescribeCluster this cluster.
    ControllerRole(String),
    /// adopt marked it when it deleted the rules that fed it ([`RETIRED_TAG`]).
    Retired,
    /// Only the queue's name (Karpenter's getting-started names it after the cluster).
    Name,
}

impl std::fmt::Display for Tie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tie::ControllerRole(role) => write!(
                f,
                "its Karpenter may read it ({role}, whose policy names the cluster)"
            ),
            Tie::Retired => f.write_str("adopt marked it when it deleted its rules"),
            Tie::Name => f.write_str("tied to the cluster by its name only"),
        }
    }
}

/// An interruption set-up of the Karpenter kind: a queue and the rules that feed it.
#[derive(Debug, Clone)]
pub struct OldSetup {
    pub queue: Queue,
    pub owner: Owner,
    pub rules: Vec<OldRule>,
    /// The clusters whose Karpenter reads it, and how that is known.
    pub clusters: Vec<(String, Tie)>,
    /// The Karpenter controller roles that may read it.
    pub readers: Vec<String>,
}

impl OldSetup {
    /// Every kind some rule sends it.
    pub fn kinds(&self) -> BTreeSet<&'static str> {
        self.rules
            .iter()
            .flat_map(|r| r.kinds.iter().map(|k| k.label()))
            .collect()
    }

    pub fn depth(&self) -> u64 {
        [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ]
        .iter()
        .filter_map(|a| self.queue.attributes.get(*a)?.parse::<u64>().ok())
        .sum()
    }
}

/// One cluster as adopt sees it.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Running or pending instances with the managed tag.
    pub nodes: Vec<String>,
    /// Indexes into [`Landscape::setups`] of the set-ups its Karpenter reads.
    pub setups: Vec<usize>,
    /// Its tenant queue, when it has one.
    pub tenant: Option<Queue>,
    /// A queue with the tenant queue's name that the tenant stack did not make, and why it is not
    /// the router's (EKS Blueprints names its own queue `karpenter-<cluster>`).
    pub name_taken: Option<(Queue, String)>,
    /// Karpenter's controller role: from `--karpenter-role`, else a role that reads its old queue.
    pub controller: Option<String>,
    /// When `--rollback` last ran for it ([`ROLLBACK_TAG`]).
    pub rolled_back: Option<SystemTime>,
    /// The evidence round under way ([`EVIDENCE_TAG`]): the probe and sentinels `--apply` sent.
    pub round: Option<Round>,
    /// When `--apply` last read evidence that held ([`VERIFIED_TAG`]).
    pub verified: Option<SystemTime>,
}

impl Cluster {
    /// Rolled back, and not verified on the new queue since.
    pub fn is_rolled_back(&self) -> bool {
        self.rolled_back
            .is_some_and(|at| self.verified.is_none_or(|v| v <= at))
    }
}

/// Everything adopt read.
pub struct Landscape {
    /// The cluster's account and region (the site's).
    pub account: String,
    pub region: String,
    /// The hub's base stack.
    pub base: Base,
    /// What connects the site to the router: the base stack, or a spoke stack.
    pub connection: Connection,
    pub queue_names: QueueNameTemplate,
    pub clusters: BTreeMap<String, Cluster>,
    pub setups: Vec<OldSetup>,
    /// Rules whose pattern uses a filter adopt does not evaluate: reported, never touched.
    pub unreadable: Vec<(String, String)>,
    /// Every role that looks like a Karpenter controller, and the clusters it names.
    pub controllers: Vec<Controller>,
}

impl Landscape {
    /// The set-ups read by several clusters' Karpenters (each deletes the others' messages).
    pub fn shared(&self) -> Vec<&OldSetup> {
        self.setups
            .iter()
            .filter(|s| s.clusters.len() > 1)
            .collect()
    }

    /// Set-ups no cluster could be tied to.
    pub fn unclaimed(&self) -> Vec<&OldSetup> {
        self.setups
            .iter()
            .filter(|s| s.clusters.is_empty())
            .collect()
    }
}

/// The tag `--rollback` puts on a cluster's tenant queue (RFC 3339) before it changes anything:
/// evidence from before it no longer counts, and the cluster moves again only on new evidence.
pub const ROLLBACK_TAG: &str = "interruption-router:adopt-rolled-back";

/// The tag adopt puts on an old queue before it deletes the rules that fed it, so the queue is
/// still found (and deleted once empty) when nothing else ties it to the cluster.
pub const RETIRED_TAG: &str = "interruption-router:retired-for";

/// The base stack's own queues (ingest, dead-letter), by ARN: a member's queue of the same name
/// is not the router's.
fn is_stack_queue(base: &Base, arn: &str) -> bool {
    ["IngestQueueArn", "DeadLetterQueueArn"]
        .iter()
        .filter_map(|o| base.output(o))
        .any(|own| own == arn)
}

/// Whose a queue with a tenant queue's name is, as the router judges it: its tenant tag for
/// `cluster`, else a policy admitting the router alone.
pub(crate) fn ownership(
    queue: &Queue,
    tags: &BTreeMap<String, String>,
    cluster: &str,
    router_role: Option<&str>,
) -> Ownership {
    tenancy::by_tag(tags.iter().map(|(k, v)| (k.as_str(), v.as_str())), cluster).unwrap_or_else(
        || {
            tenancy::by_policy(
                queue.attributes.get("Policy").map(String::as_str),
                router_role,
            )
        },
    )
}

/// Reads the account and region `site` points at (the site `connection` describes), around the
/// router's base stack `base`.
pub async fn read(
    site: &impl Moves,
    base: Base,
    connection: Connection,
    managed_tag: &str,
    karpenter_roles: &[(String, String)],
) -> Result<Landscape> {
    let account = connection.account.clone();
    let region = site.region().to_owned();
    let queue_names = tenant_queue_names(&base)?;
    let router_targets: BTreeSet<String> = ["IngestQueueArn", "DeadLetterQueueArn"]
        .iter()
        .filter_map(|o| base.output(o).map(str::to_owned))
        .collect();

    let nodes = karpenter_nodes(site, managed_tag).await?;
    let owners = StackOwners::read(site).await;
    let (rules, unreadable) = interruption_rules(site, &account, &region, &router_targets).await?;
    let controllers = controller_roles(site, &base.partition, &account, karpenter_roles).await?;

    let router_role = connection.sender.as_deref();
    let survey = Survey {
        account: &account,
        local: format!("arn:{}:sqs:{region}:{account}:", base.partition),
        base: &base,
        queue_names: &queue_names,
        router_role,
        owners: &owners,
        controllers: &controllers,
        nodes: &nodes,
    };
    let mut setups = Vec::new();
    for (arn, rules) in survey.old_queues(site, rules).await {
        if let Some(setup) = survey.old_setup(site, &arn, rules).await {
            setups.push(setup);
        }
    }

    let mut clusters = clusters_of(nodes, &setups, karpenter_roles);
    for (name, cluster) in clusters.iter_mut() {
        read_tenant(site, name, cluster, &queue_names, router_role, &controllers).await;
    }
    Ok(Landscape {
        account,
        region,
        base,
        connection,
        queue_names,
        clusters,
        setups,
        unreadable,
        controllers,
    })
}

/// The tenant queues' names, from the base stack's prefix (Karpenter's own `karpenter-` when it
/// has none).
fn tenant_queue_names(base: &Base) -> Result<QueueNameTemplate> {
    QueueNameTemplate::parse(&format!(
        "{}{{cluster}}",
        base.output("QueuePrefix").unwrap_or("karpenter-")
    ))
    .map_err(anyhow::Error::msg)
}

/// What [`read`] has found of the site, shared by the stages that judge its old queues.
struct Survey<'a> {
    account: &'a str,
    /// The account and region's SQS ARN prefix: a queue elsewhere is not this site's to adopt.
    local: String,
    base: &'a Base,
    queue_names: &'a QueueNameTemplate,
    /// The role the router writes tenant queues with here (the spoke role in a member).
    router_role: Option<&'a str>,
    owners: &'a StackOwners,
    controllers: &'a [Controller],
    nodes: &'a BTreeMap<String, Vec<String>>,
}

impl Survey<'_> {
    /// One entry per old queue, with the rules that feed it: those the rules feed, those a
    /// Karpenter controller role may read (its rules may be gone already), and those adopt
    /// marked when it deleted their rules.
    async fn old_queues(
        &self,
        site: &impl Moves,
        rules: Vec<(String, OldRule)>,
    ) -> BTreeMap<String, Vec<OldRule>> {
        let mut by_queue: BTreeMap<String, Vec<OldRule>> = BTreeMap::new();
        for (queue_arn, mut rule) in rules {
            rule.owner = self.owners.owner(
                &[&rule.name, &rule.arn],
                &rule.name,
                &rule_tags(site, &rule.arn).await,
            );
            by_queue.entry(queue_arn).or_default().push(rule);
        }
        for controller in self.controllers {
            for arn in controller.role.allowed_resources("sqs:ReceiveMessage") {
                if arn.starts_with(&self.local) && !arn.contains(['*', '?']) {
                    by_queue.entry(arn).or_default();
                }
            }
        }
        for arn in retired_queues(site, &self.local, self.nodes.keys()).await {
            by_queue.entry(arn).or_default();
        }
        by_queue
    }

    /// The old set-up the queue `arn` and its `rules` make, or none when the queue is not this
    /// site's, is gone, is the router's own, or is no interruption set-up adopt can retire.
    async fn old_setup(
        &self,
        site: &impl Moves,
        arn: &str,
        rules: Vec<OldRule>,
    ) -> Option<OldSetup> {
        // A queue in another account or region is not this account's to adopt.
        if !arn.starts_with(&self.local) || is_stack_queue(self.base, arn) {
            return None;
        }
        let queue = load_queue(site, arn_name(arn)).await.ok()?;
        let tags = queue_tags(site, &queue.url).await;
        // The router's own tenant queues are no old set-up, whatever feeds them.
        let tenant_of = crate::verify::cluster_of(self.queue_names, &queue.name);
        if tenant_of.is_some_and(|c| ownership(&queue, &tags, &c, self.router_role).is_routers()) {
            return None;
        }
        let owner = self.queue_owner(&queue, &tags, &rules);
        let readers: Vec<&Controller> = self
            .controllers
            .iter()
            .filter(|c| c.role.may("sqs:ReceiveMessage", &queue.arn).is_allowed())
            .collect();
        let clusters = self.tied_clusters(&readers, &queue.name, &tags);
        // A queue only a role reads, with no rule and no mark of adopt's, is not an
        // interruption set-up adopt knows how to retire.
        if rules.is_empty() && !tags.contains_key(RETIRED_TAG) && readers.is_empty() {
            return None;
        }
        Some(OldSetup {
            readers: readers.iter().map(|c| c.role.name().to_owned()).collect(),
            queue,
            owner,
            rules,
            clusters,
        })
    }

    /// Who made an old queue: its stack or its own marks, else its rules' tool.
    fn queue_owner(
        &self,
        queue: &Queue,
        tags: &BTreeMap<String, String>,
        rules: &[OldRule],
    ) -> Owner {
        // CloudFormation's physical id of a queue is its URL, whose host depends on the
        // endpoint the client used: matched by its path, /<account>/<name>.
        let path = format!("/{}/{}", self.account, queue.name);
        let url = self
            .owners
            .by_physical
            .keys()
            .find(|id| id.starts_with("http") && id.ends_with(&path))
            .cloned()
            .unwrap_or_else(|| queue.url.clone());
        let owner = self
            .owners
            .owner(&[&url, &queue.name, &queue.arn], &queue.name, tags);
        // A queue with no mark of its own is its rules' tool's (Terraform's modules mark only
        // their rules): never taken for hand-made while they say otherwise.
        if owner == Owner::Unmarked
            && let Some(Owner::Tool { tool, marks }) = rules
                .iter()
                .map(|r| &r.owner)
                .find(|o| matches!(o, Owner::Tool { .. }))
        {
            return Owner::Tool {
                tool: *tool,
                marks: format!("its rules' marks: {marks}"),
            };
        }
        owner
    }

    /// The clusters an old queue serves: those its readers name, else the one adopt marked it
    /// for, else the one it is named after.
    fn tied_clusters(
        &self,
        readers: &[&Controller],
        queue: &str,
        tags: &BTreeMap<String, String>,
    ) -> Vec<(String, Tie)> {
        let mut clusters: Vec<(String, Tie)> = readers
            .iter()
            .flat_map(|c| {
                c.clusters.iter().map(|cluster| {
                    (
                        cluster.clone(),
                        Tie::ControllerRole(c.role.name().to_owned()),
                    )
                })
            })
            .collect();
        clusters.sort_by(|a, b| a.0.cmp(&b.0));
        clusters.dedup_by(|a, b| a.0 == b.0);
        if clusters.is_empty() {
            if let Some(cluster) = tags.get(RETIRED_TAG) {
                clusters.push((cluster.clone(), Tie::Retired));
            } else if let Some(cluster) = named_after(queue, self.nodes.keys()) {
                clusters.push((cluster, Tie::Name));
            }
        }
        clusters
    }
}

/// Reads the cluster `name`'s tenant queue into `cluster` (or the foreign queue that took its
/// name), with adopt's marks on it; and, once the old queue is gone, the role that reads the new
/// one (and names the cluster).
async fn read_tenant(
    site: &impl Moves,
    name: &str,
    cluster: &mut Cluster,
    queue_names: &QueueNameTemplate,
    router_role: Option<&str>,
    controllers: &[Controller],
) {
    if let Some(queue) = queue_names.queue_name(name)
        && let Ok(queue) = load_queue(site, &queue).await
    {
        let tags = queue_tags(site, &queue.url).await;
        match ownership(&queue, &tags, name, router_role) {
            Ownership::Foreign(why) => cluster.name_taken = Some((queue, why)),
            _ => {
                let at = |tag: &str| {
                    let ms = rfc3339_unix_millis(tags.get(tag)?)?;
                    Some(UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).ok()?))
                };
                cluster.rolled_back = at(ROLLBACK_TAG);
                cluster.verified = at(VERIFIED_TAG);
                cluster.round = tags.get(EVIDENCE_TAG).and_then(|t| Round::parse(t));
                cluster.tenant = Some(queue);
            }
        }
    }
    // Once the old queue is gone, the role that reads the new one (and names the cluster).
    if let (None, Some(tenant)) = (&cluster.controller, &cluster.tenant) {
        cluster.controller = controllers
            .iter()
            .find(|c| {
                c.clusters.iter().any(|n| n == name)
                    && c.role.may("sqs:ReceiveMessage", &tenant.arn).is_allowed()
            })
            .map(|c| c.role.name().to_owned());
    }
}

/// Queues named after a known cluster that carry [`RETIRED_TAG`], as ARNs (`local` is the
/// account and region's SQS ARN prefix).
async fn retired_queues<'a>(
    site: &impl Moves,
    local: &str,
    clusters: impl Iterator<Item = &'a String> + Clone,
) -> Vec<String> {
    let mut found = Vec::new();
    for url in site.every_queue().await.unwrap_or_default() {
        let name = url.rsplit('/').next().unwrap_or_default();
        if named_after(name, clusters.clone()).is_none() {
            continue;
        }
        if queue_tags(site, &url).await.contains_key(RETIRED_TAG) {
            found.push(format!("{local}{name}"));
        }
    }
    found
}

async fn queue_tags(site: &impl Cloud, url: &str) -> BTreeMap<String, String> {
    site.queue_tags(url).await.unwrap_or_default()
}

/// Reads the router's base stack (what verify reads), or says why it cannot.
pub async fn base(site: &impl Cloud, stack: &str) -> Result<Base> {
    crate::deployment::base::load(site, stack)
        .await
        .map(|(base, _)| base)
        .map_err(|check| {
            anyhow::anyhow!(
                "{}{}",
                check.detail,
                check.fix.map(|f| format!(". Fix: {f}")).unwrap_or_default()
            )
        })
        .context("reading the router's base stack")
}
