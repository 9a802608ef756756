//! Whether someone consumes a queue, as SQS reports it to CloudWatch: `NumberOfMessagesDeleted`
//! in one-minute datapoints. How adopt sees Karpenter reading the new queue (step 4), and how the
//! plan says whether an old queue is still read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatch::{
    primitives::DateTime,
    types::{Dimension, Statistic},
};

use crate::aws::{Aws, describe};

/// How far back a deletion from a queue counts as someone consuming it.
pub const CONSUMING_WINDOW: Duration = Duration::from_secs(15 * 60);

/// Messages deleted from `queue` over the last [`CONSUMING_WINDOW`], or since `since` when that
/// is later, as SQS reports to CloudWatch (one-minute datapoints: `since` is rounded up to the
/// next whole minute, as CloudWatch would round it down and count the minute before it).
pub async fn deleted_since(
    aws: &Aws,
    queue: &str,
    since: Option<SystemTime>,
) -> Result<f64, String> {
    let now = SystemTime::now();
    let window_start = now - CONSUMING_WINDOW;
    let start = match since {
        Some(since) if since > window_start => {
            let secs = since
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            UNIX_EPOCH + Duration::from_secs(secs.div_ceil(60) * 60)
        }
        _ => window_start,
    };
    if start >= now {
        return Ok(0.0);
    }
    let out = aws
        .cloudwatch
        .get_metric_statistics()
        .namespace("AWS/SQS")
        .metric_name("NumberOfMessagesDeleted")
        .dimensions(Dimension::builder().name("QueueName").value(queue).build())
        .start_time(DateTime::from(start))
        .end_time(DateTime::from(now + Duration::from_secs(60)))
        .period(60)
        .statistics(Statistic::Sum)
        .send()
        .await
        .map_err(|e| {
            format!(
                "GetMetricStatistics AWS/SQS NumberOfMessagesDeleted: {}",
                describe(&e)
            )
        })?;
    Ok(out
        .datapoints()
        .iter()
        .filter(|d| {
            d.timestamp()
                .and_then(|t| SystemTime::try_from(*t).ok())
                .is_none_or(|t| t >= start)
        })
        .filter_map(|d| d.sum())
        .sum())
}
