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
//! It also reads the queue's redrive policy (once per queue per process): on a record's last
//! receive, SQS would move it to the DLQ without saying why, so the handler dead-letters it itself
//! with the reason it failed.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::Duration,
};

use aws_sdk_sqs::{
    error::DisplayErrorContext,
    types::{ChangeMessageVisibilityBatchRequestEntry, QueueAttributeName},
};
use serde::Deserialize;

use crate::accounts::partition;

/// ChangeMessageVisibilityBatch takes at most 10 entries.
const MAX_ENTRIES: usize = 10;

/// Where an SQS record came from, as the event source mapping describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqsOrigin<'a> {
    /// `eventSourceARN`: the ingest queue.
    pub queue_arn: &'a str,
    pub receipt_handle: &'a str,
    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
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
    max_receives: Mutex<HashMap<String, Option<u32>>>,
}

impl Redeliver {
    /// `sqs` is the function's own client: the ingest queue is in its account and region.
    pub fn new(sqs: aws_sdk_sqs::Client) -> Self {
        Self {
            sqs,
            max_receives: Mutex::default(),
        }
    }

    /// The queue's redrive `maxReceiveCount`, read once; `None` without a redrive policy or when
    /// it could not be read (then no receive is treated as the last).
    pub async fn max_receive_count(&self, queue_arn: &str) -> Option<u32> {
        if let Some(known) = self.max_receives.lock().unwrap().get(queue_arn) {
            return *known;
        }
        let url = queue_url(queue_arn)?;
        let read = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .send()
            .await;
        let max = match read {
            Ok(out) => out
                .attributes()
                .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
                .and_then(|policy| serde_json::from_str::<RedrivePolicy>(policy).ok())
                .map(|p| p.max_receive_count.0),
            Err(e) => {
                tracing::warn!(queue = queue_arn, error = %DisplayErrorContext(&e), "could not read the ingest queue's redrive policy");
                return None;
            }
        };
        self.max_receives
            .lock()
            .unwrap()
            .insert(queue_arn.to_owned(), max);
        max
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
