//! `router-role` and `router-role:assume-spoke-roles`: the router's execution role may exactly what the
//! router does (and nothing broader, judged as a member's spoke role is: `routing_role.rs`), and
//! may assume the spoke role in exactly the accounts it serves.

use crate::deployment::{Base, Role};
use router_core::{
    accounts::Served,
    config::{Config, DEFAULT_SPOKE_ROLE_NAME},
};

use crate::check::{self, Expect};
use crate::verify::{
    report::Check,
    routing_role::{BASE_LOOKUPS, Scope},
};

/// `router-role`: the role may route in the hub's own account (the same [`Scope`] as a member's
/// spoke role), consume the ingest queue and write dead letters, and nothing broader; it may not
/// send to the ingest queue.
pub(super) fn check_router_role(
    role: &Role,
    base: &Base,
    region: &str,
    dlq: Option<&str>,
    ingest: Option<&str>,
) -> Check {
    let name = role.name();
    let fix = |statements: &[&str]| {
        format!(
            "restore base.yaml's inline policy interruption-router on role {name} (statement{} \
             {}): update the stack; if the policy was edited by hand, put the template's \
             document back with aws iam put-role-policy",
            if statements.len() == 1 { "" } else { "s" },
            statements.join(", ")
        )
    };
    let prefix = base.output("QueuePrefix").unwrap_or("karpenter-");
    let mut scope = Scope::routing(&base.partition, &base.account, region, prefix, BASE_LOOKUPS);
    if let Some(dlq) = dlq {
        scope.need("sqs:SendMessage", dlq, "SendToDeadLetterQueue");
    }
    if let Some(ingest) = ingest {
        for action in [
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            // The router hands a record it could not forward back with a shorter visibility.
            "sqs:ChangeMessageVisibility",
        ] {
            scope.need(action, ingest, "ConsumeIngestQueue");
        }
    }
    let broader = format!(
        "remove what grants more (aws iam list-role-policies / list-attached-role-policies \
         --role-name {name}); {}",
        fix(&["interruption-router"])
    );

    // Expect → what was found → the fix.
    let mut rows = scope.judge(role, fix, &broader).to_vec();
    if let Some(ingest) = ingest {
        rows.push(
            Expect::that(
                !role.may("sqs:SendMessage", ingest).is_allowed(),
                "may not send to the ingest queue",
            )
            .otherwise(
                format!(
                    "{name} may send to the ingest queue: an instance tagged with its name as a \
                     cluster would make the router feed itself"
                ),
                fix(&["NeverSendToIngestQueue"]),
            ),
        );
    }
    check::evaluate("router-role", rows)
}

/// An account id standing for "any account" when the router serves `*`.
const SAMPLE_ACCOUNT: &str = "999999999999";
/// An account no router serves (a listed hub never lists it; an organisation's hub sees it
/// outside the organisation), to show the role may not assume the spoke role name there.
const UNSERVED_ACCOUNT: &str = "000000000000";
const OUTSIDE_ORGANIZATION: &str = "o-notyours000";

/// With SERVED_ACCOUNTS set, the role may assume each served account's spoke role (the name the
/// function's SPOKE_ROLE_NAME gives, which must be the stack's SpokeRoleName).
pub(super) fn check_assume_spoke_roles(role: &Role, config: &Config, base: &Base) -> Option<Check> {
    const NAME: &str = "router-role:assume-spoke-roles";
    let organization = base.parameter("OrganizationId").unwrap_or_default();
    // The accounts whose spoke role the router must reach (the hub's own too: its other regions
    // are written as its spoke role), with the organisation each is in.
    let mut accounts: Vec<&str> = match &config.served {
        // Its own account's other regions, which forward to its central bus, it writes as its
        // own spoke role.
        Served::Own if !base.assumes_spoke_roles() => return None,
        Served::Own => Vec::new(),
        Served::Listed(accounts) => accounts.iter().map(String::as_str).collect(),
        Served::Any => vec![SAMPLE_ACCOUNT],
    };
    accounts.push(&base.account);
    let name = &config.spoke_role_name;
    // The role's path and name as its ARN ends (`platform/ir-spoke`).
    let spoke = &config.spoke_role();
    let stack_name = base
        .parameter("SpokeRoleName")
        .unwrap_or(DEFAULT_SPOKE_ROLE_NAME);
    let path = &config.spoke_role_path;
    let stack_path = base
        .parameter("SpokeRolePath")
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    let assume = |account: &str, org: &str| {
        let arn = format!("arn:{}:iam::{account}:role/{spoke}", base.partition);
        let mut context = vec![("aws:ResourceAccount", account)];
        if !org.is_empty() {
            context.push(("aws:ResourceOrgID", org));
        }
        let decision = role.may_with("sts:AssumeRole", &arn, &context);
        (arn, decision)
    };
    let refused: Vec<String> = accounts
        .iter()
        .filter_map(|account| {
            let (arn, d) = assume(account, organization);
            (!d.is_allowed()).then(|| format!("{arn} ({d})"))
        })
        .collect();
    let which = match &config.served {
        Served::Any => format!("{spoke} in the organisation's accounts (e.g. {SAMPLE_ACCOUNT})"),
        _ => format!("{spoke} in {}", accounts.join(", ")),
    };
    // And no further: the account gate is IAM's too, not only the router's code.
    let outside_org = if organization.is_empty() {
        ""
    } else {
        OUTSIDE_ORGANIZATION
    };
    let (unserved, unserved_may) = assume(UNSERVED_ACCOUNT, outside_org);

    // Expect → what was found → the fix.
    let rows = [
        Expect::quietly(stack_name == name).otherwise(
            format!(
                "the function's SPOKE_ROLE_NAME is {name} but the stack's SpokeRoleName is \
                 {stack_name}: the role may assume only the latter"
            ),
            format!(
                "update the stack so both come from SpokeRoleName (SpokeRoleName={name} if the \
                 member accounts' spoke stacks use {name})"
            ),
        ),
        Expect::quietly(stack_path == path).otherwise(
            format!(
                "the function's SPOKE_ROLE_PATH is {path} but the stack's SpokeRolePath is \
                 {stack_path}: the role may assume only roles under the latter"
            ),
            format!(
                "update the stack so both come from SpokeRolePath (SpokeRolePath={path} if the \
                 member accounts' spoke stacks use {path})"
            ),
        ),
        Expect::that(
            refused.is_empty(),
            format!("{} may sts:AssumeRole {which}", role.name()),
        )
        .otherwise(
            format!(
                "{} may not sts:AssumeRole {}: the router cannot reach those accounts, and \
                 their clusters get no interruptions",
                role.name(),
                refused.join(", ")
            ),
            format!(
                "restore base.yaml's statement AssumeSpokeRoles (sts:AssumeRole on \
                 arn:{}:iam::*:role/<SpokeRoleName>, scoped to the served accounts and this one) \
                 on role {}: update the stack with this release's base.yaml and \
                 SpokeRoleName={name}",
                base.partition,
                role.name()
            ),
        ),
        Expect::that(
            !unserved_may.is_allowed(),
            format!("and not in an account it does not serve ({UNSERVED_ACCOUNT})"),
        )
        .otherwise(
            format!(
                "{} may sts:AssumeRole {unserved}, an account it does not serve ({unserved_may}): \
                 any account whose role of that name trusts it could hand the router its \
                 credentials",
                role.name()
            ),
            "update the stack with this project's base.yaml: its AssumeSpokeRoles statement is \
             scoped with aws:ResourceAccount (a ServedAccounts list) or aws:ResourceOrgID \
             (OrganizationId with ServedAccounts=\"*\")",
        ),
    ];
    Some(check::evaluate(NAME, rows))
}
