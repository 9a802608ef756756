//! `spoke:<account>:role-trust` and `:role-permissions`: the spoke role trusts only the hub's
//! router role and may exactly what the router needs in the account.

use super::hub_bus::STRANGER;
use super::{Hub, Member};
use crate::check::{self, Expect};
use crate::deployment::Role;
use crate::verify::{
    report::{Check, fail, pasted},
    routing_role::{SPOKE_LOOKUPS, Scope},
};
use aws_model::policy::{Decision, Principal, Request, evaluate};

pub(super) fn check_role_trust(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
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
        pasted(aws_model::documents::spoke_trust_policy(router))
    );
    let trust = match &role.trust {
        Ok(t) => t,
        Err(e) => return fail(&name, e.clone(), restore),
    };
    let decide = |principal: Principal<'_>| {
        let (arn, account) = match principal {
            Principal::Aws(arn) => (arn, aws_model::arn::arn_account(arn).unwrap_or_default()),
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
    let router_may = decide(Principal::Aws(router));
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
    let refused = |d: &Decision| matches!(d, Decision::NotAllowed | Decision::Denied { .. });
    let admitted: Vec<String> = others
        .iter()
        .map(|(arn, what)| (decide(Principal::Aws(arn)), what.to_string()))
        .chain(
            ["lambda.amazonaws.com", "ec2.amazonaws.com"]
                .map(|service| (decide(Principal::Service(service)), service.to_owned())),
        )
        .filter(|(d, _)| !refused(d))
        .map(|(d, what)| format!("{what} ({d})"))
        .collect();
    check::evaluate(
        name,
        [
            Expect::that(
                router_may.is_allowed(),
                format!("the hub's router role may assume it ({router_may})"),
            )
            .otherwise(
                format!(
                    "the hub's router role {router} may not assume {} ({router_may}): the router \
                     cannot reach {}",
                    role.name(),
                    member.account
                ),
                restore.clone(),
            ),
            Expect::that(admitted.is_empty(), "no other principal may").otherwise(
                format!(
                    "it also admits {}: they could look up instances and write fake \
                     interruptions to this account's clusters",
                    admitted.join(", ")
                ),
                restore,
            ),
        ],
    )
}

/// `role-permissions`: the spoke role may route in the member account exactly as the router role
/// may in the hub's (one [`Scope`] for both), and nothing broader: another account assumes it.
pub(super) fn check_role_permissions(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let account = member.account;
    let restore = format!(
        "update the spoke stack that creates the role (CreateSpokeRole=true) in account {account}, \
         and remove policies that grant more (aws iam list-role-policies / \
         list-attached-role-policies --role-name {role_name}); or put the policy back: aws iam \
         put-role-policy --role-name {role_name} --policy-name interruption-router-spoke \
         --policy-document '{}'",
        pasted(aws_model::documents::spoke_role_policy(
            account,
            hub.region,
            &hub.queue_prefix
        )),
        role_name = role.name()
    );
    let scope = Scope::routing(
        &hub.base.partition,
        account,
        hub.region,
        &hub.queue_prefix,
        SPOKE_LOOKUPS,
    );
    check::evaluate(
        hub.name("role-permissions"),
        scope.judge(role, |_| restore.clone(), &restore),
    )
}

/// `role-reads-direct-role` (a member whose rules write the hub's direct queue): the spoke role
/// may `iam:GetRole` the account's direct role, whose id the router compares with each direct
/// record's sender; without it every direct record is retried, then dead-lettered
/// `access-denied`.
pub(super) fn check_reads_direct_role(hub: &Hub<'_>, member: &Member<'_>, role: &Role) -> Check {
    let direct = format!(
        "arn:{}:iam::{}:role{}{}{}-{}",
        hub.base.partition,
        member.account,
        hub.spoke_role_path,
        hub.spoke_role_name,
        router_core::config::DIRECT_ROLE_SUFFIX,
        hub.region
    );
    let may = role.may("iam:GetRole", &direct);
    check::evaluate(
        hub.name("role-reads-direct-role"),
        [Expect::that(may.is_allowed(), format!("may read {direct}'s id")).otherwise(
            format!(
                "{} may not iam:GetRole {direct} ({may}): the router cannot tell this account's \
                 direct deliveries from forged ones, and dead-letters them",
                role.name()
            ),
            format!(
                "update the spoke stack that creates the role (CreateSpokeRole=true) in account \
                 {} with this release's spoke.yaml (statement ReadDirectRoleId)",
                member.account
            ),
        )],
    )
}
