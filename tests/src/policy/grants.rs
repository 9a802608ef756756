//! The checks that hold every Allow of every policy, whoever holds it: no wildcard actions, a
//! service principal pinned to the resource acting for it, no `"*"` principal left unscoped.

use serde_json::{Value, json};

use aws_model::template::Template;

use super::{
    Found,
    statements::{PolicyKind, Principal, Statement, execution_roles, statements},
    values::{branches, list_branches},
};

/// An Allow with a wildcard action grants whatever the service adds later; NotAction is the
/// same grant written inside out. Deny statements may use wildcards (the TLS denies do).
pub(super) fn no_wildcard_actions(t: &Template) -> Found {
    let mut found = Found::new();
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        if s.body.get("NotAction").is_some() {
            found.push((s.label(), "Allow with NotAction".into()));
        }
        for action in s.actions() {
            if action.contains(['*', '?']) {
                found.push((s.label(), format!("Allow of wildcard action {action:?}")));
            }
        }
    }
    found
}

/// The one service principal allowed without aws:SourceArn, and why.
pub const SOURCE_ARN_EXCEPTION: (&str, &str) = (
    "lambda.amazonaws.com",
    "the trust policy of a Lambda function's own execution role: Lambda documents no \
     aws:SourceArn or aws:SourceAccount for assuming it, and iam:PassRole already keeps the \
     role to functions of this account",
);

/// The second: EventBridge's use of a queue's key, and why it is pinned to the account alone.
pub const KEY_SOURCE_ARN_EXCEPTION: (&str, &str) = (
    "events.amazonaws.com",
    "a key policy statement for EventBridge's deliveries into the queues under the key: SQS calls \
     KMS for them, and no AWS document says that call carries the rule's aws:SourceArn, so a \
     positive condition on it could refuse every delivery; it is pinned by aws:SourceAccount to \
     this account (with aws:SourceArn only as ...IfExists), and the queue policies, which SQS \
     checks before it asks KMS, pin the stack's rules by ARN",
);

/// The third, its twin for the alarm topic: CloudWatch's use of the topic's key.
pub const TOPIC_KEY_SOURCE_ARN_EXCEPTION: (&str, &str) = (
    "cloudwatch.amazonaws.com",
    "a key policy statement for CloudWatch's alarm notifications to the topic under the key: SNS \
     calls KMS for them, and no AWS document says that call carries the alarm's aws:SourceArn, \
     so a positive condition on it could refuse every notification (and page nobody); it is \
     pinned by aws:SourceAccount to this account, with aws:SourceArn only as ...IfExists",
);

/// Whether `s` is [`KEY_SOURCE_ARN_EXCEPTION`] or [`TOPIC_KEY_SOURCE_ARN_EXCEPTION`]: a KMS key's
/// policy granting `service` exactly
/// kms:GenerateDataKey and kms:Decrypt, with aws:SourceAccount equal to this account and any
/// aws:SourceArn condition an `...IfExists` naming no wildcard.
fn key_statement_excepted(t: &Template, s: &Statement, service: &str) -> bool {
    let account = json!({"Ref": "AWS::AccountId"});
    let pinned_to_account = s.condition("aws:SourceAccount").iter().any(|(op, v)| {
        op == "StringEquals" && (**v == account || v.as_array() == Some(&vec![account.clone()]))
    });
    let source_arns_if_exist = s.condition("aws:SourceArn").iter().all(|(op, values)| {
        op.ends_with("IfExists")
            && list_branches(values)
                .iter()
                .all(|l| !l.is_empty() && l.iter().all(|v| *v != "*"))
    });
    let mut actions = s.actions();
    actions.sort();
    [KEY_SOURCE_ARN_EXCEPTION.0, TOPIC_KEY_SOURCE_ARN_EXCEPTION.0].contains(&service)
        && t.is_a(&s.holder, "AWS::KMS::Key")
        && actions == ["kms:Decrypt", "kms:GenerateDataKey"]
        && pinned_to_account
        && source_arns_if_exist
}

/// An Allow to an AWS service names the resource acting for it (`aws:SourceArn`): otherwise any
/// rule, experiment or function of any account could use the service to act here (the confused
/// deputy). `aws:SourceAccount` alone is not enough.
pub(super) fn service_principals_pinned_to_source(t: &Template) -> Found {
    let mut found = Found::new();
    let execution_roles = execution_roles(t);
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        for p in s.principals() {
            let Principal::Service(service) = p else {
                continue;
            };
            let excepted = s.kind == PolicyKind::Trust
                && service == SOURCE_ARN_EXCEPTION.0
                && execution_roles.contains(&s.holder)
                && s.actions() == ["sts:AssumeRole"];
            if excepted || key_statement_excepted(t, s, &service) {
                continue;
            }
            let pinned = s.condition("aws:SourceArn").iter().any(|(op, values)| {
                ["ArnEquals", "ArnLike", "StringEquals", "StringLike"].contains(&op.as_str())
                    && list_branches(values)
                        .iter()
                        .all(|l| !l.is_empty() && l.iter().all(|v| *v != "*"))
            });
            if !pinned {
                found.push((
                    s.label(),
                    format!("Allow to {service} without an aws:SourceArn condition"),
                ));
            }
        }
    }
    found
}

/// Condition keys that narrow a `"*"` principal to known callers.
const PRINCIPAL_KEYS: [&str; 4] = [
    "aws:PrincipalOrgID",
    "aws:PrincipalOrgPaths",
    "aws:PrincipalAccount",
    "aws:PrincipalArn",
];
/// Condition operators that only admit the values they list.
const ADMITTING_OPERATORS: [&str; 6] = [
    "StringEquals",
    "StringLike",
    "ArnEquals",
    "ArnLike",
    "ForAnyValue:StringEquals",
    "ForAnyValue:StringLike",
];

/// An Allow to `"*"` (or with NotPrincipal) is an Allow to every AWS account unless a condition
/// on the caller's organisation, account or ARN narrows it, in every branch of its conditions.
/// The hub bus's `"*"` with `aws:PrincipalOrgID` passes; the TLS denies, being denies, are not
/// grants.
pub(super) fn no_unscoped_wildcard_principals(t: &Template) -> Found {
    let mut found = Found::new();
    for s in statements(t).iter().filter(|s| s.is_allow()) {
        if s.body.get("NotPrincipal").is_some() {
            found.push((
                s.label(),
                "Allow with NotPrincipal: every principal but those named".into(),
            ));
        }
        if !s.principals().contains(&Principal::Any) {
            continue;
        }
        let narrows = |conditions: &Value| {
            conditions
                .as_object()
                .into_iter()
                .flatten()
                .any(|(op, tests)| {
                    ADMITTING_OPERATORS.contains(&op.as_str())
                        && tests
                            .as_object()
                            .into_iter()
                            .flatten()
                            .any(|(key, values)| {
                                PRINCIPAL_KEYS.iter().any(|k| k.eq_ignore_ascii_case(key))
                                    && list_branches(values).iter().all(|l| {
                                        !l.is_empty() && l.iter().all(|v| *v != "*" && *v != "")
                                    })
                            })
                })
        };
        let scoped = branches(&s.body["Condition"])
            .into_iter()
            .all(|c| c.is_some_and(narrows));
        if !scoped {
            found.push((
                s.label(),
                format!(
                    "Allow to \"*\" without a condition on {} in every branch: any AWS account \
                     may do it",
                    PRINCIPAL_KEYS.join(" / ")
                ),
            ));
        }
    }
    found
}
