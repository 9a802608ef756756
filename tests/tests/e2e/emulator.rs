//! The emulator's own fixes (`local-aws/src/moto_fixes.py`) that are for speed change no answer.
//! moto counts a queue's messages only for a call that returns the counts; a caller that asks,
//! by `All` or by name, gets them as SQS gives them.

use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName as Name;
use local_aws::moto::MotoServer;

#[tokio::test]
async fn queue_counts_are_answered_when_asked_after_sends_and_receives() -> Result<()> {
    let moto = MotoServer::start().await?;
    let sqs = aws_sdk_sqs::Client::new(&moto.sdk_config().await);
    let url = sqs
        .create_queue()
        .queue_name("counted")
        .send()
        .await?
        .queue_url()
        .context("no queue URL")?
        .to_owned();
    for n in 0..7 {
        sqs.send_message()
            .queue_url(&url)
            .message_body(n.to_string())
            .send()
            .await?;
    }
    sqs.send_message()
        .queue_url(&url)
        .message_body("delayed")
        .delay_seconds(60)
        .send()
        .await?;
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(3)
        .visibility_timeout(60)
        .wait_time_seconds(1)
        .send()
        .await?;
    assert_eq!(received.messages().len(), 3);

    let counts = [
        (Name::ApproximateNumberOfMessages, "4"),
        (Name::ApproximateNumberOfMessagesNotVisible, "3"),
        (Name::ApproximateNumberOfMessagesDelayed, "1"),
    ];
    let all = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(Name::All)
        .send()
        .await?;
    let named = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .set_attribute_names(Some(counts.iter().map(|(n, _)| n.clone()).collect()))
        .send()
        .await?;
    for answer in [&all, &named] {
        let attributes = answer.attributes().context("no attributes")?;
        for (name, want) in &counts {
            assert_eq!(
                attributes.get(name).map(String::as_str),
                Some(*want),
                "{name}: {attributes:?}"
            );
        }
    }
    // A call that asks for no count still reads its setting.
    let retention = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(Name::MessageRetentionPeriod)
        .send()
        .await?;
    assert_eq!(
        retention
            .attributes()
            .and_then(|a| a.get(&Name::MessageRetentionPeriod))
            .map(String::as_str),
        Some("345600")
    );
    Ok(())
}

/// Servers forked from one zygote (`local-aws/src/zygote.rs`) share no state, draw their own ids,
/// and are gone once stopped.
#[tokio::test]
async fn servers_forked_from_one_zygote_are_apart() -> Result<()> {
    let (one, two) = (MotoServer::start().await?, MotoServer::start().await?);
    let mut ids = Vec::new();
    for moto in [&one, &two] {
        let ec2 = aws_sdk_ec2::Client::new(&moto.sdk_config().await);
        ids.extend(local_aws::moto::launch(&ec2, &[], 1).await?);
    }
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "two servers drew the same instance id");
    let sqs = |endpoint: String| async move {
        aws_sdk_sqs::Client::new(&local_aws::moto::sdk_config_for(&endpoint).await)
    };
    sqs(one.endpoint().to_owned())
        .await
        .create_queue()
        .queue_name("only-in-one")
        .send()
        .await?;
    let missing = sqs(two.endpoint().to_owned())
        .await
        .get_queue_url()
        .queue_name("only-in-one")
        .send()
        .await;
    assert!(missing.is_err(), "{missing:?}");
    let endpoint = one.endpoint().to_owned();
    one.stop().await;
    let after = sqs(endpoint).await.list_queues().send().await;
    assert!(after.is_err(), "a stopped server still answers: {after:?}");
    Ok(())
}
