//! On time while AWS fails: storms of spot warnings through the router with real SQS redelivery.
//!
//! Each scenario runs [`e2e_tests::fault_storm`]: what AWS plays (the base stack's ingest queue
//! and redrive, an event source mapping with five execution environments, cold routers, spot
//! warnings over five clusters at 10 per second) while the fault proxy fails calls by time window
//! and at random.
//!
//! Every scenario prints, per run, the age of every delivery when it arrived in its cluster's
//! queue (arrival in the ingest queue → arrival in the cluster queue, both SQS SentTimestamps):
//! p50, p99, max and how many were later than 120 s, next to lost / misrouted / duplicates.
//! The assertions are about mechanisms and counts, not wall-clock times: nothing lost or
//! misrouted, and no record waited out the visibility timeout (its age at delivery is below it,
//! which only the router's shortened visibility can give a handed-back record).
//!
//! Scenarios (the names): (a) DescribeInstances down for the first 30 s, 10 % of every
//! call failing at random; (b) DescribeInstances down for the whole storm, the Tagging API up;
//! (c) one cluster's queue failing its sends for 30 s: its neighbours' records are never handed
//! back for it (only for a call of their own the emulator answered late, which the fault proxy
//! records: on a loaded machine moto can take longer than the router's attempt timeout). `FAULT_SCENARIO_EVENTS` sets the storm size (default 300; `make soak` runs 3,000), and
//! `FAULT_SCENARIO_BASELINE=1` (which `make soak` sets) plays (c) first without the fault, so its
//! neighbours' ages print beside a baseline's: figures to read, not a verdict, so `make test`
//! does not spend a storm on them.

use std::time::Duration;

use anyhow::Result;
use e2e_tests::fault_storm::{Ages, EVERY_CALL, OUTAGE, Storm, ec2_brownout, random_faults};
use local_aws::proxy::{Fault, FaultPlan};

/// The scenarios share two cores with their emulator and five routers each: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Whether (c) plays its baseline storm first (`FAULT_SCENARIO_BASELINE=1`).
fn baseline_wanted() -> bool {
    std::env::var("FAULT_SCENARIO_BASELINE").is_ok_and(|v| v == "1")
}

fn storm_size() -> usize {
    std::env::var("FAULT_SCENARIO_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ec2_down_for_thirty_seconds_and_random_faults() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let storm = Storm::new(storm_size()).await?;
    let plan = ec2_brownout(20_261_123);
    let run = storm.run("(a) EC2 down 30 s + 10 % faults", plan).await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    assert!(
        run.calls.get("GetResources").copied().unwrap_or_default() > 0,
        "the Tagging API was never asked: {:?}",
        run.calls
    );
    assert!(run.faults_injected() > 0, "no fault was injected");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_describe_instances_down_for_the_whole_storm_tagging_api_up() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let storm = Storm::new(storm_size()).await?;
    let plan = random_faults(&EVERY_CALL, 20_261_124).with_window(
        "DescribeInstances",
        Duration::ZERO..Duration::from_secs(3600),
        Fault::Throttled,
    );
    let run = storm
        .run("(b) DescribeInstances down, Tagging up", plan)
        .await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    let describe = run
        .calls
        .get("DescribeInstances")
        .copied()
        .unwrap_or_default();
    let tagging = run.calls.get("GetResources").copied().unwrap_or_default();
    assert!(tagging > 0, "{:?}", run.calls);
    // After a failure the router asks the Tagging API first for a while, so a throttled EC2 is
    // not asked once per batch.
    assert!(
        describe < run.drained.invocations,
        "DescribeInstances asked {describe} times in {} invocations",
        run.drained.invocations
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_one_clusters_queue_failing_does_not_delay_its_neighbours() -> Result<()> {
    let _one = ONE_AT_A_TIME.lock().await;
    let baseline = if baseline_wanted() {
        let run = Storm::new(storm_size())
            .await?
            .run("(c) baseline, no faults", FaultPlan::none())
            .await?;
        run.assert_nothing_lost_or_misrouted();
        Some(run)
    } else {
        None
    };

    let storm = Storm::new(storm_size()).await?;
    let failing = "c0";
    // Only SendMessageBatch calls naming c0's queue fail.
    let plan = FaultPlan::none().with_window_matching(
        "SendMessageBatch",
        &format!("karpenter-{failing}\""),
        Duration::ZERO..OUTAGE,
        Fault::Unavailable,
    );
    let run = storm.run("(c) c0's queue failing 30 s", plan).await?;
    run.assert_nothing_lost_or_misrouted();
    run.assert_none_waited_the_visibility_timeout();
    for (label, r) in baseline
        .iter()
        .map(|b| ("baseline", b))
        .chain([("with c0 failing", &run)])
    {
        println!(
            "  {label}: neighbours {}",
            Ages::of(r.ages_where(|c| c != failing))
        );
    }
    // A neighbour is handed back only for a delay of its own: a call naming it that the
    // emulator itself answered late (on a loaded machine it can take longer than the router's
    // attempt timeout). One handed back with no such call waited on c0's outage.
    let neighbours_handed_back: Vec<&String> = run
        .handed_back_by_cluster
        .iter()
        .filter(|(c, n)| c.as_str() != failing && **n > 0)
        .filter(|(c, _)| !run.late_by_cluster.contains_key(*c))
        .map(|(c, _)| c)
        .collect();
    assert!(
        neighbours_handed_back.is_empty(),
        "neighbours were handed back with no late answer of their own: {neighbours_handed_back:?} \
         (handed back by cluster {:?}, late emulator answers by cluster {:?})",
        run.handed_back_by_cluster,
        run.late_by_cluster
    );
    assert!(
        run.handed_back_by_cluster
            .get(failing)
            .copied()
            .unwrap_or_default()
            > 0,
        "c0's records were never handed back: the outage did not bite"
    );
    assert!(
        run.calls
            .get("ChangeMessageVisibilityBatch")
            .copied()
            .unwrap_or_default()
            > 0,
        "handed-back records kept the full visibility timeout"
    );
    Ok(())
}
