//! What `--apply` and `--rollback` change in the account: one [`Change`] at a time, each checked
//! again against the account just before it is made (a queue that filled up since the plan is
//! not deleted), and each safe to run twice (a rule already disabled stays disabled; a stack that
//! already exists is reported, not re-created).
//!
//! EventBridge applies EnableRule and DisableRule "after a short period" (its API reference), so
//! both wait for the rules to read back in their new state and then [`Options::settle`] more
//! before returning: a command adopt prints the moment it returns (the helm command after a
//! rollback) misses nothing.

use crate::deployment::Queue;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::time::Instant;

use crate::cloud::{Cloud, deliveries::Deliveries, moves::Moves};

use super::{
    Options,
    discover::{Landscape, RETIRED_TAG, ROLLBACK_TAG},
    evidence::{self, EVIDENCE_TAG, Reading, Start},
    helm,
    steps::{Change, TenantKinds},
};
use aws_model::{events::rfc3339, stacks};
use router_core::event::Kinds;

/// What a tenant deployed by adopt takes, as the plan says it: nothing when the old rules
/// delivered every kind (tenant.yaml's default).
fn describe_kinds(kinds: &TenantKinds) -> String {
    if kinds.chosen == Kinds::ALL {
        return String::new();
    }
    let declined: Kinds = Kinds::ALL
        .iter()
        .filter(|k| !kinds.chosen.contains(*k))
        .collect();
    let mut said = format!(
        ", taking the event kinds its old rules deliver ({}) and declining the others ({declined}) \
         as they did: EventKinds={}",
        kinds.chosen,
        stacks::event_kinds(kinds.deployed)
    );
    if kinds.deployed != kinds.chosen {
        said.push_str(&format!(
            ". rebalance-recommendation is added while adopt needs it (step 4's probe is one; \
             Karpenter only records a Kubernetes event for it): once adopted, make deploy-tenant \
             … EVENT_KINDS={} takes it out",
            stacks::event_kinds(kinds.chosen)
        ));
    }
    said
}

impl Change {
    /// What applying it does, in a sentence (the plan's "next" line).
    pub fn describe(&self) -> String {
        match self {
            Change::DeployTenant {
                stack,
                karpenter_role,
                kinds,
            } => format!(
                "deploys tenant stack {stack} (cloudformation/tenant.yaml) granting \
                 {karpenter_role} its queue{}",
                describe_kinds(kinds)
            ),
            Change::GrantKarpenter {
                stack,
                karpenter_role,
            } => format!("updates tenant stack {stack} with KarpenterRoleName={karpenter_role}"),
            Change::StartRound { node } => format!(
                "checks that Karpenter moved: a probe through the router (a rebalance \
                 recommendation for {node}, which Karpenter reads and deletes without acting on \
                 it) and a sentinel in each old queue, read {} s later",
                evidence::QUIET_WINDOW.as_secs()
            ),
            Change::ReadRound => {
                "reads the round (the probe and the sentinels, or SQS's counts of \
                 an old queue too full to look through); if it holds, disables the old rules in \
                 the same run"
                    .to_owned()
            }
            Change::DisableRules(rules) => format!("disables {}", rules.join(", ")),
            Change::DeleteRules { rules, .. } => format!(
                "deletes {}",
                rules
                    .iter()
                    .map(|(r, _)| r.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Change::DeleteQueue { url } => format!("deletes {url}"),
        }
    }
}

/// Makes `change` for `cluster` with the site's clients `site` (the probe goes to the router with
/// the hub's, `hub`); what was done, in a sentence.
pub async fn perform(
    site: &impl Moves,
    hub: &impl Deliveries,
    land: &Landscape,
    cluster: &str,
    options: &Options,
    change: &Change,
) -> Result<String> {
    match change {
        Change::DeployTenant {
            stack,
            karpenter_role,
            kinds,
        } => deploy_tenant(site, land, cluster, stack, karpenter_role, kinds).await,
        Change::GrantKarpenter {
            stack,
            karpenter_role,
        } => grant_karpenter(site, stack, karpenter_role).await,
        Change::StartRound { node } => {
            let view = &land.clusters[cluster];
            let tenant = view.tenant.as_ref().context("no tenant queue")?;
            let old = old_queues(land, cluster);
            let rules = enabled_rules(land, cluster);
            let start = round_site(hub, land, cluster, node, tenant, &old, &rules)?;
            evidence::start(site, &start).await
        }
        Change::ReadRound => bail!("the round is read by adopt::run, which then makes step 5"),
        Change::DisableRules(rules) => disable_rules(site, cluster, options, rules).await,
        Change::DeleteRules { rules, queues } => delete_rules(site, cluster, rules, queues).await,
        Change::DeleteQueue { url } => delete_queue(site, url).await,
    }
}

/// Step 1: deploys `cluster`'s tenant stack, unless a stack of that name exists already (a
/// failed one is the operator's to look at).
async fn deploy_tenant(
    site: &impl Moves,
    land: &Landscape,
    cluster: &str,
    stack: &str,
    karpenter_role: &str,
    kinds: &TenantKinds,
) -> Result<String> {
    if stack_exists(site, stack).await? {
        bail!(
            "stack {stack} exists but its queue is not there: look at its events \
             (aws cloudformation describe-stack-events --stack-name {stack}), delete it \
             if it failed, and run adopt again"
        );
    }
    // As make deploy-tenant deploys it: the queue imports <RouterName>:… from the stack
    // that connects this region (the base stack, or the member's spoke stack), and takes
    // its alarm topic and key setting.
    let parameters = stacks::tenant_parameters(
        &land.connection.inherits,
        cluster,
        karpenter_role,
        kinds.deployed,
    );
    let parameters: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let created = site
        .create_stack(stack, stacks::TENANT_TEMPLATE, &parameters)
        .await?;
    Ok(format!(
        "deployed {stack}: queue {}, which the router writes and {karpenter_role} may read",
        created.get("QueueName").map_or("?", String::as_str)
    ))
}

/// Step 2: grants Karpenter's role the tenant queue by updating the tenant stack: only a queue the
/// stack made can be granted this way.
async fn grant_karpenter(site: &impl Moves, stack: &str, karpenter_role: &str) -> Result<String> {
    if !stack_exists(site, stack).await? {
        bail!(
            "the tenant queue was not made by stack {stack}: grant {karpenter_role} \
             sqs:ReceiveMessage, sqs:DeleteMessage, sqs:GetQueueUrl and \
             sqs:GetQueueAttributes on it where the queue is defined, then run adopt again"
        );
    }
    site.update_stack(
        stack,
        stacks::TENANT_TEMPLATE,
        &[("KarpenterRoleName", karpenter_role)],
    )
    .await?;
    Ok(format!(
        "updated {stack}: {karpenter_role} may read the new queue"
    ))
}

/// Step 5: disables the old rules and waits until EventBridge reads them back disabled.
async fn disable_rules(
    site: &impl Moves,
    cluster: &str,
    options: &Options,
    rules: &[String],
) -> Result<String> {
    for rule in rules {
        site.disable_rule(rule)
            .await
            .map_err(|e| anyhow::anyhow!("DisableRule {rule}: {e}"))?;
    }
    let waited = settle(site, rules, "DISABLED", options.settle).await?;
    Ok(format!(
        "disabled {} (and waited {} s for EventBridge to apply it): the old queue gets no \
         new event; {} --rollback re-enables them",
        rules.join(", "),
        waited.as_secs(),
        options.command(cluster)
    ))
}

/// Step 6: removes each rule's old-queue target, and deletes the rules left with no target (a rule
/// that still feeds something else stays).
async fn delete_rules(
    site: &impl Moves,
    cluster: &str,
    rules: &[(String, String)],
    queues: &[String],
) -> Result<String> {
    // Marked first: with its rules gone, only the mark may tie a queue to the cluster.
    for url in queues {
        evidence::tag(site, url, RETIRED_TAG, cluster).await?;
    }
    let mut deleted = Vec::new();
    for (rule, target) in rules {
        site.remove_target(rule, target)
            .await
            .map_err(|e| anyhow::anyhow!("RemoveTargets {rule}: {e}"))?;
        let left = site
            .targets(rule, None)
            .await
            .map_err(|e| anyhow::anyhow!("ListTargetsByRule {rule}: {e}"))?;
        if left.is_empty() {
            site.delete_rule(rule)
                .await
                .map_err(|e| anyhow::anyhow!("DeleteRule {rule}: {e}"))?;
            deleted.push(rule.as_str());
        }
    }
    Ok(format!("deleted {}", deleted.join(", ")))
}

/// Step 7: deletes an old queue, unless it holds messages again since the plan.
async fn delete_queue(site: &impl Moves, url: &str) -> Result<String> {
    let attributes = site
        .queue_attributes(url)
        .await
        .map_err(|e| anyhow::anyhow!("GetQueueAttributes {url}: {e}"))?;
    let held: u64 = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    .iter()
    .filter_map(|a| attributes.get(*a)?.parse::<u64>().ok())
    .sum();
    if held > 0 {
        bail!("{url} holds {held} message(s) again: not deleted; run adopt again");
    }
    site.delete_queue(url)
        .await
        .map_err(|e| anyhow::anyhow!("DeleteQueue {url}: {e}"))?;
    Ok(format!("deleted {url}"))
}

/// Reads `cluster`'s ripe round ([`evidence::read`]).
pub async fn read_round(
    site: &impl Moves,
    hub: &impl Deliveries,
    land: &Landscape,
    cluster: &str,
) -> Result<Reading> {
    let view = &land.clusters[cluster];
    let (Some(tenant), Some(round)) = (&view.tenant, &view.round) else {
        bail!("{cluster} has no round of evidence under way");
    };
    let old = old_queues(land, cluster);
    let rules = enabled_rules(land, cluster);
    // Only a probe sent names a node; reading names none.
    let node = view.nodes.first().map_or("", String::as_str);
    let start = round_site(hub, land, cluster, node, tenant, &old, &rules)?;
    evidence::read(site, &start, round).await
}

/// The old rules of `cluster`'s set-ups still enabled.
fn enabled_rules(land: &Landscape, cluster: &str) -> Vec<String> {
    land.clusters[cluster]
        .setups
        .iter()
        .flat_map(|i| &land.setups[*i].rules)
        .filter(|r| r.enabled)
        .map(|r| r.name.clone())
        .collect()
}

/// The old queues of `cluster`'s set-ups.
fn old_queues<'a>(land: &'a Landscape, cluster: &str) -> Vec<&'a Queue> {
    land.clusters[cluster]
        .setups
        .iter()
        .map(|i| &land.setups[*i].queue)
        .collect()
}

/// Where a round's probes go and its sentinels are: the router function, the tenant queue, the
/// old queues.
fn round_site<'a, R>(
    hub: &'a R,
    land: &'a Landscape,
    cluster: &'a str,
    node: &'a str,
    tenant: &'a Queue,
    old: &'a [&'a Queue],
    rules: &'a [String],
) -> Result<Start<'a, R>> {
    let function = land
        .base
        .output("FunctionName")
        .with_context(|| format!("base stack {} has no FunctionName output", land.base.name))?;
    Ok(Start {
        hub,
        cluster,
        account: &land.account,
        region: &land.region,
        function,
        node,
        tenant,
        old,
        rules,
    })
}

/// What `--rollback` did.
#[derive(Debug, Clone)]
pub struct RolledBack {
    /// The old rules it re-enabled.
    pub enabled: Vec<String>,
    /// How long it waited for EventBridge to apply that.
    pub waited: Duration,
    /// The helm command that points Karpenter back at its old queue.
    pub helm: String,
}

/// Marks the tenant queue first (if that fails, nothing has changed), voids any round under way,
/// re-enables `cluster`'s disabled old rules, and returns once EventBridge applies them: from
/// then on the old queue gets every event, and the helm command it returns points Karpenter back.
/// Refused when nothing is left to go back to (the old rules are deleted).
pub async fn rollback(
    site: &impl Moves,
    land: &Landscape,
    cluster: &str,
    options: &Options,
) -> Result<RolledBack> {
    let view = &land.clusters[cluster];
    let setups: Vec<_> = view.setups.iter().map(|i| &land.setups[*i]).collect();
    let Some(old) = setups.iter().find(|s| !s.rules.is_empty()) else {
        bail!(
            "{cluster} has no old rule left to re-enable (deleted at step 6, or it never had \
             any): keep Karpenter on the router's queue"
        );
    };
    if let Some(tenant) = &view.tenant {
        evidence::tag(site, &tenant.url, ROLLBACK_TAG, &rfc3339(site.now()))
            .await
            .context("marking the rollback (nothing changed)")?;
        if view.round.is_some() {
            evidence::untag(site, &tenant.url, EVIDENCE_TAG).await?;
        }
    }
    let mut enabled = Vec::new();
    for rule in setups.iter().flat_map(|s| &s.rules).filter(|r| !r.enabled) {
        site.enable_rule(&rule.name)
            .await
            .map_err(|e| anyhow::anyhow!("EnableRule {}: {e}", rule.name))?;
        enabled.push(rule.name.clone());
    }
    let waited = settle(site, &enabled, "ENABLED", options.settle).await?;
    Ok(RolledBack {
        enabled,
        waited,
        helm: helm::snippet(&helm::Target {
            cluster,
            account: &land.account,
            region: &land.region,
            queue: &old.queue.name,
        }),
    })
}

/// Waits until every rule reads back in `state`, and `settle` since the change: EventBridge
/// applies rule changes "after a short period", which ListRules does not show. Nothing changed,
/// nothing to wait for. How long it waited.
async fn settle(
    site: &impl Cloud,
    rules: &[String],
    state: &str,
    settle: Duration,
) -> Result<Duration> {
    let started = Instant::now();
    if rules.is_empty() {
        return Ok(Duration::ZERO);
    }
    eprintln!(
        "waiting {} s for EventBridge to apply the change to {} (it takes effect \"after a short \
         period\")",
        settle.as_secs(),
        rules.join(", ")
    );
    loop {
        let mut pending = Vec::new();
        for rule in rules {
            let described = site
                .rule(rule, None)
                .await
                .map_err(|e| anyhow::anyhow!("DescribeRule {rule}: {e}"))?;
            if described.state.as_deref() != Some(state) {
                pending.push(rule.as_str());
            }
        }
        if pending.is_empty() && started.elapsed() >= settle {
            return Ok(started.elapsed());
        }
        if started.elapsed() > settle + Duration::from_secs(120) {
            bail!(
                "{} still not {} two minutes after the change: check them (aws events \
                 describe-rule --name …) before going on",
                pending.join(", "),
                state
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn stack_exists(site: &impl Cloud, stack: &str) -> Result<bool> {
    match site.stack(stack).await {
        Ok(found) => Ok(found.status != "DELETE_COMPLETE"),
        Err(e) if e.is_missing_stack() => Ok(false),
        Err(e) => bail!("DescribeStacks {stack}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use router_core::event::Kind;

    use super::*;
    use crate::cloud::{
        CallError, missing,
        model::{ModelStack, World},
    };

    fn kinds(chosen: &[Kind], deployed: &[Kind]) -> TenantKinds {
        TenantKinds {
            chosen: chosen.iter().copied().collect(),
            deployed: deployed.iter().copied().collect(),
        }
    }

    /// The plan's "next" line for a tenant: nothing said of kinds when the old rules delivered
    /// every kind; the kinds taken and declined otherwise, and rebalance's temporary addition.
    #[test]
    fn a_tenants_kinds_are_said_only_when_the_old_rules_chose_some() {
        let all: Vec<Kind> = Kinds::ALL.iter().collect();
        let deploy = |kinds| Change::DeployTenant {
            stack: "ir-tenant-alpha".into(),
            karpenter_role: "KarpenterController-alpha".into(),
            kinds,
        };
        assert_eq!(
            deploy(kinds(&all, &all)).describe(),
            "deploys tenant stack ir-tenant-alpha (cloudformation/tenant.yaml) granting \
             KarpenterController-alpha its queue"
        );
        let spot = [Kind::SpotInterruption, Kind::StateChange];
        let with_rebalance = [
            Kind::SpotInterruption,
            Kind::StateChange,
            Kind::RebalanceRecommendation,
        ];
        let same = deploy(kinds(&with_rebalance, &with_rebalance)).describe();
        assert!(same.contains("declining the others ("), "{same}");
        assert!(!same.contains("is added while adopt needs it"), "{same}");
        let added = deploy(kinds(&spot, &with_rebalance)).describe();
        assert!(
            added.contains("rebalance-recommendation is added while adopt needs it"),
            "{added}"
        );
        for kind in Kinds::ALL.iter().filter(|k| !with_rebalance.contains(k)) {
            assert!(same.contains(&kind.to_string()), "{kind} declined: {same}");
        }
    }

    /// A stack that does not exist, or is deleted, is not there; a refused read is an error.
    #[tokio::test(start_paused = true)]
    async fn a_stack_exists_unless_cloudformation_says_it_does_not() {
        let world = World::new("123456789012", "us-east-1");
        assert!(!stack_exists(&world, "ir-tenant-alpha").await.unwrap());
        for (status, exists) in [("CREATE_COMPLETE", true), ("DELETE_COMPLETE", false)] {
            world.site(|site| {
                let mut stack = ModelStack::default();
                stack.stack.name = "ir-tenant-alpha".into();
                stack.stack.status = status.into();
                site.stacks.insert("ir-tenant-alpha".into(), stack)
            });
            assert_eq!(
                stack_exists(&world, "ir-tenant-alpha").await.unwrap(),
                exists,
                "{status}"
            );
        }
        world.refuse("DescribeStacks");
        assert!(stack_exists(&world, "ir-tenant-alpha").await.is_err());
        let other = CallError::new(missing::STACK, "Rate exceeded");
        assert!(!other.is_missing_stack());
    }
}
