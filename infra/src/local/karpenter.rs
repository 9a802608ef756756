//! Karpenter's interruption controller, as far as its queue goes: how `routerctl adopt`'s test and
//! demo play each cluster's Karpenter. It long-polls the one queue its settings name
//! (`settings.interruptionQueue`), up to 10 messages at a time, records every event it reads (id
//! and instances) and deletes every message, its cluster's or not, as Karpenter does.
//!
//! [`Karpenter::point_at`] is the helm upgrade: a reader starts on the new queue, and the reader
//! of the old one stops once it finds that queue empty. In a real rollout the old leader stops
//! and the new one takes the lease seconds later; the old reader's last pass stands for "what the
//! old queue held when Karpenter left it", so a test can tell whether each event reached the
//! queue Karpenter was reading when the event was sent.
//!
//! moto reports no SQS metrics. adopt sees Karpenter consuming a queue by SQS's
//! `NumberOfMessagesDeleted`, so the reader also puts the datapoint SQS would report for each
//! batch it deletes (namespace AWS/SQS, dimension QueueName).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Result, bail};
use aws_sdk_cloudwatch::{
    primitives::DateTime,
    types::{Dimension, MetricDatum, StandardUnit},
};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::aws::{Aws, describe};

/// One event Karpenter read.
#[derive(Debug, Clone)]
pub struct Read {
    pub id: String,
    pub queue: String,
    pub instances: Vec<String>,
}

struct Reader {
    queue: String,
    stop: Arc<AtomicBool>,
    task: JoinHandle<Result<()>>,
}

pub struct Karpenter {
    aws: Aws,
    reads: Arc<Mutex<Vec<Read>>>,
    current: Option<Reader>,
    /// When it was pointed at each queue, in order.
    switches: Vec<(Instant, String)>,
}

impl Karpenter {
    /// A Karpenter reading `queue` (a name) from now on.
    pub async fn start(aws: &Aws, queue: &str) -> Result<Self> {
        let mut karpenter = Self {
            aws: aws.clone(),
            reads: Arc::default(),
            current: None,
            switches: Vec::new(),
        };
        karpenter.point_at(queue).await?;
        Ok(karpenter)
    }

    /// The helm upgrade that sets `settings.interruptionQueue` to `queue`.
    pub async fn point_at(&mut self, queue: &str) -> Result<()> {
        let url = self
            .aws
            .sqs
            .get_queue_url()
            .queue_name(queue)
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("Karpenter cannot find queue {queue}: {}", describe(&e)))?
            .queue_url()
            .unwrap_or_default()
            .to_owned();
        self.switches.push((Instant::now(), queue.to_owned()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(read(
            self.aws.clone(),
            queue.to_owned(),
            url,
            self.reads.clone(),
            stop.clone(),
        ));
        let previous = self.current.replace(Reader {
            queue: queue.to_owned(),
            stop,
            task,
        });
        if let Some(previous) = previous {
            previous.stop.store(true, Ordering::SeqCst);
            previous.task.await??;
        }
        Ok(())
    }

    /// The queue it reads now.
    pub fn reading(&self) -> Option<&str> {
        self.current.as_ref().map(|r| r.queue.as_str())
    }

    /// The queue it was reading at `at`.
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

    /// Stops reading once the current queue is empty.
    pub async fn stop(&mut self) -> Result<()> {
        if let Some(reader) = self.current.take() {
            reader.stop.store(true, Ordering::SeqCst);
            reader.task.await??;
        }
        Ok(())
    }
}

/// Reads `url` until `stop` is set and the queue holds nothing sent before then: a receive comes
/// back empty, or with only messages sent more than a second after the stop (the queue keeps
/// filling while its rules are enabled).
async fn read(
    aws: Aws,
    queue: String,
    url: String,
    reads: Arc<Mutex<Vec<Read>>>,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let mut stopped_at: Option<u64> = None;
    loop {
        if stopped_at.is_none() && stop.load(Ordering::SeqCst) {
            stopped_at = Some(unix_millis(SystemTime::now()));
        }
        let received = aws
            .sqs
            .receive_message()
            .queue_url(&url)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .max_number_of_messages(10)
            .wait_time_seconds(RECEIVE_WAIT.as_secs() as i32)
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
            Err(e) => bail!("ReceiveMessage {queue}: {}", describe(&e)),
        };
        let messages = out.messages();
        let sent_after_stop = |m: &&aws_sdk_sqs::types::Message| {
            let sent = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                .and_then(|t| t.parse::<u64>().ok());
            matches!((sent, stopped_at), (Some(sent), Some(at)) if sent > at + 1000)
        };
        if stopped_at.is_some() && messages.iter().all(|m| sent_after_stop(&m)) {
            return Ok(());
        }
        if messages.is_empty() {
            continue;
        }
        let mut entries = Vec::new();
        for (n, message) in messages.iter().enumerate() {
            let body: Value =
                serde_json::from_str(message.body().unwrap_or_default()).unwrap_or(Value::Null);
            reads.lock().unwrap().push(Read {
                id: body["id"].as_str().unwrap_or_default().to_owned(),
                queue: queue.clone(),
                instances: instances(&body),
            });
            entries.push(
                DeleteMessageBatchRequestEntry::builder()
                    .id(n.to_string())
                    .set_receipt_handle(message.receipt_handle().map(str::to_owned))
                    .build()?,
            );
        }
        let deleted = aws
            .sqs
            .delete_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("DeleteMessageBatch {queue}: {}", describe(&e)))?;
        report_deleted(&aws, &queue, deleted.successful().len()).await?;
    }
}

/// What SQS reports to CloudWatch for `count` messages deleted from `queue` now (moto reports
/// nothing).
pub async fn report_deleted(aws: &Aws, queue: &str, count: usize) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    aws.cloudwatch
        .put_metric_data()
        .namespace("AWS/SQS")
        .metric_data(
            MetricDatum::builder()
                .metric_name("NumberOfMessagesDeleted")
                .dimensions(Dimension::builder().name("QueueName").value(queue).build())
                .timestamp(DateTime::from(SystemTime::now()))
                .value(count as f64)
                .unit(StandardUnit::Count)
                .build(),
        )
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("PutMetricData AWS/SQS: {}", describe(&e)))?;
    Ok(())
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

/// How long a reader waits for messages per receive (SQS long polling).
pub const RECEIVE_WAIT: Duration = Duration::from_secs(1);
