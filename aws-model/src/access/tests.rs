use serde_json::json;

use super::*;

const ACCOUNT: &str = "123456789012";
const ROLE: &str = "arn:aws:iam::123456789012:role/platform/router";
const KEY: &str = "arn:aws:kms:us-east-1:123456789012:key/k";
const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:karpenter-alpha";
const VIA_SQS: [(&str, &str); 2] = [
    ("kms:ViaService", "sqs.us-east-1.amazonaws.com"),
    ("kms:CallerAccount", ACCOUNT),
];

fn policy(source: &str, statements: serde_json::Value) -> Policy {
    Policy::parse(
        source,
        &json!({"Version": "2012-10-17", "Statement": statements}).to_string(),
    )
    .unwrap()
}

fn allow(principal: serde_json::Value, actions: &[&str]) -> serde_json::Value {
    json!({"Effect": "Allow", "Principal": principal, "Action": actions, "Resource": "*",
           "Condition": {"StringEquals": {"kms:ViaService": "sqs.us-east-1.amazonaws.com"}}})
}

fn identity_kms(actions: &[&str]) -> Policy {
    policy(
        "identity",
        json!([{"Effect": "Allow", "Action": actions, "Resource": KEY}]),
    )
}

fn decrypt<'a>(context: &'a [(&'a str, &'a str)]) -> Request<'a> {
    Request {
        principal: Principal::Attached,
        action: "kms:Decrypt",
        resource: KEY,
        context,
    }
}

fn key_decision(identity: &[Policy], boundary: Option<&Policy>, key: &Policy) -> Decision {
    let role = Identity {
        arn: ROLE,
        policies: identity,
        boundary,
    };
    authorize_role(&role, key, ResourcePolicy::Key, ACCOUNT, &decrypt(&VIA_SQS))
}

#[test]
fn a_key_policy_naming_the_role_is_enough_without_an_identity_policy() {
    let key = policy(
        "key policy",
        json!([allow(json!({"AWS": ROLE}), &["kms:Decrypt"])]),
    );
    assert!(key_decision(&[], None, &key).is_allowed());
    // Another role of the same account is not named.
    let other = Identity {
        arn: "arn:aws:iam::123456789012:role/other",
        policies: &[identity_kms(&["kms:Decrypt"])],
        boundary: None,
    };
    assert_eq!(
        authorize_role(
            &other,
            &key,
            ResourcePolicy::Key,
            ACCOUNT,
            &decrypt(&VIA_SQS)
        ),
        Decision::NotAllowed
    );
}

#[test]
fn an_identity_policy_alone_never_uses_a_key() {
    let key = policy(
        "key policy",
        json!([{"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                "Action": "kms:DescribeKey", "Resource": "*"}]),
    );
    assert_eq!(
        key_decision(&[identity_kms(&["kms:Decrypt"])], None, &key),
        Decision::NotAllowed
    );
    // A queue is different: within one account the identity policy suffices.
    let queue = policy("queue policy", json!([]));
    let role = Identity {
        arn: ROLE,
        policies: &[policy(
            "identity",
            json!([{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE}]),
        )],
        boundary: None,
    };
    let send = Request {
        action: "sqs:SendMessage",
        resource: QUEUE,
        ..decrypt(&[])
    };
    assert!(authorize_role(&role, &queue, ResourcePolicy::Ordinary, ACCOUNT, &send).is_allowed());
}

#[test]
fn a_key_policy_delegating_to_the_account_needs_the_identity_policy_too() {
    let key = policy(
        "key policy",
        json!([allow(
            json!({"AWS": "arn:aws:iam::123456789012:root"}),
            &["kms:Decrypt"]
        )]),
    );
    assert!(key_decision(&[identity_kms(&["kms:Decrypt"])], None, &key).is_allowed());
    assert_eq!(key_decision(&[], None, &key), Decision::NotAllowed);
    assert_eq!(
        key_decision(&[identity_kms(&["kms:GenerateDataKey"])], None, &key),
        Decision::NotAllowed
    );
    // The key's condition holds only through SQS.
    let direct_call = [("kms:CallerAccount", ACCOUNT), ("kms:ViaService", "")];
    let role = Identity {
        arn: ROLE,
        policies: &[identity_kms(&["kms:Decrypt"])],
        boundary: None,
    };
    assert_eq!(
        authorize_role(
            &role,
            &key,
            ResourcePolicy::Key,
            ACCOUNT,
            &decrypt(&direct_call)
        ),
        Decision::NotAllowed
    );
}

#[test]
fn a_boundary_caps_identity_policies_and_grants_naming_the_role() {
    let sqs_only = policy(
        "boundary",
        json!([{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}]),
    );
    let with_kms = policy(
        "boundary",
        json!([{"Effect": "Allow", "Action": ["sqs:*", "kms:Decrypt"], "Resource": "*"}]),
    );
    let named = policy(
        "key policy",
        json!([allow(json!({"AWS": ROLE}), &["kms:Decrypt"])]),
    );
    assert!(matches!(
        key_decision(&[], Some(&sqs_only), &named),
        Decision::Denied { by } if by.contains("permissions boundary")
    ));
    assert!(key_decision(&[], Some(&with_kms), &named).is_allowed());
    let delegated = policy(
        "key policy",
        json!([allow(json!({"AWS": ACCOUNT}), &["kms:Decrypt"])]),
    );
    let identity = [identity_kms(&["kms:Decrypt"])];
    assert!(matches!(
        key_decision(&identity, Some(&sqs_only), &delegated),
        Decision::Denied { .. }
    ));
    assert!(key_decision(&identity, Some(&with_kms), &delegated).is_allowed());
    // An explicit Deny in the boundary wins over everything.
    let denying = policy(
        "boundary",
        json!([{"Effect": "Allow", "Action": "*", "Resource": "*"},
               {"Effect": "Deny", "Action": "kms:Decrypt", "Resource": "*"}]),
    );
    assert!(matches!(
        key_decision(&identity, Some(&denying), &named),
        Decision::Denied { .. }
    ));
}

#[test]
fn across_accounts_key_and_identity_policy_must_both_allow() {
    let member = "arn:aws:iam::111111111111:role/spoke";
    let key = policy(
        "key policy",
        json!([allow(json!({"AWS": member}), &["kms:Decrypt"])]),
    );
    let decide = |policies: &[Policy]| {
        let role = Identity {
            arn: member,
            policies,
            boundary: None,
        };
        authorize_role(
            &role,
            &key,
            ResourcePolicy::Key,
            ACCOUNT,
            &decrypt(&VIA_SQS),
        )
    };
    assert_eq!(decide(&[]), Decision::NotAllowed);
    assert!(decide(&[identity_kms(&["kms:Decrypt"])]).is_allowed());
}

#[test]
fn a_service_principal_is_decided_by_the_key_policy_alone() {
    let rule = "arn:aws:events:us-east-1:123456789012:rule/r";
    let key = policy(
        "key policy",
        json!([{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
                "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": "*",
                "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/*"}}}]),
    );
    let context = [("aws:SourceArn", rule)];
    let generate = Request {
        action: "kms:GenerateDataKey",
        ..decrypt(&context)
    };
    assert!(authorize_service(&key, "events.amazonaws.com", &generate).is_allowed());
    assert_eq!(
        authorize_service(&key, "sns.amazonaws.com", &generate),
        Decision::NotAllowed
    );
    let elsewhere = [(
        "aws:SourceArn",
        "arn:aws:events:us-east-1:999999999999:rule/r",
    )];
    assert_eq!(
        authorize_service(&key, "events.amazonaws.com", &decrypt(&elsewhere)),
        Decision::NotAllowed
    );
}
