//! Redeliver: what happens to a record the router hands back to the ingest queue.
//!
//! Lambda's event source mapping leaves a record named in `batchItemFailures` in the queue, where
//! it becomes visible again when its visibility timeout runs out: the ingest queue's 180 s,
//! counted from when Lambda received it. Two minutes is all a spot warning gives, so before handing
//! a record back the router shortens that with ChangeMessageVisibilityBatch to
//! [`retry::redelivery_delay`] of the record's receive count: seconds after a brief failure, up to
//! a minute after many. If that call fails the record is still handed back and waits the queue's
//! timeout, which is slower but loses nothing.
//!
//! It also reads the queue's redrive policy: on a record's last receive, SQS would move it to the
//! DLQ without saying why, so the handler dead-letters it itself with the reason it failed. The
//! read is bounded by the caller's deadline (an SQS slowdown must not hold a batch of forwarded
//! records past the invocation's end), a failed read is remembered for [`READ_FAILURE_MEMORY`] so
//! the next batches do not wait on it again, and a good answer is refreshed after
//! [`POLICY_REFRESH`] (a lowered `maxReceiveCount` would otherwise redrive records without a
//! reason). While it cannot be read, the last answer is used, or none: then no receive counts as
//! the last, and SQS's redrive stays the backstop.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use tokio::time::Instant;

use aws_sdk_sqs::{
    error::DisplayErrorContext,
    types::{ChangeMessageVisibilityBatchRequestEntry, QueueAttributeName},
};
use serde::Deserialize;

use crate::accounts::partition;

/// ChangeMessageVisibilityBatch takes at most 10 entries.
const MAX_ENTRIES: usize = 10;
/// How long a read redrive policy is used before it is read again.
pub const POLICY_REFRESH: Duration = Duration::from_secs(300);
/// How long a failed read is not retried.
pub const READ_FAILURE_MEMORY: Duration = Duration::from_secs(30);

/// Where an SQS record came from, as the event source mapping describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqsOrigin<'a> {
    /// `eventSourceARN`: the ingest queue.
    pub queue_arn: &'a str,
    pub receipt_handle: &'a str,
    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
    /// `ApproximateFirstReceiveTimestamp`, ms since the epoch, when the mapping passed it.
    pub first_receive_ms: Option<i64>,
}

/// One record to hand back, and how long it should stay invisible.
#[derive(Debug, Clone, Copy)]
pub struct HandBack<'a> {
    pub origin: SqsOrigin<'a>,
    pub delay: Duration,
}

/// Calls and results of one hand-back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HandBackStats {
    pub calls: u64,
    pub changed: u64,
    pub failed: u64,
}

pub struct Redeliver {
    sqs: aws_sdk_sqs::Client,
    max_receives: Mutex<HashMap<String, RedriveRead>>,
}

/// What is known of one queue's redrive policy.
#[derive(Debug, Clone, Copy, Default)]
struct RedriveRead {
    /// The last good answer (`None` inside: the queue has no redrive policy), and when.
    known: Option<(Option<u32>, Instant)>,
    /// When a read last failed.
    failed_at: Option<Instant>,
}

impl RedriveRead {
    fn last_answer(&self) -> Option<u32> {
        self.known.and_then(|(max, _)| max)
    }
}

impl Redeliver {
    /// `sqs` is the function's own client: the ingest queue is in its account and region.
    pub fn new(sqs: aws_sdk_sqs::Client) -> Self {
        Self {
            sqs,
            max_receives: Mutex::default(),
        }
    }

    /// The queue's redrive `maxReceiveCount`, read at most every [`POLICY_REFRESH`] and waited
    /// for until `deadline` at the latest; `None` without a redrive policy or when it has never
    /// been read (then no receive is treated as the last).
    pub async fn max_receive_count(&self, queue_arn: &str, deadline: Instant) -> Option<u32> {
        let read = self
            .max_receives
            .lock()
            .unwrap()
            .get(queue_arn)
            .copied()
            .unwrap_or_default();
        let fresh = read
            .known
            .is_some_and(|(_, at)| at.elapsed() < POLICY_REFRESH);
        let failed_lately = read
            .failed_at
            .is_some_and(|at| at.elapsed() < READ_FAILURE_MEMORY);
        if fresh || failed_lately {
            return read.last_answer();
        }
        let url = queue_url(queue_arn)?;
        let request = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .send();
        let result = match tokio::time::timeout_at(deadline, request).await {
            Ok(Ok(out)) => Ok(out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
                .and_then(|policy| serde_json::from_str::<RedrivePolicy>(policy).ok())
                .map(|p| p.max_receive_count.0)),
            Ok(Err(e)) => Err(DisplayErrorContext(&e).to_string()),
            Err(_) => Err("no answer within the invocation's budget".to_owned()),
        };
        let mut reads = self.max_receives.lock().unwrap();
        let entry = reads.entry(queue_arn.to_owned()).or_default();
        match result {
            Ok(max) => {
                *entry = RedriveRead {
                    known: Some((max, Instant::now())),
                    failed_at: None,
                };
                max
            }
            Err(error) => {
                entry.failed_at = Some(Instant::now());
                tracing::warn!(queue = queue_arn, %error, last_known = ?entry.last_answer(), "could not read the ingest queue's redrive policy");
                entry.last_answer()
            }
        }
    }

    /// Sets each record's visibility to its delay; returns, per record in order, whether SQS
    /// confirmed it.
    pub async fn hand_back(
        &self,
        records: &[HandBack<'_>],
        stats: &mut HandBackStats,
    ) -> Vec<bool> {
        let mut confirmed = vec![false; records.len()];
        let mut by_queue: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, r) in records.iter().enumerate() {
            by_queue.entry(r.origin.queue_arn).or_default().push(i);
        }
        for (queue_arn, positions) in by_queue {
            let Some(url) = queue_url(queue_arn) else {
                tracing::warn!(
                    queue = queue_arn,
                    "eventSourceARN is not an SQS queue ARN: records wait out the visibility timeout"
                );
                stats.failed += positions.len() as u64;
                continue;
            };
            for chunk in positions.chunks(MAX_ENTRIES) {
                let entries = chunk
                    .iter()
                    .map(|&i| {
                        ChangeMessageVisibilityBatchRequestEntry::builder()
                            .id(i.to_string())
                            .receipt_handle(records[i].origin.receipt_handle)
                            .visibility_timeout(records[i].delay.as_secs().min(43_200) as i32)
                            .build()
                    })
                    .collect::<Result<Vec<_>, _>>();
                let entries = match entries {
                    Ok(entries) => entries,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not build ChangeMessageVisibilityBatch");
                        stats.failed += chunk.len() as u64;
                        continue;
                    }
                };
                stats.calls += 1;
                match self
                    .sqs
                    .change_message_visibility_batch()
                    .queue_url(&url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                {
                    Ok(out) => {
                        for ok in out.successful() {
                            if let Some(i) =
                                ok.id().parse::<usize>().ok().filter(|i| chunk.contains(i))
                            {
                                confirmed[i] = true;
                            }
                        }
                        for failed in out.failed() {
                            tracing::warn!(
                                entry = failed.id(),
                                code = failed.code(),
                                message = failed.message().unwrap_or_default(),
                                "SQS did not change a handed-back record's visibility: it waits out the visibility timeout"
                            );
                        }
                    }
                    Err(e) => {
                        tracing::warn!(queue = queue_arn, records = chunk.len(), error = %DisplayErrorContext(&e), "ChangeMessageVisibilityBatch failed: handed-back records wait out the visibility timeout");
                    }
                }
            }
        }
        let changed = confirmed.iter().filter(|c| **c).count() as u64;
        stats.changed += changed;
        stats.failed += records.len() as u64 - changed;
        confirmed
    }
}

/// The URL of an SQS queue from its ARN (`arn:<partition>:sqs:<region>:<account>:<name>`), in the
/// form SQS itself returns.
pub fn queue_url(arn: &str) -> Option<String> {
    let mut parts = arn.splitn(6, ':');
    let (prefix, partition_name, service) = (parts.next()?, parts.next()?, parts.next()?);
    let (region, account, name) = (parts.next()?, parts.next()?, parts.next()?);
    if prefix != "arn"
        || service != "sqs"
        || region.is_empty()
        || account.is_empty()
        || name.is_empty()
    {
        return None;
    }
    let suffix = match partition_name {
        "aws-cn" => "amazonaws.com.cn",
        "aws-iso" => "c2s.ic.gov",
        "aws-iso-b" => "sc2s.sgov.gov",
        "aws-eusc" => "amazonaws.eu",
        _ if partition(region) == "aws-cn" => "amazonaws.com.cn",
        _ => "amazonaws.com",
    };
    Some(format!("https://sqs.{region}.{suffix}/{account}/{name}"))
}

#[derive(Deserialize)]
struct RedrivePolicy {
    #[serde(rename = "maxReceiveCount")]
    max_receive_count: Count,
}

/// SQS returns `maxReceiveCount` as a number or a string, depending on how it was set.
struct Count(u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u32),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(Count(n)),
            Raw::Text(t) => t
                .trim()
                .parse()
                .map(Count)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_come_from_arns() {
        assert_eq!(
            queue_url("arn:aws:sqs:eu-west-1:123456789012:ir-ingest").as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/123456789012/ir-ingest")
        );
        assert_eq!(
            queue_url("arn:aws-cn:sqs:cn-north-1:123456789012:q").as_deref(),
            Some("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q")
        );
        assert_eq!(queue_url("arn:aws:sns:us-east-1:123456789012:t"), None);
        assert_eq!(queue_url("ir-ingest"), None);
        assert_eq!(queue_url("arn:aws:sqs:us-east-1::q"), None);
    }

    #[test]
    fn redrive_counts_parse_as_numbers_or_text() {
        let parse = |s: &str| {
            serde_json::from_str::<RedrivePolicy>(s)
                .map(|p| p.max_receive_count.0)
                .ok()
        };
        assert_eq!(
            parse(r#"{"deadLetterTargetArn":"arn:x","maxReceiveCount":20}"#),
            Some(20)
        );
        assert_eq!(
            parse(r#"{"deadLetterTargetArn":"arn:x","maxReceiveCount":"5"}"#),
            Some(5)
        );
        assert_eq!(parse(r#"{"deadLetterTargetArn":"arn:x"}"#), None);
    }
}
