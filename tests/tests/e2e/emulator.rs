//! The emulator's own speed-ups change no answer: moto counts a queue's messages only for a call
//! that returns the counts (`local-aws/src/moto_fixes.py`), and servers forked from one zygote
//! (`local-aws/src/zygote.rs`) are as apart as servers started one by one.

use std::collections::HashMap;

use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName as Name;
use e2e_tests::World;

/// GetQueueAttributes of `names`.
async fn attributes(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    names: &[Name],
) -> Result<HashMap<Name, String>> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(names.to_vec()))
        .send()
        .await?
        .attributes
        .context("no attributes")
}

#[tokio::test]
async fn queue_counts_are_answered_when_asked_after_sends_and_receives() -> Result<()> {
    let world = World::start().await?;
    let (sqs, url) = (&world.sqs, world.create_queue("counted").await?);
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
    let names: Vec<Name> = counts.iter().map(|(name, _)| name.clone()).collect();
    for asked in [&[Name::All][..], &names] {
        let answer = attributes(sqs, &url, asked).await?;
        for (name, want) in &counts {
            assert_eq!(
                answer.get(name).map(String::as_str),
                Some(*want),
                "{name} asked as {asked:?}: {answer:?}"
            );
        }
    }
    // A call that asks for no count still reads its setting.
    let retention = attributes(sqs, &url, &[Name::MessageRetentionPeriod]).await?;
    assert_eq!(
        retention
            .get(&Name::MessageRetentionPeriod)
            .map(String::as_str),
        Some("345600")
    );
    Ok(())
}

/// Servers forked from one zygote share no state, draw their own ids, and are gone once stopped.
#[tokio::test]
async fn servers_forked_from_one_zygote_are_apart() -> Result<()> {
    let (one, two) = (World::start().await?, World::start().await?);
    let (a, b) = (one.launch(&[]).await?, two.launch(&[]).await?);
    assert_ne!(a, b, "two servers drew the same instance id");
    one.create_queue("only-in-one").await?;
    let missing = two.queue_url("only-in-one").await;
    assert!(missing.is_err(), "{missing:?}");
    let World { moto, sqs, .. } = one;
    moto.stop().await;
    let after = sqs.list_queues().send().await;
    assert!(after.is_err(), "a stopped server still answers: {after:?}");
    Ok(())
}
