//! `spoke:<account>:…` (with `--account`): a member account the hub serves through its central
//! bus and a spoke.yaml stack. What only a member has:
//!
//! * `served`: the router's SERVED_ACCOUNTS includes the account (or is `*`);
//! * `access`: verify reaches the account, by assuming its spoke role from the caller's
//!   credentials, or with `--profile`;
//! * `stack`: the spoke stack is complete, forwards to this hub's bus, and exports the QueuePrefix
//!   the router names queues with and the role the router assumes (tenant.yaml imports both);
//! * `hub-bus-policy`: the hub bus's resource policy admits the account (with
//!   aws:PrincipalOrgID from `--org-id`; without it an organisation condition is undetermined) and
//!   no stranger;
//! * `role-trust`: the spoke role trusts the hub's router role and nothing else;
//! * `alarm-topic`: the topic this region's tenant alarms notify has a confirmed subscription.
//!
//! And the checks a member shares with the hub, run here with the member's site: `rule:<name>`
//! (5, `../rules/`, forwarding to the hub's bus as a role EventBridge may assume for that rule and
//! that may events:PutEvents there), `role-permissions` (`../routing_role.rs`: the spoke role may
//! route here exactly as the router role may at the hub, and nothing broader), and
//! `tenant:<cluster>:…` (`../tenants/`, the spoke role as the sender).

mod hub_bus;
mod spoke_role;
mod spoke_stack;
#[cfg(test)]
mod tests;

use crate::deployment::Base;
use router_core::{
    accounts::Served,
    config::{Config, DEFAULT_SPOKE_ROLE_NAME, DIRECT_ROLE_SUFFIX, QueueNameTemplate},
};

use super::{
    alarm_topic,
    report::{Check, fail, pass},
    rules::{self, Delivers, DirectQueue, HubBus, RULES, RuleSite},
    tenants::{self, Place, Site},
};
use crate::cloud::{Cloud, Reach, missing, role_fix};
use aws_model::policy::Policy;

use self::hub_bus::check_bus_policy;
use self::spoke_role::{check_reads_direct_role, check_role_permissions, check_role_trust};
use self::spoke_stack::check_spoke_stack;
/// The member account to check, and how.
pub(super) struct Member<'a> {
    pub account: &'a str,
    pub spoke_stack: &'a str,
    pub profile: Option<&'a str>,
    pub org_id: Option<&'a str>,
}

/// What the hub says about the member, worked out once.
struct Hub<'a> {
    base: &'a Base,
    region: &'a str,
    bus: Option<&'a str>,
    router_role: Option<&'a str>,
    spoke_role_name: &'a str,
    /// Its IAM path (`/` unless the accounts put it under one).
    spoke_role_path: &'a str,
    /// The role the router assumes in the member account.
    spoke_role_arn: String,
    queue_prefix: String,
    /// The check names' common prefix, `spoke:<account>`.
    prefix: String,
}

impl Hub<'_> {
    fn name(&self, check: &str) -> String {
        format!("{}:{check}", self.prefix)
    }

    fn deploy_spoke(&self, member: &Member<'_>) -> String {
        format!(
            "deploy cloudformation/spoke.yaml in account {} ({}): aws cloudformation deploy \
             --region {} --stack-name {} --template-file cloudformation/spoke.yaml --capabilities \
             CAPABILITY_NAMED_IAM --parameter-overrides HubEventBusArn={} RouterRoleArn={} \
             QueuePrefix={} {} (CreateSpokeRole=false in every region but one)",
            member.account,
            self.region,
            self.region,
            member.spoke_stack,
            self.bus.unwrap_or("<the base stack's HubEventBusArn>"),
            self.router_role
                .unwrap_or("<the base stack's RouterRoleArn>"),
            self.queue_prefix,
            self.spoke_role_parameters(),
        )
    }

    /// `SpokeRoleName=<name>`, and `SpokeRolePath=<path>` when the role is not at `/`.
    fn spoke_role_parameters(&self) -> String {
        match self.spoke_role_path {
            "/" => format!("SpokeRoleName={}", self.spoke_role_name),
            path => format!(
                "SpokeRoleName={} SpokeRolePath={path}",
                self.spoke_role_name
            ),
        }
    }
}

/// A 12-digit account id (the `--account` value parser).
pub fn parse_account_id(value: &str) -> Result<String, String> {
    if value.len() == 12 && value.bytes().all(|b| b.is_ascii_digit()) {
        Ok(value.to_owned())
    } else {
        Err("an AWS account id is 12 digits".to_owned())
    }
}

/// An AWS Organizations id, `o-` and 10 to 32 lowercase letters or digits (`--org-id`).
pub fn parse_org_id(value: &str) -> Result<String, String> {
    let rest = value.strip_prefix("o-").unwrap_or_default();
    let ok = (10..=32).contains(&rest.len())
        && rest
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if ok {
        Ok(value.to_owned())
    } else {
        Err(
            "an organisation id looks like o-abcd123456 (aws organizations describe-organization)"
                .to_owned(),
        )
    }
}

pub(super) async fn check<C: Cloud>(
    hub_aws: &C,
    base: &Base,
    config: Option<&Config>,
    template: Option<&QueueNameTemplate>,
    member: &Member<'_>,
    checks: &mut Vec<Check>,
) {
    let spoke_role_name = config
        .map(|c| c.spoke_role_name.as_str())
        .or_else(|| base.parameter("SpokeRoleName"))
        .unwrap_or(DEFAULT_SPOKE_ROLE_NAME);
    // Its path, as the ARN carries it after `role/` ("" for /).
    let spoke_role_path = config
        .map(|c| c.spoke_role_path.as_str())
        .or_else(|| base.parameter("SpokeRolePath").filter(|p| !p.is_empty()))
        .unwrap_or("/");
    let hub = Hub {
        base,
        region: hub_aws.region(),
        bus: base.hub_bus_arn(),
        router_role: base.output("RouterRoleArn"),
        spoke_role_name,
        spoke_role_path,
        spoke_role_arn: format!(
            "arn:{}:iam::{}:role{spoke_role_path}{spoke_role_name}",
            base.partition, member.account
        ),
        queue_prefix: template
            .map(|t| t.prefix().to_owned())
            .or_else(|| base.output("QueuePrefix").map(str::to_owned))
            .unwrap_or_else(|| "karpenter-".to_owned()),
        prefix: format!("spoke:{}", member.account),
    };

    if member.account == base.account {
        checks.push(fail(
            &hub.name("served"),
            format!(
                "{} is the hub's own account: its events reach the router through the base \
                 stack's default-bus rules, and a spoke stack here would deliver each twice",
                member.account
            ),
            "run verify --account with a member account's id",
        ));
        return;
    }
    if let Some(config) = config {
        checks.push(check_served(&hub, config, member));
    }
    let aws = match reach(hub_aws, &hub, member).await {
        Ok((aws, check)) => {
            checks.push(check);
            aws
        }
        Err(check) => {
            checks.push(check);
            checks.push(check_bus_policy(hub_aws, &hub, member, None).await);
            return;
        }
    };
    let Some(spoke) = check_spoke_stack(&aws, &hub, member, checks).await else {
        checks.push(check_bus_policy(hub_aws, &hub, member, None).await);
        return;
    };
    // The hub's rule checks, forwarding to the hub's bus instead of the ingest queue.
    let site = RuleSite {
        account: member.account,
        region: hub.region,
        partition: &base.partition,
        resources: &spoke.resources,
        prefix: hub.name(""),
        stack: format!("the spoke stack {}", member.spoke_stack),
        update: "update the spoke stack with this project's cloudformation/spoke.yaml".to_owned(),
        recreate: format!(
            "CloudFormation does not re-create deleted resources on its own: delete and \
             re-deploy the spoke stack {} in account {}",
            member.spoke_stack, member.account
        ),
        delivers: Delivers::HubBus(HubBus {
            bus: hub.bus,
            forward_role: spoke
                .resources
                .get("ForwardToHubRole")
                .map(|r| format!("arn:{}:iam::{}:role/{r}", base.partition, member.account)),
            account: member.account,
            region: hub.region,
            spoke_stack: member.spoke_stack,
            bus_check: hub.name("hub-bus-policy"),
            direct: match base.output("DirectQueueArn") {
                Some(arn) => Some(DirectQueue {
                    arn,
                    policy: direct_queue_policy(hub_aws, arn).await,
                    role_arn: format!(
                        "arn:{}:iam::{}:role{}{}{DIRECT_ROLE_SUFFIX}-{}",
                        base.partition,
                        member.account,
                        hub.spoke_role_path,
                        hub.spoke_role_name,
                        hub.region
                    ),
                    base_stack: &base.name,
                }),
                None => None,
            },
        }),
    };
    checks.push(
        alarm_topic::check(
            &aws,
            &alarm_topic::Site {
                name: hub.name("alarm-topic"),
                topic: spoke.alarm_topic.as_deref(),
                region: hub.region,
                deploy: format!(
                    "update the spoke stack {} in account {} with this release's spoke.yaml: \
                     given no AlarmTopicArn, it creates a topic for this region's tenant alarms",
                    member.spoke_stack, member.account
                ),
            },
        )
        .await,
    );
    let rules = RULES.iter().map(|(logical, kind)| (*logical, *kind, None));
    let found = rules::check_site(&aws, &site, rules, checks).await;
    checks.push(
        check_bus_policy(
            hub_aws,
            &hub,
            member,
            found.forwarders.first().map(String::as_str),
        )
        .await,
    );
    let role = match aws.role(&hub.spoke_role_arn).await {
        Ok(role) => {
            checks.push(check_role_trust(&hub, member, &role));
            checks.push(check_role_permissions(&hub, member, &role));
            // Direct rules: the router reads the direct role's id through the spoke role.
            if spoke.resources.contains_key("DirectRole") {
                checks.push(check_reads_direct_role(&hub, member, &role));
            }
            Some(role)
        }
        Err(e) => {
            let missing = e.code() == Some(missing::ROLE);
            checks.push(fail(
                &hub.name("role-trust"),
                if missing {
                    format!(
                        "the spoke role {} does not exist: the router cannot reach {}",
                        hub.spoke_role_arn, member.account
                    )
                } else {
                    e.to_string()
                },
                if missing {
                    format!(
                        "update the spoke stack {} in the region that creates the role with \
                         CreateSpokeRole=true and {}",
                        member.spoke_stack,
                        hub.spoke_role_parameters()
                    )
                } else {
                    role_fix(&e).to_owned()
                },
            ));
            None
        }
    };
    if let Some(template) = template {
        // The same tenant checks as the hub's, with the spoke role as the sender.
        let site = Site {
            base: &base.name,
            account: member.account,
            region: hub.region,
            partition: &base.partition,
            place: Place::Member {
                spoke_stack: member.spoke_stack,
            },
            sender: Some(&hub.spoke_role_arn),
            queue_prefix: Some(&hub.queue_prefix),
            serves_others: false,
        };
        tenants::check(&aws, &site, template, role.as_ref(), &[], &[], &[], checks).await;
    }
}

fn check_served(hub: &Hub<'_>, config: &Config, member: &Member<'_>) -> Check {
    let name = hub.name("served");
    let account = member.account;
    let fix = |listed: &str| {
        format!(
            "update the base stack {} with ServedAccounts={listed} (the central bus's policy then \
             admits it too)",
            hub.base.name
        )
    };
    match &config.served {
        Served::Any => pass(
            &name,
            "SERVED_ACCOUNTS=*: every account the central bus admits is served",
        ),
        Served::Listed(accounts) if accounts.contains(account) => pass(
            &name,
            format!("{account} is in the router's SERVED_ACCOUNTS"),
        ),
        Served::Listed(accounts) => {
            let mut list: Vec<&str> = accounts.iter().map(String::as_str).collect();
            list.push(account);
            fail(
                &name,
                format!(
                    "{account} is not in the router's SERVED_ACCOUNTS ({}): its events are \
                     dropped as not served",
                    accounts.iter().cloned().collect::<Vec<_>>().join(",")
                ),
                fix(&list.join(",")),
            )
        }
        Served::Own => fail(
            &name,
            format!(
                "the router serves only its own account (SERVED_ACCOUNTS is empty): events from \
                 {account} are dropped as not served"
            ),
            format!("{} and CentralBus=Enabled", fix(account)),
        ),
    }
}

/// Clients acting in the member account: its spoke role assumed, or `--profile`.
async fn reach<C: Cloud>(
    hub_aws: &C,
    hub: &Hub<'_>,
    member: &Member<'_>,
) -> Result<(C, Check), Check> {
    let name = hub.name("access");
    let account = member.account;
    let (aws, how) = match member.profile {
        Some(profile) => {
            let aws = hub_aws.reach(Reach::Profile(profile)).await.map_err(|e| {
                fail(
                    &name,
                    format!("profile {profile}: {}", e.message),
                    "check the profile's name (aws configure list-profiles)",
                )
            })?;
            (aws, format!("profile {profile}"))
        }
        None => {
            let aws = hub_aws
                .reach(Reach::Assume {
                    role_arn: &hub.spoke_role_arn,
                    session: "routerctl-verify",
                })
                .await
                .map_err(|e| {
                    fail(
                        &name,
                        e.message,
                        format!(
                            "the spoke role trusts only the hub's router role, so other \
                             credentials may not assume it: pass --profile with a profile for \
                             account {account} allowed to read CloudFormation, EventBridge, IAM \
                             and SQS there"
                        ),
                    )
                })?;
            (aws, format!("assumed {}", hub.spoke_role_arn))
        }
    };
    match aws.caller().await {
        Ok((acting, arn)) if acting == account => Ok((aws, pass(&name, format!("{how}: {arn}")))),
        Ok((acting, arn)) => Err(fail(
            &name,
            format!("{how} acts as {arn} in account {acting}, not {account}"),
            format!("pass --profile with a profile for account {account}"),
        )),
        Err(e) => Err(fail(
            &name,
            format!("{how}: GetCallerIdentity: {e}"),
            "check the credentials (aws sts get-caller-identity)",
        )),
    }
}

/// The spoke stack as CloudFormation describes it in the member account.
struct Spoke {
    resources: std::collections::BTreeMap<String, String>,
    /// The topic this region's tenant alarms notify (none from a spoke stack before 0.2.0).
    alarm_topic: Option<String>,
}

/// The hub's direct queue's policy, as SQS holds it.
async fn direct_queue_policy(hub_aws: &impl Cloud, arn: &str) -> Result<Policy, String> {
    let name = aws_model::arn::arn_name(arn);
    let url = hub_aws
        .queue_url(name)
        .await
        .map_err(|e| format!("GetQueueUrl {name}: {e}"))?;
    let attributes = hub_aws
        .queue_attributes(&url)
        .await
        .map_err(|e| format!("GetQueueAttributes {arn}: {e}"))?;
    let text = attributes
        .get("Policy")
        .ok_or_else(|| format!("{arn} has no policy"))?;
    Policy::parse(format!("policy of {arn}"), text)
}
