//! `routerctl simulate` against the deployed stacks: each synthetic interruption reaches exactly
//! its cluster's queue, and what would not reach it is refused with the reason.

use std::{sync::Arc, time::Duration};

use super::{Estate, sorted};
use anyhow::Result;
use aws_clients::aws::Aws;
use e2e_tests::INVOKE_BUDGET;
use local_aws::{
    esm::Stop,
    invoke_api::InvokeApi,
    moto::{ACCOUNT, sdk_config_for},
    proxy::{Fault, FaultPlan},
    runtime_api::Invocation,
};
use routerctl::simulate::{self, SimKind};

#[tokio::test]
async fn simulate_into_the_ingest_queue_reaches_exactly_the_clusters_queue() -> Result<()> {
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let esm = estate.take_over_mapping().await?;
    let ingest = estate.sandbox.ingest_queue_url().await?;

    let mut alpha_ids = Vec::new();
    for (kind, events) in [
        (SimKind::Spot, 2),
        (SimKind::Rebalance, 2),
        (SimKind::State, 2),
        (SimKind::Capacity, 2),
        (SimKind::Health, 1),
        (SimKind::Fis, 8),
    ] {
        let options = simulate::Options {
            count: 2,
            ..simulate::Options::new("alpha", kind, &ingest)
        };
        let report = simulate::run(aws, &options).await?;
        assert_eq!(report.failed(), 0, "{}", report.render());
        assert_eq!(report.sent.len(), events, "{kind:?}: {}", report.render());
        // Lowest ids first, and never the managed node group's instance.
        assert_eq!(report.instances, estate.alpha[..2], "{kind:?}");
        assert!(!report.instances.contains(&estate.managed));
        assert_eq!(
            report.account, ACCOUNT,
            "the account comes from the instances' owner"
        );
        alpha_ids.extend(report.event_ids().into_iter().map(str::to_owned));
    }
    let beta = simulate::run(aws, &simulate::Options::new("beta", SimKind::Spot, &ingest)).await?;
    assert_eq!(beta.instances, estate.beta[..1]);
    let rendered = beta.render();
    assert!(
        rendered.contains(beta.sent[0].event.id.as_str()) && rendered.contains("message "),
        "{rendered}"
    );

    let sent = (alpha_ids.len() + 1) as u64;
    let router = estate.start_router().await?;
    let stop = Stop {
        handled: Some(sent),
        idle: Duration::from_secs(20),
    };
    let drained = esm.drain(&aws.sqs, &router, stop, |_| {}).await?;
    assert_eq!(drained.handled, sent, "{drained:?}");

    assert_eq!(
        estate.ids_in("karpenter-alpha").await?,
        sorted(alpha_ids.iter().map(String::as_str).collect()),
        "alpha's queue holds exactly the events simulated for alpha, once each"
    );
    assert_eq!(
        estate.ids_in("karpenter-beta").await?,
        sorted(beta.event_ids())
    );
    assert_eq!(estate.world.depth(&ingest).await?, 0);
    let dlq = estate.sandbox.queue_url("ir-dlq").await?;
    assert_eq!(estate.world.depth(&dlq).await?, 0, "nothing dead-lettered");
    Ok(())
}

#[tokio::test]
async fn simulate_refuses_what_would_not_reach_the_cluster_and_says_why() -> Result<()> {
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let ingest = estate.sandbox.ingest_queue_url().await?;
    let missing_queue = format!("{}/{ACCOUNT}/missing-ingest", estate.world.moto.endpoint());
    let spot = |cluster: &str, to: &str| simulate::Options::new(cluster, SimKind::Spot, to);
    let cases = [
        (
            spot("nope", &ingest),
            "no running instances tagged eks:eks-cluster-name=nope in us-east-1",
        ),
        (
            simulate::Options {
                count: 4,
                ..spot("alpha", &ingest)
            },
            "--count 4: only 3 running Karpenter instances are tagged eks:eks-cluster-name=alpha",
        ),
        (
            simulate::Options {
                instances: vec![estate.beta[0].clone()],
                ..spot("alpha", &ingest)
            },
            "is not tagged eks:eks-cluster-name=alpha (it has eks:eks-cluster-name=beta)",
        ),
        (
            simulate::Options {
                instances: vec![estate.managed.clone()],
                ..spot("alpha", &ingest)
            },
            "has no karpenter.sh/nodepool tag: the router forwards events only for instances tagged",
        ),
        (
            spot("alpha", &missing_queue),
            "missing-ingest does not exist in us-east-1: pass the base stack's IngestQueueUrl output",
        ),
        (
            simulate::Options {
                state: "running".into(),
                ..simulate::Options::new("alpha", SimKind::State, &ingest)
            },
            "--state running: the rules and the router only pass stopping, stopped, shutting-down, terminated",
        ),
    ];
    for (options, expected) in cases {
        let error = simulate::run(aws, &options)
            .await
            .expect_err(expected)
            .to_string();
        assert!(error.contains(expected), "{error}\nexpected: {expected}");
    }
    assert_eq!(estate.world.depth(&ingest).await?, 0, "nothing was sent");
    Ok(())
}

/// In AWS the base stack's ingest queue denies every sender but its own rules: simulate reports
/// the refusal and names the path that works (the function).
#[tokio::test]
async fn simulate_refused_by_the_ingest_queue_says_to_send_to_the_function() -> Result<()> {
    let estate = Estate::deploy().await?;
    let ingest = estate.sandbox.ingest_queue_url().await?;
    estate.world.proxy.set_plan(FaultPlan::none().with_window(
        "SendMessageBatch",
        Duration::ZERO..Duration::from_secs(3600),
        Fault::Denied,
    ));
    let aws = Aws {
        sqs: aws_sdk_sqs::Client::new(&sdk_config_for(&estate.world.proxy.endpoint()).await),
        ..estate.aws().clone()
    };
    let report = simulate::run(
        &aws,
        &simulate::Options::new("alpha", SimKind::Spot, &ingest),
    )
    .await?;
    assert_eq!(report.failed(), 1, "{}", report.render());
    let error = report.sent[0].result.as_ref().unwrap_err();
    assert!(
        error.contains("AccessDenied")
            && error.contains("DenySendersOtherThanTheseRules")
            && error.contains("--to <the stack's FunctionName output>"),
        "{error}"
    );
    assert_eq!(estate.world.depth(&ingest).await?, 0);
    Ok(())
}

/// Where the ingest queue refuses simulate (in AWS it admits only the stack's rules): the events
/// go to the function as the SQS batch the event source mapping would have handed it, through
/// Lambda's Invoke API, and the router's answer says what it took.
#[tokio::test]
async fn simulate_invokes_the_function_with_the_batch_the_ingest_queue_would_have_given()
-> Result<()> {
    let estate = Estate::deploy().await?;

    // Lambda's Invoke API in front of the router process: the real path of an async invoke.
    let router = Arc::new(estate.start_router().await?);
    let function = estate.sandbox.function_name()?;
    let api = InvokeApi::start(router.clone(), function, INVOKE_BUDGET).await?;
    let aws = Aws {
        lambda: aws_sdk_lambda::Client::new(&sdk_config_for(&api.endpoint()).await),
        ..estate.aws().clone()
    };
    let options = simulate::Options {
        count: 2,
        ..simulate::Options::new("alpha", SimKind::Fis, function)
    };
    let report = simulate::run(&aws, &options).await?;
    assert_eq!(report.sent.len(), 8, "{}", report.render());
    for sent in &report.sent {
        assert_eq!(sent.result.as_deref(), Ok("forwarded by the router"));
    }
    let finished = api.wait_finished(1, Duration::from_secs(60)).await;
    assert_eq!(finished.len(), 1, "8 events, one batch");
    assert!(
        finished
            .iter()
            .all(|i| matches!(i, Invocation::Response(_))),
        "{finished:?}"
    );
    assert_eq!(
        estate.ids_in("karpenter-alpha").await?,
        sorted(report.event_ids())
    );
    assert!(estate.ids_in("karpenter-beta").await?.is_empty());

    let error = simulate::run(
        &aws,
        &simulate::Options::new("alpha", SimKind::Spot, "not-the-router"),
    )
    .await
    .expect_err("no such function")
    .to_string();
    assert!(
        error.contains("function not-the-router not found in us-east-1"),
        "{error}"
    );
    Ok(())
}
