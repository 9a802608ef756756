//! The function's environment and the router role's checks, on recorded inputs.

use super::router_role::{actions_on, router_needs};

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
