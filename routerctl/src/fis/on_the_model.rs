//! `routerctl fis` on the model of AWS ([`crate::cloud::model`]) in tokio's paused time: the
//! template found by its tags and checked before anything starts, the experiment started and
//! waited for, the instances it interrupted read back from FIS, and the router's deliveries read
//! from its log group, judged.

use std::{collections::BTreeMap, time::Duration};

use serde_json::json;

use super::{Options, run};
use crate::cloud::{
    experiments::{ExperimentTemplate, TemplateTarget},
    model::World,
};
use aws_model::stacks::BASE_TEMPLATE;

const NODEPOOL: &str = "karpenter.sh/nodepool";
const ALPHA: [&str; 2] = ["i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"];

/// A spot-interruption template: one target selecting `tags`.
fn template(tags: &[(&str, &str)]) -> ExperimentTemplate {
    ExperimentTemplate {
        targets: vec![TemplateTarget {
            name: "SpotInstances".into(),
            resource_type: "aws:ec2:spot-instance".into(),
            resource_tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            by_arn: false,
        }],
        log_group_arn: None,
        spot_notices: vec!["PT2M".into()],
    }
}

/// A hub with alpha's two spot nodes and beta's one, and fis.yaml's template for alpha.
fn hub() -> (World, String) {
    let world = World::new("123456789012", "us-east-1");
    world
        .deploy("ir", BASE_TEMPLATE, &[("CodeS3Bucket", "artefacts")])
        .expect("base.yaml deploys");
    for id in ALPHA {
        world.instance(
            id,
            "running",
            &[("eks:eks-cluster-name", "alpha"), (NODEPOOL, "spot")],
        );
    }
    world.instance(
        "i-0bbbbbbbbbbbbbbb1",
        "running",
        &[("eks:eks-cluster-name", "beta"), (NODEPOOL, "spot")],
    );
    world.put_experiment_template(
        "EXTalpha",
        &[("cluster", "alpha"), ("app", "interruption-router")],
        template(&[("eks:eks-cluster-name", "alpha"), (NODEPOOL, "spot")]),
    );
    let group = world.site(|site| site.stacks["ir"].resources["RouterLogGroup"].clone());
    (world, group)
}

/// The router's metric document listing these deliveries (cluster, instance).
fn document(deliveries: &[(&str, &str)]) -> String {
    let listed: Vec<_> = deliveries
        .iter()
        .enumerate()
        .map(|(n, (cluster, instance))| {
            json!([cluster, format!("e{n}"), instance, 900, "spot-interruption"])
        })
        .collect();
    json!({"_aws": {}, "Received": listed.len(), "Deliveries": listed}).to_string()
}

fn options() -> Options {
    Options {
        cluster: Some("alpha".into()),
        template_id: None,
        experiment_id: None,
        stack: "ir".into(),
        log_group: None,
        settle: None,
        poll: Duration::from_secs(5),
        timeout: Duration::from_secs(900),
        strict: false,
        managed_tag: NODEPOOL.into(),
    }
}

fn fis(world: &World, options: &Options) -> anyhow::Result<super::Report> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(run(world, options, |_| {}))
}

/// Every interrupted node delivered to alpha, and none elsewhere: it passes; the waits (the
/// notice and log delivery) pass in virtual time.
#[test]
fn an_experiment_whose_nodes_reach_their_cluster_passes() {
    let (world, group) = hub();
    world.log(
        &group,
        &document(&[("alpha", ALPHA[0]), ("alpha", ALPHA[1])]),
    );
    let report = fis(&world, &options()).unwrap();
    assert!(report.passed(), "{}", report.render());
    assert_eq!(
        report.instances,
        ALPHA.iter().map(|s| s.to_string()).collect()
    );
    assert_eq!(report.verdict.clusters["alpha"].experiment, 2);
    // beta's node was not touched.
    assert!(world.site(|site| site.instances["i-0bbbbbbbbbbbbbbb1"].state == "running"));
}

/// An interrupted node's event in another cluster's queue is a leak; a node never delivered is a
/// miss.
#[test]
fn a_leak_or_a_miss_fails_the_verdict() {
    let (world, group) = hub();
    world.log(
        &group,
        &document(&[("alpha", ALPHA[0]), ("beta", ALPHA[1])]),
    );
    let report = fis(&world, &options()).unwrap();
    assert!(!report.passed());
    let problems = report.problems().join("\n");
    assert!(problems.contains("beta"), "{problems}");
    assert!(problems.contains(ALPHA[1]), "{problems}");
}

/// A template that could interrupt another cluster's nodes, or nodes nobody drains, is never
/// started; a cluster without a template says how to deploy one.
#[test]
fn a_template_that_could_touch_another_cluster_is_never_started() {
    for (tags, expected) in [
        (
            &[("eks:eks-cluster-name", "beta"), (NODEPOOL, "spot")][..],
            "not started",
        ),
        (
            &[("eks:eks-cluster-name", "alpha")][..],
            "does not select by karpenter.sh/nodepool",
        ),
        (
            &[(NODEPOOL, "spot")][..],
            "does not select instances by eks:eks-cluster-name",
        ),
    ] {
        let (world, _) = hub();
        world.put_experiment_template(
            "EXTalpha",
            &[("cluster", "alpha"), ("app", "interruption-router")],
            template(tags),
        );
        let error = fis(&world, &options()).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
        assert!(world.site(|site| site.experiments.is_empty()), "started");
    }
    let (world, _) = hub();
    let error = fis(
        &world,
        &Options {
            cluster: Some("gamma".into()),
            ..options()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("make deploy-fis CLUSTER=gamma REGION=us-east-1"),
        "{error}"
    );
}

/// `--experiment-id`: an experiment that already ran is reported on, nothing started.
#[test]
fn an_experiment_that_already_ran_is_reported_on_without_starting_another() {
    let (world, group) = hub();
    let id = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(crate::cloud::experiments::Experiments::start_experiment(
            &world, "EXTalpha",
        ))
        .unwrap();
    world.log(
        &group,
        &document(&[("alpha", ALPHA[0]), ("alpha", ALPHA[1])]),
    );
    let report = fis(
        &world,
        &Options {
            experiment_id: Some(id.clone()),
            cluster: None,
            ..options()
        },
    )
    .unwrap();
    assert!(report.passed(), "{}", report.render());
    assert_eq!(report.experiment.id, id);
    assert_eq!(
        world.site(|site| site.experiments.len()),
        1,
        "nothing else started"
    );
}

/// Templates that could not be judged for one cluster, or are not this project's: never started.
#[test]
fn templates_by_arn_of_another_type_or_two_of_them_are_refused() {
    let mut by_arn = template(&[("eks:eks-cluster-name", "alpha"), (NODEPOOL, "spot")]);
    by_arn.targets[0].by_arn = true;
    let mut other_type = template(&[("eks:eks-cluster-name", "alpha"), (NODEPOOL, "spot")]);
    other_type.targets[0].resource_type = "aws:ec2:instance".into();
    for (t, expected) in [
        (by_arn, "names instances by ARN"),
        (other_type, "not aws:ec2:spot-instance"),
    ] {
        let (world, _) = hub();
        world.put_experiment_template(
            "EXTalpha",
            &[("cluster", "alpha"), ("app", "interruption-router")],
            t,
        );
        let error = fis(&world, &options()).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
        assert!(world.site(|site| site.experiments.is_empty()));
    }
    let (world, _) = hub();
    world.put_experiment_template(
        "EXTalpha2",
        &[("cluster", "alpha"), ("app", "interruption-router")],
        template(&[("eks:eks-cluster-name", "alpha"), (NODEPOOL, "spot")]),
    );
    let error = fis(&world, &options()).unwrap_err().to_string();
    assert!(
        error.contains("2 templates are tagged cluster=alpha"),
        "{error}"
    );
}

/// An experiment FIS failed: the error says why, and what an empty target means.
#[test]
fn a_failed_experiment_says_why() {
    let (world, _) = hub();
    world.site(|site| {
        site.experiments.insert(
            "EXPfailed".into(),
            crate::cloud::experiments::ExperimentState {
                template_id: "EXTalpha".into(),
                status: Some("failed".into()),
                reason: Some("Target resolution returned empty set".into()),
                ..Default::default()
            },
        );
    });
    let error = fis(
        &world,
        &Options {
            experiment_id: Some("EXPfailed".into()),
            ..options()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("experiment EXPfailed failed: Target resolution returned empty set"),
        "{error}"
    );
    assert!(
        error.contains("no running spot instance carries the cluster tag"),
        "{error}"
    );
}
