//! `ingest-queue:key`, `dead-letter-queue:key`, `tenant:<cluster>:key`: a queue encrypted with a
//! KMS key (`KmsKey=Create`, or the organisation's own key given as `KmsKey=<key ARN>`) can be
//! used by everyone on the interruption's path. The key is the queue's account's, enabled and
//! customer managed (never `aws/sqs`, whose policy admits no service principal, so EventBridge
//! cannot deliver to a queue under it), and its key policy, with each role's own policies and
//! permissions boundary, lets each principal do what SQS needs of it: EventBridge's rules and a
//! sender kms:GenerateDataKey and kms:Decrypt, a reader kms:Decrypt (SQS developer guide, "Key
//! management"), decided by [`aws_model::access`]. For a key the stack created the fix is the
//! stack's update; for a given key, whose policy the stacks never edit, it is the exact statement
//! to add ([`Owner::Given`]: the ones the stack writes into a key of its own). A queue under
//! SSE-SQS has no such check. `direct-queue:key` (CentralBus=Enabled) judges the served accounts'
//! direct roles as senders, with the policy spoke.yaml gives them.

use crate::deployment::{Base, Queue, Role, load_queue};
use serde_json::Value;

use super::report::Check;
use crate::{
    check::{self, Expect},
    cloud::Cloud,
};
use aws_model::{
    access::{EventBridgeUse, Identity, eventbridge_use, role_through_sqs},
    arn::arn_account,
    kms::Key,
    policy::Decision,
};

/// What a producer needs of the key; a consumer needs only kms:Decrypt.
pub(crate) const PRODUCE: &[&str] = &["kms:GenerateDataKey", "kms:Decrypt"];
pub(crate) const CONSUME: &[&str] = &["kms:Decrypt"];

/// Who uses a queue's key, and for what.
pub(crate) enum KeyUser<'a> {
    /// EventBridge delivering for these rules (and writing their dead letters).
    Rules(&'a [String]),
    /// A role: `what` names it in messages ("the router role").
    Role {
        what: &'a str,
        identity: Identity<'a>,
        actions: &'a [&'a str],
    },
}

/// Whose key a queue uses, which decides the fix.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// The stack's own (`KmsKey=Create`): updating the stack writes its policy.
    Stack,
    /// The organisation's (`KmsKey=<key ARN>`): its owner adds these statements
    /// ([`aws_model::documents::key_statements`]).
    Given(&'a [Value]),
}

/// Whether a stack's `KmsKey` names a key of the organisation's.
pub(crate) fn is_given(kms_key: Option<&str>) -> bool {
    kms_key.is_some_and(|k| k.starts_with("arn:"))
}

/// `alias/aws/sqs` as SQS accepts it in KmsMasterKeyId (the alias, or its ARN).
fn is_aws_managed_alias(key: &str) -> bool {
    key == "alias/aws/sqs" || key.ends_with(":alias/aws/sqs")
}

const AWS_MANAGED: &str = "its key policy cannot be changed and admits no service principal, so \
                           EventBridge cannot deliver to the queue";

/// The key check of `queue`, or `None` when the queue uses no KMS key (SSE-SQS).
pub(crate) async fn check(
    aws: &impl Cloud,
    queue: &Queue,
    users: &[KeyUser<'_>],
    name: &str,
    redeploy: &str,
    owner: Owner<'_>,
) -> Option<Check> {
    let key_id = queue.attribute("KmsMasterKeyId")?;
    // By alias, SQS's way to name the AWS-managed key: nothing to look up.
    if is_aws_managed_alias(key_id) {
        return Some(check::evaluate(
            name,
            [aws_managed(&queue.name, key_id, redeploy)],
        ));
    }
    // Another account's key: its policy is not this account's to read (GetKeyPolicy answers only
    // the key's own account), and the stacks grant roles the use of their own account's keys.
    if let Some(row) = foreign(queue, key_id, redeploy) {
        return Some(check::evaluate(name, [row]));
    }
    // Where: the key and its policy.
    let loaded = aws.key(key_id).await;
    let rows = match &loaded {
        Ok(key) => match foreign(queue, &key.arn, redeploy) {
            Some(row) => vec![row],
            None => judge(key, queue, users, aws.region(), redeploy, owner),
        },
        Err(_) => vec![Expect::lookup(
            &loaded,
            "run verify with kms:DescribeKey and kms:GetKeyPolicy on the queue's key",
        )],
    };
    Some(check::evaluate(name, rows))
}

/// The row refusing a key of another account than the queue's, if `key` (an ARN, else unknown
/// yet) is one.
fn foreign(queue: &Queue, key: &str, redeploy: &str) -> Option<Expect> {
    let (key_account, queue_account) = (arn_account(key)?, arn_account(&queue.arn)?);
    (key_account != queue_account).then(|| {
        Expect::problem(
            format!(
                "{} is encrypted with {key}, a key of account {key_account}, not the queue's \
                 account {queue_account}: its policy cannot be read or checked from here, and the \
                 stacks grant their roles only keys of their own account",
                queue.name
            ),
            format!(
                "{redeploy} KMS_KEY=<a customer-managed key of account {queue_account} in this \
                 region> (or KMS_KEY=Create)"
            ),
        )
    })
}

/// The row refusing the AWS-managed key.
fn aws_managed(queue: &str, key: &str, redeploy: &str) -> Expect {
    Expect::problem(
        format!("{queue} is encrypted with the AWS-managed key {key}: {AWS_MANAGED}"),
        format!("{redeploy} KMS_KEY=Create (a key the stack creates, with the policy it needs)"),
    )
}

/// The rows of a key check: the key itself, then each user and action.
pub(crate) fn judge(
    key: &Key,
    queue: &Queue,
    users: &[KeyUser<'_>],
    region: &str,
    redeploy: &str,
    owner: Owner<'_>,
) -> Vec<Expect> {
    if key.aws_managed {
        return vec![aws_managed(&queue.name, &key.arn, redeploy)];
    }
    let mut rows = vec![match &key.disabled {
        Some(state) => Expect::problem(
            format!(
                "{}'s key {} is {state}: nobody can send to or receive from it",
                queue.name, key.arn
            ),
            format!("aws kms enable-key --region {region} --key-id {}", key.arn),
        ),
        None => Expect::found(format!(
            "{} encrypted with customer-managed key {} (enabled)",
            queue.name, key.arn
        )),
    }];
    let stack_fix = format!(
        "{redeploy}: with KmsKey=Create the stack writes the key policy and the grants (README, \
         Locked-down accounts); a permissions boundary must allow kms:GenerateDataKey and \
         kms:Decrypt"
    );
    for user in users {
        let fix = match owner {
            Owner::Stack => stack_fix.clone(),
            Owner::Given(statements) => statement_fix(key, user, statements, region),
        };
        match user {
            KeyUser::Rules(rules) => rows.extend(rules_rows(key, rules, &queue.name, &fix)),
            KeyUser::Role {
                what,
                identity,
                actions,
            } => rows.extend(role_rows(key, what, identity, actions, region, &fix)),
        }
    }
    rows
}

/// For a given key: the statement of `statements` that lets `user` use it, as the fix to paste
/// into its policy. EventBridge's names its service; a role's names the role, or else is the one
/// that lets IAM grant the account's roles what the role needs (the stack's own grant, or for
/// Karpenter's role with KARPENTER_ROLE=none its own policies, then decides).
fn statement_fix(key: &Key, user: &KeyUser<'_>, statements: &[Value], region: &str) -> String {
    let names = |s: &&Value, principal: &str| {
        let p = &s["Principal"];
        [&p["Service"], &p["AWS"]]
            .iter()
            .any(|v| v.as_str() == Some(principal))
    };
    let grants = |s: &&Value, action: &str| match &s["Action"] {
        Value::String(a) => a == action,
        Value::Array(actions) => actions.iter().any(|a| a == action),
        _ => false,
    };
    let chosen = match user {
        KeyUser::Rules(_) => statements.iter().find(|s| names(s, "events.amazonaws.com")),
        KeyUser::Role {
            identity, actions, ..
        } => statements
            .iter()
            .find(|s| names(s, identity.arn))
            // One that lets it on its own (a member's direct role, admitted by account and role
            // name through SQS).
            .or_else(|| {
                statements.iter().find(|s| {
                    let Ok(alone) = aws_model::policy::Policy::parse(
                        "statement",
                        &serde_json::json!({ "Statement": [s] }).to_string(),
                    ) else {
                        return false;
                    };
                    actions.iter().all(|a| {
                        role_through_sqs(identity, &key.arn, &alone, a, region).is_allowed()
                    })
                })
            })
            .or_else(|| {
                statements.iter().find(|s| {
                    s["Principal"]["AWS"]
                        .as_str()
                        .is_some_and(|p| p.ends_with(":root"))
                        && actions.iter().all(|a| grants(s, a))
                })
            }),
    };
    match chosen {
        Some(statement) => format!(
            "add this statement to the key policy of {} (the organisation's key: the stacks never \
             edit its policy): {statement}",
            key.arn
        ),
        None => format!(
            "give the key policy of {} what the stacks' own keys grant (README, Locked-down \
             accounts)",
            key.arn
        ),
    }
}

/// EventBridge, for each rule: kms:GenerateDataKey and kms:Decrypt (silent when allowed), with
/// or without the rule's `aws:SourceArn` on SQS's call to KMS
/// ([`aws_model::access::eventbridge_use`]). The rules refused alike share one row.
fn rules_rows(key: &Key, rules: &[String], queue: &str, fix: &str) -> Vec<Expect> {
    let account = arn_account(&key.arn).unwrap_or_default();
    // (actions, rule names) per way of failing, in the order first met.
    let mut failures: Vec<(String, Vec<&str>, Vec<&str>)> = Vec::new();
    for rule in rules {
        for action in PRODUCE {
            let why = match eventbridge_use(&key.arn, &key.policy, account, rule, action) {
                EventBridgeUse::Allowed => continue,
                EventBridgeUse::OnlyWithSourceArn => String::new(),
                EventBridgeUse::Refused(d) => d.to_string(),
            };
            let name = rule.rsplit('/').next().unwrap_or(rule);
            match failures.iter_mut().find(|(w, _, _)| *w == why) {
                Some((_, actions, names)) => {
                    if !actions.contains(action) {
                        actions.push(action);
                    }
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                None => failures.push((why, vec![action], vec![name])),
            }
        }
    }
    failures
        .into_iter()
        .map(|(why, actions, names)| {
            let (actions, names) = (actions.join(" and "), names.join(", "));
            let problem = if why.is_empty() {
                format!(
                    "the key policy of {} lets EventBridge {actions} for rules {names} only when \
                     the request names the rule (aws:SourceArn), which SQS's call to KMS is not \
                     documented to carry: deliveries to {queue} may fail, and nothing but the \
                     rules' own metrics says so; condition EventBridge's statement on \
                     aws:SourceAccount instead (which rules may send is the queue policy's say)",
                    key.arn
                )
            } else {
                format!(
                    "EventBridge may not {actions} with {} for rules {names}: {why}; their \
                     deliveries to {queue} fail, and nothing but the rules' own metrics says so",
                    key.arn
                )
            };
            Expect::problem(problem, fix)
        })
        .collect()
}

/// A role, for each of its actions, through SQS ([`aws_model::access::role_through_sqs`]).
fn role_rows(
    key: &Key,
    what: &str,
    identity: &Identity<'_>,
    actions: &[&str],
    region: &str,
    fix: &str,
) -> Vec<Expect> {
    let mut rows = Vec::new();
    for action in actions {
        let d = role_through_sqs(identity, &key.arn, &key.policy, action, region);
        let why = match &d {
            Decision::NotAllowed => "neither the key policy naming it, nor the key policy's grant \
                                     to the account together with its own policies, allows it"
                .to_owned(),
            other => other.to_string(),
        };
        rows.push(
            Expect::that(
                d.is_allowed(),
                format!("{what} {} may {action} through SQS", identity.arn),
            )
            .otherwise(
                format!(
                    "{what} {} may not {action} with {}: {why}",
                    identity.arn, key.arn
                ),
                fix,
            ),
        );
    }
    rows
}

/// The base stack's own queues: EventBridge's rules deliver to both, the router role receives
/// from the ingest queue and writes dead letters.
pub(super) async fn check_base(
    aws: &impl Cloud,
    base: &Base,
    rule_arns: &[String],
    role: Option<&Role>,
    checks: &mut Vec<Check>,
) {
    let redeploy = format!(
        "update the base stack: make deploy-base STACK_NAME={}",
        base.name
    );
    // An organisation's key: the statements its policy needs, as base.yaml writes them into a
    // key of its own.
    let given = is_given(base.parameter("KmsKey"))
        .then(|| {
            aws_model::documents::base_key_statements(&base.account, aws.region(), &base.parameters)
                .ok()
        })
        .flatten();
    // The direct queue's senders (CentralBus=Enabled): each served account's direct role, with
    // the policy spoke.yaml gives it.
    let direct = base.output("DirectQueueArn");
    let members = direct_roles(base, aws.region(), direct);
    let queues = [
        ("ingest-queue:key", base.output("IngestQueueArn"), CONSUME),
        (
            "dead-letter-queue:key",
            base.output("DeadLetterQueueArn"),
            PRODUCE,
        ),
        ("direct-queue:key", direct, CONSUME),
    ];
    for (name, arn, actions) in queues {
        let Some(queue_name) = arn.map(aws_model::arn::arn_name) else {
            continue;
        };
        let Ok(queue) = load_queue(aws, queue_name).await else {
            // The queue checks report a missing queue.
            continue;
        };
        let is_direct = name == "direct-queue:key";
        let mut users = if is_direct {
            senders(&members)
        } else {
            vec![KeyUser::Rules(rule_arns)]
        };
        if let Some(role) = role {
            users.push(KeyUser::Role {
                what: "the router role",
                identity: role.identity(),
                actions,
            });
        }
        let owner = match &given {
            Some(statements) => Owner::Given(statements),
            None => Owner::Stack,
        };
        if let Some(check) = check(aws, &queue, &users, name, &redeploy, owner).await {
            checks.push(check);
        }
    }
}

/// The direct queue's key users for [`direct_roles`]: each a producer.
fn senders(members: &[DirectRole]) -> Vec<KeyUser<'_>> {
    members
        .iter()
        .map(|(what, arn, policies)| KeyUser::Role {
            what,
            identity: Identity {
                arn,
                policies,
                boundary: None,
            },
            actions: PRODUCE,
        })
        .collect()
}

/// A served account's direct role: what it is called in messages, its ARN, its policies.
type DirectRole = (String, String, Vec<aws_model::policy::Policy>);

/// The served accounts' direct roles (`<SpokeRoleName>-direct-<region>`), each with the inline
/// policy spoke.yaml gives it for the direct queue `direct`: (what, ARN, policies). None without a
/// direct queue, or for an organisation (`ServedAccounts=*`: no list of accounts to name).
fn direct_roles(base: &Base, region: &str, direct: Option<&str>) -> Vec<DirectRole> {
    let Some(direct) = direct else {
        return Vec::new();
    };
    let name = base
        .parameter("SpokeRoleName")
        .filter(|n| !n.is_empty())
        .unwrap_or(router_core::config::DEFAULT_SPOKE_ROLE_NAME);
    let path = base
        .parameter("SpokeRolePath")
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    base.parameter("ServedAccounts")
        .unwrap_or_default()
        .split(',')
        .filter(|a| a.len() == 12)
        .filter_map(|account| {
            let policy = aws_model::documents::direct_role_policy(account, region, direct).ok()?;
            let policy = aws_model::policy::Policy::parse(
                format!("spoke.yaml's DirectRole policy in {account}"),
                &policy.to_string(),
            )
            .ok()?;
            Some((
                format!("{account}'s direct role"),
                format!(
                    "arn:{}:iam::{account}:role{path}{name}{}-{region}",
                    base.partition,
                    router_core::config::DIRECT_ROLE_SUFFIX
                ),
                vec![policy],
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests;
