//! The policy documents this release's templates render for one deployment: what `verify`
//! expects of a deployed site and writes into its fixes, what the lab puts where moto skips a
//! resource, and what the tests break and restore. None is written out again in Rust: each is
//! read from base.yaml, spoke.yaml or tenant.yaml through [`crate::template`], so a change to a
//! template changes what every checker expects.
//!
//! Each function renders its template for the values a deployment fixes (the ARNs it made, the
//! parameters it was given); a parameter the template does not declare (a stack deployed from an
//! older release) is left out, and one it does not get takes its default, as `aws cloudformation
//! deploy` would.

use std::{
    collections::BTreeMap,
    sync::{Mutex, OnceLock},
};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::{
    arn::{arn_account, arn_name},
    stacks::{BASE_TEMPLATE, SPOKE_TEMPLATE, TENANT_TEMPLATE},
    template::{Stage, Template},
};

/// The region of an ARN (`arn:<partition>:<service>:<region>:…`).
fn arn_region(arn: &str) -> Option<&str> {
    arn.split(':').nth(3).filter(|r| !r.is_empty())
}

/// A compiled-in template, parsed once per process: verify, adopt and the model render these
/// policies many times a run, and parsing the YAML is most of the cost.
fn parsed(which: Compiled) -> Result<&'static Template> {
    static PARSED: [OnceLock<Template>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (cell, name, text) = match which {
        Compiled::Base => (&PARSED[0], "base.yaml", BASE_TEMPLATE),
        Compiled::Spoke => (&PARSED[1], "spoke.yaml", SPOKE_TEMPLATE),
        Compiled::Tenant => (&PARSED[2], "tenant.yaml", TENANT_TEMPLATE),
    };
    if let Some(template) = cell.get() {
        return Ok(template);
    }
    let template = Template::parse(name, text)?;
    Ok(cell.get_or_init(|| template))
}

#[derive(Clone, Copy)]
enum Compiled {
    Base,
    Spoke,
    Tenant,
}

fn document(template: &Template, stage: &Stage, logical: &str, path: &[&str]) -> Result<Value> {
    let value = template.deploy(stage)?.property(logical, path)?;
    if value.is_null() {
        anyhow::bail!(
            "{}: {logical} has no {} in this deployment",
            template.name,
            path.join(".")
        );
    }
    Ok(value)
}

/// tenant.yaml's InterruptionQueuePolicy for the queue `queue_arn` and the role the router sends
/// with (`sender_role_arn`: the hub's router role, or in a member account its spoke role), for a
/// stack naming no Karpenter role (so without DenyReadersOtherThanKarpenter).
pub fn tenant_queue_policy(queue_arn: &str, sender_role_arn: &str) -> Result<Value> {
    tenant_queue_policy_read_by(queue_arn, sender_role_arn, None)
}

/// As [`tenant_queue_policy`], for a stack whose `KarpenterRoleName` is `karpenter_role` (a role
/// name): with DenyReadersOtherThanKarpenter, which lets that role alone receive and delete.
pub fn tenant_queue_policy_read_by(
    queue_arn: &str,
    sender_role_arn: &str,
    karpenter_role: Option<&str>,
) -> Result<Value> {
    // Rendered once per process for each (queue, sender, reader): verify and adopt judge every
    // tenant queue's policy against it on every pass, and a model walk makes thousands of passes.
    type Key = (String, String, Option<String>);
    static RENDERED: Mutex<BTreeMap<Key, Value>> = Mutex::new(BTreeMap::new());
    let key = (
        queue_arn.to_owned(),
        sender_role_arn.to_owned(),
        karpenter_role.map(str::to_owned),
    );
    if let Some(known) = RENDERED.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(known.clone());
    }
    let rendered = render_tenant_queue_policy(queue_arn, sender_role_arn, karpenter_role)?;
    (RENDERED.lock().unwrap_or_else(|e| e.into_inner())).insert(key, rendered.clone());
    Ok(rendered)
}

fn render_tenant_queue_policy(
    queue_arn: &str,
    sender_role_arn: &str,
    karpenter_role: Option<&str>,
) -> Result<Value> {
    let account = arn_account(queue_arn).context("a queue ARN names its account")?;
    let region = arn_region(queue_arn).context("a queue ARN names its region")?;
    let mut stage = Stage::new("tenant", account, region)
        .parameter("ClusterName", arn_name(queue_arn))
        .parameter("RouterRoleArn", sender_role_arn);
    if let Some(role) = karpenter_role {
        stage = stage.parameter("KarpenterRoleName", role);
    }
    // Its URL too: the policy resource names the queue by Ref, and without it the renderer
    // would work the name out from imports this stage does not have.
    let url = format!(
        "https://sqs.{region}.amazonaws.com/{account}/{}",
        arn_name(queue_arn)
    );
    stage.resources.insert(
        "InterruptionQueue".into(),
        BTreeMap::from([
            ("Arn".to_owned(), queue_arn.to_owned()),
            ("Ref".to_owned(), url),
        ]),
    );
    let template = parsed(Compiled::Tenant)?;
    document(
        template,
        &stage,
        "InterruptionQueuePolicy",
        &["PolicyDocument"],
    )
}

/// spoke.yaml's stage in `account`, `region` for a hub whose router role is `router_role_arn`.
fn spoke_stage(account: &str, region: &str, router_role_arn: &str, queue_prefix: &str) -> Stage {
    Stage::new("spoke", account, region)
        .parameter(
            "HubEventBusArn",
            &format!("arn:aws:events:{region}:{account}:event-bus/hub"),
        )
        .parameter("RouterRoleArn", router_role_arn)
        .parameter("QueuePrefix", queue_prefix)
}

/// spoke.yaml's SpokeRole trust policy: the hub's router role may assume it.
pub fn spoke_trust_policy(router_role_arn: &str) -> Result<Value> {
    let account = arn_account(router_role_arn).context("a role ARN names its account")?;
    let template = parsed(Compiled::Spoke)?;
    document(
        template,
        &spoke_stage(account, "us-east-1", router_role_arn, "karpenter-"),
        "SpokeRole",
        &["AssumeRolePolicyDocument"],
    )
}

/// spoke.yaml's SpokeRole inline policy in `account` (its partition from `region`), for queues
/// named `<queue_prefix>…`.
pub fn spoke_role_policy(account: &str, region: &str, queue_prefix: &str) -> Result<Value> {
    let template = parsed(Compiled::Spoke)?;
    let stage = spoke_stage(
        account,
        region,
        &format!("arn:aws:iam::{account}:role/router"),
        queue_prefix,
    );
    let policies = document(template, &stage, "SpokeRole", &["Policies"])?;
    policies
        .as_array()
        .and_then(|p| p.first())
        .map(|p| p["PolicyDocument"].clone())
        .filter(|d| !d.is_null())
        .context("spoke.yaml: SpokeRole has no inline policy")
}

/// spoke.yaml's DirectRole inline policy in `account`, `region` (a spoke whose rules write the
/// hub's direct queue `direct_queue_arn`).
pub fn direct_role_policy(account: &str, region: &str, direct_queue_arn: &str) -> Result<Value> {
    let template = parsed(Compiled::Spoke)?;
    let stage = spoke_stage(
        account,
        region,
        &format!("arn:aws:iam::{account}:role/router"),
        "karpenter-",
    )
    .parameter("HubDirectQueueArn", direct_queue_arn);
    let policies = document(template, &stage, "DirectRole", &["Policies"])?;
    policies
        .as_array()
        .and_then(|p| p.first())
        .map(|p| p["PolicyDocument"].clone())
        .filter(|d| !d.is_null())
        .context("spoke.yaml: DirectRole has no inline policy")
}

/// base.yaml's central bus policy for the bus `bus_arn` (named `<stack>-hub`): the organisation
/// `organization` when given, else the accounts `served_accounts` (comma-separated).
pub fn hub_bus_policy(
    bus_arn: &str,
    served_accounts: &str,
    organization: Option<&str>,
) -> Result<Value> {
    let account = arn_account(bus_arn).context("a bus ARN names its account")?;
    let region = arn_region(bus_arn).context("a bus ARN names its region")?;
    let bus = bus_arn.rsplit('/').next().unwrap_or(bus_arn);
    let stack = bus.strip_suffix("-hub").unwrap_or(bus);
    let stage = Stage::new(stack, account, region)
        .parameter("CodeS3Bucket", "code")
        .parameter("CentralBus", "Enabled")
        .parameter("ServedAccounts", served_accounts)
        .parameter("OrganizationId", organization.unwrap_or_default());
    let template = parsed(Compiled::Base)?;
    document(template, &stage, "HubEventBus", &["Policy"])
}

/// The statements an organisation's own key (`KmsKey=<key ARN>`) needs in its policy for the
/// queues of a stack in `account`, `region`: the ones the stack writes into the key it creates
/// with `KmsKey=Create` (all but the account's administration of the key). For base.yaml's
/// queues `sender_role_arn` is unused (its key delegates the router role to IAM); for a tenant
/// queue it is the role the router sends with (the router role, or a member's spoke role).
pub fn key_statements(
    stack: KeyedStack,
    account: &str,
    region: &str,
    sender_role_arn: &str,
) -> Result<Vec<Value>> {
    keyed_statements(stack, account, region, sender_role_arn, &BTreeMap::new())
}

/// [`key_statements`] for base.yaml's queues as a hub deployed with `parameters` renders them:
/// with `CentralBus=Enabled`, the served accounts' direct roles' statement too (the direct
/// queue's senders). Parameters base.yaml does not declare are ignored.
pub fn base_key_statements(
    account: &str,
    region: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<Vec<Value>> {
    keyed_statements(KeyedStack::Base, account, region, "", parameters)
}

fn keyed_statements(
    stack: KeyedStack,
    account: &str,
    region: &str,
    sender_role_arn: &str,
    parameters: &BTreeMap<String, String>,
) -> Result<Vec<Value>> {
    let template = parsed(match stack {
        KeyedStack::Base => Compiled::Base,
        KeyedStack::Tenant => Compiled::Tenant,
    })?;
    let mut stage = Stage::new("keyed", account, region);
    let declared = template.doc["Parameters"].as_object();
    for (key, value) in parameters {
        if declared.is_some_and(|d| d.contains_key(key)) {
            stage.parameters.insert(key.clone(), value.clone());
        }
    }
    let mut stage = stage.parameter("KmsKey", "Create");
    stage = match stack {
        KeyedStack::Base => stage.parameter("CodeS3Bucket", "artifacts"),
        KeyedStack::Tenant => stage
            .parameter("ClusterName", "cluster")
            .parameter("RouterRoleArn", sender_role_arn)
            .parameter("QueuePrefix", "karpenter-"),
    };
    let policy = document(template, &stage, "QueueKey", &["KeyPolicy"])?;
    Ok(policy["Statement"]
        .as_array()
        .context("a key policy has statements")?
        .iter()
        .filter(|s| s["Sid"] != "AccountAdministersTheKey")
        // For the alarm topic the stack encrypts only with a key of its own: a given key's topic
        // stays unencrypted, so its policy needs no statement for CloudWatch.
        .filter(|s| s["Sid"] != "CloudWatchAlarmsOfThisAccountPublish")
        .cloned()
        .collect())
}

/// Which stack's queues a key is for ([`key_statements`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedStack {
    /// base.yaml's ingest queue and DLQ: EventBridge's rules deliver, the router role reads.
    Base,
    /// A tenant queue: the router's sender writes, Karpenter's role reads.
    Tenant,
}

/// The base stack's queue policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseQueue {
    /// IngestQueuePolicy: the stack's rules may send, and nobody else.
    Ingest,
    /// DeadLetterQueuePolicy: the stack's rules' dead letters.
    DeadLetter,
    /// DirectQueuePolicy (CentralBus=Enabled): the served accounts' direct roles may send.
    Direct,
}

/// A deployed base stack as far as its queue policies go: its name, account and region, the
/// parameters it was deployed with, and the ARNs of its queues and rules by logical id.
pub struct BaseSite<'a> {
    pub stack: &'a str,
    pub account: &'a str,
    pub region: &'a str,
    pub parameters: &'a BTreeMap<String, String>,
    /// Logical id → ARN (IngestQueue, DeadLetterQueue, the rules).
    pub arns: &'a BTreeMap<String, String>,
}

/// base.yaml's policy for one of its queues, as this site deploys it.
pub fn base_queue_policy(site: &BaseSite<'_>, queue: BaseQueue) -> Result<Value> {
    let template = parsed(Compiled::Base)?;
    let mut stage = Stage::new(site.stack, site.account, site.region);
    let declared = template.doc["Parameters"].as_object();
    for (key, value) in site.parameters {
        if declared.is_some_and(|d| d.contains_key(key)) {
            stage.parameters.insert(key.clone(), value.clone());
        }
    }
    for (logical, arn) in site.arns {
        stage.resources.insert(
            logical.clone(),
            BTreeMap::from([("Arn".to_owned(), arn.clone())]),
        );
    }
    let logical = match queue {
        BaseQueue::Ingest => "IngestQueuePolicy",
        BaseQueue::DeadLetter => "DeadLetterQueuePolicy",
        BaseQueue::Direct => "DirectQueuePolicy",
    };
    document(template, &stage, logical, &["PolicyDocument"])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const QUEUE: &str = "arn:aws-cn:sqs:cn-north-1:111111111111:karpenter-alpha";
    const ROUTER: &str = "arn:aws:iam::222222222222:role/interruption-router-router";

    fn sids(policy: &Value) -> Vec<&str> {
        policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["Sid"].as_str().unwrap())
            .collect()
    }

    /// A given key needs what the stack's own key says: EventBridge's rules and the account's
    /// roles through SQS for the base queues; the sender by name and the account's readers for a
    /// tenant queue. Never the account's administration of the key.
    #[test]
    fn a_given_key_needs_the_statements_the_stacks_write_into_their_own() {
        let base = key_statements(KeyedStack::Base, "111111111111", "eu-west-1", "").unwrap();
        let sids: Vec<&str> = base.iter().map(|s| s["Sid"].as_str().unwrap()).collect();
        assert_eq!(
            sids,
            [
                "EventBridgeRulesOfThisAccountDeliver",
                "AccountRolesUseItThroughSqs"
            ]
        );
        assert_eq!(
            base[0]["Condition"]["StringEquals"]["aws:SourceAccount"],
            "111111111111"
        );
        let tenant =
            key_statements(KeyedStack::Tenant, "111111111111", "eu-west-1", ROUTER).unwrap();
        assert_eq!(tenant[0]["Sid"], "RouterSendsThroughSqs");
        assert_eq!(tenant[0]["Principal"]["AWS"], ROUTER);
        assert_eq!(
            tenant[0]["Condition"]["StringEquals"]["kms:ViaService"],
            "sqs.eu-west-1.amazonaws.com"
        );
        assert_eq!(tenant[1]["Sid"], "AccountRolesDecryptThroughSqs");
    }

    #[test]
    fn a_tenant_queue_admits_the_role_it_is_rendered_for() {
        let policy = tenant_queue_policy(QUEUE, ROUTER).unwrap();
        assert_eq!(
            sids(&policy),
            [
                "AllowRouterToSend",
                "DenySendersOtherThanRouter",
                "DenyInsecureTransport"
            ]
        );
        let statements = &policy["Statement"];
        assert_eq!(statements[0]["Principal"]["AWS"], ROUTER);
        assert_eq!(statements[0]["Resource"], QUEUE);
        assert_eq!(
            statements[1]["Condition"]["ArnNotEquals"]["aws:PrincipalArn"],
            ROUTER
        );
    }

    /// Rendered for a stack naming Karpenter's role, the policy lets that role alone read.
    #[test]
    fn a_tenant_queue_read_by_karpenter_denies_every_other_reader() {
        let policy = tenant_queue_policy_read_by(QUEUE, ROUTER, Some("alpha-karpenter")).unwrap();
        assert_eq!(
            sids(&policy),
            [
                "AllowRouterToSend",
                "DenySendersOtherThanRouter",
                "DenyReadersOtherThanKarpenter",
                "DenyInsecureTransport"
            ]
        );
        let readers = &policy["Statement"][2]["Condition"]["ArnNotLike"]["aws:PrincipalArn"];
        assert!(
            readers.to_string().contains(":role/alpha-karpenter"),
            "{readers}"
        );
    }

    #[test]
    fn the_spoke_role_is_rendered_in_its_accounts_partition() {
        assert_eq!(
            spoke_trust_policy(ROUTER).unwrap()["Statement"][0]["Principal"]["AWS"],
            ROUTER
        );
        let policy = spoke_role_policy("111111111111", "cn-north-1", "kq-").unwrap();
        assert_eq!(
            sids(&policy),
            [
                "ResolveInstanceTags",
                "SendToClusterQueues",
                "ReadClusterQueueOwnership",
                "ReadDirectRoleId",
                "ReadTenantRecords"
            ]
        );
        assert_eq!(
            policy["Statement"][1]["Resource"],
            "arn:aws-cn:sqs:*:111111111111:kq-*"
        );
    }

    #[test]
    fn the_hub_bus_admits_its_accounts_or_its_organisation() {
        let bus = "arn:aws:events:eu-west-1:222222222222:event-bus/ir-hub";
        let listed = hub_bus_policy(bus, "111111111111,333333333333", None).unwrap();
        assert_eq!(
            listed["Statement"][0]["Principal"]["AWS"],
            json!(["111111111111", "333333333333"])
        );
        assert_eq!(listed["Statement"][0]["Resource"], bus);
        let org = hub_bus_policy(bus, "*", Some("o-abcd123456")).unwrap();
        assert_eq!(
            org["Statement"][0]["Condition"]["StringEquals"]["aws:PrincipalOrgID"],
            "o-abcd123456"
        );
    }

    #[test]
    fn a_base_queue_policy_names_the_rules_of_its_deployment() {
        let arn = |name: &str| format!("arn:aws:events:eu-west-1:222222222222:rule/{name}");
        let mut arns: BTreeMap<String, String> = [
            "SpotInterruptionRule",
            "RebalanceRecommendationRule",
            "StateChangeRule",
            "ScheduledChangeRule",
            "CapacityReservationInterruptionRule",
        ]
        .into_iter()
        .map(|r| (r.to_owned(), arn(r)))
        .collect();
        arns.insert(
            "IngestQueue".into(),
            "arn:aws:sqs:eu-west-1:222222222222:ir-ingest".into(),
        );
        let mut parameters = BTreeMap::from([
            ("CodeS3Bucket".to_owned(), "code".to_owned()),
            // A parameter of an older release this one no longer declares is left out.
            ("Retired".to_owned(), "x".to_owned()),
        ]);
        fn site<'a>(
            parameters: &'a BTreeMap<String, String>,
            arns: &'a BTreeMap<String, String>,
        ) -> BaseSite<'a> {
            BaseSite {
                stack: "ir",
                account: "222222222222",
                region: "eu-west-1",
                parameters,
                arns,
            }
        }
        let ingest = base_queue_policy(&site(&parameters, &arns), BaseQueue::Ingest).unwrap();
        assert_eq!(
            sids(&ingest),
            [
                "AllowTheseRulesOnly",
                "DenySendersOtherThanTheseRules",
                "DenyInsecureTransport"
            ]
        );
        let rules = &ingest["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"];
        assert_eq!(rules.as_array().unwrap().len(), 5, "{rules}");
        assert_eq!(rules[0], arn("SpotInterruptionRule"));
        // With the central bus, its five copies too.
        parameters.insert("CentralBus".into(), "Enabled".into());
        parameters.insert("ServedAccounts".into(), "111111111111".into());
        let dead = base_queue_policy(&site(&parameters, &arns), BaseQueue::DeadLetter).unwrap();
        let rules = &dead["Statement"][0]["Condition"]["ArnEquals"]["aws:SourceArn"];
        assert_eq!(rules.as_array().unwrap().len(), 10, "{rules}");
    }
}
