//! Redeliver: what happens to a record the router hands back to the ingest queue.
//!
//! Lambda's event source mapping leaves a record named in `batchItemFailures` in the queue, where
//! it becomes visible again when its visibility timeout runs out: the ingest queue's 180 s,
//! counted from when Lambda received it. Two minutes is all a spot warning gives, so before handing
//! a record back the router shortens that with ChangeMessageVisibilityBatch to
//! [`crate::retry::redelivery_delay`] of the record's receive count: seconds after a brief
//! failure, up to a minute after many. If that call fails the record is still handed back and
//! waits the queue's timeout, which is slower but loses nothing.
//!
//! Which receive is the last is configuration, not a reading: base.yaml gives the function the
//! ingest queue's `maxReceiveCount` (`MAX_RECEIVE_COUNT`) from the same value it sets on the
//! queue's redrive policy, so every execution environment knows it from its first invocation and
//! no SQS slowdown can hide it.

use std::time::Duration;

use crate::{
    accounts::Place,
    aws::{Aws, EntryResult, VisibilityEntry},
};

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

/// Sets each record's visibility to its delay, acting at `home` (the ingest queue is the
/// function's own); counts what SQS confirmed.
pub async fn hand_back<A: Aws>(
    aws: &A,
    home: &Place,
    records: &[HandBack<'_>],
    stats: &mut HandBackStats,
) {
    let session = crate::aws::Session {
        scope: home.scope.clone(),
        identity: crate::aws::Identity::Home,
    };
    let mut by_queue: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, r) in records.iter().enumerate() {
        by_queue.entry(r.origin.queue_arn).or_default().push(i);
    }
    let mut changed = 0;
    for (queue_arn, positions) in by_queue {
        let Some(url) = queue_url(queue_arn) else {
            tracing::warn!(
                queue = queue_arn,
                "eventSourceARN is not an SQS queue ARN: records wait out the visibility timeout"
            );
            continue;
        };
        for chunk in positions.chunks(MAX_ENTRIES) {
            let ids: Vec<String> = chunk.iter().map(|i| i.to_string()).collect();
            let entries: Vec<VisibilityEntry<'_>> = chunk
                .iter()
                .zip(&ids)
                .map(|(&i, id)| VisibilityEntry {
                    id,
                    receipt_handle: records[i].origin.receipt_handle,
                    timeout_secs: records[i].delay.as_secs().min(u64::from(u32::MAX)) as u32,
                })
                .collect();
            stats.calls += 1;
            match aws
                .change_message_visibility_batch(&session, &url, &entries)
                .await
            {
                Ok(results) => {
                    for result in results {
                        match result {
                            EntryResult::Ok { id } if ids.contains(&id) => changed += 1,
                            EntryResult::Ok { .. } => {}
                            EntryResult::Failed(f) => tracing::warn!(
                                entry = f.id,
                                code = f.code,
                                message = f.message,
                                "SQS did not change a handed-back record's visibility: it waits out the visibility timeout"
                            ),
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(queue = queue_arn, records = chunk.len(), error = %e, "ChangeMessageVisibilityBatch failed: handed-back records wait out the visibility timeout");
                }
            }
        }
    }
    stats.changed += changed;
    stats.failed += records.len() as u64 - changed;
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
        _ => "amazonaws.com",
    };
    Some(format!("https://sqs.{region}.{suffix}/{account}/{name}"))
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
        // Each partition's SQS domain, from the ARN's partition.
        for (partition, region, domain) in [
            ("aws-iso", "us-iso-east-1", "c2s.ic.gov"),
            ("aws-iso-b", "us-isob-east-1", "sc2s.sgov.gov"),
            ("aws-eusc", "eusc-de-east-1", "amazonaws.eu"),
        ] {
            assert_eq!(
                queue_url(&format!("arn:{partition}:sqs:{region}:123456789012:q")),
                Some(format!("https://sqs.{region}.{domain}/123456789012/q"))
            );
        }
        assert_eq!(queue_url("arn:aws:sns:us-east-1:123456789012:t"), None);
        assert_eq!(queue_url("ir-ingest"), None);
        assert_eq!(queue_url("arn:aws:sqs:us-east-1::q"), None);
    }
}
