//! adopt in a busy account: Karpenter's rules have no cluster filter, so once Karpenter has moved
//! the old queue fills with every interruption of the account, past what a look can search for
//! the sentinel. A look cannot tell that backlog (nobody reading) from what a reader that came
//! back during the round leaves behind, so SQS's own counts of the old queue decide
//! (`routerctl::adopt::evidence::counts`): nothing received or deleted, step 5 follows, minutes
//! later than with a sentinel; a reader back on the old queue, nothing changes.

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::*;
use routerctl::adopt::evidence::look::MAX_LOOK_RECEIVES;

/// More messages than a look receives: events of other clusters' instances, as an account's
/// unfiltered rules put there (of a source no parser knows, so a Karpenter that reads them deletes
/// them as it would another cluster's).
async fn fill(estate: &Estate, queue: &str) -> Result<usize> {
    let url = estate.sandbox.queue_url(queue).await?;
    let count = MAX_LOOK_RECEIVES * 10 + 100;
    for batch in 0..count / 10 {
        let entries = (0..10)
            .map(|n| {
                let body = json!({"version": "0", "id": format!("backlog-{batch}-{n}"),
                    "source": "test.backlog", "detail-type": "another cluster's event",
                    "account": "123456789012", "time": "2026-11-26T12:00:00Z",
                    "region": "us-east-1", "resources": [], "detail": {}});
                SendMessageBatchRequestEntry::builder()
                    .id(n.to_string())
                    .message_body(body.to_string())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        estate
            .aws
            .sqs
            .send_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    Ok(count)
}

/// alpha's Karpenter moved by the helm command, and then its old queue filled (nobody reads it
/// any more) before the round's sentinel goes in.
async fn after_the_helm_command_a_full_old_queue() -> Result<Estate> {
    let mut estate =
        Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
    walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Operator { step: 3, .. })
    })
    .await?;
    fill(&estate, "alpha").await?;
    Ok(estate)
}

/// The move in which the round's first read met the backlog and left the round to SQS's counts.
fn counts_decide(moves: &[Move]) -> String {
    moves
        .iter()
        .find_map(|m| match m {
            Move::Applied { step: 4, did } => Some(did.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the round never went to SQS's counts: {moves:?}"))
}

#[tokio::test]
async fn a_backlog_nobody_reads_is_decided_by_sqs_counts_and_adoption_goes_on() -> Result<()> {
    let mut estate = after_the_helm_command_a_full_old_queue().await?;
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    let pending = counts_decide(&moves);
    assert!(
        pending.contains("SQS's own counts of alpha decide"),
        "{pending}"
    );
    assert!(
        pending.contains("sent before the one it looks for"),
        "{pending}"
    );
    // adopt waited for CloudWatch, minutes late, as AWS has it.
    assert!(
        moves
            .iter()
            .any(|m| matches!(m, Move::Waited { step: 4, why }
            if why.contains("CloudWatch does not have SQS's counts of alpha"))),
        "{moves:?}"
    );
    let Some(Move::Applied { did, .. }) = moves.last() else {
        anyhow::bail!("{moves:?}");
    };
    assert!(
        did.contains("SQS counted no message received or deleted from alpha"),
        "{did}"
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Disabled; 5]
    );
    let outcome = estate.finish().await?;
    assert!(outcome.passed(), "{outcome:?}");
    Ok(())
}

/// A GitOps controller puts the old value back after the round's first read: alpha's Karpenter
/// starts on the oldest messages of the backlog, far from the sentinel, and SQS counts what it
/// deletes.
#[tokio::test]
async fn a_reader_back_on_the_backlog_during_the_round_leaves_the_old_rules_on() -> Result<()> {
    let mut estate = after_the_helm_command_a_full_old_queue().await?;
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 4, .. })
    })
    .await?;
    counts_decide(&moves);
    estate.helm("alpha", "alpha").await?;
    let error = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await
    .expect_err("step 5 must not be made");
    let why = format!("{error:#}");
    assert!(
        why.contains("deleted from alpha") && why.contains("something still reads it"),
        "{why}"
    );
    assert!(why.contains("Argo CD self-heal"), "{why}");
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    Ok(())
}
