//! An SQS event source mapping, played locally: Lambda's poller for the central ingest queue.
//!
//! Like the real one it gathers up to `batch_size` records or waits `batching_window` from the
//! first one, invokes the function with an SQS event, and deletes the records the function
//! handled, each of those decided by [`aws_model::esm`], which the simulation's mapping follows
//! too. Records named in `batchItemFailures` (or the whole batch, if the invocation failed or
//! the answer is one Lambda counts a complete failure) are left alone, as Lambda's poller leaves
//! them: they become visible again when the queue's
//! visibility timeout runs out, or sooner if the function shortened it with
//! ChangeMessageVisibility. Receives use the queue's own visibility timeout, and the records carry
//! what Lambda's do: the real receipt handle, the system `attributes` (ApproximateReceiveCount,
//! SentTimestamp, ApproximateFirstReceiveTimestamp) and `eventSourceARN`. The queue's redrive
//! policy moves a record to the dead-letter queue after `maxReceiveCount` receives, as in AWS
//! (moto implements visibility, receive counts and redrive).
//!
//! Lambda polls with several pollers at once, each invoking its own execution environment;
//! [`EventSourceMapping::drain_with`] plays that with one poller per [`Function`] given. Like
//! Lambda's, a poller long-polls an empty queue ([`LONG_POLL`], shorter than Lambda's 20 s so a
//! drain notices it is idle within a second): short receives every few milliseconds kept the
//! emulator busy answering empty receives for every scene that ran beside it.
//!
//! moto creates the stack's `AWS::Lambda::EventSourceMapping`, and on every message sent to the
//! queue it receives a batch itself and tries to invoke the function in Docker; without Docker
//! that fails and the messages go back, each time counting towards `maxReceiveCount`, until the
//! redrive policy dead-letters them. [`EventSourceMapping::take_over`] therefore disables the
//! mapping in the emulator and plays it here, with the deployed mapping's settings.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};

/// How long a poller's receive waits on an empty queue for a first record.
pub const LONG_POLL: Duration = Duration::from_secs(1);

/// How often a poller asks again for more records while its batching window is open and the
/// queue has none right now. A receive that returns records is followed at once by the next, so
/// this delays only noticing a full batch, never the window's end (the last wait is what remains
/// of it). Every 20 ms was some 40 empty receives per batch, each answered by the emulator and
/// signed by the SDK: 18,000 of the end-to-end suite's 47,000 requests (5,300 at 100 ms).
pub const WINDOW_POLL: Duration = Duration::from_millis(250);
use aws_model::esm::{self, Answer, Batching, Record};
use serde_json::Value;

use super::{function::Function, runtime_api::Invocation};

#[derive(Debug, Clone)]
pub struct EventSourceMapping {
    pub queue_url: String,
    pub queue_arn: String,
    pub batch_size: usize,
    /// How long to gather records after the first one (MaximumBatchingWindowInSeconds).
    pub batching_window: Duration,
    /// How long one invocation may run (the function's timeout).
    pub function_timeout: Duration,
}

/// When [`EventSourceMapping::drain`] stops.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    /// Once this many distinct records (by body) have been handled (deleted), if given. Distinct,
    /// because SQS delivers at least once: a record handled twice must not stand in for one
    /// still waiting out its visibility.
    pub handled: Option<u64>,
    /// Once no record has arrived for this long.
    pub idle: Duration,
}

/// What one drain did.
#[derive(Debug, Default, Clone)]
pub struct Drained {
    pub invocations: u64,
    /// Records passed to the function, retries included.
    pub records: u64,
    /// Records the function handled (deleted from the queue), a record handled twice counted twice.
    pub handled: u64,
    /// The distinct records (by body) the function handled.
    pub handled_bodies: HashSet<String>,
    /// Records handed back by the function (batchItemFailures, or all of a failed invocation).
    pub retried: u64,
    /// Whole invocations that failed or did not answer.
    pub failed_invocations: u64,
    /// Wall time of each invocation, as the poller saw it.
    pub invocation_times: Vec<Duration>,
    /// When each record (by body) first arrived in the queue: its SentTimestamp, ms since epoch.
    pub arrivals: HashMap<String, u64>,
    /// How many times each record (by body) was handed back.
    pub handed_back: HashMap<String, u32>,
}

impl EventSourceMapping {
    /// Disables the event source mappings of `function_name` in the emulator and returns the
    /// ingest queue's (base.yaml's `<stack>-ingest`; the only one unless CentralBus=Enabled adds
    /// the direct queue's) with its queue, BatchSize and MaximumBatchingWindowInSeconds, to be
    /// played here.
    pub async fn take_over(
        lambda: &aws_sdk_lambda::Client,
        sqs: &aws_sdk_sqs::Client,
        function_name: &str,
        function_timeout: Duration,
    ) -> Result<Self> {
        let mut all = Self::take_over_all(lambda, sqs, function_name, function_timeout).await?;
        let ingest = all
            .iter()
            .position(|m| m.queue_arn.ends_with("-ingest"))
            .unwrap_or(0);
        Ok(all.swap_remove(ingest))
    }

    /// Every event source mapping of `function_name`, each disabled in the emulator and returned
    /// to be played here ([`EventSourceMapping::take_over`]).
    pub async fn take_over_all(
        lambda: &aws_sdk_lambda::Client,
        sqs: &aws_sdk_sqs::Client,
        function_name: &str,
        function_timeout: Duration,
    ) -> Result<Vec<Self>> {
        let mappings = lambda
            .list_event_source_mappings()
            .function_name(function_name)
            .send()
            .await?;
        if mappings.event_source_mappings().is_empty() {
            bail!(
                "function {function_name} has no event source mapping (was it deployed from base.yaml?)"
            );
        }
        let mut taken = Vec::new();
        for mapping in mappings.event_source_mappings() {
            if let Some(uuid) = mapping.uuid() {
                lambda
                    .update_event_source_mapping()
                    .uuid(uuid)
                    .enabled(false)
                    .send()
                    .await
                    .context("disabling moto's mapping")?;
            }
            let queue_arn = mapping
                .event_source_arn()
                .context("mapping without a source")?
                .to_owned();
            let queue_name = queue_arn.rsplit(':').next().unwrap_or_default();
            let queue_url = sqs
                .get_queue_url()
                .queue_name(queue_name)
                .send()
                .await?
                .queue_url()
                .context("no queue url")?
                .to_owned();
            taken.push(Self {
                queue_url,
                queue_arn,
                batch_size: mapping.batch_size().unwrap_or(10).max(1) as usize,
                batching_window: Duration::from_secs(
                    mapping
                        .maximum_batching_window_in_seconds()
                        .unwrap_or(0)
                        .max(0) as u64,
                ),
                function_timeout,
            });
        }
        Ok(taken)
    }

    /// Polls and invokes `function` until `stop` says so. `progress` is told how many records
    /// each invocation handled.
    pub async fn drain(
        &self,
        sqs: &aws_sdk_sqs::Client,
        function: &Function,
        stop: Stop,
        progress: impl Fn(u64),
    ) -> Result<Drained> {
        self.drain_with(sqs, &[function], stop, progress).await
    }

    /// Like [`drain`](Self::drain), with one poller per function, all at once: an invocation
    /// that is still retrying does not hold the next batch back, as in Lambda.
    pub async fn drain_with(
        &self,
        sqs: &aws_sdk_sqs::Client,
        functions: &[&Function],
        stop: Stop,
        progress: impl Fn(u64),
    ) -> Result<Drained> {
        let shared = Shared {
            drained: Mutex::default(),
            last_arrival: Mutex::new(Instant::now()),
        };
        let pollers = functions
            .iter()
            .map(|function| self.poll(sqs, function, stop, &shared, &progress));
        for result in futures_util::future::join_all(pollers).await {
            result?;
        }
        Ok(shared.drained.into_inner().unwrap())
    }

    /// One poller: receive a batch, invoke, delete what was handled, until `stop`.
    async fn poll(
        &self,
        sqs: &aws_sdk_sqs::Client,
        function: &Function,
        stop: Stop,
        shared: &Shared,
        progress: &impl Fn(u64),
    ) -> Result<()> {
        loop {
            let handled = shared.drained.lock().unwrap().handled_bodies.len() as u64;
            if stop.handled.is_some_and(|n| handled >= n) {
                return Ok(());
            }
            let batch = self.gather(sqs).await?;
            if batch.is_empty() {
                if shared.last_arrival.lock().unwrap().elapsed() >= stop.idle {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            *shared.last_arrival.lock().unwrap() = Instant::now();
            {
                let mut drained = shared.drained.lock().unwrap();
                for m in &batch {
                    let sent = m
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_default();
                    drained
                        .arrivals
                        .entry(m.body().unwrap_or_default().to_owned())
                        .or_insert(sent);
                }
            }

            let started = Instant::now();
            let invocation = function
                .invoke(
                    sqs_event(&batch, &self.queue_arn).to_string(),
                    self.function_timeout,
                )
                .await;
            let took = started.elapsed();

            let ids: Vec<&str> = batch.iter().filter_map(Message::message_id).collect();
            let response = match &invocation {
                // An empty response is Lambda's "empty EventResponse": a complete success.
                Invocation::Response(body) if body.is_empty() => Some(Value::Null),
                _ => invocation.json(),
            };
            let left = esm::left(
                match invocation {
                    Invocation::Response(_) => Answer::Response(response.as_ref()),
                    _ => Answer::Error,
                },
                &ids,
            );
            // What the mapping leaves is left to its visibility timeout (or to the function's
            // ChangeMessageVisibility), as Lambda's poller leaves it.
            let stays = |m: &Message| left.keeps(m.message_id().unwrap_or_default());
            let done: Vec<&Message> = batch.iter().filter(|m| !stays(m)).collect();
            self.delete(sqs, &done).await?;
            {
                let mut drained = shared.drained.lock().unwrap();
                drained.invocation_times.push(took);
                drained.invocations += 1;
                drained.records += batch.len() as u64;
                if !matches!(invocation, Invocation::Response(_)) {
                    drained.failed_invocations += 1;
                }
                drained.retried += (batch.len() - done.len()) as u64;
                for m in batch.iter().filter(|m| stays(m)) {
                    *drained
                        .handed_back
                        .entry(m.body().unwrap_or_default().to_owned())
                        .or_default() += 1;
                }
                drained.handled += done.len() as u64;
                drained
                    .handled_bodies
                    .extend(done.iter().map(|m| m.body().unwrap_or_default().to_owned()));
            }
            progress(done.len() as u64);
        }
    }

    /// Receives until the batch is full, or the batching window since the first record has passed,
    /// or (with no window) the queue has nothing more right now.
    async fn gather(&self, sqs: &aws_sdk_sqs::Client) -> Result<Vec<Message>> {
        let mut batch: Vec<Message> = Vec::with_capacity(self.batch_size);
        let mut first = None;
        while batch.len() < self.batch_size {
            let want = (self.batch_size - batch.len()).min(10) as i32;
            // Waits for the batch's first record; the rest are gathered as the window allows.
            let wait = if first.is_none() {
                LONG_POLL
            } else {
                Duration::ZERO
            };
            let out = sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(want)
                .wait_time_seconds(wait.as_secs() as i32)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .message_attribute_names("All")
                .send()
                .await
                .context("ReceiveMessage from the mapping's queue")?;
            if !out.messages().is_empty() {
                first.get_or_insert_with(Instant::now);
                batch.extend(out.messages().iter().cloned());
                continue;
            }
            let batching = Batching {
                size: self.batch_size,
                window: self.batching_window,
            };
            match first.and_then(|at: Instant| batching.left(batch.len(), at.elapsed())) {
                Some(left) => tokio::time::sleep(WINDOW_POLL.min(left)).await,
                None => break,
            }
        }
        Ok(batch)
    }

    async fn delete(&self, sqs: &aws_sdk_sqs::Client, messages: &[&Message]) -> Result<()> {
        for chunk in messages.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .set_receipt_handle(m.receipt_handle().map(str::to_owned))
                        .build()
                        .ok()
                })
                .collect();
            sqs.delete_message_batch()
                .queue_url(&self.queue_url)
                .set_entries(Some(entries))
                .send()
                .await
                .context("DeleteMessageBatch")?;
        }
        Ok(())
    }
}

/// What the pollers of one drain share.
struct Shared {
    drained: Mutex<Drained>,
    last_arrival: Mutex<Instant>,
}

/// An SQS event as Lambda builds it from received messages ([`esm::sqs_event`]).
pub fn sqs_event(messages: &[Message], queue_arn: &str) -> Value {
    esm::sqs_event(messages.iter().map(|m| {
        let mut attributes: Vec<(String, String)> = m
            .attributes()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
            .collect();
        attributes.sort();
        Record {
            message_id: m.message_id().unwrap_or_default(),
            receipt_handle: m.receipt_handle().unwrap_or_default(),
            body: m.body().unwrap_or_default(),
            attributes,
            md5_of_body: m.md5_of_body().unwrap_or_default(),
            queue_arn,
            region: super::moto::REGION,
        }
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::EventSourceMapping;
    use crate::moto::MotoServer;

    async fn send(sqs: &aws_sdk_sqs::Client, url: &str, bodies: &[&str]) {
        for body in bodies {
            sqs.send_message()
                .queue_url(url)
                .message_body(*body)
                .send()
                .await
                .unwrap();
        }
    }

    /// A batch holds what arrives while its window is open (the poller asks again, every
    /// `WINDOW_POLL`, on a queue that had none a moment before), and goes at once when full.
    #[tokio::test]
    async fn a_batch_takes_what_arrives_in_its_window_and_goes_when_full() {
        let moto = MotoServer::start().await.unwrap();
        let sqs = aws_sdk_sqs::Client::new(&moto.sdk_config().await);
        let url = sqs
            .create_queue()
            .queue_name("ingest")
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_owned();
        let mut mapping = EventSourceMapping {
            queue_url: url.clone(),
            queue_arn: "arn:aws:sqs:us-east-1:123456789012:ingest".into(),
            batch_size: 100,
            // Long enough that the later sends land inside it on a busy machine.
            batching_window: Duration::from_secs(5),
            function_timeout: Duration::from_secs(30),
        };
        send(&sqs, &url, &["a", "b"]).await;
        let later = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            send(&sqs, &url, &["c", "d", "e"]).await;
        };
        let (batch, ()) = tokio::join!(mapping.gather(&sqs), later);
        let batch = batch.unwrap();
        let mut bodies: Vec<&str> = batch.iter().filter_map(|m| m.body()).collect();
        bodies.sort();
        assert_eq!(bodies, ["a", "b", "c", "d", "e"]);

        // A window no test waits out: a full batch must not wait for it.
        mapping.batch_size = 3;
        mapping.batching_window = Duration::from_secs(600);
        send(&sqs, &url, &["f", "g", "h", "i"]).await;
        let batch = tokio::time::timeout(Duration::from_secs(60), mapping.gather(&sqs))
            .await
            .expect("a full batch waits for no window");
        assert_eq!(batch.unwrap().len(), 3);
        moto.stop().await;
    }
}
