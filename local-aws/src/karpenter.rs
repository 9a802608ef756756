//! Karpenter's interruption controller, as far as its queue goes: how `routerctl adopt`'s tests
//! and demo play each cluster's Karpenter, with the timing that matters kept in.
//!
//! * It long-polls the one queue its settings name (`settings.interruptionQueue`), 20 s at a time
//!   and up to 10 messages, as Karpenter's SQS provider does ([`Behaviour::receive_wait`]); a long
//!   poll returns as soon as a message arrives. It records every event it reads (id, instances)
//!   and deletes every message, its cluster's or not, parsable or not, as Karpenter does.
//! * [`Karpenter::point_at`] is a helm upgrade that sets `settings.interruptionQueue` (or a GitOps
//!   controller setting it back, or one run in the wrong kube-context): the running leader
//!   finishes the receive it is in, reads what the old queue held when it was told (what was sent
//!   until then), and stops; the new leader starts on the new queue [`Behaviour::handover`] after
//!   the change (it takes the lease). `point_at` returns once the old leader has stopped, as
//!   `kubectl rollout status` would.
//! * What it receives and deletes, SQS counts in CloudWatch per minute and minutes late, with
//!   every other caller's: the emulator reports that itself (`moto_fixes/`,
//!   [`crate::moto::MotoServer::set_sqs_metric_delay`]).
//!
//! * [`Karpenter::start_as`] reads as its controller role: from a queue whose policy admits that
//!   role as a reader, and under a KMS key only what KMS lets that role decrypt
//!   ([`crate::reader`]); a refused receive reads nothing, is kept in [`Karpenter::refusals`]
//!   (Karpenter logs the error) and is tried again a second later.
//!
//! [`Karpenter::reading_at`] says which queue it was pointed at when an event was sent, so a test
//! can tell whether each event reached the queue Karpenter was reading.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use serde_json::Value;
use tokio::task::JoinHandle;

use aws_clients::aws::{Aws, describe, queue_url};

/// What [`Karpenter::stop`] sends to wake its leader's long poll: deleted, never a read.
const WAKE: &str = r#"{"stand-in":"stop: wakes the long poll"}"#;

/// One event Karpenter read.
#[derive(Debug, Clone)]
pub struct Read {
    pub id: String,
    pub queue: String,
    pub instances: Vec<String>,
}

/// Karpenter's timing.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// One long poll (Karpenter: 20 s).
    pub receive_wait: Duration,
    /// From a settings change to the new leader's first receive.
    pub handover: Duration,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            receive_wait: Duration::from_secs(20),
            handover: Duration::from_secs(2),
        }
    }
}

struct Reader {
    queue: String,
    url: String,
    stop: Arc<AtomicBool>,
    task: JoinHandle<Result<()>>,
}

pub struct Karpenter {
    aws: Aws,
    behaviour: Behaviour,
    /// The controller role it reads as, if its key use is judged.
    role: Option<String>,
    reads: Arc<Mutex<Vec<Read>>>,
    refusals: Arc<Mutex<Vec<String>>>,
    current: Option<Reader>,
    /// When it was pointed at each queue, in order.
    switches: Vec<(Instant, String)>,
}

impl Karpenter {
    /// A Karpenter reading `queue` (a name) from now on.
    pub async fn start(aws: &Aws, queue: &str, behaviour: Behaviour) -> Result<Self> {
        Self::started(aws, queue, behaviour, None).await
    }

    /// A Karpenter reading `queue` as its controller role `role` (an ARN): a queue under a KMS key
    /// gives it only what KMS lets the role decrypt.
    pub async fn start_as(
        aws: &Aws,
        queue: &str,
        behaviour: Behaviour,
        role: &str,
    ) -> Result<Self> {
        Self::started(aws, queue, behaviour, Some(role.to_owned())).await
    }

    async fn started(
        aws: &Aws,
        queue: &str,
        behaviour: Behaviour,
        role: Option<String>,
    ) -> Result<Self> {
        let mut karpenter = Self {
            aws: aws.clone(),
            behaviour,
            role,
            refusals: Arc::default(),
            reads: Arc::default(),
            current: None,
            switches: Vec::new(),
        };
        karpenter.start_reader(queue, Duration::ZERO).await?;
        Ok(karpenter)
    }

    /// `settings.interruptionQueue` set to `queue` (a helm upgrade, or a GitOps controller): the
    /// old leader stops once it has read what was sent before now, the new one starts on `queue`
    /// after the handover.
    pub async fn point_at(&mut self, queue: &str) -> Result<()> {
        let previous = self.current.take();
        self.start_reader(queue, self.behaviour.handover).await?;
        if let Some(previous) = previous {
            previous.stop.store(true, Ordering::SeqCst);
            previous.task.await??;
        }
        Ok(())
    }

    async fn start_reader(&mut self, queue: &str, after: Duration) -> Result<()> {
        let url = queue_url(&self.aws.sqs, queue)
            .await
            .with_context(|| format!("Karpenter cannot find queue {queue}"))?;
        self.switches.push((Instant::now(), queue.to_owned()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader_url = url.clone();
        let reader = Leader {
            aws: self.aws.clone(),
            queue: queue.to_owned(),
            url,
            reads: self.reads.clone(),
            role: self.role.clone(),
            refusals: self.refusals.clone(),
            stop: stop.clone(),
            wait: self.behaviour.receive_wait,
        };
        let task = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            reader.run().await
        });
        self.current = Some(Reader {
            queue: queue.to_owned(),
            url: reader_url,
            stop,
            task,
        });
        Ok(())
    }

    /// The queue it reads now.
    pub fn reading(&self) -> Option<&str> {
        self.current.as_ref().map(|r| r.queue.as_str())
    }

    /// The queue it was pointed at, at `at`.
    pub fn reading_at(&self, at: Instant) -> Option<&str> {
        self.switches
            .iter()
            .rev()
            .find(|(since, _)| *since <= at)
            .map(|(_, queue)| queue.as_str())
    }

    pub fn reads(&self) -> Vec<Read> {
        self.reads.lock().unwrap().clone()
    }

    /// The receives SQS refused it (the error code and why), in order.
    pub fn refusals(&self) -> Vec<String> {
        self.refusals.lock().unwrap().clone()
    }

    /// Stops reading once the current queue holds nothing sent before now.
    ///
    /// The leader is in a long poll, which on a quiet queue returns only when its 20 s are up.
    /// A long poll returns once a message is there, so the stop sends one ([`WAKE`]): everything
    /// sent before it is already there to be read, and it is not recorded as a read. (A helm
    /// upgrade, [`Karpenter::point_at`], lets the old leader finish its poll, as the pod would.)
    pub async fn stop(&mut self) -> Result<()> {
        if let Some(reader) = self.current.take() {
            reader.stop.store(true, Ordering::SeqCst);
            // A queue deleted under it ends its reader by itself; else the poll runs its course.
            let _ = self
                .aws
                .sqs
                .send_message()
                .queue_url(&reader.url)
                .message_body(WAKE)
                .send()
                .await;
            reader.task.await??;
        }
        Ok(())
    }
}

/// The leader's interruption controller on one queue.
struct Leader {
    aws: Aws,
    queue: String,
    url: String,
    reads: Arc<Mutex<Vec<Read>>>,
    role: Option<String>,
    refusals: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    wait: Duration,
}

impl Leader {
    /// Reads until stopped and the queue holds nothing sent before the stop: after the stop, a
    /// receive that comes back empty, or with only messages sent after it (those it leaves to
    /// whoever reads next, as a stopping pod that no longer reconciles would).
    async fn run(self) -> Result<()> {
        let mut stopped_at: Option<u64> = None;
        loop {
            if stopped_at.is_none() && self.stop.load(Ordering::SeqCst) {
                stopped_at = Some(unix_millis(SystemTime::now()));
            }
            // Stopping, it no longer waits for new messages.
            let wait = if stopped_at.is_some() {
                Duration::from_secs(1)
            } else {
                self.wait
            };
            // SQS lets the caller receive and decrypts for it, or refuses the receive; Karpenter
            // logs the error and tries again.
            if let Some(role) = &self.role
                && let Some(refused) =
                    crate::reader::receive_refused(&self.aws, &self.url, role).await
            {
                self.refusals.lock().unwrap().push(refused);
                if stopped_at.is_some() {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            let received = self
                .aws
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                .max_number_of_messages(10)
                .visibility_timeout(20)
                .wait_time_seconds(wait.as_secs() as i32)
                .send()
                .await;
            let out = match received {
                Ok(out) => out,
                // Deleted under it: Karpenter logs errors and reads nothing more from it.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_queue_does_not_exist()) =>
                {
                    return Ok(());
                }
                Err(e) => bail!("ReceiveMessage {}: {}", self.queue, describe(&e)),
            };
            let sent_before_stop = |m: &aws_sdk_sqs::types::Message| {
                let sent = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                    .and_then(|t| t.parse::<u64>().ok());
                match (sent, stopped_at) {
                    (Some(sent), Some(at)) => sent <= at + 1000,
                    _ => true,
                }
            };
            let mine: Vec<_> = out
                .messages()
                .iter()
                .filter(|m| sent_before_stop(m))
                .collect();
            if stopped_at.is_some() && mine.is_empty() {
                self.release(out.messages()).await;
                return Ok(());
            }
            if mine.len() < out.messages().len() {
                let later: Vec<_> = out
                    .messages()
                    .iter()
                    .filter(|m| !sent_before_stop(m))
                    .cloned()
                    .collect();
                self.release(&later).await;
            }
            if mine.is_empty() {
                continue;
            }
            let mut entries = Vec::new();
            for (n, message) in mine.iter().enumerate() {
                entries.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(n.to_string())
                        .set_receipt_handle(message.receipt_handle().map(str::to_owned))
                        .build()?,
                );
                if message.body() == Some(WAKE) {
                    continue;
                }
                let body: Value =
                    serde_json::from_str(message.body().unwrap_or_default()).unwrap_or(Value::Null);
                self.reads.lock().unwrap().push(Read {
                    id: body["id"].as_str().unwrap_or_default().to_owned(),
                    queue: self.queue.clone(),
                    instances: instances(&body),
                });
            }
            self.aws
                .sqs
                .delete_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    anyhow::anyhow!("DeleteMessageBatch {}: {}", self.queue, describe(&e))
                })?;
        }
    }

    /// Makes messages a stopping leader received but leaves to the next reader visible again.
    async fn release(&self, messages: &[aws_sdk_sqs::types::Message]) {
        for message in messages {
            if let Some(handle) = message.receipt_handle() {
                let _ = self
                    .aws
                    .sqs
                    .change_message_visibility()
                    .queue_url(&self.url)
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .send()
                    .await;
            }
        }
    }
}

fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// The instances an event names, where Karpenter looks for them: `detail.instance-id`, or a
/// Health event's `detail.affectedEntities[].entityValue`.
pub fn instances(event: &Value) -> Vec<String> {
    let detail = &event["detail"];
    match detail["instance-id"].as_str() {
        Some(id) => vec![id.to_owned()],
        None => detail["affectedEntities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["entityValue"].as_str().map(str::to_owned))
            .collect(),
    }
}
