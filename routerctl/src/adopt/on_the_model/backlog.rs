//! A sentinel found behind an unread backlog, on the model: the old queue holds a few hundred
//! messages nobody read while Karpenter read the tenant queue; the round's probe is taken from the
//! tenant queue; then a GitOps controller reverts Karpenter to the old queue, where it starts on
//! the backlog, ten messages a receive, oldest first. adopt's look pages through the backlog
//! ahead of it and meets the sentinel before Karpenter does, received by nobody: which is not
//! "nothing reads it". The old rules must stay on, minute after minute of `--apply`, with the
//! world's metric and rule delays, and every interruption must reach the Karpenter that reads.

use serde_json::json;

use super::{
    OLD_QUEUE, Reads, World, account, advance, assert_nothing_missed, assert_old_rules_kept,
    paused, traffic,
};

/// Messages the old queue holds before the round: more than Karpenter reads in a round's quiet
/// window, fewer than a look pages through.
const BACKLOG: usize = 300;

/// After the helm command the old queue takes the account's other interruptions while nobody
/// reads it; once the round's probe has been taken from the tenant queue, Karpenter is reverted
/// to the old queue and works through the backlog.
fn reverted_onto_a_backlog(world: &World) -> impl FnMut(&str, &[String], &mut Reads) + '_ {
    let mut filled = false;
    move |did, moves, reads| {
        if did.starts_with("operator: helm") && !filled {
            for n in 0..BACKLOG {
                let body = json!({"version": "0", "id": format!("backlog-{n}"),
                    "source": "test.backlog", "detail-type": "another cluster's event"});
                world.deliver(OLD_QUEUE, &body.to_string());
            }
            filled = true;
        }
        // The probe went out on the move before: this move's traffic took it from the tenant
        // queue. Then the revert.
        if *reads == Reads::Tenant && moves.last().is_some_and(|m| m.contains("sent probe")) {
            *reads = Reads::OldBacklog;
        }
    }
}

/// Three rounds read and refused, or 400 moves (half an hour): minutes of `--apply`.
fn refused_three_times(moves: &[String]) -> bool {
    moves
        .iter()
        .filter(|m| m.starts_with("refused at step 4"))
        .count()
        >= 3
}

#[test]
fn a_sentinel_found_behind_an_unread_backlog_never_disables_the_old_rules() {
    let world = account();
    let mut react = reverted_onto_a_backlog(&world);
    let moves = paused().block_on(async {
        let mut reads = Reads::Old;
        let mut moves: Vec<String> = Vec::new();
        while !refused_three_times(&moves) && moves.len() <= 400 {
            // adopt finishing the walk is what must not happen; the assertions below say so.
            let Some(did) = advance(&world, &mut reads).await.unwrap() else {
                break;
            };
            react(&did, &moves, &mut reads);
            moves.push(did);
        }
        traffic(&world, reads).await;
        moves
    });
    assert_old_rules_kept(&world, &moves);
    assert_nothing_missed();
    // The first read met the sentinel behind the backlog, and left it to SQS's counts, which
    // saw Karpenter's receives.
    assert!(
        moves.iter().any(|m| m.contains("sent before the sentinel")),
        "{moves:#?}"
    );
    assert!(
        moves.iter().any(|m| m.contains("SQS counted")),
        "{moves:#?}"
    );
}
