//! What the router refuses, and says so: a bad configuration stops start-up naming the variable
//! and its fix, an unsupported payload fails its invocation, and a router that does not know its
//! own account routes nothing.

use anyhow::Result;
use e2e_tests::{
    INVOKE_BUDGET, World, batch_item_failures, ec2_event, fixture, invoke_batch, sqs_event,
};
use local_aws::runtime_api::Invocation;
use serde_json::json;

use super::{Estate, refused_start};

#[tokio::test]
async fn a_bad_configuration_stops_start_up_naming_the_variable_and_the_fix() -> Result<()> {
    let world = World::start().await?;
    let env = world.router_env(&[("QUEUE_NAME_TEMPLATE", "karpenter-queue")]);
    let (function, message) = refused_start(&env).await?;
    assert!(
        message.contains("QUEUE_NAME_TEMPLATE=\"karpenter-queue\""),
        "{message}"
    );
    assert!(
        message.contains("{cluster}") && message.contains("Fix:"),
        "{message}"
    );
    assert!(
        function.api().first_poll().is_none(),
        "it never asked for work"
    );
    Ok(())
}

#[tokio::test]
async fn unsupported_payloads_fail_the_invocation_with_a_clear_error() -> Result<()> {
    let world = World::start().await?;
    let router = world.start_router(&[]).await?;
    let kinesis =
        json!({"Records": [{"eventSource": "aws:kinesis", "eventID": "x", "kinesis": {}}]});
    match router.invoke(kinesis.to_string(), INVOKE_BUDGET).await {
        Invocation::Error {
            error_type,
            message,
        } => {
            assert_eq!(error_type, "InterruptionRouter.UnsupportedPayload");
            assert!(message.contains("aws:kinesis"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // An EventBridge event invoking the function directly (a rule targeting it): refused with
    // why, so the misconfiguration shows; the rule's retries and its DLQ keep the event.
    match router
        .invoke(
            fixture("asg-terminate-lifecycle-action.json").to_string(),
            INVOKE_BUDGET,
        )
        .await
    {
        Invocation::Error { message, .. } => {
            assert!(message.contains("SQS event source mapping"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The process survives to serve the next invocation.
    let ok = router
        .invoke(
            sqs_event(&[fixture("asg-terminate-lifecycle-action.json").to_string()]).to_string(),
            INVOKE_BUDGET,
        )
        .await;
    assert!(batch_item_failures(&ok).is_empty(), "{ok:?}");
    Ok(())
}

#[tokio::test]
async fn a_router_that_does_not_know_its_own_account_routes_nothing() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // An invoked function ARN without an account: the router cannot tell its own account from
    // any other, so it must not use its own credentials on a guess.
    router
        .api()
        .set_function_arn("arn:aws:lambda:us-east-1::function:interruption-router");
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "home?").to_string(),
        {
            let mut foreign =
                ec2_event("spot-interruption-warning.json", &estate.beta[0], "member?");
            foreign["account"] = json!("222222222222");
            foreign.to_string()
        },
    ];
    assert_eq!(invoke_batch(&router, &bodies).await, ["msg-0", "msg-1"]);
    for queue in ["alpha", "beta", "dlq"] {
        assert_eq!(
            estate.world.depth(&estate.queues[queue]).await?,
            0,
            "{queue}"
        );
    }
    let calls = estate.world.proxy.calls();
    for action in [
        "DescribeInstances",
        "GetResources",
        "SendMessageBatch",
        "AssumeRole",
    ] {
        assert_eq!(calls.get(action), None, "{action}: {calls:?}");
    }
    Ok(())
}
