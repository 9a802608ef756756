//! `router-role` and `router-role:assume-spoke-roles`: the router's execution role may exactly what the
//! router does (and nothing broader, judged as a member's spoke role is: `routing_role.rs`), and
//! may assume the spoke role in exactly the accounts it serves.

use crate::deployment::{Base, Role};
use aws_model::policy::Decision;
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
    let accounts = reached_accounts(config, base)?;
    // The role's path and name as its ARN ends (`platform/ir-spoke`).
    let spoke = &config.spoke_role();
    let [same_name, same_path] = spoke_role_agrees(config, base);

    // Expect → what was found → the fix.
    let rows = [
        same_name,
        same_path,
        may_assume_served(role, config, base, spoke, &accounts, organization),
        refuses_unserved(role, base, spoke, organization),
    ];
    Some(check::evaluate(NAME, rows))
}

/// The accounts whose spoke role the router must reach (the hub's own too: its other regions
/// are written as its spoke role); none when the check does not apply.
fn reached_accounts<'a>(config: &'a Config, base: &'a Base) -> Option<Vec<&'a str>> {
    let mut accounts: Vec<&str> = match &config.served {
        // Its own account's other regions, which forward to its central bus, it writes as its
        // own spoke role.
        Served::Own if !base.assumes_spoke_roles() => return None,
        Served::Own => Vec::new(),
        Served::Listed(accounts) => accounts.iter().map(String::as_str).collect(),
        Served::Any => vec![SAMPLE_ACCOUNT],
    };
    accounts.push(&base.account);
    Some(accounts)
}

/// Whether `role` may assume the spoke role `spoke` in `account` (of organisation `org`, when
/// not empty), and that role's ARN.
fn assume(role: &Role, base: &Base, spoke: &str, account: &str, org: &str) -> (String, Decision) {
    let arn = format!("arn:{}:iam::{account}:role/{spoke}", base.partition);
    let mut context = vec![("aws:ResourceAccount", account)];
    if !org.is_empty() {
        context.push(("aws:ResourceOrgID", org));
    }
    let decision = role.may_with("sts:AssumeRole", &arn, &context);
    (arn, decision)
}

/// The function's spoke role name and path must be the stack's: the role may assume only the
/// stack's.
fn spoke_role_agrees(config: &Config, base: &Base) -> [Expect; 2] {
    let name = &config.spoke_role_name;
    let stack_name = base
        .parameter("SpokeRoleName")
        .unwrap_or(DEFAULT_SPOKE_ROLE_NAME);
    let path = &config.spoke_role_path;
    let stack_path = base
        .parameter("SpokeRolePath")
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    [
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
    ]
}

/// The role must reach the spoke role in every account it serves, or their clusters get no
/// interruptions.
fn may_assume_served(
    role: &Role,
    config: &Config,
    base: &Base,
    spoke: &str,
    accounts: &[&str],
    organization: &str,
) -> Expect {
    let name = &config.spoke_role_name;
    let refused: Vec<String> = accounts
        .iter()
        .filter_map(|account| {
            let (arn, d) = assume(role, base, spoke, account, organization);
            (!d.is_allowed()).then(|| format!("{arn} ({d})"))
        })
        .collect();
    let which = match &config.served {
        Served::Any => format!("{spoke} in the organisation's accounts (e.g. {SAMPLE_ACCOUNT})"),
        _ => format!("{spoke} in {}", accounts.join(", ")),
    };
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
    )
}

/// And no further: the account gate is IAM's too, not only the router's code.
fn refuses_unserved(role: &Role, base: &Base, spoke: &str, organization: &str) -> Expect {
    let outside_org = if organization.is_empty() {
        ""
    } else {
        OUTSIDE_ORGANIZATION
    };
    let (unserved, unserved_may) = assume(role, base, spoke, UNSERVED_ACCOUNT, outside_org);
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
    )
}
