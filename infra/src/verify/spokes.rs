//! `spoke:<account>:…` (with `--account`): a member account the hub serves through its central
//! bus and a spoke.yaml stack.
//!
//! * `served`: the router's SERVED_ACCOUNTS includes the account (or is `*`);
//! * `access`: verify reaches the account, by assuming its spoke role from the caller's
//!   credentials, or with `--profile`;
//! * `stack`: the spoke stack is complete, forwards to this hub's bus, and exports the QueuePrefix
//!   the router names queues with and the role the router assumes (tenant.yaml imports both);
//! * `rule:<name>` (5): on the member's default bus, ENABLED, the router's pattern (as the hub's
//!   rules, `rules.rs`), targeting the hub bus with a role EventBridge may assume for that rule and
//!   that may events:PutEvents on the bus;
//! * `hub-bus-policy`: the hub bus's resource policy admits the account (with
//!   aws:PrincipalOrgID from `--org-id`; without it an organisation condition is undetermined) and
//!   no stranger;
//! * `role-trust`: the spoke role trusts the hub's router role and nothing else;
//! * `role-permissions`: the spoke role may exactly ec2:DescribeInstances, tag:GetResources,
//!   sqs:GetQueueUrl, sqs:SendMessage, sqs:ListQueueTags and sqs:GetQueueAttributes on
//!   `<QueuePrefix>*`, and nothing broader;
//! * `tenant:<cluster>:encryption`, `:queue-policy`, `:spoke-role`: every cluster queue in the
//!   account is encrypted, admits the spoke role as its only sender, and the role may send to it.

use std::collections::HashMap;

use aws_sdk_eventbridge::operation::list_targets_by_rule::ListTargetsByRuleOutput;
use interruption_router::{
    accounts::Served,
    config::{Config, DEFAULT_SPOKE_ROLE_NAME, QueueNameTemplate},
    event::Kind,
};
use serde_json::{Value, json};

use super::{
    queues::{encryption, load_queue},
    report::{Check, Findings, fail, pass},
    role::{Role, load_role},
    rules::{RULES, bus_name, describe_rule, state_bus_and_pattern},
    stack::{self, Base},
    tenants::{Sender, check_ownership, check_read, check_tenant_policy, discover_clusters},
};
use crate::{
    aws::{Aws, describe},
    policy::{Decision, Policy, Principal, Request, evaluate},
};

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
             QueuePrefix={} SpokeRoleName={} (CreateSpokeRole=false in every region but one)",
            member.account,
            self.region,
            self.region,
            member.spoke_stack,
            self.bus.unwrap_or("<the base stack's HubEventBusArn>"),
            self.router_role
                .unwrap_or("<the base stack's RouterRoleArn>"),
            self.queue_prefix,
            self.spoke_role_name,
        )
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

pub(super) async fn check(
    hub_aws: &Aws,
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
    let hub = Hub {
        base,
        region: &hub_aws.region,
        bus: base.hub_bus_arn(),
        router_role: base.output("RouterRoleArn"),
        spoke_role_name,
        spoke_role_arn: format!(
            "arn:{}:iam::{}:role/{spoke_role_name}",
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
    let forwarders = check_rules(&aws, &hub, member, &spoke, checks).await;
    checks.push(
        check_bus_policy(
            hub_aws,
            &hub,
            member,
            forwarders.first().map(String::as_str),
        )
        .await,
    );
    let role = match load_role(&aws, &hub.spoke_role_arn).await {
        Ok(role) => {
            checks.push(check_role_trust(&hub, member, &role));
            checks.push(check_role_permissions(&hub, member, &role));
            Some(role)
        }
        Err((problem, fix)) => {
            let missing = problem.contains("NoSuchEntity");
            checks.push(fail(
                &hub.name("role-trust"),
                if missing {
                    format!(
                        "the spoke role {} does not exist: the router cannot reach {}",
                        hub.spoke_role_arn, member.account
                    )
                } else {
                    problem
                },
                if missing {
                    format!(
                        "update the spoke stack {} in the region that creates the role with \
                         CreateSpokeRole=true and SpokeRoleName={}",
                        member.spoke_stack, hub.spoke_role_name
                    )
                } else {
                    fix
                },
            ));
            None
        }
    };
    if let Some(template) = template {
        check_tenants(&aws, &hub, member, template, role.as_ref(), checks).await;
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
async fn reach(hub_aws: &Aws, hub: &Hub<'_>, member: &Member<'_>) -> Result<(Aws, Check), Check> {
    let name = hub.name("access");
    let account = member.account;
    let (aws, how) = match member.profile {
        Some(profile) => {
            let aws = Aws::load_profile(profile, hub.region).await.map_err(|e| {
                fail(
                    &name,
                    format!("profile {profile}: {e:#}"),
                    "check the profile's name (aws configure list-profiles)",
                )
            })?;
            (aws, format!("profile {profile}"))
        }
        None => {
            let aws = hub_aws
                .assume_role(&hub.spoke_role_arn, "routerctl-verify")
                .await
                .map_err(|e| {
                    fail(
                        &name,
                        format!("{e:#}"),
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
            format!("{how}: {e:#}"),
            "check the credentials (aws sts get-caller-identity)",
        )),
    }
}

/// The spoke stack as CloudFormation describes it in the member account.
struct Spoke {
    resources: std::collections::BTreeMap<String, String>,
}

async fn check_spoke_stack(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    checks: &mut Vec<Check>,
) -> Option<Spoke> {
    let name = hub.name("stack");
    let stack_name = member.spoke_stack;
    let described = match aws
        .cfn
        .describe_stacks()
        .stack_name(stack_name)
        .send()
        .await
    {
        Ok(d) => d,
        Err(e) => {
            checks.push(fail(
                &name,
                format!(
                    "{stack_name} in account {}: {} (pass its name with --spoke-stack)",
                    member.account,
                    describe(&e)
                ),
                hub.deploy_spoke(member),
            ));
            return None;
        }
    };
    let Some(stack) = described.stacks().first() else {
        checks.push(fail(
            &name,
            format!("{stack_name} does not exist in account {}", member.account),
            hub.deploy_spoke(member),
        ));
        return None;
    };
    let mut f = Findings::default();
    let status = stack
        .stack_status()
        .map(|s| s.as_str())
        .unwrap_or("unknown");
    if [
        "CREATE_COMPLETE",
        "UPDATE_COMPLETE",
        "UPDATE_ROLLBACK_COMPLETE",
    ]
    .contains(&status)
    {
        f.ok(format!("{stack_name}: {status}"));
    } else {
        f.problem(
            format!("{stack_name} is {status}"),
            format!(
                "see why: aws cloudformation describe-stack-events --stack-name {stack_name} \
                 --region {} (in account {})",
                hub.region, member.account
            ),
        );
    }
    let outputs: HashMap<String, String> = stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect();
    let update = |parameter: &str, value: &str| {
        format!(
            "update the spoke stack {stack_name} in account {} with {parameter}={value}",
            member.account
        )
    };
    match (outputs.get("HubEventBusArn"), hub.bus) {
        (Some(found), Some(bus)) if found == bus => f.ok(format!("forwards to {bus}")),
        (found, Some(bus)) => f.problem(
            format!(
                "it forwards to {}, not this hub's central bus {bus}",
                found.map_or("(no HubEventBusArn output)", String::as_str)
            ),
            update("HubEventBusArn", bus),
        ),
        // The missing central bus is hub-bus-policy's finding.
        (_, None) => {}
    }
    match outputs.get("QueuePrefix") {
        Some(prefix) if *prefix == hub.queue_prefix => {
            f.ok(format!("QueuePrefix {prefix} as the router's"))
        }
        found => f.problem(
            format!(
                "its QueuePrefix is {}, but the router names queues {}<cluster>: it cannot send to \
                 this account's tenant queues",
                found.map_or("missing", String::as_str),
                hub.queue_prefix
            ),
            format!(
                "{}, then update its tenant stacks (they import it)",
                update("QueuePrefix", &hub.queue_prefix)
            ),
        ),
    }
    match outputs
        .get("RegionRouterRoleArn")
        .or(outputs.get("RouterRoleArn"))
    {
        Some(role) if *role == hub.spoke_role_arn => {
            f.ok("exports the spoke role for tenant queue policies")
        }
        found => f.problem(
            format!(
                "it exports RouterRoleArn {} for tenant queue policies, but the router assumes \
                 {}",
                found.map_or("(none)", String::as_str),
                hub.spoke_role_arn
            ),
            update("SpokeRoleName", hub.spoke_role_name),
        ),
    }
    let resources = match stack::resources(aws, stack_name).await {
        Ok(r) => r,
        Err(problem) => {
            f.problem(
                problem,
                "run verify with cloudformation:DescribeStackResources in the member account",
            );
            Default::default()
        }
    };
    checks.push(f.into_check(name));
    Some(Spoke { resources })
}

/// The five rules; the ARNs of the roles their hub targets use.
async fn check_rules(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    spoke: &Spoke,
    checks: &mut Vec<Check>,
) -> Vec<String> {
    let mut roles: HashMap<String, Result<Role, String>> = HashMap::new();
    let mut forwarders: Vec<String> = Vec::new();
    for (logical, kind) in RULES {
        let (check, role) = check_rule(aws, hub, member, spoke, logical, kind, &mut roles).await;
        checks.push(check);
        if let Some(role) = role.filter(|r| !forwarders.contains(r)) {
            forwarders.push(role);
        }
    }
    forwarders
}

async fn check_rule(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    spoke: &Spoke,
    logical: &str,
    kind: Kind,
    roles: &mut HashMap<String, Result<Role, String>>,
) -> (Check, Option<String>) {
    let check_name = hub.name(&format!("rule:{logical}"));
    let region = hub.region;
    let Some(name) = spoke.resources.get(logical) else {
        return (
            fail(
                &check_name,
                format!("the spoke stack {} has no {logical}", member.spoke_stack),
                "update the spoke stack with this project's cloudformation/spoke.yaml",
            ),
            None,
        );
    };
    let rule = match describe_rule(aws, name, None).await {
        Ok(rule) => rule,
        Err(problem) => {
            return (
                fail(
                    &check_name,
                    problem,
                    format!(
                        "CloudFormation does not re-create deleted resources on its own: delete \
                         and re-deploy the spoke stack {} in account {}",
                        member.spoke_stack, member.account
                    ),
                ),
                None,
            );
        }
    };
    let rule_arn = rule.arn().map(str::to_owned).unwrap_or_else(|| {
        format!(
            "arn:{}:events:{region}:{}:rule/{name}",
            hub.base.partition, member.account
        )
    });
    let mut f = Findings::default();
    state_bus_and_pattern(&rule, name, kind, None, region, &mut f);
    let Some(bus) = hub.bus else {
        f.problem(
            "cannot tell whether it targets the hub: the base stack has no central bus",
            format!("see {}", hub.name("hub-bus-policy")),
        );
        return (f.into_check(check_name), None);
    };
    let forward_role = spoke.resources.get("ForwardToHubRole").map(|r| {
        format!(
            "arn:{}:iam::{}:role/{r}",
            hub.base.partition, member.account
        )
    });
    let put_targets = format!(
        "aws events put-targets --rule {name} --region {region} --targets \
         'Id=hub,Arn={bus},RoleArn={}' (in account {})",
        forward_role
            .as_deref()
            .unwrap_or("<the spoke stack's ForwardToHubRole ARN>"),
        member.account
    );
    let targets: Result<ListTargetsByRuleOutput, String> = aws
        .events
        .list_targets_by_rule()
        .rule(name)
        .send()
        .await
        .map_err(|e| format!("ListTargetsByRule {name}: {}", describe(&e)));
    let targets = match targets {
        Ok(t) => t,
        Err(problem) => {
            f.problem(problem, "run verify with events:ListTargetsByRule");
            return (f.into_check(check_name), None);
        }
    };
    let Some(target) = targets.targets().iter().find(|t| t.arn() == bus) else {
        let found: Vec<&str> = targets.targets().iter().map(|t| t.arn()).collect();
        f.problem(
            format!("does not target the hub bus {bus} (targets: {found:?})"),
            put_targets,
        );
        return (f.into_check(check_name), None);
    };
    let Some(role_arn) = target.role_arn() else {
        f.problem(
            "its hub target has no role: EventBridge needs one to put events on another \
             account's bus",
            put_targets,
        );
        return (f.into_check(check_name), None);
    };
    let restore = format!(
        "update the spoke stack {} in account {} (ForwardToHubRole: trust OnlyTheseRules, policy \
         forward-to-hub)",
        member.spoke_stack, member.account
    );
    if !roles.contains_key(role_arn) {
        let loaded = load_role(aws, role_arn)
            .await
            .map_err(|(problem, _)| problem);
        roles.insert(role_arn.to_owned(), loaded);
    }
    match &roles[role_arn] {
        Err(problem) => f.problem(
            format!("its target's role: {problem}"),
            format!("{restore}, or {put_targets}"),
        ),
        Ok(role) => {
            let d = role.may("events:PutEvents", bus);
            if d.is_allowed() {
                f.ok(format!("→ hub bus as {}", role.name()));
            } else {
                f.problem(
                    format!(
                        "its target's role {} may not events:PutEvents on {bus} ({d})",
                        role.name()
                    ),
                    restore.clone(),
                );
            }
            let trusted = match &role.trust {
                Ok(trust) => {
                    let context = [
                        ("aws:SourceArn", rule_arn.as_str()),
                        ("aws:SourceAccount", member.account),
                    ];
                    evaluate(
                        std::slice::from_ref(trust),
                        &Request {
                            principal: Principal::Service("events.amazonaws.com"),
                            action: "sts:AssumeRole",
                            resource: role_arn,
                            context: &context,
                        },
                    )
                }
                Err(e) => Decision::Undetermined { why: e.clone() },
            };
            if !trusted.is_allowed() {
                f.problem(
                    format!(
                        "EventBridge may not assume {} for this rule ({trusted})",
                        role.name()
                    ),
                    restore,
                );
            }
        }
    }
    (f.into_check(check_name), Some(role_arn.to_owned()))
}

/// base.yaml's HubEventBus policy: the organisation, or the listed accounts.
pub fn hub_bus_policy(bus_arn: &str, served_accounts: &str, organization: Option<&str>) -> Value {
    let statement = match organization.filter(|o| !o.is_empty()) {
        Some(org) => json!({"Sid": "AllowOrganizationToPutEvents", "Effect": "Allow",
            "Principal": "*", "Action": "events:PutEvents", "Resource": bus_arn,
            "Condition": {"StringEquals": {"aws:PrincipalOrgID": org}}}),
        None => {
            let accounts: Vec<&str> = served_accounts.split(',').collect();
            json!({"Sid": "AllowServedAccountsToPutEvents", "Effect": "Allow",
                "Principal": {"AWS": accounts}, "Action": "events:PutEvents", "Resource": bus_arn})
        }
    };
    json!({"Version": "2012-10-17", "Statement": [statement]})
}

/// An account no hub serves, and an organisation that is not the hub's.
const STRANGER: &str = "999999999999";
const STRANGER_ORG: &str = "o-routerctlprobe";

async fn check_bus_policy(
    hub_aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    forwarder: Option<&str>,
) -> Check {
    let name = hub.name("hub-bus-policy");
    let base = hub.base;
    let account = member.account;
    let Some(bus) = hub.bus else {
        return fail(
            &name,
            format!(
                "the base stack {} has no central bus (CentralBus=Disabled): the spoke's rules \
                 have nowhere to forward",
                base.name
            ),
            format!(
                "update the base stack {} with CentralBus=Enabled and ServedAccounts={account} \
                 (or OrganizationId with ServedAccounts=*)",
                base.name
            ),
        );
    };
    let organization = base.parameter("OrganizationId").filter(|o| !o.is_empty());
    let served = base.parameter("ServedAccounts").unwrap_or(account);
    let restore = format!(
        "update the base stack {} (HubEventBus's policy comes from OrganizationId or \
         ServedAccounts), or put it back: aws events put-permission --region {} --event-bus-name \
         {} --policy '{}'",
        base.name,
        hub.region,
        bus_name(bus),
        hub_bus_policy(bus, served, organization)
    );
    let described = hub_aws
        .events
        .describe_event_bus()
        .name(bus_name(bus))
        .send()
        .await;
    let text = match described {
        Ok(out) => out.policy().map(str::to_owned),
        Err(e) => {
            return fail(
                &name,
                format!("DescribeEventBus {}: {}", bus_name(bus), describe(&e)),
                format!(
                    "re-create the central bus: delete and re-deploy the base stack {} (it was \
                     deleted outside CloudFormation), or check events:DescribeEventBus",
                    base.name
                ),
            );
        }
    };
    let Some(text) = text else {
        return fail(
            &name,
            format!(
                "{} has no resource policy: no other account may put events on it",
                bus_name(bus)
            ),
            restore,
        );
    };
    let policy = match Policy::parse("bus policy", &text) {
        Ok(p) => p,
        Err(e) => return fail(&name, e, restore),
    };
    let decide = |principal: &str, account: &str, org: Option<&str>| {
        let mut context = vec![
            ("aws:PrincipalAccount", account),
            ("aws:PrincipalArn", principal),
        ];
        if let Some(org) = org {
            context.push(("aws:PrincipalOrgID", org));
        }
        evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Aws(principal),
                action: "events:PutEvents",
                resource: bus,
                context: &context,
            },
        )
    };
    let root = format!("arn:{}:iam::{account}:root", base.partition);
    let principal = forwarder.unwrap_or(&root);
    let mut f = Findings::default();
    match decide(principal, account, member.org_id) {
        d @ Decision::Allowed { .. } => f.ok(format!(
            "{account} may events:PutEvents on {} ({d})",
            bus_name(bus)
        )),
        d @ Decision::Undetermined { .. } if member.org_id.is_none() => f.problem(
            format!(
                "whether {account} may events:PutEvents on {} is {d}",
                bus_name(bus)
            ),
            "pass the organisation's id with --org-id (aws organizations describe-organization \
             --query Organization.Id --output text)",
        ),
        d => f.problem(
            format!(
                "{account} may not events:PutEvents on {} ({d}): its interruptions never reach \
                 the router",
                bus_name(bus)
            ),
            if organization.is_some() {
                format!(
                    "the bus admits organisation {}: move {account} into it, or {restore}",
                    organization.unwrap_or_default()
                )
            } else {
                format!(
                    "add {account} to the base stack's ServedAccounts ({served},{account}): \
                     {restore}"
                )
            },
        ),
    }
    let stranger = format!("arn:{}:iam::{STRANGER}:root", base.partition);
    if account != STRANGER {
        match decide(&stranger, STRANGER, Some(STRANGER_ORG)) {
            Decision::Allowed { by } => f.problem(
                format!(
                    "any account may put events on {} (allowed by {by}): anyone can inject \
                     interruptions for the router to act on",
                    bus_name(bus)
                ),
                restore,
            ),
            _ => f.ok("no other account may"),
        }
    }
    f.into_check(name)
}

/// spoke.yaml's SpokeRole trust policy.
pub fn spoke_trust_policy(router_role_arn: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{"Sid": "OnlyTheHubRouter", "Effect": "Allow",
        "Principal": {"AWS": router_role_arn}, "Action": "sts:AssumeRole"}]})
}

/// spoke.yaml's SpokeRole inline policy interruption-router-spoke.
pub fn spoke_role_policy(partition: &str, account: &str, queue_prefix: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "ResolveInstanceTags", "Effect": "Allow",
         "Action": ["ec2:DescribeInstances", "tag:GetResources"], "Resource": "*"},
        {"Sid": "SendToClusterQueues", "Effect": "Allow",
         "Action": ["sqs:GetQueueUrl", "sqs:SendMessage"],
         "Resource": format!("arn:{partition}:sqs:*:{account}:{queue_prefix}*")},
        {"Sid": "ReadClusterQueueOwnership", "Effect": "Allow",
         "Action": ["sqs:ListQueueTags", "sqs:GetQueueAttributes"],
         "Resource": format!("arn:{partition}:sqs:*:{account}:{queue_prefix}*")}]})
}

fn check_role_trust(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let name = hub.name("role-trust");
    let base = hub.base;
    let Some(router) = hub.router_role else {
        return fail(
            &name,
            "the base stack has no RouterRoleArn output: the role the spoke must trust is unknown",
            "update the base stack with this project's cloudformation/base.yaml",
        );
    };
    let restore = format!(
        "update the spoke stack {} in account {} with RouterRoleArn={router} (in the region that \
         creates the role), or put the trust back: aws iam update-assume-role-policy --role-name \
         {} --policy-document '{}'",
        member.spoke_stack,
        member.account,
        role.name(),
        spoke_trust_policy(router)
    );
    let trust = match &role.trust {
        Ok(t) => t,
        Err(e) => return fail(&name, e.clone(), restore),
    };
    let decide = |principal: Principal<'_>| {
        let (arn, account) = match principal {
            Principal::Aws(arn) => (arn, crate::aws::arn_account(arn).unwrap_or_default()),
            _ => ("", ""),
        };
        let context = [("aws:PrincipalArn", arn), ("aws:PrincipalAccount", account)];
        evaluate(
            std::slice::from_ref(trust),
            &Request {
                principal,
                action: "sts:AssumeRole",
                resource: &role.arn,
                context: if arn.is_empty() { &[] } else { &context },
            },
        )
    };
    let mut f = Findings::default();
    match decide(Principal::Aws(router)) {
        d @ Decision::Allowed { .. } => f.ok(format!("the hub's router role may assume it ({d})")),
        d => f.problem(
            format!(
                "the hub's router role {router} may not assume {} ({d}): the router cannot reach \
                 {}",
                role.name(),
                member.account
            ),
            restore.clone(),
        ),
    }
    let probe = |account: &str| {
        format!(
            "arn:{}:iam::{account}:role/routerctl-verify-probe",
            base.partition
        )
    };
    let others = [
        (probe(&base.account), "another role of the hub account"),
        (probe(member.account), "a role of this account"),
        (probe(STRANGER), "a role of another account"),
    ];
    let mut admitted = Vec::new();
    for (arn, what) in &others {
        let d = decide(Principal::Aws(arn));
        if !matches!(d, Decision::NotAllowed | Decision::Denied { .. }) {
            admitted.push(format!("{what} ({d})"));
        }
    }
    for service in ["lambda.amazonaws.com", "ec2.amazonaws.com"] {
        let d = decide(Principal::Service(service));
        if !matches!(d, Decision::NotAllowed | Decision::Denied { .. }) {
            admitted.push(format!("{service} ({d})"));
        }
    }
    if admitted.is_empty() {
        f.ok("no other principal may");
    } else {
        f.problem(
            format!(
                "it also admits {}: they could look up instances and write fake interruptions \
                 to this account's clusters",
                admitted.join(", ")
            ),
            restore,
        );
    }
    f.into_check(name)
}

fn check_role_permissions(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let name = hub.name("role-permissions");
    let base = hub.base;
    let account = member.account;
    let queue = |name: &str| format!("arn:{}:sqs:{}:{account}:{name}", base.partition, hub.region);
    let cluster_queue = queue(&format!("{}routerctl-verify-probe", hub.queue_prefix));
    let restore = format!(
        "update the spoke stack that creates the role (CreateSpokeRole=true) in account {account}, \
         and remove policies that grant more (aws iam list-role-policies / \
         list-attached-role-policies --role-name {role_name}); or put the policy back: aws iam \
         put-role-policy --role-name {role_name} --policy-name interruption-router-spoke \
         --policy-document '{}'",
        spoke_role_policy(&base.partition, account, &hub.queue_prefix),
        role_name = role.name()
    );
    let needed = [
        ("ec2:DescribeInstances", "*"),
        ("tag:GetResources", "*"),
        ("sqs:GetQueueUrl", cluster_queue.as_str()),
        ("sqs:SendMessage", cluster_queue.as_str()),
        // Whether a queue with a cluster's name is a tenant queue (router/src/tenancy.rs).
        ("sqs:ListQueueTags", cluster_queue.as_str()),
        ("sqs:GetQueueAttributes", cluster_queue.as_str()),
    ];
    let outside = queue("routerctl-verify-probe");
    let broader = [
        ("sqs:ReceiveMessage", cluster_queue.as_str()),
        ("sqs:DeleteMessage", cluster_queue.as_str()),
        ("sqs:PurgeQueue", cluster_queue.as_str()),
        ("sqs:SetQueueAttributes", cluster_queue.as_str()),
        ("sqs:SendMessage", outside.as_str()),
        ("ec2:TerminateInstances", "*"),
        ("ec2:RunInstances", "*"),
        ("ec2:CreateTags", "*"),
        ("tag:TagResources", "*"),
        ("iam:PassRole", "*"),
        ("sts:AssumeRole", "*"),
        ("s3:GetObject", "*"),
    ];
    let mut f = Findings::default();
    let missing: Vec<String> = needed
        .iter()
        .filter_map(|(action, resource)| {
            let d = role.may(action, resource);
            (!d.is_allowed()).then(|| format!("{action} on {resource} ({d})"))
        })
        .collect();
    if missing.is_empty() {
        f.ok(format!(
            "{} may ec2:DescribeInstances and tag:GetResources, sqs:GetQueueUrl, \
             sqs:SendMessage, sqs:ListQueueTags and sqs:GetQueueAttributes on {}*",
            role.name(),
            hub.queue_prefix
        ));
    } else {
        f.problem(
            format!(
                "{} may not {}: the router cannot route this account's events",
                role.name(),
                missing.join(", ")
            ),
            restore.clone(),
        );
    }
    let extra: Vec<String> = broader
        .iter()
        .filter_map(|(action, resource)| {
            let d = role.may(action, resource);
            d.is_allowed().then(|| {
                let on = if *resource == "*" {
                    String::new()
                } else {
                    format!(" on {}", crate::aws::arn_name(resource))
                };
                format!("{action}{on} ({d})")
            })
        })
        .collect();
    if extra.is_empty() {
        f.ok("nothing broader");
    } else {
        f.problem(
            format!(
                "{} may also {}: more than the router needs, to a role another account assumes",
                role.name(),
                extra.join(", ")
            ),
            restore,
        );
    }
    f.into_check(name)
}

async fn check_tenants(
    aws: &Aws,
    hub: &Hub<'_>,
    member: &Member<'_>,
    template: &QueueNameTemplate,
    role: Option<&Role>,
    checks: &mut Vec<Check>,
) {
    let account = member.account;
    let region = hub.region;
    let deploy = format!(
        "deploy cloudformation/tenant.yaml per cluster in account {account}, region {region} \
         (make deploy-tenant CLUSTER=<name> REGION={region} with that account's credentials): it \
         imports the spoke role and QueuePrefix the spoke stack {} exports for the region",
        member.spoke_stack
    );
    let clusters = match discover_clusters(aws, template, &[]).await {
        Ok(found) if found.is_empty() => {
            checks.push(fail(
                &hub.name("tenants"),
                format!(
                    "no queue named {}… in account {account}, {region}: the router has nowhere \
                     to deliver this account's events",
                    template.prefix()
                ),
                deploy,
            ));
            return;
        }
        Ok(found) => found,
        Err(problem) => {
            checks.push(fail(
                &hub.name("tenants"),
                problem,
                "run verify with sqs:ListQueues in the member account",
            ));
            return;
        }
    };
    for cluster in &clusters {
        let prefix = format!("tenant:{cluster}");
        let Some(queue_name) = template.queue_name(cluster) else {
            continue;
        };
        let queue = match load_queue(aws, &queue_name).await {
            Ok(q) => q,
            Err(problem) => {
                checks.push(fail(
                    &hub.name(&format!("{prefix}:queue")),
                    problem,
                    &deploy,
                ));
                continue;
            }
        };
        let owned = check_ownership(
            aws,
            &queue,
            cluster,
            Some(&hub.spoke_role_arn),
            &hub.name(&prefix),
        )
        .await;
        let foreign = !owned.passed;
        checks.push(owned);
        if foreign {
            continue;
        }
        let mut f = Findings::default();
        encryption(&queue, &mut f, region);
        checks.push(f.into_check(hub.name(&format!("{prefix}:encryption"))));
        let sender = Sender {
            label: "spoke role",
            role_arn: &hub.spoke_role_arn,
            account,
            partition: &hub.base.partition,
            wrong_role_fix: format!(
                "the policy must name the spoke role: update the tenant stack with BaseStackName \
                 empty (it then imports the spoke role the spoke stack {} exports for the region) \
                 or RouterRoleArn={}",
                member.spoke_stack, hub.spoke_role_arn
            ),
        };
        checks.push(check_tenant_policy(
            &queue,
            &sender,
            region,
            &hub.name(&format!("{prefix}:queue-policy")),
            &format!(
                "re-deploy the tenant stack of {cluster} in account {account} with BaseStackName \
                 empty (it imports what the spoke stack {} exports for the region)",
                member.spoke_stack
            ),
        ));
        if let Some(role) = role {
            let d = role.may("sqs:SendMessage", &queue.arn);
            let name = hub.name(&format!("{prefix}:spoke-role"));
            checks.push(if d.is_allowed() {
                pass(
                    &name,
                    format!("{} may send to {queue_name} ({d})", role.name()),
                )
            } else {
                fail(
                    &name,
                    format!(
                        "{} may not sqs:SendMessage to {queue_name}: {d}",
                        role.name()
                    ),
                    format!(
                        "the spoke role may send to <QueuePrefix>* only: deploy the tenant stack \
                         with BaseStackName empty, so it imports the spoke stack {}'s QueuePrefix \
                         ({}), or restore the role's SendToClusterQueues statement",
                        member.spoke_stack, hub.queue_prefix
                    ),
                )
            });
        }
        checks.push(check_read(aws, &queue, cluster, None, &hub.name(&prefix)).await);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_and_organisation_ids_are_validated() {
        assert_eq!(parse_account_id("111111111111").unwrap(), "111111111111");
        assert!(parse_account_id("11111111111").is_err());
        assert!(parse_account_id("11111111111a").is_err());
        assert!(parse_org_id("o-abcd123456").is_ok());
        assert!(parse_org_id("o-ABCD123456").is_err());
        assert!(parse_org_id("abcd123456").is_err());
    }

    fn bus_decision(policy: &Value, account: &str, org: Option<&str>) -> Decision {
        let policy = Policy::parse("bus policy", &policy.to_string()).unwrap();
        let principal = format!("arn:aws:iam::{account}:root");
        let mut context = vec![("aws:PrincipalAccount", account)];
        if let Some(org) = org {
            context.push(("aws:PrincipalOrgID", org));
        }
        evaluate(
            &[policy],
            &Request {
                principal: Principal::Aws(&principal),
                action: "events:PutEvents",
                resource: "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub",
                context: &context,
            },
        )
    }

    #[test]
    fn the_hub_bus_policy_admits_listed_accounts_or_the_organisation() {
        let bus = "arn:aws:events:us-east-1:123456789012:event-bus/ir-hub";
        let listed = hub_bus_policy(bus, "111111111111,222222222222", None);
        assert!(bus_decision(&listed, "222222222222", None).is_allowed());
        assert_eq!(
            bus_decision(&listed, "333333333333", None),
            Decision::NotAllowed
        );
        let org = hub_bus_policy(bus, "*", Some("o-abcd123456"));
        assert!(bus_decision(&org, "333333333333", Some("o-abcd123456")).is_allowed());
        assert_eq!(
            bus_decision(&org, "333333333333", Some("o-other00000")),
            Decision::NotAllowed
        );
        // Without the organisation's id the condition cannot be evaluated: not a pass.
        assert!(matches!(
            bus_decision(&org, "333333333333", None),
            Decision::Undetermined { .. }
        ));
    }
}
