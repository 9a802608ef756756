//! adopt in a busy account, on the model: once Karpenter has moved, the old queue fills with
//! every interruption of the account (its rules have no cluster filter) past what a look can
//! search for the sentinel, so SQS's own per-minute counts of the old queue decide, minutes later,
//! in virtual time.

use std::time::Duration;

use serde_json::json;

use super::{OLD_QUEUE, Reads, World, account, advance, assert_nothing_missed, paused, traffic};

/// After the helm command, the old queue fills with the account's other interruptions (its rules
/// have no cluster filter) past what a look can search: the round's first read cannot reach the
/// sentinel, so SQS's own per-minute counts of the old queue decide it, minutes later.
fn busy(reader_comes_back: bool) -> Vec<String> {
    busy_in(account(), reader_comes_back)
}

fn busy_in(world: World, reader_comes_back: bool) -> Vec<String> {
    let moves = paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        let mut filled = false;
        loop {
            // The account's other interruptions keep arriving through the old rules.
            if filled {
                for n in 0..3 {
                    let body = json!({"version": "0", "id": format!("later-{}-{n}", moves.len()),
                        "source": "test.backlog", "detail-type": "another cluster's event"});
                    world.deliver(OLD_QUEUE, &body.to_string());
                }
            }
            let did = advance(&world, &mut reads).await.unwrap();
            let Some(did) = did else { break };
            if did.starts_with("operator: helm") && !filled {
                let backlog = crate::adopt::evidence::look::MAX_LOOK_RECEIVES * 10 + 100;
                for n in 0..backlog {
                    let body = json!({"version": "0", "id": format!("backlog-{n}"),
                        "source": "test.backlog", "detail-type": "another cluster's event"});
                    world.deliver(OLD_QUEUE, &body.to_string());
                }
                filled = true;
                // The backlog is there before the round's sentinel goes in.
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            let counted = did.contains("SQS's own counts");
            moves.push(did);
            if counted && reader_comes_back {
                // A Karpenter back on the old queue (a second replica, a revert): it reads.
                reads = Reads::Old;
            }
            let decided = moves.iter().any(|m| {
                m.starts_with("applied step 5")
                    || (m.starts_with("refused")
                        && (m.contains("SQS counted") || m.contains("CloudWatch still lacks")))
            });
            if decided || moves.len() > 400 {
                break;
            }
        }
        traffic(&world, reads).await;
        moves
    });
    assert_nothing_missed();
    moves
}

#[test]
fn a_backlog_nobody_reads_is_decided_by_sqs_counts_and_adoption_goes_on() {
    let moves = busy(false);
    assert!(
        moves
            .iter()
            .any(|m| m.contains("SQS's own counts of Karpenter-alpha decide")),
        "{moves:#?}"
    );
    let step5 = moves.iter().find(|m| m.starts_with("applied step 5"));
    assert!(step5.is_some_and(|m| m.contains("received")), "{moves:#?}");
}

/// The old queue still read during the counts' window: SQS counted its receives and deletes, the
/// round is refused, the old rules stay on.
#[test]
fn a_reader_back_on_a_busy_old_queue_keeps_the_old_rules_on() {
    let moves = busy(true);
    assert!(
        !moves.iter().any(|m| m.starts_with("applied step 5")),
        "{moves:#?}"
    );
    let refused = moves
        .iter()
        .find(|m| m.starts_with("refused at step 4") && m.contains("SQS counted"));
    assert!(
        refused.is_some_and(|m| m.contains("received and") && m.contains("something still reads")),
        "{moves:#?}"
    );
}

/// CloudWatch never has the counts' minutes: adopt waits for them (the plan says so), and after
/// its patience says it cannot tell and disables nothing.
#[test]
fn counts_that_never_come_disable_nothing() {
    let world = account();
    world.edit(|state, _, _| state.metric_lag = Duration::from_secs(24 * 3600));
    let moves = busy_in(world, false);
    assert!(
        !moves.iter().any(|m| m.starts_with("applied step 5")),
        "{moves:#?}"
    );
    let refused = moves
        .iter()
        .find(|m| m.contains("CloudWatch still lacks SQS's counts"));
    assert!(
        refused.is_some_and(|m| m.contains("15 min after the round's last minute ended")
            && m.contains("aws events disable-rule")),
        "{moves:#?}"
    );
    // It waited its patience first: 5-s looks for about 15 minutes after the counts were asked.
    let asked = moves
        .iter()
        .position(|m| m.contains("SQS's own counts of Karpenter-alpha decide"))
        .expect("the counts were asked");
    let waits = moves[asked..]
        .iter()
        .filter(|m| *m == "waited at step 4")
        .count();
    assert!(waits >= 170, "gave up after {waits} looks: {moves:#?}");
}
