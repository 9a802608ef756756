//! The verdict: [`Estate::finish`] stops the stream, lets the router and every Karpenter drain,
//! and checks every event against the queue its cluster's Karpenter was pointed at when it was
//! sent; the [`Outcome`] says what the stream's events became.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::atomic::Ordering,
};

use anyhow::Result;
use futures_util::future::try_join_all;

use super::{Estate, Outcome};

impl Estate {
    /// Stops the stream, lets the router and every Karpenter drain, and checks what each
    /// Karpenter read.
    pub async fn finish(mut self) -> Result<Outcome> {
        self.stream_stop.store(true, Ordering::SeqCst);
        let published = self.stream.await??;
        let drained = self.esm.await??;
        // Every Karpenter stops at once: each finishes the long poll it is in (up to 20 s), so
        // one after another would add 20 s per cluster.
        try_join_all(
            self.clusters
                .values_mut()
                .filter_map(|cluster| cluster.karpenter.as_mut())
                .map(|karpenter| karpenter.stop()),
        )
        .await?;
        let mut reads = BTreeMap::new();
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for (name, cluster) in &self.clusters {
            for node in &cluster.nodes {
                owner.insert(node.clone(), name.clone());
            }
            if let Some(karpenter) = &cluster.karpenter {
                reads.insert(name.clone(), karpenter.reads());
            }
        }
        let mut missed = Vec::new();
        for event in &published {
            for cluster in &event.clusters {
                let karpenter = self.clusters[cluster].karpenter.as_ref().unwrap();
                let queue = karpenter.reading_at(event.at).unwrap_or_default();
                let read = reads[cluster]
                    .iter()
                    .any(|r| r.id == event.id && r.queue == queue);
                if !read {
                    missed.push(format!(
                        "{cluster}: {} ({}) was sent while its Karpenter read {queue}, which \
                         never received it",
                        event.id,
                        event.kind.label()
                    ));
                }
            }
        }
        // Reads that are not the stream's: adopt's probes and sentinels, by cluster and queue.
        let adopts = |suffix: bool| {
            reads
                .iter()
                .flat_map(|(cluster, reads)| {
                    reads
                        .iter()
                        .filter(move |r| {
                            r.id.starts_with("routerctl-adopt-")
                                && r.id.ends_with("-sentinel") == suffix
                        })
                        .map(move |r| (cluster.clone(), r.queue.clone(), r.id.clone()))
                })
                .collect::<Vec<_>>()
        };
        let (probes, sentinels) = (adopts(false), adopts(true));
        let mut misrouted = Vec::new();
        for (cluster, reads) in &reads {
            for read in reads
                .iter()
                .filter(|r| r.queue == Self::tenant_queue(cluster))
            {
                for instance in &read.instances {
                    if owner.get(instance) != Some(cluster) {
                        misrouted.push(format!(
                            "{} in {}: names {instance} of {}",
                            read.id,
                            read.queue,
                            owner.get(instance).map_or("no cluster", String::as_str)
                        ));
                    }
                }
            }
        }
        let dlq = self.sandbox.base.output("DeadLetterQueueArn")?.to_owned();
        let dlq_url = self
            .sandbox
            .queue_url(aws_model::arn::arn_name(&dlq))
            .await?;
        let (dead_lettered, dead_letter_details) = dead_letters(&self.aws.sqs, &dlq_url).await?;
        let mut kinds: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
        for event in &published {
            for cluster in &event.clusters {
                kinds
                    .entry(cluster.clone())
                    .or_default()
                    .insert(event.kind.label());
            }
        }
        let duplicates = reads
            .iter()
            .map(|(cluster, reads)| {
                let mut seen = BTreeSet::new();
                let twice = reads
                    .iter()
                    .filter(|r| !r.id.starts_with("routerctl-") && !seen.insert((&r.id, &r.queue)))
                    .count();
                (cluster.clone(), twice)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        let router_warnings = self
            .router
            .stdout_lines()
            .into_iter()
            .filter(|line| {
                serde_json::from_str::<serde_json::Value>(line)
                    .is_ok_and(|l| matches!(l["level"].as_str(), Some("WARN" | "ERROR")))
            })
            .collect();
        self.moto.stop().await;
        Ok(Outcome {
            router_warnings,
            published: published.len(),
            kinds,
            missed,
            misrouted,
            dead_lettered,
            dead_letter_details,
            handed_back: drained.retried,
            probes,
            sentinels,
            duplicates,
        })
    }
}

/// The dead-letter queue's messages by the reason the router gave (its `reason` attribute),
/// or `redriven` for those SQS moved there after the ingest queue's maxReceiveCount.
/// The dead-letter queue's messages: a count per reason, and each one's reason, clusters and
/// detail (what a failed run needs to say why).
async fn dead_letters(
    sqs: &aws_sdk_sqs::Client,
    dlq_url: &str,
) -> Result<(BTreeMap<String, usize>, Vec<String>)> {
    let mut reasons = BTreeMap::new();
    let mut details = Vec::new();
    loop {
        let received = sqs
            .receive_message()
            .queue_url(dlq_url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            // Long enough that no message is read twice while the queue is listed.
            .visibility_timeout(600)
            .send()
            .await?;
        if received.messages().is_empty() {
            return Ok((reasons, details));
        }
        for message in received.messages() {
            let attribute = |name: &str| {
                message
                    .message_attributes()
                    .and_then(|a| a.get(name))
                    .and_then(|v| v.string_value())
                    .unwrap_or_default()
                    .to_owned()
            };
            let reason = Some(attribute("reason"))
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "redriven".to_owned());
            details.push(format!(
                "{reason} [{}]: {}",
                attribute("clusters"),
                attribute("detail")
            ));
            *reasons.entry(reason).or_default() += 1;
        }
    }
}
