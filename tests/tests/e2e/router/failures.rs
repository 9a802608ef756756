//! When forwarding fails: permanent failures handed back without a dead-letter queue, entries SQS
//! fails inside a 200 answer, a close deadline, AccessDenied dead-lettered once its grace is over,
//! and a record still failing on its last receive (MAX_RECEIVE_COUNT) dead-lettered with its
//! reason. (Each decision is also proven in milliseconds by the router's own tests on a fake of
//! its seam; these show the binary, the SDK and SQS agree.)

use anyhow::Result;
use e2e_tests::{
    INVOKE_BUDGET, Received, assert_batch_handled, batch_item_failures, ec2_event, fixture,
    invoke_batch, sqs_event,
};
use local_aws::proxy::{Fault, FaultPlan};
use serde_json::{Value, json};

use super::{Estate, now_ms, total};

#[tokio::test]
async fn without_a_dead_letter_queue_permanent_failures_are_handed_back() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&[]).await?;
    // gamma's queue is deleted by hand (its tenant record stands): its events are lost unless kept.
    let first = ec2_event("state-change-stopping.json", &estate.gamma, "before").to_string();
    assert_batch_handled(&router, &[first]).await;
    estate
        .world
        .sqs
        .delete_queue()
        .queue_url(&estate.queues["gamma"])
        .send()
        .await?;
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "ok").to_string(),
        ec2_event("spot-interruption-warning.json", &estate.gamma, "no-queue").to_string(),
        "{\"not\": \"an event\"}".to_owned(),
        ec2_event("spot-interruption-warning.json", &estate.beta[0], "ok-too").to_string(),
    ];
    assert_eq!(invoke_batch(&router, &bodies).await, ["msg-1", "msg-2"]);
    assert_eq!(
        estate.world.drain(&estate.queues["alpha"]).await?.len(),
        1,
        "a neighbour's failure fails nobody else"
    );
    assert_eq!(estate.world.drain(&estate.queues["beta"]).await?.len(), 1);
    assert_eq!(estate.world.depth(&estate.queues["dlq"]).await?, 0);

    Ok(())
}

#[tokio::test]
async fn entries_sqs_fails_inside_a_200_answer_are_retried_or_handed_back_never_counted_sent()
-> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // 30 spot warnings for alpha: three SendMessageBatch calls of ten.
    let bodies: Vec<String> = (0..30)
        .map(|i| {
            ec2_event(
                "spot-interruption-warning.json",
                &estate.alpha[i % 2],
                &format!("spot-{i}"),
            )
            .to_string()
        })
        .collect();
    // Every SendMessageBatch answer (retries included) reports at least one entry failed.
    estate.world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["SendMessageBatch"],
        &[Fault::PartialBatch],
        42,
    ));
    let response = router
        .invoke(sqs_event(&bodies).to_string(), INVOKE_BUDGET)
        .await;
    let failed = batch_item_failures(&response);
    assert!(
        !failed.is_empty(),
        "every batch lost an entry on every attempt"
    );

    let delivered: Vec<Value> = estate
        .world
        .drain(&estate.queues["alpha"])
        .await?
        .iter()
        .map(Received::json)
        .collect();
    let delivered_ids: Vec<&str> = delivered
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    for (i, _) in bodies.iter().enumerate() {
        let id = format!("spot-{i}");
        let handed_back = failed.contains(&format!("msg-{i}"));
        let present = delivered_ids.iter().filter(|d| **d == id).count();
        // Withheld entries never reached SQS: a failed record is absent, a handled one present once.
        assert_eq!(
            present,
            usize::from(!handed_back),
            "{id}: handed back {handed_back}, delivered {present}x"
        );
    }
    // Retries happened: more calls than the three a clean run needs.
    assert!(estate.world.proxy.calls()["SendMessageBatch"] > 3);

    // Redelivering the handed-back records (as the event source mapping does) completes the set.
    estate.world.proxy.set_plan(FaultPlan::none());
    let retry: Vec<String> = failed
        .iter()
        .map(|m| bodies[m.trim_start_matches("msg-").parse::<usize>().unwrap()].clone())
        .collect();
    assert_eq!(
        batch_item_failures(
            &router
                .invoke(sqs_event(&retry).to_string(), INVOKE_BUDGET)
                .await
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        estate.world.drain(&estate.queues["alpha"]).await?.len(),
        failed.len()
    );
    Ok(())
}

#[tokio::test]
async fn a_close_deadline_hands_back_undone_records_instead_of_timing_out() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "slow-1").to_string(),
        ec2_event("spot-interruption-warning.json", &estate.beta[0], "slow-2").to_string(),
        fixture("asg-terminate-lifecycle-action.json").to_string(),
    ];
    // SQS answers only after 20 s; the invocation has 2 s.
    estate.world.proxy.set_plan(FaultPlan::rate(
        1.0,
        &["SendMessageBatch"],
        &[Fault::Slow(std::time::Duration::from_secs(20))],
        7,
    ));
    let response = router
        .invoke(
            sqs_event(&bodies).to_string(),
            std::time::Duration::from_secs(2),
        )
        .await;
    assert_eq!(
        batch_item_failures(&response),
        ["msg-0", "msg-1"],
        "undone records are handed back, the ignored one is done"
    );
    let logs = router.log_records();
    assert!(
        logs.iter().any(|l| l["fields"]["outcome"] == "failed"
            && l["fields"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("deadline"))),
        "the failure names the deadline: {logs:#?}"
    );
    Ok(())
}

/// `event` (from [`sqs_event`]) with record `i` first received at `first_receive_ms[i]`.
fn first_received(mut event: Value, first_receive_ms: &[u128]) -> Value {
    for (record, at) in event["Records"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .zip(first_receive_ms)
    {
        record["attributes"]["ApproximateFirstReceiveTimestamp"] = json!(at.to_string());
    }
    event
}

#[tokio::test]
async fn access_denied_is_dead_lettered_with_its_cause_once_its_grace_is_over() -> Result<()> {
    let estate = Estate::new().await?;
    let router = estate.world.start_router(&estate.router_config()).await?;
    // beta's queue refuses the router (its queue policy admits another principal): SQS answers
    // AccessDenied to every SendMessageBatch there, as it would in AWS. (Matched on the queue
    // URL's end, not the name alone: the dead letter's detail names the queue too.)
    estate
        .world
        .proxy
        .set_plan(FaultPlan::none().with_window_matching(
            "SendMessageBatch",
            "/karpenter-beta\"",
            std::time::Duration::ZERO..std::time::Duration::from_secs(3600),
            Fault::Denied,
        ));
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.alpha[0], "ok").to_string(),
        ec2_event(
            "spot-interruption-warning.json",
            &estate.beta[0],
            "denied-long",
        )
        .to_string(),
        ec2_event(
            "spot-interruption-warning.json",
            &estate.beta[1],
            "denied-new",
        )
        .to_string(),
    ];
    // Record 1 was first received ten minutes ago (past the grace), record 2 just now.
    let ten_minutes_ago = now_ms() - 600_000;
    let event = first_received(sqs_event(&bodies), &[now_ms(), ten_minutes_ago, now_ms()]);
    let response = router.invoke(event.to_string(), INVOKE_BUDGET).await;

    // The new one is retried (IAM and queue policies take time to propagate after a deploy);
    // the old one is not retried for minutes as a brownout would be: it is dead-lettered now.
    assert_eq!(
        batch_item_failures(&response),
        ["msg-2"],
        "{}",
        router.printed_lines().join("\n")
    );
    assert_eq!(estate.world.drain(&estate.queues["alpha"]).await?.len(), 1);
    assert_eq!(estate.world.depth(&estate.queues["beta"]).await?, 0);
    let dead = estate.world.drain(&estate.queues["dlq"]).await?;
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(dead[0].body, bodies[1]);
    assert_eq!(dead[0].attributes["reason"], "access-denied");
    let detail = &dead[0].attributes["detail"];
    for names in [
        "karpenter-beta",
        "the router's execution role",
        "AccessDenied",
        "Fix:",
    ] {
        assert!(
            detail.contains(names),
            "the detail names {names:?}: {detail}"
        );
    }
    let emf = router.emf_documents().pop().unwrap();
    assert_eq!(total(&emf, "AccessDenied"), 1);
    assert_eq!(total(&emf, "DeadLettered.access-denied"), 1);
    assert_eq!(total(&emf, "Failed"), 1);
    let logs = router.log_records();
    assert!(
        logs.iter()
            .any(|l| l["level"] == "ERROR" && l["fields"]["reason"] == "access-denied"),
        "an ERROR line says what to fix: {logs:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_record_still_failing_on_its_last_receive_is_dead_lettered_with_its_reason() -> Result<()>
{
    let estate = Estate::new().await?;
    let mut config = estate.router_config();
    config.push(("MAX_RECEIVE_COUNT", "5"));
    let router = estate.world.start_router(&config).await?;
    // beta's queue is down for good.
    estate
        .world
        .proxy
        .set_plan(FaultPlan::none().with_window_matching(
            "SendMessageBatch",
            "/karpenter-beta\"",
            std::time::Duration::ZERO..std::time::Duration::from_secs(3600),
            Fault::Unavailable,
        ));
    let bodies = vec![
        ec2_event("spot-interruption-warning.json", &estate.beta[0], "fourth").to_string(),
        ec2_event("spot-interruption-warning.json", &estate.beta[1], "fifth").to_string(),
    ];
    let mut event = sqs_event(&bodies);
    event["Records"][0]["attributes"]["ApproximateReceiveCount"] = json!("4");
    event["Records"][1]["attributes"]["ApproximateReceiveCount"] = json!("5");
    let response = router.invoke(event.to_string(), INVOKE_BUDGET).await;
    // The fourth receive is handed back; the fifth is the last, and the router keeps it with why.
    assert_eq!(batch_item_failures(&response), ["msg-0"]);
    let dead = estate.world.drain(&estate.queues["dlq"]).await?;
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(dead[0].body, bodies[1]);
    assert_eq!(dead[0].attributes["reason"], "retries-exhausted");
    assert!(
        dead[0].attributes["detail"].contains("receive 5 of 5"),
        "{:?}",
        dead[0].attributes
    );
    Ok(())
}
