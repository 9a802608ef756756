//! A rollback returns only once the old rules deliver again, so its helm command, run at once,
//! misses nothing.

use super::*;

/// EventBridge applies EnableRule "after a short period". A rollback that returned at once would
/// have its helm command move Karpenter back to the old queue before the old rules deliver again:
/// what comes meanwhile reaches only the new queue, which Karpenter has left. Here, against the
/// emulator's stand-in and its rule delay, adopt's wait (the demo's settle) misses nothing. That
/// a rollback without the wait loses events is shown on the model, in virtual time
/// (`adopt::on_the_model::a_rollback_that_does_not_wait_for_eventbridge_loses_what_comes_meanwhile`).
#[tokio::test]
async fn a_rollback_returns_once_the_old_rules_deliver_so_its_helm_command_misses_nothing()
-> Result<()> {
    rollback_with(Scene::demo().settle()).await
}

/// alpha walked to step 5, rolled back with `settle`, and its Karpenter sent back at once.
async fn rollback_with(settle: Duration) -> Result<()> {
    let mut estate =
        Estate::start(None, scene(&[("alpha", Some(Flavour::GettingStarted))])).await?;
    walk(&mut estate, "alpha", |m| {
        matches!(m, Move::Applied { step: 5, .. })
    })
    .await?;
    let rolled = estate
        .adopt(&adopt::Options::rollback(STACK, "alpha").settle(settle))
        .await?;
    assert!(
        matches!(rolled.outcome, Outcome::RolledBack { .. }),
        "{}",
        rolled.render()
    );
    // One helm command in the report, the one that goes back.
    let text = rolled.render();
    assert_eq!(text.matches("helm upgrade karpenter").count(), 1, "{text}");
    assert!(text.contains("settings.interruptionQueue=alpha "), "{text}");
    assert!(
        !text.contains("interruptionQueue=karpenter-alpha"),
        "{text}"
    );
    // The operator runs the printed helm command the moment it appears.
    estate.helm("alpha", "alpha").await?;
    tokio::time::sleep(estate.scene.rule_delay * 2).await;
    let outcome = estate.finish().await?;
    assert_eq!(outcome.missed, Vec::<String>::new());
    Ok(())
}
