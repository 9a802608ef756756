//! Classification of every fixture as Karpenter v1.14 reads it.

use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/events");

pub(super) fn fixture(name: &str) -> String {
    let path = format!("{FIXTURES}/{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(super) fn ids(list: &[&str]) -> Vec<InstanceId> {
    list.iter().map(|s| InstanceId::parse(s).unwrap()).collect()
}

fn routed(name: &str) -> Interruption {
    match classify(&fixture(name)).unwrap() {
        Classified::Route(i) => i,
        other => panic!("{name}: expected Route, got {other:?}"),
    }
}

fn ignored(body: &str) -> IgnoreReason {
    match classify(body).unwrap() {
        Classified::Ignore { reason, .. } => reason,
        other => panic!("expected Ignore, got {other:?}"),
    }
}

#[test]
fn fixtures_karpenter_acts_on_are_routed_with_their_instances() {
    let cases = [
        (
            "spot-interruption-warning.json",
            Kind::SpotInterruption,
            "i-0b662ef9931388ba0",
        ),
        (
            "rebalance-recommendation.json",
            Kind::RebalanceRecommendation,
            "i-0b662ef9931388ba0",
        ),
        (
            "state-change-stopping.json",
            Kind::StateChange,
            "i-0123456789abcdef0",
        ),
        (
            "state-change-terminated.json",
            Kind::StateChange,
            "i-0123456789abcdef2",
        ),
        (
            "capacity-reservation-interruption-warning.json",
            Kind::CapacityReservationInterruption,
            "i-0123456789abcdef4",
        ),
        (
            "health-scheduled-change-bare-id.json",
            Kind::ScheduledChange,
            "i-12345678",
        ),
        (
            "health-instance-retirement-arn-entity.json",
            Kind::ScheduledChange,
            "i-1234567890abcdef0",
        ),
    ];
    for (name, kind, instance) in cases {
        let i = routed(name);
        assert_eq!(i.kind, kind, "{name}");
        assert_eq!(i.instances, ids(&[instance]), "{name}");
    }
}

#[test]
fn envelope_fields_are_kept_for_logs_and_keys() {
    let i = routed("state-change-terminated.json");
    assert_eq!(
        i.id.as_deref(),
        Some("6b7a4a2e-0f5c-4c71-9a51-3f5c2b1f0b00")
    );
    assert_eq!(i.time.as_deref(), Some("2026-08-21T10:00:00Z"));
    assert_eq!(
        i.origin,
        Origin {
            account: Some("000000000000".into()),
            region: Some("us-west-2".into())
        }
    );
}

#[test]
fn fixtures_karpenter_deletes_are_ignored_with_a_reason() {
    assert_eq!(
        ignored(&fixture("state-change-pending.json")),
        IgnoreReason::StateNotActionable
    );
    assert_eq!(
        ignored(&fixture("state-change-no-version-field.json")),
        IgnoreReason::UnsupportedVersion
    );
    assert_eq!(
        ignored(&fixture("health-issue-backup-event.json")),
        IgnoreReason::HealthNotScheduledChange
    );
    assert_eq!(
        ignored(&fixture("health-non-ec2-risk.json")),
        IgnoreReason::HealthNotScheduledChange
    );
    assert_eq!(
        ignored(&fixture("asg-terminate-lifecycle-action.json")),
        IgnoreReason::UnknownKind
    );
}

#[test]
fn every_actionable_state_routes_and_others_do_not() {
    let body = fixture("state-change-stopping.json");
    for state in ACTIONABLE_STATES {
        let b = body.replace("\"stopping\"", &format!("{state:?}"));
        assert!(
            matches!(classify(&b).unwrap(), Classified::Route(_)),
            "{state}"
        );
    }
    for state in ["pending", "running", "Stopping", ""] {
        let b = body.replace("\"stopping\"", &format!("{state:?}"));
        assert_eq!(ignored(&b), IgnoreReason::StateNotActionable, "{state}");
    }
}

#[test]
fn payloads_without_string_source_and_detail_type_are_malformed() {
    for body in [
        "",
        "null",
        "[]",
        "\"text\"",
        "{}",
        r#"{"source":"aws.ec2"}"#,
        r#"{"detail-type":"EC2 Spot Instance Interruption Warning"}"#,
        r#"{"source":5,"detail-type":"x"}"#,
        r#"{"source":"aws.ec2","detail-type":null}"#,
        r#"{"source":"aws.ec2","source":"aws.ec2","detail-type":"x"}"#,
        "{\"source\":\"aws.ec2\",",
    ] {
        assert!(classify(body).is_err(), "{body:?} should be malformed");
    }
}

#[test]
fn known_kinds_karpenter_could_not_parse_are_malformed() {
    let spot = fixture("spot-interruption-warning.json");
    let cases = [
        spot.replace("\"2026-11-01T12:00:00Z\"", "\"yyyy-mm-ddThh:mm:ssZ\""),
        spot.replace("\"123456789012\"", "123456789012"),
        spot.replace("\"version\": \"0\"", "\"version\": 0"),
        spot.replace(
            "\"instance-id\": \"i-0b662ef9931388ba0\"",
            "\"instance-id\": \"host-1\"",
        ),
        spot.replace(
            "\"instance-id\": \"i-0b662ef9931388ba0\"",
            "\"instance-id\": 7",
        ),
        spot.replace("\"instance-id\": \"i-0b662ef9931388ba0\",", ""),
        spot.replace(
            "\"resources\": [\n    \"arn:aws:ec2:us-east-1b:instance/i-0b662ef9931388ba0\"\n  ]",
            "\"resources\": \"arn\"",
        ),
    ];
    for (n, body) in cases.iter().enumerate() {
        assert_ne!(body, &spot, "case {n} did not change the fixture");
        assert!(
            classify(body).is_err(),
            "case {n} should be malformed: {body}"
        );
    }
    // The same defects in an event Karpenter does not parse are nobody's business.
    let asg =
        fixture("asg-terminate-lifecycle-action.json").replace("\"123456789012\"", "123456789012");
    assert_eq!(ignored(&asg), IgnoreReason::UnknownKind);
}

#[test]
fn health_entities_that_are_not_instances_are_skipped_and_duplicates_collapse() {
    let body = fixture("health-scheduled-change-bare-id.json").replace(
        r#""affectedEntities": ["#,
        r#""affectedEntities": [
          {"entityValue": "h-0123456789abcdef0"},
          {"entityValue": "arn:aws:ec2:us-east-1:123456789012:instance/i-12345678"},
          {"entityValue": 42},
          {"entityValue": "i-0aaaaaaaaaaaaaaaa"},"#,
    );
    // entityValue 42 is not a string: Karpenter's Go struct could not decode it.
    assert!(classify(&body).is_err());
    let body = body.replace(r#"{"entityValue": 42},"#, "");
    let i = match classify(&body).unwrap() {
        Classified::Route(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(i.instances, ids(&["i-12345678", "i-0aaaaaaaaaaaaaaaa"]));
}

/// An entity written as an array (`[["i-…"]]`): serde would read `entityValue` from it, but
/// Karpenter's Go decoder and the splitter refuse it, so it is malformed, not routed (found by
/// `classify_props::mutated_real_events_never_panic` on a clean clone's `make test`).
#[test]
fn a_health_entity_that_is_not_an_object_is_malformed() {
    let fixture = fixture("health-scheduled-change-bare-id.json");
    for entities in [r#"[["i-0123456789abcdef0"]]"#, r#"["i-0123456789abcdef0"]"#] {
        let start = fixture
            .find(r#""affectedEntities": ["#)
            .expect("the fixture's entities");
        let end = start + fixture[start..].find(']').expect("their end") + 1;
        let body = format!(
            "{}\"affectedEntities\": {entities}{}",
            &fixture[..start],
            &fixture[end..]
        );
        let error = classify(&body).expect_err(entities);
        assert!(
            error.to_string().contains("an entity is a JSON object"),
            "{entities}: {error}"
        );
    }
}

/// serde reads a struct from a JSON array (its fields in order); Karpenter's Go decoder does not.
/// An event, an EC2 detail or a Health detail written as an array is malformed, not routed.
#[test]
fn an_event_or_a_detail_written_as_an_array_is_malformed() {
    let spot = r#"{"version":"0","id":"e","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":"2026-01-27T01:43:21Z","region":"us-east-1","resources":[],"detail":["i-0123456789abcdef0","terminate"]}"#;
    let health = r#"{"version":"0","id":"h","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012","time":"2026-01-27T01:43:21Z","region":"us-east-1","resources":[],"detail":["EC2","scheduledChange",[{"entityValue":"i-0123456789abcdef0"}]]}"#;
    let envelope = r#"["aws.ec2","EC2 Spot Instance Interruption Warning","0","e","2026-01-27T01:43:21Z","123456789012","us-east-1",[],{"instance-id":"i-0123456789abcdef0"}]"#;
    for body in [spot, health, envelope] {
        let error = classify(body).expect_err(body);
        assert!(
            error.to_string().contains("a JSON object"),
            "{body}: {error}"
        );
    }
}

#[test]
fn ec2_scheduled_change_naming_no_instance_is_ignored() {
    let body =
        fixture("health-scheduled-change-bare-id.json").replace("\"i-12345678\"", "\"h-12345678\"");
    assert_eq!(ignored(&body), IgnoreReason::NoInstanceEntities);
}

#[test]
fn rule_patterns_admit_exactly_what_is_forwarded() {
    assert_eq!(
        Kind::StateChange.event_pattern(),
        serde_json::json!({"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
                           "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]}})
    );
    assert_eq!(
        Kind::ScheduledChange.event_pattern()["detail"],
        serde_json::json!({"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]})
    );
    assert_eq!(
        Kind::SpotInterruption.event_pattern(),
        serde_json::json!({"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]})
    );
    assert_eq!(
        Kind::SpotInterruption.event_pattern_in("111111111111"),
        serde_json::json!({"account": ["111111111111"], "source": ["aws.ec2"],
                           "detail-type": ["EC2 Spot Instance Interruption Warning"]})
    );
}

#[test]
fn instance_ids_accept_bare_and_arn_forms_only() {
    assert_eq!(
        InstanceId::parse("i-0123456789abcdef0").unwrap().as_str(),
        "i-0123456789abcdef0"
    );
    assert_eq!(
        InstanceId::parse("i-abcd1111").unwrap().as_str(),
        "i-abcd1111"
    );
    assert_eq!(
        InstanceId::parse(
            "arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/i-0123456789abcdef0"
        )
        .unwrap()
        .as_str(),
        "i-0123456789abcdef0"
    );
    for bad in [
        "",
        "i-",
        "i-123",
        "i-0123456789ABCDEF0",
        "i-0123456789abcdef0 ",
        "h-0123456789abcdef0",
        "arn:aws:ec2:us-east-1:123456789012:volume/vol-0123456789abcdef0",
        "arn:aws:s3:us-east-1:123456789012:instance/i-0123456789abcdef0",
        "ACCESS_KEY_ID_HERE",
    ] {
        assert_eq!(InstanceId::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn null_envelope_fields_read_as_absent_as_in_karpenters_go_structs() {
    // encoding/json leaves a string field empty for a JSON null; Karpenter parses the event.
    let body = fixture("spot-interruption-warning.json")
        .replace("\"123456789012\"", "null")
        .replace("\"us-east-1\"", "null")
        .replace("\"1e5527d7-bb36-4607-3370-4164db56a40e\"", "null");
    let i = match classify(&body).unwrap() {
        Classified::Route(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(i.origin, Origin::default());
    assert_eq!(i.id, None);
    assert_eq!(i.instances, ids(&["i-0b662ef9931388ba0"]));
}

#[test]
fn kinds_reasons_ids_and_origins_read_as_their_labels_in_logs() {
    assert_eq!(
        Kind::SpotInterruption.to_string(),
        Kind::SpotInterruption.label()
    );
    assert_eq!(IgnoreReason::KindDeclined.to_string(), "kind-declined");
    assert_eq!(
        ids(&["i-0b662ef9931388ba0"])[0].to_string(),
        "i-0b662ef9931388ba0"
    );
    let origin = Origin {
        account: Some("111122223333".into()),
        region: None,
    };
    assert_eq!(origin.to_string(), "111122223333/-");
}

#[test]
fn a_health_split_of_a_body_that_is_not_an_object_says_what_it_expected() {
    // classify routes only objects, so this is a caller's error; the message still says why.
    for body in ["42", r#"{"detail": 5}"#] {
        let error = health_body_for(body, &[]).unwrap_err().to_string();
        assert!(error.contains("expected a JSON object"), "{body}: {error}");
    }
}
