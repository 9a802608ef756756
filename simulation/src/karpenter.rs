//! What every cluster's Karpenter asks of its account's EC2 DescribeInstances bucket, which the
//! router's lookups share: a status poll a minute per cluster (Karpenter v1.12+ polls
//! DescribeInstanceStatus, in the same bucket), and while a cluster's nodes are being replaced
//! (the storm and 90 s after), one batched DescribeInstances a second (its batcher: up to 500 ids,
//! a 1-s window). The replacement rate is an assumption; the calls are spread across each second
//! so they meet the router's as they would.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use tokio::time::Instant;

use crate::aws::World;

/// Runs the Karpenters of the organisation from `start` for `duration`.
pub async fn run(world: Arc<World>, start: Instant, duration: Duration) {
    let org = &world.org;
    // Clusters per account and region, and those the reclaim hits.
    let mut clusters: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    let mut hit = vec![false; org.clusters.len()];
    for instance in org.instances.values() {
        if let Some(c) = instance.cluster {
            hit[c] = true;
        }
    }
    for (c, cluster) in org.clusters.iter().enumerate() {
        let entry = clusters
            .entry((cluster.account.clone(), cluster.region.clone()))
            .or_default();
        entry.0 += 1;
        entry.1 += usize::from(hit[c]);
    }
    let replacing_until = org.shape.storm_window + Duration::from_secs(90 + 120);
    // Ten ticks a second; each account-region's calls are spread over them.
    let tick = Duration::from_millis(100);
    let mut owed: BTreeMap<(String, String), f64> = BTreeMap::new();
    let mut at = start;
    while at < start + duration {
        at += tick;
        tokio::time::sleep_until(at).await;
        let elapsed = at - start;
        for (key, (all, replacing)) in &clusters {
            let mut per_second = *all as f64 / 60.0;
            if elapsed >= org.shape.lead_in && elapsed <= org.shape.lead_in + replacing_until {
                per_second += *replacing as f64;
            }
            let due = owed.entry(key.clone()).or_default();
            *due += per_second * tick.as_secs_f64();
            while *due >= 1.0 {
                *due -= 1.0;
                world.karpenter_describe(&key.0, &key.1);
            }
        }
    }
}
