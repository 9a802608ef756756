//! The evaluator against the documents the stacks create: identity and queue policies, unstated
//! condition keys, service principals, Lambda permissions, IAM's URL-encoded documents, and
//! IAM's rules within one account and across two.

use super::{conditions::arn_like, *};

const ROLE: &str = "arn:aws:iam::123456789012:role/ir-RouterRole-ABC";
const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:karpenter-alpha";

/// The router role's inline policy as base.yaml writes it (Queue mode, stack "ir").
fn router_role() -> Policy {
    Policy::parse(
        "inline interruption-router",
        r#"{"Version":"2012-10-17","Statement":[
          {"Sid":"ResolveInstanceTags","Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"},
          {"Sid":"SendToClusterQueues","Effect":"Allow","Action":["sqs:GetQueueUrl","sqs:SendMessage"],
           "Resource":"arn:aws:sqs:us-east-1:123456789012:karpenter-*"},
          {"Sid":"NeverSendToIngestQueue","Effect":"Deny","Action":["sqs:SendMessage"],
           "Resource":"arn:aws:sqs:us-east-1:123456789012:karpenter-ingest"}]}"#,
    )
    .unwrap()
}

/// tenant.yaml's queue policy.
fn tenant_queue_policy(router: &str) -> Policy {
    let doc = serde_json::json!({"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowRouterToSend", "Effect": "Allow", "Principal": {"AWS": router},
         "Action": "sqs:SendMessage", "Resource": QUEUE},
        {"Sid": "DenySendersOtherThanRouter", "Effect": "Deny", "Principal": "*",
         "Action": "sqs:SendMessage", "Resource": QUEUE,
         "Condition": {"ArnNotEquals": {"aws:PrincipalArn": router}}},
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "sqs:*",
         "Resource": QUEUE, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]});
    Policy::parse("queue policy", &doc.to_string()).unwrap()
}

fn send(principal: Principal<'_>, resource: &str, context: &[(&str, &str)]) -> Decision {
    let policies = match principal {
        Principal::Attached => vec![router_role()],
        _ => vec![tenant_queue_policy(ROLE)],
    };
    evaluate(
        &policies,
        &Request {
            principal,
            action: "sqs:SendMessage",
            resource,
            context,
        },
    )
}

#[test]
fn identity_policy_wildcards_and_explicit_deny() {
    assert!(send(Principal::Attached, QUEUE, &[]).is_allowed());
    let ingest = "arn:aws:sqs:us-east-1:123456789012:karpenter-ingest";
    assert_eq!(
        send(Principal::Attached, ingest, &[]),
        Decision::Denied {
            by: "inline interruption-router statement NeverSendToIngestQueue".into()
        }
    );
    let other_region = "arn:aws:sqs:eu-west-1:123456789012:karpenter-alpha";
    assert_eq!(
        send(Principal::Attached, other_region, &[]),
        Decision::NotAllowed
    );
    // Actions are case-insensitive; the action must still be one the statement names.
    let describe = Request {
        principal: Principal::Attached,
        action: "EC2:describeinstances",
        resource: "*",
        context: &[],
    };
    assert!(evaluate(&[router_role()], &describe).is_allowed());
    let receive = Request {
        action: "sqs:ReceiveMessage",
        resource: QUEUE,
        ..describe
    };
    assert_eq!(evaluate(&[router_role()], &receive), Decision::NotAllowed);
}

#[test]
fn tenant_queue_policy_lets_only_the_router_send() {
    let secure = [("aws:SecureTransport", "true"), ("aws:PrincipalArn", ROLE)];
    assert_eq!(
        send(Principal::Aws(ROLE), QUEUE, &secure),
        Decision::Allowed {
            by: "queue policy statement AllowRouterToSend".into()
        }
    );
    let intruder = "arn:aws:iam::123456789012:role/ci";
    let context = [
        ("aws:SecureTransport", "true"),
        ("aws:PrincipalArn", intruder),
    ];
    assert_eq!(
        send(Principal::Aws(intruder), QUEUE, &context),
        Decision::Denied {
            by: "queue policy statement DenySendersOtherThanRouter".into()
        }
    );
    // A policy written for a previous router role denies the current one.
    let stale = tenant_queue_policy("arn:aws:iam::123456789012:role/old-router");
    let request = Request {
        principal: Principal::Aws(ROLE),
        action: "sqs:SendMessage",
        resource: QUEUE,
        context: &secure,
    };
    assert!(matches!(
        evaluate(&[stale], &request),
        Decision::Denied { .. }
    ));
}

#[test]
fn conditions_on_unstated_keys_are_undetermined_not_guessed() {
    // No aws:SecureTransport in the context: the Deny might apply.
    let decision = send(Principal::Aws(ROLE), QUEUE, &[("aws:PrincipalArn", ROLE)]);
    assert!(
        matches!(&decision, Decision::Undetermined { why } if why.contains("aws:SecureTransport")),
        "{decision:?}"
    );
}

#[test]
fn source_arn_conditions_for_service_principals() {
    let rule = "arn:aws:events:us-east-1:123456789012:rule/ir-SpotInterruptionRule-X";
    let policy = Policy::parse(
        "queue policy",
        &serde_json::json!({"Statement": [{"Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Resource": QUEUE, "Condition": {"ArnEquals": {"aws:SourceArn": [rule]}}}]})
        .to_string(),
    )
    .unwrap();
    let decide = |source: &str, service: &str| {
        let context = [("AWS:SourceArn", source)];
        let request = Request {
            principal: Principal::Service(service),
            action: "sqs:SendMessage",
            resource: QUEUE,
            context: &context,
        };
        evaluate(std::slice::from_ref(&policy), &request)
    };
    assert!(decide(rule, "events.amazonaws.com").is_allowed());
    let other = "arn:aws:events:us-east-1:999999999999:rule/theirs";
    assert_eq!(decide(other, "events.amazonaws.com"), Decision::NotAllowed);
    assert_eq!(decide(rule, "sns.amazonaws.com"), Decision::NotAllowed);
}

#[test]
fn lambda_permissions_as_get_policy_returns_them() {
    // What AWS::Lambda::Permission with SourceArn and SourceAccount leaves in the function
    // policy (Direct mode); note the AWS: prefix casing Lambda writes.
    let function = "arn:aws:lambda:us-east-1:123456789012:function:ir-RouterFunction-X";
    let rule = "arn:aws:events:us-east-1:123456789012:rule/ir-SpotInterruptionRule-X";
    let policy = Policy::parse(
        "function policy",
        &serde_json::json!({"Version": "2012-10-17", "Id": "default", "Statement": [{
            "Sid": "ir-SpotInterruptionRulePermission-X", "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"}, "Action": "lambda:InvokeFunction",
            "Resource": function,
            "Condition": {"StringEquals": {"AWS:SourceAccount": "123456789012"},
                          "ArnLike": {"AWS:SourceArn": rule}}}]})
        .to_string(),
    )
    .unwrap();
    let decide = |source: &str| {
        let context = [
            ("aws:SourceArn", source),
            ("aws:SourceAccount", "123456789012"),
        ];
        evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "lambda:InvokeFunction",
                resource: function,
                context: &context,
            },
        )
    };
    assert!(decide(rule).is_allowed());
    let other = "arn:aws:events:us-east-1:123456789012:rule/ir-StateChangeRule-X";
    assert_eq!(decide(other), Decision::NotAllowed);
}

#[test]
fn iam_documents_are_url_decoded() {
    let encoded = "%7B%22Statement%22%3A%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22sqs%3A%2A%22%2C%22Resource%22%3A%22%2A%22%7D%7D";
    let policy = Policy::parse_iam("managed", encoded).unwrap();
    assert!(
        evaluate(
            &[policy],
            &Request {
                principal: Principal::Attached,
                action: "sqs:SendMessage",
                resource: QUEUE,
                context: &[],
            }
        )
        .is_allowed()
    );
    assert!(Policy::parse_iam("inline", "{'Statement': []}").is_err());
}

#[test]
fn across_accounts_both_policies_must_allow_within_one_either_does() {
    let identity = Policy::parse(
        "identity",
        r#"{"Statement":{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}}"#,
    )
    .unwrap();
    let empty = Policy::parse("queue policy", r#"{"Statement":[]}"#).unwrap();
    let request = Request {
        principal: Principal::Attached,
        action: "sqs:SendMessage",
        resource: QUEUE,
        context: &[("aws:SecureTransport", "true"), ("aws:PrincipalArn", ROLE)],
    };
    let same = authorize(
        std::slice::from_ref(&identity),
        std::slice::from_ref(&empty),
        ROLE,
        "123456789012",
        &request,
    );
    assert!(same.is_allowed(), "{same}");
    let other = authorize(
        std::slice::from_ref(&identity),
        &[empty],
        ROLE,
        "999999999999",
        &request,
    );
    assert_eq!(other, Decision::NotAllowed);
    let both = authorize(
        &[identity],
        &[tenant_queue_policy(ROLE)],
        ROLE,
        "999999999999",
        &request,
    );
    assert!(both.is_allowed(), "{both}");
}

#[test]
fn glob_and_arn_like() {
    assert!(glob("karpenter-*", "karpenter-alpha"));
    assert!(glob("*", ""));
    assert!(glob("a?c*", "abcdef"));
    assert!(!glob("karpenter-*", "ir-ingest"));
    assert!(!glob("a*b", "acbx"));
    // IAM's special variables are the literal character, not a wildcard.
    assert!(glob("*${?}*", "https://b/k?x=1"));
    assert!(!glob("*${?}*", "https://b/k"));
    assert!(glob("a${*}b", "a*b"));
    assert!(!glob("a${*}b", "axxb"));
    assert!(glob("${$}{x}", "${x}"));
    assert!(arn_like(
        "arn:aws:events:*:123456789012:rule/*",
        "arn:aws:events:us-east-1:123456789012:rule/x"
    ));
    assert!(!arn_like(
        "arn:aws:events:*:123456789012:rule/*",
        "arn:aws:events:us-east-1:999999999999:rule/x"
    ));
}
