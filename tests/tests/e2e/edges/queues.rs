//! The model's standard queue (`aws_world::sqs::Messages`, under every queue of the model and the
//! simulation's ingest queue) answers as the emulator's SQS does: one script of sends, receives,
//! visibility changes and deletes, run against a queue with a redrive policy in each, gives the
//! same transcript. The semantics it covers are the SQS Developer Guide's: a receive hides what
//! it returns for the visibility asked and hands out the oldest first, each receive counts, a
//! message goes to the dead-letter queue on the receive after its `maxReceiveCount`-th (that
//! receive does not return it, the others it finds still come), keeping when it was sent.
//!
//! Not in the script: a stale receipt handle. AWS says a delete with one "succeeds but the
//! message might not be deleted"; moto deletes with any handle a message ever had, the model
//! with its latest only (`aws-world/src/sqs/messages.rs`'s unit test), and the router always
//! uses the latest.

use anyhow::Result;
use e2e_tests::World;
use local_aws::moto::{ACCOUNT, REGION};

/// What a receive returned: each message's body and receive count, oldest first.
type Got = Vec<(String, u64)>;

/// The calls the script makes, as the two queues take them.
trait Queue {
    async fn send(&self, queue: &str, body: &str) -> Result<()>;
    /// ReceiveMessage of up to 10, hidden `hide` s: (body, receive count, sent ms, handle).
    async fn receive(&self, queue: &str, hide: i32) -> Result<Vec<(String, u64, u64, String)>>;
    async fn release(&self, queue: &str, handle: &str) -> Result<()>;
    async fn delete(&self, queue: &str, handle: &str) -> Result<()>;
}

/// The script, on queue `q` (redrive after 2 receives) and its dead-letter queue `dlq`.
async fn script(aws: &impl Queue) -> Result<Vec<String>> {
    let mut said = Vec::new();
    let got = |r: &[(String, u64, u64, String)]| -> Got {
        r.iter().map(|(b, n, _, _)| (b.clone(), *n)).collect()
    };
    for body in ["a", "b", "c"] {
        aws.send("q", body).await?;
    }
    let first = aws.receive("q", 60).await?;
    said.push(format!("first: {:?}", got(&first)));
    let hidden = aws.receive("q", 60).await?;
    said.push(format!("while hidden: {:?}", got(&hidden)));
    for (_, _, _, handle) in &first[..2] {
        aws.release("q", handle).await?;
    }
    let second = aws.receive("q", 60).await?;
    said.push(format!("a and b released: {:?}", got(&second)));
    aws.delete("q", &first[2].3).await?;
    aws.release("q", &second[0].3).await?;
    aws.release("q", &second[1].3).await?;
    let third = aws.receive("q", 60).await?;
    said.push(format!("past maxReceiveCount: {:?}", got(&third)));
    aws.send("q", "d").await?;
    let fourth = aws.receive("q", 60).await?;
    said.push(format!("a new one: {:?}", got(&fourth)));
    let dead = aws.receive("dlq", 60).await?;
    let bodies: Vec<&str> = dead.iter().map(|(b, ..)| b.as_str()).collect();
    said.push(format!("dead-letter queue: {bodies:?}"));
    let sent: Vec<u64> = first[..2].iter().map(|(_, _, s, _)| *s).collect();
    let kept: Vec<u64> = dead.iter().map(|(_, _, s, _)| *s).collect();
    said.push(format!("sent when first sent: {}", sent == kept));
    Ok(said)
}

struct Emulator<'a>(&'a World);

impl Emulator<'_> {
    async fn url(&self, queue: &str) -> Result<String> {
        self.0.queue_url(queue).await
    }
}

impl Queue for Emulator<'_> {
    async fn send(&self, queue: &str, body: &str) -> Result<()> {
        let url = self.url(queue).await?;
        self.0
            .sqs
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await?;
        Ok(())
    }

    async fn receive(&self, queue: &str, hide: i32) -> Result<Vec<(String, u64, u64, String)>> {
        use aws_sdk_sqs::types::MessageSystemAttributeName as Name;
        let out = self
            .0
            .sqs
            .receive_message()
            .queue_url(self.url(queue).await?)
            .max_number_of_messages(10)
            .visibility_timeout(hide)
            .message_system_attribute_names(Name::All)
            .send()
            .await?;
        Ok(out
            .messages()
            .iter()
            .map(|m| {
                let attribute = |name: Name| {
                    m.attributes()
                        .and_then(|a| a.get(&name))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_default()
                };
                (
                    m.body().unwrap_or_default().to_owned(),
                    attribute(Name::ApproximateReceiveCount),
                    attribute(Name::SentTimestamp),
                    m.receipt_handle().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }

    async fn release(&self, queue: &str, handle: &str) -> Result<()> {
        self.0
            .sqs
            .change_message_visibility()
            .queue_url(self.url(queue).await?)
            .receipt_handle(handle)
            .visibility_timeout(0)
            .send()
            .await?;
        Ok(())
    }

    async fn delete(&self, queue: &str, handle: &str) -> Result<()> {
        self.0
            .sqs
            .delete_message()
            .queue_url(self.url(queue).await?)
            .receipt_handle(handle)
            .send()
            .await?;
        Ok(())
    }
}

struct Model(aws_world::World);

impl Model {
    fn url(&self, queue: &str) -> String {
        format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{queue}")
    }
}

impl Queue for Model {
    async fn send(&self, queue: &str, body: &str) -> Result<()> {
        self.0.sqs_send(&self.url(queue), body)?;
        Ok(())
    }

    async fn receive(&self, queue: &str, hide: i32) -> Result<Vec<(String, u64, u64, String)>> {
        Ok(self
            .0
            .sqs_receive(&self.url(queue), hide)?
            .into_iter()
            .map(|m| {
                let count = m.receive_count.unwrap_or_default();
                let sent = m.sent_ms.unwrap_or_default();
                (m.body, count, sent, m.receipt_handle)
            })
            .collect())
    }

    async fn release(&self, queue: &str, handle: &str) -> Result<()> {
        self.0.sqs_release(&self.url(queue), &[handle.to_owned()])?;
        Ok(())
    }

    async fn delete(&self, queue: &str, handle: &str) -> Result<()> {
        self.0.sqs_delete(&self.url(queue), handle)?;
        Ok(())
    }
}

#[tokio::test]
async fn the_models_standard_queue_receives_hides_and_redrives_as_the_emulators_does() -> Result<()>
{
    let dlq_arn = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:dlq");
    let redrive = serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2});
    let redrive = redrive.to_string();

    let world = World::start().await?;
    world.create_queue("dlq").await?;
    world
        .sqs
        .create_queue()
        .queue_name("q")
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy,
            &redrive,
        )
        .send()
        .await?;
    let emulator = script(&Emulator(&world)).await?;

    let model = aws_world::World::new(ACCOUNT, REGION);
    model.create_queue("dlq", &[]);
    model.create_queue("q", &[("RedrivePolicy", &redrive)]);
    let modelled = script(&Model(model)).await?;

    assert_eq!(modelled, emulator);
    // The transcript says what both did: a test of agreement alone would pass on two models
    // wrong alike.
    assert_eq!(
        emulator,
        [
            r#"first: [("a", 1), ("b", 1), ("c", 1)]"#,
            "while hidden: []",
            r#"a and b released: [("a", 2), ("b", 2)]"#,
            "past maxReceiveCount: []",
            r#"a new one: [("d", 1)]"#,
            r#"dead-letter queue: ["a", "b"]"#,
            "sent when first sent: true",
        ]
    );
    Ok(())
}
