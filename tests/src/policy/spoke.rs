//! The checks on spoke.yaml's spoke role: it trusts the hub router's role alone, and may do exactly
//! what the router does in a member account.

use serde_json::Value;

use aws_model::template::Template;

use super::{
    Found,
    statements::{PolicyKind, Principal, Statement, assumable_roles, statements},
    values::{alternatives, items, reference, text},
};

/// A role AWS principals may assume (spoke.yaml's spoke role) trusts the hub router's role alone
/// (the `RouterRoleArn` parameter, which must be a role ARN: a pattern starting `^arn:` cannot
/// match "*"), for sts:AssumeRole alone.
pub(super) fn spoke_role_trusts_only_router(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = assumable_roles(t);
    let mut names_parameter = false;
    for s in statements(t)
        .iter()
        .filter(|s| s.kind == PolicyKind::Trust && roles.contains(&s.holder))
    {
        if s.body.get("NotPrincipal").is_some() {
            found.push((s.label(), "trust with NotPrincipal".into()));
        }
        if !s.is_allow() {
            continue;
        }
        for set in s.principal_sets() {
            for p in set {
                match p {
                    Principal::Aws(v)
                        if alternatives(&v)
                            .iter()
                            .all(|a| reference(a) == Some("RouterRoleArn")) =>
                    {
                        names_parameter = true;
                    }
                    other => found.push((
                        s.label(),
                        format!("{} trusts {other:?}, not only the router role", s.holder),
                    )),
                }
            }
        }
        for action in s.actions() {
            if action != "sts:AssumeRole" {
                found.push((
                    s.label(),
                    format!("trust allows {action}; only sts:AssumeRole"),
                ));
            }
        }
    }
    if names_parameter {
        let pattern = t.doc["Parameters"]["RouterRoleArn"]["AllowedPattern"]
            .as_str()
            .unwrap_or_default();
        if !pattern.starts_with("^arn:") {
            found.push((
                "Parameters.RouterRoleArn".into(),
                format!(
                    "AllowedPattern {pattern:?} does not hold it to an ARN: \"*\" would trust \
                     everyone"
                ),
            ));
        }
    }
    found
}

/// The spoke role's actions on `"*"` (they have no resource-level permissions).
const SPOKE_LOOKUPS: [&str; 2] = ["ec2:DescribeInstances", "tag:GetResources"];
/// The spoke role's queue actions, on `SPOKE_QUEUES` only: sending, and telling a tenant queue
/// from a look-alike (its tag, or its policy).
const SPOKE_SENDS: [&str; 4] = [
    "sqs:SendMessage",
    "sqs:GetQueueUrl",
    "sqs:ListQueueTags",
    "sqs:GetQueueAttributes",
];
/// This account's cluster queues, in every region (the role is global).
const SPOKE_QUEUES: &str = "arn:${AWS::Partition}:sqs:*:${AWS::AccountId}:${QueuePrefix}*";
/// The tenant records (tenant.yaml's SSM parameters) of those queues, read when a queue is
/// missing, on `SPOKE_RECORDS` only.
const SPOKE_RECORD_READS: [&str; 1] = ["ssm:GetParameter"];
const SPOKE_RECORDS: &str = "arn:${AWS::Partition}:ssm:*:${AWS::AccountId}:parameter/interruption-router/tenant-queues/${QueuePrefix}*";
/// The direct role's id (a direct delivery's sender is checked against it), on
/// `SPOKE_DIRECT_ROLES` only.
const SPOKE_ROLE_READS: [&str; 1] = ["iam:GetRole"];
const SPOKE_DIRECT_ROLES: &str =
    "arn:${AWS::Partition}:iam::${AWS::AccountId}:role${Path}${SpokeRoleName}-direct-*";

/// A resource's Fn::Sub pattern, in either form (`"…"` or `["…", {variables}]`).
fn sub_pattern(r: &Value) -> Option<&str> {
    match r.get("Fn::Sub")? {
        Value::String(s) => Some(s),
        Value::Array(a) => a.first()?.as_str(),
        _ => None,
    }
}

/// What the spoke role may do with the account's own tenant queue keys (spoke.yaml's `KmsKey`),
/// only on those keys and only through SQS.
const SPOKE_KEY_USES: [&str; 2] = ["kms:GenerateDataKey", "kms:Decrypt"];

/// Whether statement `s` grants the key uses only on the keys given, through SQS.
fn key_uses_fit(s: &Statement) -> bool {
    let resources = &s.body["Resource"];
    let given = resources
        .get("Fn::Split")
        .and_then(Value::as_array)
        .is_some_and(|split| {
            split.len() == 2 && split[0] == "," && reference(&split[1]) == Some("KmsKey")
        });
    given && s.body["Condition"]["StringLike"]["kms:ViaService"] == "sqs.*.amazonaws.com"
}

/// The spoke role may do exactly what the router does in a member account: the two lookups on
/// "*", SendMessage, GetQueueUrl, ListQueueTags and GetQueueAttributes on `<QueuePrefix>*` queues
/// of this account (QueuePrefix not empty), GetParameter on those queues' tenant records, GetRole
/// on the account's direct roles, with
/// `KmsKey` the two key uses on those keys through SQS only, nothing else, and no managed
/// policies beside the inline one.
pub(super) fn spoke_role_exact_permissions(t: &Template) -> Found {
    let mut found = Found::new();
    let roles = assumable_roles(t);
    let exact: Vec<&str> = SPOKE_LOOKUPS
        .iter()
        .chain(&SPOKE_SENDS)
        .chain(&SPOKE_RECORD_READS)
        .chain(&SPOKE_ROLE_READS)
        .copied()
        .collect();
    let mut uses_prefix = false;
    for role in &roles {
        let managed = &t.doc["Resources"][role]["Properties"]["ManagedPolicyArns"];
        if !items(managed).is_empty() {
            found.push((
                role.clone(),
                "ManagedPolicyArns: permissions beyond the spoke's own".into(),
            ));
        }
        let allows: Vec<Statement> = statements(t)
            .into_iter()
            .filter(|s| s.kind == PolicyKind::Identity && s.is_allow() && s.subjects.contains(role))
            .collect();
        for s in &allows {
            if s.body.get("NotAction").is_some() || s.body.get("NotResource").is_some() {
                found.push((s.label(), "Allow with NotAction or NotResource".into()));
            }
            for action in s.actions() {
                if SPOKE_KEY_USES
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&action))
                {
                    if !key_uses_fit(s) {
                        found.push((
                            s.label(),
                            format!(
                                "{role} may {action} beyond the keys given (KmsKey) through SQS"
                            ),
                        ));
                    }
                    continue;
                }
                if !exact.iter().any(|a| a.eq_ignore_ascii_case(&action)) {
                    found.push((
                        s.label(),
                        format!("{role} may {action}; only {}", exact.join(", ")),
                    ));
                }
            }
            if SPOKE_ROLE_READS.iter().any(|a| s.covers(a)) {
                for r in s.resources() {
                    if sub_pattern(r) != Some(SPOKE_DIRECT_ROLES) {
                        found.push((
                            s.label(),
                            format!("{role} may read {}, not only {SPOKE_DIRECT_ROLES}", text(r)),
                        ));
                    }
                }
            }
            if SPOKE_RECORD_READS.iter().any(|a| s.covers(a)) {
                for r in s.resources() {
                    if r.get("Fn::Sub").and_then(Value::as_str) != Some(SPOKE_RECORDS) {
                        found.push((
                            s.label(),
                            format!("{role} may read {}, not only {SPOKE_RECORDS}", text(r)),
                        ));
                    }
                }
            }
            if SPOKE_SENDS.iter().any(|a| s.covers(a)) {
                for r in s.resources() {
                    if r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_QUEUES) {
                        uses_prefix = true;
                    } else {
                        found.push((
                            s.label(),
                            format!("{role} may send to {}, not only {SPOKE_QUEUES}", text(r)),
                        ));
                    }
                }
            }
        }
        for action in &exact {
            let fits = |r: &Value| {
                if SPOKE_SENDS.contains(action) {
                    r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_QUEUES)
                } else if SPOKE_RECORD_READS.contains(action) {
                    r.get("Fn::Sub").and_then(Value::as_str) == Some(SPOKE_RECORDS)
                } else if SPOKE_ROLE_READS.contains(action) {
                    sub_pattern(r) == Some(SPOKE_DIRECT_ROLES)
                } else {
                    *r == "*"
                }
            };
            let allowed = allows.iter().any(|s| {
                s.covers(action)
                    && s.body.get("NotResource").is_none()
                    && s.resources().into_iter().any(fits)
            });
            if !allowed {
                found.push((
                    role.clone(),
                    format!("{role} lacks {action}: the router cannot do it in this account"),
                ));
            }
        }
    }
    if uses_prefix
        && t.doc["Parameters"]["QueuePrefix"]["MinLength"]
            .as_u64()
            .unwrap_or(0)
            < 1
    {
        found.push((
            "Parameters.QueuePrefix".into(),
            "no MinLength >= 1: an empty prefix lets the spoke role send to every queue".into(),
        ));
    }
    found
}
