//! `spoke:<account>:hub-bus-policy`: the hub bus's resource policy admits the account's forwarding
//! role and no stranger.

use super::{Hub, Member};
use crate::check::{self, Expect};
use crate::cloud::Cloud;
use crate::deployment::Base;
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
        return no_central_bus(&name, base, account);
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
    let policy = match read_policy(&name, base, bus, described, &restore) {
        Ok(policy) => policy,
        Err(failed) => return failed,
    };
    let judged = BusPolicy {
        bus,
        policy,
        organization,
        served,
        restore,
    };
    check::evaluate(
        name,
        [
            Some(judged.admits_member(hub, member, forwarder)),
            judged.admits_strangers(hub, account),
        ]
        .into_iter()
        .flatten(),
    )
}

/// The failure when the base stack made no central bus: nothing else is worth judging.
fn no_central_bus(name: &str, base: &Base, account: &str) -> Check {
    fail(
        name,
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
    )
}

/// The bus's policy from DescribeEventBus's answer, or the failure when the bus is gone, has
/// no policy, or has one that does not parse (`restore` puts the stack's own back).
fn read_policy(
    name: &str,
    base: &Base,
    bus: &str,
    described: Result<Option<String>, String>,
    restore: &str,
) -> Result<Policy, Check> {
    let text = described.map_err(|e| {
        fail(
            name,
            e,
            format!(
                "re-create the central bus: delete and re-deploy the base stack {} (it was \
                 deleted outside CloudFormation), or check events:DescribeEventBus",
                base.name
            ),
        )
    })?;
    let Some(text) = text else {
        return Err(fail(
            name,
            format!(
                "{} has no resource policy: no other account may put events on it",
                bus_name(bus)
            ),
            restore,
        ));
    };
    Policy::parse("bus policy", &text).map_err(|e| fail(name, e, restore))
}

/// The hub bus's policy as read, with what the base stack meant it to admit.
struct BusPolicy<'a> {
    bus: &'a str,
    policy: Policy,
    /// The organisation the base stack admits (OrganizationId), if any.
    organization: Option<&'a str>,
    /// The base stack's ServedAccounts (the member itself when it has none).
    served: &'a str,
    /// The fix that puts the stack's own policy back.
    restore: String,
}

impl BusPolicy<'_> {
    /// Whether `principal` of `account` (in organisation `org`) may put events on the bus.
    fn decide(&self, principal: &str, account: &str, org: Option<&str>) -> Decision {
        let mut context = vec![
            ("aws:PrincipalAccount", account),
            ("aws:PrincipalArn", principal),
        ];
        if let Some(org) = org {
            context.push(("aws:PrincipalOrgID", org));
        }
        evaluate(
            std::slice::from_ref(&self.policy),
            &Request {
                principal: Principal::Aws(principal),
                action: "events:PutEvents",
                resource: self.bus,
                context: &context,
            },
        )
    }

    /// The bus must admit the member's forwarding role, or its interruptions never arrive.
    fn admits_member(&self, hub: &Hub<'_>, member: &Member<'_>, forwarder: Option<&str>) -> Expect {
        let account = member.account;
        let bus = self.bus;
        // Without a rule's target to read it from (a member whose rules write the hub's direct
        // queue, or one not reached), the forwarding role spoke.yaml makes: the bus admits only
        // those.
        let named = format!(
            "arn:{}:iam::{account}:role/{}-forward-{}",
            hub.base.partition, hub.spoke_role_name, hub.region
        );
        let principal = forwarder.unwrap_or(&named);
        match self.decide(principal, account, member.org_id) {
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
                    "{account} may not events:PutEvents on {} ({d}): its interruptions never \
                     reach the router",
                    bus_name(bus)
                ),
                self.admit_member_fix(account),
            ),
        }
    }

    /// How to let the member in: by the organisation the bus admits, else by ServedAccounts.
    fn admit_member_fix(&self, account: &str) -> String {
        let (served, restore) = (self.served, &self.restore);
        match self.organization {
            Some(org) => {
                format!("the bus admits organisation {org}: move {account} into it, or {restore}")
            }
            None => format!(
                "add {account} to the base stack's ServedAccounts ({served},{account}): {restore}"
            ),
        }
    }

    /// The bus must refuse any other account (none when the member is the stranger itself).
    fn admits_strangers(&self, hub: &Hub<'_>, account: &str) -> Option<Expect> {
        // The member account cannot be its own stranger. A stranger's role named as a forwarding
        // role: the bus must refuse it for its account, not only for its name.
        let stranger = format!(
            "arn:{}:iam::{STRANGER}:role/{}-forward-{}",
            hub.base.partition, hub.spoke_role_name, hub.region
        );
        (account != STRANGER).then(
            || match self.decide(&stranger, STRANGER, Some(STRANGER_ORG)) {
                Decision::Allowed { by } => Expect::problem(
                    format!(
                        "any account may put events on {} (allowed by {by}): anyone can inject \
                     interruptions for the router to act on",
                        bus_name(self.bus)
                    ),
                    &self.restore,
                ),
                _ => Expect::found("no other account may"),
            },
        )
    }
}
