//! Hostile input never panics the parser, and whatever it routes is sound: arbitrary JSON,
//! mutated real events, deep nesting, huge Health events, and wrong types where strings belong.

use proptest::prelude::*;
use router_core::event::{Classified, InstanceId, Kind, classify, health_body_for};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/events");

fn fixtures() -> Vec<String> {
    let mut bodies: Vec<String> = std::fs::read_dir(FIXTURES)
        .expect("shared fixtures")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    bodies.sort();
    assert!(bodies.len() >= 12, "fixtures missing from {FIXTURES}");
    bodies
}

/// What must hold for any input: no panic; a routed event names at least one well-formed id, each
/// once; a Health copy for any subset of its instances is itself routed to exactly that subset.
fn check(body: &str) {
    let Ok(Classified::Route(interruption)) = classify(body) else {
        return;
    };
    assert!(!interruption.instances.is_empty());
    let mut seen = std::collections::HashSet::new();
    for id in &interruption.instances {
        assert_eq!(InstanceId::parse(id.as_str()).as_ref(), Some(id));
        assert!(seen.insert(id.clone()), "{id} listed twice");
    }
    if interruption.kind == Kind::ScheduledChange {
        let subset = &interruption.instances[..1];
        let copy = health_body_for(body, subset).expect("a routed Health event can be split");
        match classify(&copy) {
            Ok(Classified::Route(c)) => assert_eq!(c.instances, subset),
            other => panic!("the split copy is not routable: {other:?}\n{copy}"),
        }
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::String),
        prop_oneof![
            Just("aws.ec2"),
            Just("aws.health"),
            Just("0"),
            Just("EC2"),
            Just("scheduledChange"),
            Just("i-0123456789abcdef0"),
            Just("terminated")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("source".to_owned()),
                        Just("detail-type".to_owned()),
                        Just("version".to_owned()),
                        Just("detail".to_owned()),
                        Just("instance-id".to_owned()),
                        Just("affectedEntities".to_owned()),
                        Just("entityValue".to_owned()),
                        Just("resources".to_owned()),
                        Just("time".to_owned()),
                        "[a-z-]{1,12}",
                    ],
                    inner
                ),
                0..8
            )
            .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A real event with one field replaced by an arbitrary value, at any depth.
fn mutated_fixture() -> impl Strategy<Value = String> {
    let bodies = fixtures();
    (
        0..bodies.len(),
        arbitrary_json(),
        any::<prop::sample::Index>(),
    )
        .prop_map(move |(i, replacement, at)| {
            let mut event: Value = serde_json::from_str(&bodies[i]).unwrap();
            let mut paths = Vec::new();
            collect_paths(&event, String::new(), &mut paths);
            let path = at.get(&paths).clone();
            if let Some(slot) = event.pointer_mut(&path) {
                *slot = replacement;
            }
            event.to_string()
        })
}

fn collect_paths(value: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            collect_paths(
                v,
                format!("{here}/{}", k.replace('~', "~0").replace('/', "~1")),
                out,
            )
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| collect_paths(v, format!("{here}/{i}"), out)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(value in arbitrary_json()) {
        check(&value.to_string());
    }

    #[test]
    fn arbitrary_envelopes_never_panic(detail in arbitrary_json(), kind in 0usize..5, version in arbitrary_json()) {
        let kind = Kind::ALL[kind];
        let event = json!({"version": version, "source": kind.source(), "detail-type": kind.detail_type(), "detail": detail});
        check(&event.to_string());
    }

    #[test]
    fn mutated_real_events_never_panic(body in mutated_fixture()) {
        check(&body);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        check(&text);
    }

    #[test]
    fn truncated_and_spliced_real_events_never_panic(i in 0usize..12, cut in any::<prop::sample::Index>(), junk in "\\PC{0,8}") {
        let bodies = fixtures();
        let body = &bodies[i % bodies.len()];
        let mut at = cut.index(body.len());
        while !body.is_char_boundary(at) { at -= 1; }
        check(&body[..at]);
        check(&format!("{}{junk}{}", &body[..at], &body[at..]));
    }
}

#[test]
fn deeply_nested_json_neither_overflows_the_stack_nor_routes() {
    let health =
        std::fs::read_to_string(format!("{FIXTURES}/health-scheduled-change-bare-id.json"))
            .unwrap();
    for depth in [200, 10_000, 1_000_000] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let spot = |field: &str| {
            format!(
                r#"{{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","version":"0",{field}}}"#
            )
        };
        assert!(
            classify(&nested).is_err(),
            "depth {depth}: a bare array is not an event"
        );
        assert!(
            classify(&spot(&format!(r#""detail":{nested}"#))).is_err(),
            "depth {depth}: nested detail"
        );
        assert!(
            classify(&spot(&format!(r#""id":{nested},"detail":{{}}"#))).is_err(),
            "depth {depth}: nested id"
        );
        // Junk in a field nobody reads is skipped (iteratively): an unknown kind stays ignored.
        let unknown = format!(r#"{{"x":{nested},"source":"aws.ec2","detail-type":"y"}}"#);
        assert!(
            matches!(classify(&unknown), Ok(Classified::Ignore { .. })),
            "depth {depth}"
        );
        // A routed Health event carrying junk deep in its detail: the split copies fields it does
        // not rewrite as text, so the junk passes through intact at any depth, without recursion.
        let junk = health.replacen(
            r#""service": "EC2","#,
            &format!(r#""service": "EC2", "junk": {nested},"#),
            1,
        );
        assert!(
            matches!(classify(&junk), Ok(Classified::Route(_))),
            "depth {depth}"
        );
        let split = health_body_for(&junk, &[InstanceId::parse("i-12345678").unwrap()])
            .unwrap_or_else(|e| panic!("depth {depth}: {e}"));
        assert!(split.contains(&nested), "depth {depth}: junk not copied");
        assert!(
            matches!(classify(&split), Ok(Classified::Route(i)) if i.instances.len() == 1),
            "depth {depth}: the copy is not routed"
        );
    }
}

#[test]
fn a_256_kb_health_event_with_thousands_of_entities_splits_cleanly() {
    let entity = |i: usize| json!({"entityValue": format!("i-{i:017x}"), "lastUpdatedTime": "Thu, 26 Jan 2026 19:01:55 GMT", "status": "PENDING"});
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{FIXTURES}/health-instance-retirement-arn-entity.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut entities: Vec<Value> = (0..2_200).map(entity).collect();
    // Duplicates and entities that are not instances, as AWS Health may send.
    entities.extend((0..150).map(entity));
    entities.extend((0..50).map(|i| json!({"entityValue": format!("vol-{i:017x}")})));
    event["detail"]["affectedEntities"] = Value::Array(entities);
    let body = event.to_string();
    assert!(
        body.len() > 200_000 && body.len() <= 262_144,
        "{} bytes",
        body.len()
    );

    let Ok(Classified::Route(interruption)) = classify(&body) else {
        panic!("not routed")
    };
    assert_eq!(
        interruption.instances.len(),
        2_200,
        "duplicates collapse, non-instances are dropped"
    );
    // One cluster owns every other instance: its copy names exactly those, once each.
    let mine: Vec<InstanceId> = interruption.instances.iter().step_by(2).cloned().collect();
    let copy: Value = serde_json::from_str(&health_body_for(&body, &mine).unwrap()).unwrap();
    let names: Vec<&str> = copy["detail"]["affectedEntities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entityValue"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        mine.iter().map(InstanceId::as_str).collect::<Vec<_>>()
    );
    assert_eq!(copy["resources"].as_array().unwrap().len(), 1_100);
}

#[test]
fn non_string_values_where_strings_belong_make_known_kinds_malformed() {
    let spot: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/spot-interruption-warning.json")).unwrap(),
    )
    .unwrap();
    for pointer in [
        "/id",
        "/account",
        "/region",
        "/time",
        "/version",
        "/detail/instance-id",
        "/resources/0",
    ] {
        for wrong in [json!(1), json!(true), json!({"a": 1}), json!(["x"])] {
            let mut event = spot.clone();
            *event.pointer_mut(pointer).unwrap() = wrong.clone();
            assert!(
                classify(&event.to_string()).is_err(),
                "{pointer} = {wrong} accepted"
            );
        }
    }
}

/// What `mutated_real_events_never_panic` once found on a clean clone's `make test`: an entity
/// written as an array was routed, and its Health copy could not be written.
#[test]
fn a_health_entity_written_as_an_array_found_by_the_mutations() {
    let body = r#"{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"AWS Health Event","source":"aws.health","account":"123456789012","time":"2026-01-27T01:43:21Z","region":"us-east-1","detail":{"service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange","affectedEntities":[["i-0123456789abcdef0"]],"affectedAccount":"123456789012"}}"#;
    check(body);
    assert!(classify(body).is_err());
}
