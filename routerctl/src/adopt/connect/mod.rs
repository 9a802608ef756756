//! Where the cluster runs, and what connects that account and region to the router: the hub's
//! own account in the base stack's region, which the base stack connects; or a member account
//! (or the hub's account in another region), which a spoke.yaml stack connects. adopt reads and
//! changes the cluster's account with that site's clients; only the probe goes to the hub, to the
//! router function.
//!
//! In a member account adopt refuses, with the fix, what would leave the new queue unfed: no spoke
//! stack, a spoke stack that forwards to another hub or trusts another router role, or a base
//! stack that does not serve the account.

use crate::deployment::Base;
use std::collections::BTreeMap;

use anyhow::{Result, bail};

use crate::cloud::{Cloud, Stack};
use aws_clients::aws::Aws;
use aws_model::arn::arn_account;

/// The states a spoke stack serves from (verify's `spoke:<account>:stack` takes the same).
const SETTLED: [&str; 3] = [
    "CREATE_COMPLETE",
    "UPDATE_COMPLETE",
    "UPDATE_ROLLBACK_COMPLETE",
];

/// The member account adopt works in (`--account`), and its spoke stack's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub account: String,
    pub spoke_stack: String,
}

/// What connects the cluster's account and region to the router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The hub's own account, in the base stack's region.
    Hub,
    /// A spoke.yaml stack of this name.
    Spoke(String),
}

/// The cluster's account and region as adopt works in them.
#[derive(Debug, Clone)]
pub struct Connection {
    pub account: String,
    pub region: String,
    pub place: Place,
    /// The role the router writes this site's tenant queues with: the base stack's router role
    /// at the hub, the spoke role in a member.
    pub sender: Option<String>,
    /// The parameters tenant stacks here inherit ([`aws_model::stacks::TENANT_INHERITS`]): the
    /// base stack's at the hub; the spoke stack's `RouterName` and its one key of this account
    /// and region in a member.
    pub inherits: BTreeMap<String, String>,
}

impl Connection {
    /// The hub's own account and region, connected by `base`.
    pub(crate) fn hub(base: &Base, region: &str) -> Self {
        Self {
            account: base.account.clone(),
            region: region.to_owned(),
            place: Place::Hub,
            sender: base.output("RouterRoleArn").map(str::to_owned),
            inherits: base.parameters.clone(),
        }
    }
}

/// The connection of `member` in `region` (the site's), or why adopt cannot work there. Without
/// `member`, or with the hub's own account in the base stack's region, the base stack connects it.
pub(crate) async fn connect(
    site: &impl Cloud,
    base: &Base,
    hub_region: &str,
    member: Option<&Member>,
) -> Result<Connection> {
    let Some(member) =
        member.filter(|m| !(m.account == base.account && site.region() == hub_region))
    else {
        return Ok(Connection::hub(base, site.region()));
    };
    let (account, region, stack_name) = (&member.account, site.region(), &member.spoke_stack);
    if !serves(base, account) {
        bail!(
            "the base stack {} does not serve account {account} (ServedAccounts: {}): the router \
             would not route its events. Fix: update the base stack with ServedAccounts listing \
             {account} (its central bus then admits it too), then run adopt again",
            base.name,
            base.parameter("ServedAccounts")
                .filter(|s| !s.is_empty())
                .unwrap_or("empty, this account alone")
        );
    }
    let stack = match Cloud::stack(site, stack_name).await {
        Ok(stack) => Some(stack),
        Err(e) => bail!(
            "account {account} has no spoke stack {stack_name} in {region} ({e}): nothing \
             forwards its events to the router, and no role lets the router write its queues. \
             Fix: {}; or pass its name with --spoke-stack",
            deploy_spoke(base, member, region)
        ),
    };
    judge_spoke(base, member, region, stack.as_ref())
}

/// What fixes a missing spoke stack: its deploy with this hub's outputs, or first the central bus.
fn deploy_spoke(base: &Base, member: &Member, region: &str) -> String {
    let (account, stack_name) = (&member.account, &member.spoke_stack);
    let router_role = base.output("RouterRoleArn").unwrap_or_default();
    let prefix = base.output("QueuePrefix").unwrap_or("karpenter-");
    match base.hub_bus_arn() {
        Some(bus) => format!(
            "deploy cloudformation/spoke.yaml there with account {account}'s credentials: aws \
             cloudformation deploy --region {region} --stack-name {stack_name} --template-file \
             cloudformation/spoke.yaml --capabilities CAPABILITY_NAMED_IAM --parameter-overrides \
             HubEventBusArn={bus} RouterRoleArn={router_role} QueuePrefix={prefix} \
             (CreateSpokeRole=false in every region of the account but one; docs/many-accounts.md)"
        ),
        None => format!(
            "the base stack {} has no central bus: update it with CentralBus=Enabled and \
             ServedAccounts listing {account}, then deploy cloudformation/spoke.yaml in account \
             {account} ({region}) with its HubEventBusArn and RouterRoleArn outputs \
             (docs/many-accounts.md)",
            base.name
        ),
    }
}

/// The member's connection from its spoke stack as DescribeStacks answered it (`None`: there is
/// none), or why adopt cannot work there: decided here, without AWS, so each refusal has its test.
fn judge_spoke(
    base: &Base,
    member: &Member,
    region: &str,
    stack: Option<&Stack>,
) -> Result<Connection> {
    let (account, stack_name) = (&member.account, &member.spoke_stack);
    let router_role = base.output("RouterRoleArn").unwrap_or_default();
    let prefix = base.output("QueuePrefix").unwrap_or("karpenter-");
    let Some(stack) = stack else {
        bail!(
            "account {account} has no spoke stack {stack_name} in {region}. Fix: {}",
            deploy_spoke(base, member, region)
        );
    };
    let status = stack.status.as_str();
    if !SETTLED.contains(&status) {
        bail!(
            "the spoke stack {stack_name} in account {account} ({region}) is {status}. Fix: see \
             why (aws cloudformation describe-stack-events --region {region} --stack-name \
             {stack_name}), and run adopt again once it is complete"
        );
    }
    let parameters = stack.parameters.clone();
    let outputs: BTreeMap<String, String> = stack.outputs.clone();
    let parameter = |key: &str| parameters.get(key).map(String::as_str).unwrap_or_default();
    // A spoke that forwards elsewhere feeds another router: a queue deployed here would get
    // nothing from this one.
    let bus = parameter("HubEventBusArn");
    let trusted = parameter("RouterRoleArn");
    if Some(bus) != base.hub_bus_arn() || trusted != router_role {
        bail!(
            "the spoke stack {stack_name} in account {account} ({region}) serves another hub: it \
             forwards to {bus} and trusts {trusted}, where this hub's base stack {} has the bus \
             {} and the router role {router_role}. Fix: run adopt against the hub that spoke \
             serves (--stack, and that hub's credentials), or update the spoke stack with \
             HubEventBusArn={} RouterRoleArn={router_role}",
            base.name,
            base.hub_bus_arn().unwrap_or("(none)"),
            base.hub_bus_arn()
                .unwrap_or("<the base stack's HubEventBusArn>"),
        );
    }
    let spoke_prefix = outputs
        .get("RegionQueuePrefix")
        .or(outputs.get("QueuePrefix"))
        .map(String::as_str);
    if spoke_prefix.is_some_and(|p| p != prefix) {
        bail!(
            "the spoke stack {stack_name} in account {account} ({region}) exports QueuePrefix \
             {}, the router names queues {prefix}<cluster>. Fix: update the spoke stack with \
             QueuePrefix={prefix}",
            spoke_prefix.unwrap_or_default()
        );
    }
    let sender = outputs
        .get("RegionRouterRoleArn")
        .or(outputs.get("RouterRoleArn"))
        .cloned();
    // QueuePrefix only names the queue (tenant_parameters derives a QueueName when it is long).
    let mut inherits = BTreeMap::from([("QueuePrefix".to_owned(), prefix.to_owned())]);
    if let Some(name) = parameters.get("RouterName").filter(|n| !n.is_empty()) {
        inherits.insert("RouterName".to_owned(), name.clone());
    }
    if let Some(key) = tenant_key(parameter("KmsKey"), account, region) {
        inherits.insert("KmsKey".to_owned(), key.to_owned());
    }
    Ok(Connection {
        account: account.clone(),
        region: region.to_owned(),
        place: Place::Spoke(stack_name.clone()),
        sender,
        inherits,
    })
}

/// Where adopt works, from its command line: the hub's clients (`--hub-region`, else `--region`,
/// with the caller's credentials), the site's (`--region` in `--account`, with `--profile`'s
/// credentials or the caller's when they are in that account), and the member the site is (with
/// `--account`, or the hub's account in another region), connected by `spoke_stack`.
pub async fn reach(
    region: Option<String>,
    hub_region: Option<String>,
    account: Option<String>,
    profile: Option<String>,
    spoke_stack: &str,
) -> Result<(Aws, Aws, Option<Member>)> {
    let hub = Aws::load(hub_region.clone().or(region.clone())).await?;
    if at_the_hub(account.as_deref(), hub_region.as_deref()) {
        return Ok((hub.clone(), hub, None));
    }
    let site_region = match &region {
        Some(region) => region.clone(),
        None => hub.region.clone(),
    };
    let (caller, _) = hub.caller().await?;
    let account = account.unwrap_or_else(|| caller.clone());
    let site = match credentials_for(&caller, &account, profile.as_deref())? {
        Some(profile) => {
            let aws = Aws::load_profile(profile, &site_region).await?;
            let (reached, _) = aws.caller().await.map_err(|e| {
                anyhow::anyhow!(
                    "--profile {profile}: {e}; check its name (aws configure list-profiles)"
                )
            })?;
            if reached != account {
                bail!("--profile {profile} acts in account {reached}, not --account {account}");
            }
            aws
        }
        None => Aws::load(Some(site_region)).await?,
    };
    Ok((
        hub,
        site,
        Some(Member {
            account,
            spoke_stack: spoke_stack.to_owned(),
        }),
    ))
}

/// Whether adopt works at the hub alone: no `--account`, no `--hub-region`.
fn at_the_hub(account: Option<&str>, hub_region: Option<&str>) -> bool {
    account.is_none() && hub_region.is_none()
}

/// Whose credentials reach `account` from a caller in `caller`: `--profile`'s (`Some`), the
/// caller's own when they are in it (`None`), else refused with the fix.
fn credentials_for<'a>(
    caller: &str,
    account: &str,
    profile: Option<&'a str>,
) -> Result<Option<&'a str>> {
    match profile {
        Some(profile) => Ok(Some(profile)),
        None if caller == account => Ok(None),
        None => bail!(
            "--account {account}: your credentials are in account {caller}, the hub's. adopt \
             reads the cluster's rules, queues and roles in {account} and deploys its tenant \
             stack there: pass --profile with a profile for account {account} \
             (docs/adopting.md says what it needs). The spoke role is no way in: it trusts only \
             the hub's router role"
        ),
    }
}

/// The key a tenant queue in `account` and `region` takes from spoke.yaml's `KmsKey`: the spoke
/// lists the keys the spoke role may use, any region, and a tenant queue takes one of its own
/// account and region, so exactly one such key is unambiguous; none or several, no key.
fn tenant_key<'a>(spoke_keys: &'a str, account: &str, region: &str) -> Option<&'a str> {
    let local: Vec<&str> = spoke_keys
        .split(',')
        .filter(|k| k.split(':').nth(3) == Some(region) && arn_account(k) == Some(account))
        .collect();
    match local.as_slice() {
        [key] => Some(key),
        _ => None,
    }
}

/// Whether the base stack's router serves `account` (its ServedAccounts, or its own account).
fn serves(base: &Base, account: &str) -> bool {
    if account == base.account {
        return base.hub_bus_arn().is_some();
    }
    match base.parameter("ServedAccounts").unwrap_or_default() {
        "*" => true,
        listed => listed.split(',').any(|a| a.trim() == account),
    }
}

#[cfg(test)]
mod tests;
