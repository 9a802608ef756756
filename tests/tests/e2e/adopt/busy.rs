//! adopt in a busy account: Karpenter's rules have no cluster filter, so once Karpenter has moved
//! the old queue fills with every interruption of the account, past what a look can search for
//! the sentinel. The round then ends on a closing probe (`routerctl::adopt::evidence`): taken,
//! step 5 follows; not taken (this cluster's Karpenter stopped reading the router's queue after
//! the first probe), nothing changes.

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::*;
use routerctl::adopt::evidence::MAX_LOOK_RECEIVES;

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

#[tokio::test]
async fn a_backlog_too_big_to_search_ends_the_round_on_a_closing_probe() -> Result<()> {
    let mut estate = after_the_helm_command_a_full_old_queue().await?;
    let moves = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    let closing = moves
        .iter()
        .find_map(|m| match m {
            Move::Applied { step: 4, did } => Some(did.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no closing probe: {moves:?}"));
    assert!(closing.contains("sent closing probe"), "{closing}");
    assert!(
        closing.contains("alpha hold(s) more than 1000 messages"),
        "{closing}"
    );
    let Some(Move::Applied { did, .. }) = moves.last() else {
        anyhow::bail!("{moves:?}");
    };
    assert!(
        did.contains("the closing probe sent") && did.contains("was taken from karpenter-alpha"),
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

#[tokio::test]
async fn a_closing_probe_nobody_takes_leaves_the_old_rules_on() -> Result<()> {
    let mut estate = after_the_helm_command_a_full_old_queue().await?;
    let started = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 3, .. })
    })
    .await?;
    let probe = probes(&started).pop().context("the round's probe")?;
    // Karpenter takes the round's probe, then stops reading (its pods gone, say): the closing
    // probe the first read sends is taken by nobody.
    let karpenter = estate
        .clusters
        .get_mut("alpha")
        .and_then(|c| c.karpenter.as_mut())
        .context("alpha's Karpenter")?;
    for _ in 0..120 {
        if karpenter.reads().iter().any(|r| r.id == probe) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(karpenter.reads().iter().any(|r| r.id == probe));
    karpenter.stop().await?;
    let error = walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await
    .expect_err("step 5 must not be made");
    let why = format!("{error:#}");
    assert!(
        why.contains("the closing probe sent") && why.contains("is still in karpenter-alpha"),
        "{why}"
    );
    assert_eq!(
        rule_states(&estate.aws, "Karpenter-alpha").await?,
        vec![RuleState::Enabled; 5]
    );
    Ok(())
}
