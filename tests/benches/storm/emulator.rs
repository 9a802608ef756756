//! What the emulator itself charges per call, measured through the same proxy: why the
//! batched/naive throughput ratio on this emulator is far below the call ratio.

use std::time::{Duration, Instant};

use anyhow::Result;
use aws_model::events::Synthetic;

use super::figures::percentile;
use super::passes::Estate;

/// What the emulator itself charges per call, measured sequentially through the same proxy: it
/// explains the batched/naive throughput ratio on this emulator, which is far below the call ratio.
pub struct EmulatorCosts {
    pub describe_one: Duration,
    pub get_queue_url: Duration,
    pub send_message: Duration,
    pub send_message_batch_10: Duration,
}

impl EmulatorCosts {
    pub const SAMPLES: usize = 30;

    pub async fn measure(estate: &Estate, storm: &[Synthetic]) -> Result<Self> {
        let sdk = local_aws::moto::sdk_config_for(&estate.world.proxy.endpoint()).await;
        let (ec2, sqs) = (
            aws_sdk_ec2::Client::new(&sdk),
            aws_sdk_sqs::Client::new(&sdk),
        );
        let (node, cluster) = &estate.nodes[0];
        let queue = &estate.queues[cluster];
        let body = storm[0].body();
        let mut times: [Vec<Duration>; 4] = Default::default();
        for _ in 0..Self::SAMPLES {
            let t = Instant::now();
            ec2.describe_instances().instance_ids(node).send().await?;
            times[0].push(t.elapsed());
            let t = Instant::now();
            sqs.get_queue_url()
                .queue_name(format!("karpenter-{cluster}"))
                .send()
                .await?;
            times[1].push(t.elapsed());
            let t = Instant::now();
            sqs.send_message()
                .queue_url(queue)
                .message_body(&body)
                .send()
                .await?;
            times[2].push(t.elapsed());
            let entries = (0..10)
                .map(|i| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(&body)
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?;
            let t = Instant::now();
            sqs.send_message_batch()
                .queue_url(queue)
                .set_entries(Some(entries))
                .send()
                .await?;
            times[3].push(t.elapsed());
        }
        // The probe's messages are not part of any storm.
        estate.world.drain(queue).await?;
        let [d, g, m, b] = times.map(|t| percentile(&t, 50));
        Ok(Self {
            describe_one: d,
            get_queue_url: g,
            send_message: m,
            send_message_batch_10: b,
        })
    }

    /// Naive cost per event over batched cost per event (one tenth of a full SendMessageBatch),
    /// with every call made one after another.
    pub fn sequential_ratio(&self) -> f64 {
        (self.describe_one + self.get_queue_url + self.send_message).as_secs_f64()
            / (self.send_message_batch_10.as_secs_f64() / 10.0)
    }
}
