//! The verdict, the template checks and the parsers of `routerctl fis`, on recorded inputs.

use std::{collections::BTreeSet, time::Duration};

use super::duration::{iso8601_duration, parse_duration};
use super::evidence::{
    ClusterTally, Delivery, Window, parse_delivery, parse_document_deliveries, tally, window,
};
use super::experiment::{instance_id_in, logged_targets};
use super::template::{TargetSelection, Template};

fn delivery(at_ms: i64, cluster: &str, instances: &[&str], age_ms: u64) -> Delivery {
    Delivery {
        at_ms,
        event_id: format!("e-{at_ms}"),
        kind: "spot-interruption".into(),
        cluster: cluster.into(),
        instances: instances.iter().map(|s| s.to_string()).collect(),
        age_ms: Some(age_ms),
    }
}

#[test]
fn the_window_runs_from_just_before_the_start_to_settle_after_the_end() {
    let w = window(1_000_000, 1_090_000, Duration::from_secs(180));
    assert_eq!(
        w,
        Window {
            from_ms: 995_000,
            to_ms: 1_270_000
        }
    );
    assert!(w.contains(995_000) && w.contains(1_270_000));
    assert!(!w.contains(994_999) && !w.contains(1_270_001));
    // An end before the start (clock trouble) never shrinks the window below the start.
    assert_eq!(window(1_000_000, 900_000, Duration::ZERO).to_ms, 1_000_000);
}

#[test]
fn the_verdict_needs_target_deliveries_and_no_leaks() {
    let w = window(1_000, 10_000, Duration::ZERO);
    let ours: BTreeSet<String> = ["i-0aaaaaaaaaaaaaaaa".to_owned()].into();
    let ok = [
        delivery(2_000, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 800),
        delivery(3_000, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 1_200),
        // Normal traffic for another cluster: counted, not a failure.
        delivery(4_000, "beta", &["i-0bbbbbbbbbbbbbbbb"], 500),
        // Outside the window: ignored.
        delivery(20_000, "beta", &["i-0aaaaaaaaaaaaaaaa"], 1),
    ];
    let v = tally("alpha", &ours, &ok, w, false);
    assert!(v.passed(), "{:?}", v.problems());
    assert_eq!(v.clusters["alpha"].experiment, 2);
    assert_eq!(v.clusters["alpha"].ages_ms, vec![800, 1_200]);
    assert_eq!(
        v.clusters["beta"],
        ClusterTally {
            experiment: 0,
            other: 1,
            ages_ms: vec![],
            kinds: BTreeSet::new(),
        }
    );
    // --strict also fails on the other cluster's traffic.
    let strict = tally("alpha", &ours, &ok, w, true);
    assert_eq!(strict.problems().len(), 1, "{:?}", strict.problems());

    let leaked = [
        ok[0].clone(),
        delivery(5_000, "beta", &["i-0aaaaaaaaaaaaaaaa"], 900),
    ];
    let v = tally("alpha", &ours, &leaked, w, false);
    assert!(!v.passed());
    assert_eq!(v.leaks.len(), 1);
    assert!(
        v.problems()[0].starts_with("beta received event e-5000"),
        "{:?}",
        v.problems()
    );

    let v = tally("alpha", &ours, &ok[2..], w, false);
    assert!(!v.passed());
    assert!(
        v.problems()[0].starts_with("alpha received none"),
        "{:?}",
        v.problems()
    );
}

#[test]
fn a_run_without_the_spot_interruption_warning_fails() {
    let w = window(1_000, 10_000, Duration::ZERO);
    let ours: BTreeSet<String> = ["i-0aaaaaaaaaaaaaaaa".to_owned()].into();
    let of = |kind: &str, at: i64| Delivery {
        kind: kind.into(),
        ..delivery(at, "alpha", &["i-0aaaaaaaaaaaaaaaa"], 900)
    };
    // FIS's order: a rebalance recommendation, the warning, state changes.
    let full = [
        of("rebalance-recommendation", 2_000),
        of("spot-interruption", 3_000),
        of("state-change", 4_000),
    ];
    assert!(tally("alpha", &ours, &full, w, false).passed());
    let no_warning = [
        of("rebalance-recommendation", 2_000),
        of("state-change", 4_000),
    ];
    let v = tally("alpha", &ours, &no_warning, w, false);
    assert!(!v.passed());
    assert!(
        v.problems()[0].contains("no spot interruption warning")
            && v.problems()[0].contains("only: rebalance-recommendation, state-change"),
        "{:?}",
        v.problems()
    );
    // Records from before kinds were written prove nothing either way.
    let v = tally("alpha", &ours, &[of("", 2_000)], w, false);
    assert!(
        v.problems()[0].contains("do not say which kind"),
        "{:?}",
        v.problems()
    );
}

#[test]
fn lambda_wrapped_and_flat_lines_parse_too() {
    let flat = r#"{"outcome":"forwarded","cluster":"alpha","instances":"i-1,i-2","event_id":"x","kind":"state-change","age_ms":7}"#;
    let d = parse_delivery(flat, 5).unwrap();
    assert_eq!(
        (d.cluster.as_str(), d.instances.len(), d.age_ms),
        ("alpha", 2, Some(7))
    );
    let wrapped =
        serde_json::json!({"timestamp": "…", "level": "INFO", "message": flat}).to_string();
    assert_eq!(parse_delivery(&wrapped, 5), Some(d));
    assert_eq!(
        parse_delivery(r#"{"fields":{"outcome":"ignored"}}"#, 0),
        None
    );
    assert_eq!(
        parse_delivery("START RequestId: 1 Version: $LATEST", 0),
        None
    );
}

/// An interruption record (router_core::insight) of a forwarded instance is no delivery line:
/// the delivery's own `forwarded` line is (a FilterLogEvents for "forwarded" meets both).
#[test]
fn an_interruption_record_is_not_read_as_a_delivery() {
    let record = router_core::insight::InterruptionRecord {
        outcome: "forwarded".into(),
        cluster: Some("alpha".into()),
        kind: Some("spot-interruption".into()),
        instance: Some("i-1".into()),
        delay_ms: Some(7),
        ..Default::default()
    };
    let line = record.to_line(0, router_core::logging::Level::Info);
    assert_eq!(parse_delivery(&line, 5), None, "{line}");
}

fn template(tags: &[(&str, &str)]) -> Template {
    Template {
        id: "EXT1".into(),
        cluster: None,
        duration_before_interruption: None,
        targets: vec![TargetSelection {
            name: "ClusterSpotInstances".into(),
            resource_type: "aws:ec2:spot-instance".into(),
            resource_tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            by_arn: false,
        }],
        log_group: None,
    }
}

#[test]
fn a_template_must_select_exactly_the_cluster_and_routed_nodes() {
    let managed = "karpenter.sh/nodepool";
    let ok = template(&[("eks:eks-cluster-name", "alpha"), (managed, "default")]);
    assert_eq!(ok.selects_only("alpha", managed), Ok(()));
    let beta = template(&[("eks:eks-cluster-name", "beta"), (managed, "default")]);
    assert!(
        beta.selects_only("alpha", managed)
            .unwrap_err()
            .contains("beta's nodes")
    );
    let unrouted = template(&[("eks:eks-cluster-name", "alpha")]);
    assert!(
        unrouted
            .selects_only("alpha", managed)
            .unwrap_err()
            .contains("does not select by karpenter.sh/nodepool")
    );
    let two = template(&[
        ("eks:eks-cluster-name", "alpha"),
        ("kubernetes.io/cluster/beta", "owned"),
        (managed, "default"),
    ]);
    assert!(
        two.selects_only("alpha", managed)
            .unwrap_err()
            .contains("another cluster")
    );
    let mut by_arn = ok.clone();
    by_arn.targets[0].by_arn = true;
    assert!(by_arn.selects_only("alpha", managed).is_err());
    let mut instances = ok.clone();
    instances.targets[0].resource_type = "aws:ec2:instance".into();
    assert!(instances.selects_only("alpha", managed).is_err());
}

#[test]
fn experiment_logs_and_metric_documents_are_read() {
    let record = serde_json::json!({"id": "EXP1", "log_type": "target-resolution-detail",
        "version": "2", "details": {"resolved_targets": [
            {"arn": "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0",
             "target_type": "aws:ec2:spot-instance"}]}})
    .to_string();
    assert_eq!(logged_targets(&record, "EXP1"), ["i-0123456789abcdef0"]);
    assert!(logged_targets(&record, "EXP2").is_empty());
    let document = r#"{"_aws":{},"Received":2,"Deliveries":[["alpha","e1","i-1,i-2",900,"spot-interruption"],["beta","e2","i-3",null]]}"#;
    let found = parse_document_deliveries(document, 7);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].instances, ["i-1", "i-2"]);
    assert_eq!((found[0].age_ms, found[1].age_ms), (Some(900), None));
    // Each delivery's kind; none in an earlier build's four-field entries.
    assert_eq!(
        (found[0].kind.as_str(), found[1].kind.as_str()),
        ("spot-interruption", "")
    );
    let wrapped = serde_json::json!({"message": document}).to_string();
    assert_eq!(parse_document_deliveries(&wrapped, 7), found);
}

#[test]
fn durations() {
    assert_eq!(iso8601_duration("PT2M"), Some(Duration::from_secs(120)));
    assert_eq!(
        iso8601_duration("PT1H30M5S"),
        Some(Duration::from_secs(5405))
    );
    assert_eq!(iso8601_duration("PT"), None);
    assert_eq!(iso8601_duration("P1D"), None);
    assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
    assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    assert!(
        parse_duration("3").is_err()
            && parse_duration("m").is_err()
            && parse_duration("2d").is_err()
    );
}

#[test]
fn instance_ids_from_fis_target_information() {
    assert_eq!(
        instance_id_in("arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0")
            .as_deref(),
        Some("i-0123456789abcdef0")
    );
    assert_eq!(instance_id_in("i-0123abcd").as_deref(), Some("i-0123abcd"));
    assert_eq!(instance_id_in("spot-instance"), None);
    assert_eq!(instance_id_in("i-xyz"), None);
}
