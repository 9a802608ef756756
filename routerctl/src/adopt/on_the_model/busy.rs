//! adopt in a busy account, on the model: once Karpenter has moved, the old queue fills with
//! every interruption of the account (its rules have no cluster filter) past what a look can
//! search for the sentinel, so SQS's own per-minute counts of the old queue decide, minutes later,
//! in virtual time.

use std::time::Duration;

use serde_json::json;

use super::{
    CLUSTER, OLD_QUEUE, Options, Reads, State, TENANT_QUEUE, World, account, advance,
    assert_nothing_missed, paused, run, step_state, traffic,
};
use crate::adopt::evidence::{EVIDENCE_TAG, Round, counts::Window};

/// After the helm command, the old queue fills with the account's other interruptions (its rules
/// have no cluster filter) past what a look can search: the round's first read cannot reach the
/// sentinel, so SQS's own per-minute counts of the old queue decide it, minutes later.
fn busy(reader_comes_back: bool) -> Vec<String> {
    busy_in(account(), reader_comes_back).0
}

/// How step 4 waited on the counts, look by look: until the window's close while it was open,
/// then with no instant while CloudWatch lacked its minutes.
#[derive(Debug, Default, PartialEq, Eq)]
struct CountWaits {
    until_closed: usize,
    for_cloudwatch: usize,
}

/// The moves, and how step 4 waited on the counts ([`CountWaits`]; any other wait while the
/// counts decide fails the test).
fn busy_in(world: World, reader_comes_back: bool) -> (Vec<String>, CountWaits) {
    let (moves, waits) = paused().block_on(async {
        let (moves, reads, waits) = play(&world, reader_comes_back, decided).await;
        traffic(&world, reads).await;
        (moves, waits)
    });
    assert_nothing_missed();
    (moves, waits)
}

/// The counts disabled the old rules, or refused to.
fn decided(moves: &[String]) -> bool {
    moves.iter().any(|m| {
        m.starts_with("applied step 5")
            || (m.starts_with("refused")
                && (m.contains("SQS counted") || m.contains("CloudWatch still lacks")))
    })
}

/// Plays the busy account until `stop` holds for the moves so far (or 400 moves): the moves, what
/// Karpenter reads then, and how step 4 waited on the counts.
async fn play(
    world: &World,
    reader_comes_back: bool,
    stop: impl Fn(&[String]) -> bool,
) -> (Vec<String>, Reads, CountWaits) {
    let mut waits = CountWaits::default();
    {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        let mut filled = false;
        loop {
            if let Some(window) = counts_window(world) {
                let plan = run(world, &Options::plan_of("ir", CLUSTER)).await.unwrap();
                let four = plan.cluster(CLUSTER).unwrap().step(4).state.clone();
                match four {
                    State::Waiting { until: Some(at) } if at == window.closes() => {
                        assert!(
                            world.clock() < at,
                            "waiting past the close: {}",
                            plan.render()
                        );
                        waits.until_closed += 1;
                    }
                    State::Waiting { until: None } => {
                        assert!(world.clock() >= window.closes(), "{}", plan.render());
                        waits.for_cloudwatch += 1;
                    }
                    State::Waiting { .. } => panic!("another wait: {}", plan.render()),
                    _ => {}
                }
            }
            // The account's other interruptions keep arriving through the old rules.
            if filled {
                for n in 0..3 {
                    let body = json!({"version": "0", "id": format!("later-{}-{n}", moves.len()),
                        "source": "test.backlog", "detail-type": "another cluster's event"});
                    world.deliver(OLD_QUEUE, &body.to_string());
                }
            }
            let did = advance(world, &mut reads).await.unwrap();
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
            if stop(&moves) || moves.len() > 400 {
                break;
            }
        }
        (moves, reads, waits)
    }
}

/// The counts' two instants, landed on exactly: step 4 waits until the window closes, and at its
/// close no longer; it then waits for CloudWatch's minutes, with no instant, until adopt's
/// patience ends, and at that second the round can be read (and refused).
#[test]
fn step_4_waits_on_the_counts_to_the_second() {
    let world = account();
    world.edit(|state, _, _| state.metric_lag = Duration::from_secs(24 * 3600));
    paused().block_on(async {
        let (moves, _, _) = play(&world, false, |moves| {
            moves.iter().any(|m| m.contains("SQS's own counts"))
        })
        .await;
        let window = counts_window(&world).unwrap_or_else(|| panic!("no window: {moves:#?}"));
        let second = Duration::from_secs(1);
        for (at, expected) in [
            (
                window.closes() - second,
                State::Waiting {
                    until: Some(window.closes()),
                },
            ),
            (window.closes(), State::Waiting { until: None }),
            (window.gives_up() - second, State::Waiting { until: None }),
            (window.gives_up(), State::Todo),
        ] {
            world.advance(at.duration_since(world.clock()).unwrap());
            assert_eq!(step_state(&world, 4).await, expected, "at {at:?}");
        }
    });
}

/// The counts' window of the round under way, once its look met the backlog.
fn counts_window(world: &World) -> Option<Window> {
    let tag = world.site(|site| {
        site.queues
            .get(TENANT_QUEUE)
            .and_then(|q| q.tags.get(EVIDENCE_TAG).cloned())
    })?;
    Round::parse(&tag)?.window()
}

#[test]
fn a_backlog_nobody_reads_is_decided_by_sqs_counts_and_adoption_goes_on() {
    let (moves, waits) = busy_in(account(), false);
    assert!(
        moves
            .iter()
            .any(|m| m.contains("SQS's own counts of Karpenter-alpha decide")),
        "{moves:#?}"
    );
    // The window's minutes were waited for, named by their close.
    assert!(waits.until_closed > 0, "{waits:?}: {moves:#?}");
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
    let (moves, waits) = busy_in(world, false);
    assert!(
        !moves.iter().any(|m| m.starts_with("applied step 5")),
        "{moves:#?}"
    );
    // Past the window's close, no instant: CloudWatch's minutes come when they come.
    assert!(
        waits.until_closed > 0 && waits.for_cloudwatch >= 170,
        "{waits:?}: {moves:#?}"
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
