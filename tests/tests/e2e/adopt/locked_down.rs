//! adopt in a locked-down account: the tenant queue it deploys is locked down as `make
//! deploy-tenant` would make it next to that base stack (a customer-managed key, the base stack's
//! alarm topic), not an SSE-SQS queue.

use super::*;

#[tokio::test]
async fn adopt_deploys_the_tenant_as_make_deploy_tenant_would_in_a_locked_down_account()
-> Result<()> {
    let topic = "arn:aws:sns:us-east-1:123456789012:platform-alarms";
    let mut estate = Estate::start(
        None,
        Scene {
            base_parameters: vec![
                ("KmsKey".into(), "Create".into()),
                ("AlarmTopicArn".into(), topic.into()),
            ],
            ..scene(&[("alpha", Some(Flavour::GettingStarted))])
        },
    )
    .await?;
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 1, .. })
    })
    .await?;
    assert!(
        matches!(moves.last(), Some(Move::Applied { step: 1, .. })),
        "{moves:?}"
    );
    let stack = tenant_stack("alpha");
    let described = estate
        .aws
        .cfn
        .describe_stacks()
        .stack_name(&stack)
        .send()
        .await?;
    let parameters =
        aws_clients::stacks::parameters(described.stacks().first().context("the tenant stack")?);
    assert_eq!(parameters.get("KmsKey").map(String::as_str), Some("Create"));
    assert_eq!(
        parameters.get("AlarmTopicArn").map(String::as_str),
        Some(topic)
    );
    let url = estate.sandbox.queue_url("karpenter-alpha").await?;
    let attributes = estate
        .aws
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await?;
    let key = attributes
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::KmsMasterKeyId))
        .cloned()
        .unwrap_or_default();
    assert!(!key.is_empty(), "{attributes:?}");
    Ok(())
}
