//! The function's environment and the router role's checks, on recorded inputs.

use super::other_invokers;
use super::router_role::{actions_on, router_needs};
use aws_model::policy::Policy;

#[test]
fn any_invoker_but_the_stacks_rules_is_reported() {
    let rule = "arn:aws:events:us-east-1:123456789012:rule/ir-SpotInterruptionRule-X";
    // As Lambda's GetPolicy returns AWS::Lambda::Permission's statements (AWS: casing).
    let policy = Policy::parse(
        "function policy",
        &serde_json::json!({"Statement": [
            {"Sid": "ours", "Effect": "Allow", "Action": "lambda:InvokeFunction",
             "Principal": {"Service": "events.amazonaws.com"}, "Resource": "f",
             "Condition": {"ArnLike": {"AWS:SourceArn": rule},
                           "StringEquals": {"AWS:SourceAccount": "123456789012"}}},
            {"Sid": "console-test", "Effect": "Allow", "Action": "lambda:InvokeFunction",
             "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Resource": "f"},
            {"Sid": "other-rule", "Effect": "Allow", "Action": "lambda:InvokeFunction",
             "Principal": {"Service": "events.amazonaws.com"}, "Resource": "f",
             "Condition": {"ArnLike": {"AWS:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/theirs"}}},
            {"Sid": "unpinned", "Effect": "Allow", "Action": "lambda:*",
             "Principal": {"Service": "events.amazonaws.com"}, "Resource": "f"},
            {"Sid": "config-read", "Effect": "Allow", "Action": "lambda:GetFunction",
             "Principal": {"AWS": "*"}, "Resource": "f"}]})
        .to_string(),
    )
    .unwrap();
    let others: Vec<String> = other_invokers(&policy, &[rule.to_owned()])
        .into_iter()
        .map(|(sid, _)| sid)
        .collect();
    assert_eq!(others, ["console-test", "other-rule", "unpinned"]);
}

#[test]
fn the_role_check_names_every_action_it_needs() {
    let dlq = "arn:aws:sqs:us-east-1:123456789012:ir-dlq";
    let ingest = "arn:aws:sqs:us-east-1:123456789012:ir-ingest";
    let need = router_needs(Some(dlq), Some(ingest));
    assert_eq!(
        actions_on(&need, "*"),
        "ec2:DescribeInstances and tag:GetResources"
    );
    assert_eq!(
        actions_on(&need, ingest),
        "sqs:ReceiveMessage, sqs:DeleteMessage, sqs:GetQueueAttributes and \
         sqs:ChangeMessageVisibility on ir-ingest"
    );
    assert_eq!(actions_on(&need, dlq), "sqs:SendMessage on ir-dlq");
}
