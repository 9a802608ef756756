//! `routerctl fis` against the deployed stacks: the verdict from the router's own logs, and no
//! template that could interrupt another cluster's nodes is ever started.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Estate, routerctl};
use anyhow::{Context, Result};
use local_aws::esm::Stop;
use routerctl::{
    fis,
    simulate::{self, SimKind},
};
use serde_json::Value;

#[tokio::test]
async fn fis_reports_from_the_routers_logs_which_clusters_got_the_experiments_events() -> Result<()>
{
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let template = estate.sandbox.create_fis_template("alpha").await?;
    let esm = estate.take_over_mapping().await?;
    let ingest = estate.sandbox.ingest_queue_url().await?;
    let router = estate.start_router().await?;

    // moto runs the experiment but sends nothing: what FIS makes EC2 send is simulated while it
    // runs, alongside normal traffic for beta, and carried by the real router.
    let experiment = fis::start(aws, &template).await?;
    let spot = simulate::run(
        aws,
        &simulate::Options {
            count: 2,
            ..simulate::Options::new("alpha", SimKind::Fis, &ingest)
        },
    )
    .await?;
    let background =
        simulate::run(aws, &simulate::Options::new("beta", SimKind::Spot, &ingest)).await?;
    let stop = Stop {
        handled: Some(9),
        idle: Duration::from_secs(20),
    };
    esm.drain(&aws.sqs, &router, stop, |_| {}).await?;
    // What Lambda does with the function's stdout.
    let lines = router.stdout_lines();
    estate.sandbox.ship_logs(&lines).await?;

    let options = fis::Options {
        cluster: None,
        template_id: None,
        experiment_id: Some(experiment.clone()),
        stack: "ir".into(),
        log_group: None,
        settle: Some(Duration::from_secs(2)),
        poll: Duration::from_millis(20),
        timeout: Duration::from_secs(30),
        strict: false,
        managed_tag: "karpenter.sh/nodepool".into(),
    };
    // moto's FIS resolves no tag-selected target and writes no experiment log: alpha received
    // events, but nothing says they are about the instance the experiment interrupted. No PASS.
    let unknown = fis::run(aws, &options, |_| {}).await?;
    assert!(!unknown.passed(), "{}", unknown.render());
    assert_eq!(unknown.instance_source, fis::InstanceSource::Unknown);
    assert!(
        unknown.render().contains("FIS named no instance"),
        "{}",
        unknown.render()
    );

    // What FIS writes to the experiment's log when it resolves the target.
    estate
        .sandbox
        .log_fis_target_resolution(&template, &experiment, &spot.instances)
        .await?;
    let report = fis::run(aws, &options, |_| {}).await?;
    let rendered = report.render();
    assert!(report.passed(), "{rendered}");
    assert_eq!(report.experiment.status, "completed");
    assert_eq!(
        report.template.cluster.as_deref(),
        Some("alpha"),
        "the target comes from the template"
    );
    assert_eq!(
        report.template.duration_before_interruption,
        Some(Duration::from_secs(120))
    );
    assert_eq!(report.log_group, "/aws/lambda/ir-router");
    assert_eq!(report.instance_source, fis::InstanceSource::ExperimentLog);
    assert_eq!(
        report.instances,
        spot.instances.iter().cloned().collect(),
        "the instances FIS logged, not every instance of the cluster"
    );
    let alpha = &report.verdict.clusters["alpha"];
    assert_eq!((alpha.experiment, alpha.other), (8, 0), "{rendered}");
    assert_eq!(alpha.ages_ms.len(), 8, "every delivery carries its age");
    assert_eq!(
        report.verdict.clusters["beta"],
        fis::ClusterTally {
            experiment: 0,
            other: 1,
            ages_ms: vec![],
            kinds: Default::default(),
        }
    );
    // The metric documents say each delivery's kind: the warning itself reached alpha.
    assert_eq!(
        alpha.kinds,
        [
            "rebalance-recommendation",
            "spot-interruption",
            "state-change"
        ]
        .map(str::to_owned)
        .into(),
        "{rendered}"
    );
    assert!(
        rendered.contains("PASS: 8 events about the experiment's instances reached alpha"),
        "{rendered}"
    );
    // The binary prints the same report and exits 0 on a pass. Printed: the operating guide's
    // transcript is this output (`--nocapture`).
    let (code, out, err) = routerctl(
        &estate,
        &[
            "fis",
            "--experiment-id",
            &experiment,
            "--stack",
            "ir",
            "--settle",
            "2s",
        ],
    )
    .await?;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, rendered, "{err}");
    println!("$ routerctl fis --experiment-id {experiment} --stack ir --settle 2s\n{out}");

    // --strict counts beta's unrelated spot warning against isolation.
    let strict = fis::run(
        aws,
        &fis::Options {
            strict: true,
            settle: Some(Duration::ZERO),
            ..options.clone()
        },
        |_| {},
    )
    .await?;
    assert!(!strict.passed());
    assert!(
        strict
            .render()
            .contains("beta received 1 other event(s) during the window (--strict)")
    );

    // The verdict on the router's real log lines, one of them rewritten to a misroute.
    let now = now_ms();
    let window = fis::window(now - 60_000, now, Duration::ZERO);
    let deliveries: Vec<fis::Delivery> = lines
        .iter()
        .filter_map(|l| fis::parse_delivery(l, now))
        .collect();
    assert_eq!(deliveries.len(), 9, "one line per delivery: {lines:#?}");
    let beta_delivery = deliveries.iter().find(|d| d.cluster == "beta").unwrap();
    assert_eq!(beta_delivery.event_id, background.sent[0].event.id);
    assert_eq!(beta_delivery.kind, "spot-interruption");
    assert_eq!(beta_delivery.instances, background.instances);
    let verdict = fis::tally("alpha", &report.instances, &deliveries, window, false);
    assert!(verdict.passed(), "{:?}", verdict.problems());
    // The same run without the warnings (only the rebalance recommendations and state changes
    // arrived) is no evidence: FAIL.
    let without_warning: Vec<fis::Delivery> = deliveries
        .iter()
        .filter(|d| d.kind != "spot-interruption")
        .cloned()
        .collect();
    let verdict = fis::tally("alpha", &report.instances, &without_warning, window, false);
    assert!(!verdict.passed());
    assert!(
        verdict.problems()[0].contains("no spot interruption warning"),
        "{:?}",
        verdict.problems()
    );

    let misrouted: Vec<fis::Delivery> = lines
        .iter()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap_or_default();
            if value["fields"]["event_id"]
                .as_str()
                .is_some_and(|id| id.ends_with("-0-fis-warning"))
            {
                value["fields"]["cluster"] = "beta".into();
            }
            value.to_string()
        })
        .filter_map(|l| fis::parse_delivery(&l, now))
        .collect();
    let verdict = fis::tally("alpha", &report.instances, &misrouted, window, false);
    assert_eq!(verdict.leaks.len(), 1, "{:?}", verdict.problems());
    assert!(
        verdict.problems()[0].starts_with("beta received event routerctl-"),
        "{:?}",
        verdict.problems()
    );

    let nothing: Vec<fis::Delivery> = deliveries
        .iter()
        .filter(|d| d.cluster == "beta")
        .cloned()
        .collect();
    let verdict = fis::tally("alpha", &report.instances, &nothing, window, false);
    assert!(verdict.problems()[0].starts_with("alpha received none of the experiment's events"));

    // At LogLevel WARN Lambda drops the per-event lines; the metric documents' Deliveries stay,
    // and the verdict rests on them.
    let env = estate.sandbox.function_environment().await?;
    let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    pairs.push(("AWS_LAMBDA_LOG_LEVEL", "WARN"));
    let quiet = estate.world.start_router(&pairs).await?;
    let second = fis::start(aws, &template).await?;
    estate
        .sandbox
        .log_fis_target_resolution(&template, &second, &spot.instances)
        .await?;
    let again = simulate::run(
        aws,
        &simulate::Options {
            count: 2,
            ..simulate::Options::new("alpha", SimKind::Fis, &ingest)
        },
    )
    .await?;
    assert_eq!(again.instances, spot.instances);
    let stop = Stop {
        handled: Some(8),
        idle: Duration::from_secs(20),
    };
    esm.drain(&aws.sqs, &quiet, stop, |_| {}).await?;
    let kept = quiet.stdout_lines();
    assert!(
        kept.iter().all(|l| fis::parse_delivery(l, 0).is_none()),
        "no forwarded line survives WARN: {kept:#?}"
    );
    estate
        .sandbox
        .ship_logs_to("/aws/lambda/ir-router-at-warn", &kept)
        .await?;
    let at_warn = fis::run(
        aws,
        &fis::Options {
            experiment_id: Some(second),
            log_group: Some("/aws/lambda/ir-router-at-warn".into()),
            ..options.clone()
        },
        |_| {},
    )
    .await?;
    assert!(at_warn.passed(), "{}", at_warn.render());
    assert_eq!(at_warn.verdict.clusters["alpha"].experiment, 8);
    Ok(())
}

#[tokio::test]
async fn fis_never_starts_a_template_that_could_interrupt_another_clusters_or_an_unrouted_node()
-> Result<()> {
    let estate = Estate::deploy().await?;
    let aws = estate.aws();
    let started = async || -> Result<usize> {
        Ok(aws.fis.list_experiments().send().await?.experiments().len())
    };
    let run = |template: &str, cluster: &str, log_group: Option<&str>| fis::Options {
        cluster: Some(cluster.into()),
        template_id: Some(template.into()),
        experiment_id: None,
        stack: "ir".into(),
        log_group: log_group.map(str::to_owned),
        settle: Some(Duration::ZERO),
        poll: Duration::from_millis(20),
        timeout: Duration::from_secs(30),
        strict: false,
        managed_tag: "karpenter.sh/nodepool".into(),
    };

    // Beta's template, asked to run against alpha: refused before StartExperiment.
    let beta = estate.sandbox.create_fis_template("beta").await?;
    let error = fis::run(aws, &run(&beta, "alpha", None), |_| {})
        .await
        .err()
        .context("beta's template must not run for alpha")?;
    assert!(
        error
            .to_string()
            .contains("interrupts instances of beta, not alpha: not started"),
        "{error:#}"
    );
    assert_eq!(started().await?, 0, "nothing was started");
    let (code, _, err) = routerctl(
        &estate,
        &["fis", "--template-id", &beta, "--cluster", "alpha", "--yes"],
    )
    .await?;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not started"), "{err}");
    assert_eq!(started().await?, 0);

    // The template as fis.yaml wrote it before it selected by the managed tag: it could pick a
    // managed node group's spot node, which the router does not route and nobody drains.
    let old = estate
        .sandbox
        .create_fis_template_from(&e2e_tests::previous_template("fis.yaml"), "alpha")
        .await?;
    let error = fis::run(aws, &run(&old, "alpha", None), |_| {})
        .await
        .err()
        .context("a template without the managed tag must not run")?;
    assert!(
        error
            .to_string()
            .contains("does not select by karpenter.sh/nodepool"),
        "{error:#}"
    );
    assert_eq!(started().await?, 0);

    // Once an experiment runs, a later failure names it and how to stop it.
    let alpha = estate.sandbox.create_fis_template("alpha").await?;
    let error = fis::run(aws, &run(&alpha, "alpha", Some("/no/such/group")), |_| {})
        .await
        .err()
        .context("reading a log group that does not exist fails")?;
    let text = format!("{error:#}");
    assert_eq!(started().await?, 1);
    assert!(
        text.contains("was started and may still be interrupting nodes")
            && text.contains("aws fis stop-experiment --region us-east-1 --id"),
        "{text}"
    );
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
