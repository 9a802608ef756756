//! A queue nobody has read for longer than its retention: SQS has deleted what outlived it, so
//! adopt's sentinel, sent after, is what a receive finds. (Between the helm command and the old
//! rules' disabling, the old queue fills and nobody reads it; after a rollback its oldest events
//! outlive the getting-started queue's 300 s.) moto keeps expired messages and, meeting enough of
//! them, answers an empty receive: `local-aws/src/moto_fixes/` deletes them as SQS does.

use super::*;

#[tokio::test]
async fn a_receive_finds_a_fresh_message_behind_messages_past_their_retention() -> Result<()> {
    use aws_sdk_sqs::types::QueueAttributeName;
    use local_aws::moto::MotoServer;

    let moto = MotoServer::start().await?;
    let sqs = aws_sdk_sqs::Client::new(&moto.sdk_config().await);
    // SQS's shortest retention.
    let url = sqs
        .create_queue()
        .queue_name("old-interruptions")
        .attributes(QueueAttributeName::MessageRetentionPeriod, "60")
        .send()
        .await?
        .queue_url()
        .context("no queue URL")?
        .to_owned();
    // Enough that moto, scanning one expired message a pass, spends its whole wait on them.
    e2e_tests::send_all(
        &sqs,
        &url,
        (0..1500).map(|n| format!("unread {}-{}", n / 10, n % 10)),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(62)).await;
    sqs.send_message()
        .queue_url(&url)
        .message_body("sentinel")
        .send()
        .await?;

    let out = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await?;
    let bodies: Vec<_> = out.messages().iter().filter_map(|m| m.body()).collect();
    assert_eq!(bodies, ["sentinel"]);
    Ok(())
}
