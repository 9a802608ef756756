//! `spoke:<account>:hub-bus-policy`: the hub bus's resource policy admits the account's forwarding
//! role and no stranger.

use super::{Hub, Member};
use crate::check::{self, Expect};
use crate::cloud::Cloud;
use crate::verify::{
    report::{Check, fail, pasted},
    rules::bus_name,
};
use aws_model::policy::{Decision, Policy, Principal, Request, evaluate};

/// An account no hub serves, and an organisation that is not the hub's.
pub(super) const STRANGER: &str = "999999999999";
const STRANGER_ORG: &str = "o-routerctlprobe";

pub(super) async fn check_bus_policy(
    hub_aws: &impl Cloud,
    hub: &Hub<'_>,
    member: &Member<'_>,
    forwarder: Option<&str>,
) -> Check {
    // Where: the bus's resource policy, as DescribeEventBus answers it.
    let described = match hub.bus {
        Some(bus) => hub_aws
            .bus_policy(bus_name(bus))
            .await
            .map_err(|e| format!("DescribeEventBus {}: {e}", bus_name(bus))),
        None => Ok(None),
    };
    judge_bus_policy(hub, member, forwarder, described)
}

/// `hub-bus-policy`, judged on the bus's policy as DescribeEventBus answered it (`None`: it has
/// none), for the member's forwarding role (or its account).
pub(super) fn judge_bus_policy(
    hub: &Hub<'_>,
    member: &Member<'_>,
    forwarder: Option<&str>,
    described: Result<Option<String>, String>,
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
        pasted(aws_model::documents::hub_bus_policy(
            bus,
            served,
            organization
        ))
    );
    let text = match described {
        Ok(text) => text,
        Err(e) => {
            return fail(
                &name,
                e,
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
    // Without a rule's target to read it from (a member whose rules write the hub's direct queue,
    // or one not reached), the forwarding role spoke.yaml makes: the bus admits only those.
    let named = format!(
        "arn:{}:iam::{account}:role/{}-forward-{}",
        base.partition, hub.spoke_role_name, hub.region
    );
    let principal = forwarder.unwrap_or(&named);
    let admits_member = match decide(principal, account, member.org_id) {
        d @ Decision::Allowed { .. } => Expect::found(format!(
            "{account} may events:PutEvents on {} ({d})",
            bus_name(bus)
        )),
        d @ Decision::Undetermined { .. } if member.org_id.is_none() => Expect::problem(
            format!(
                "whether {account} may events:PutEvents on {} is {d}",
                bus_name(bus)
            ),
            "pass the organisation's id with --org-id (aws organizations describe-organization \
             --query Organization.Id --output text)",
        ),
        d => Expect::problem(
            format!(
                "{account} may not events:PutEvents on {} ({d}): its interruptions never reach \
                 the router",
                bus_name(bus)
            ),
            match organization {
                Some(org) => {
                    format!(
                        "the bus admits organisation {org}: move {account} into it, or {restore}"
                    )
                }
                None => format!(
                    "add {account} to the base stack's ServedAccounts ({served},{account}): \
                     {restore}"
                ),
            },
        ),
    };
    // The member account cannot be its own stranger. A stranger's role named as a forwarding
    // role: the bus must refuse it for its account, not only for its name.
    let stranger = format!(
        "arn:{}:iam::{STRANGER}:role/{}-forward-{}",
        base.partition, hub.spoke_role_name, hub.region
    );
    let admits_strangers =
        (account != STRANGER).then(|| match decide(&stranger, STRANGER, Some(STRANGER_ORG)) {
            Decision::Allowed { by } => Expect::problem(
                format!(
                    "any account may put events on {} (allowed by {by}): anyone can inject \
                     interruptions for the router to act on",
                    bus_name(bus)
                ),
                restore,
            ),
            _ => Expect::found("no other account may"),
        });
    check::evaluate(
        name,
        [Some(admits_member), admits_strangers]
            .into_iter()
            .flatten(),
    )
}
