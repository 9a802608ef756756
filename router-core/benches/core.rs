//! Micro-benchmarks of the pure core: parse + classify + plan, per event kind and for a
//! 100-record SQS batch. No I/O: this is the router's own CPU cost per event, on one core.
//! Target: ≥ 200,000 events/s. `make bench` copies the figures into BENCHMARKS.md.

use std::{hint::black_box, sync::Arc};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use router_core::{
    accounts::{Home, Served, admit},
    event::{Classified, Kind, classify, health_body_for},
    forward::{Destination, Message, plan_batches},
};
use serde_json::{Value, json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/events");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap()
}

/// What the handler does per record before any I/O: classify, then one message per owning cluster
/// (Health events split), then batch planning.
fn route(bodies: &[&str], clusters: usize) -> usize {
    let home = Home::new(
        "arn:aws:lambda:us-east-1:000000000000:function:r",
        "us-east-1",
    );
    let mut messages = Vec::with_capacity(bodies.len());
    for (n, body) in bodies.iter().enumerate() {
        if let Ok(Classified::Route(i)) = classify(body) {
            let cluster: Arc<str> = Arc::from(format!("c{}", n % clusters));
            let body = match i.kind {
                Kind::ScheduledChange => health_body_for(body, &i.instances).unwrap(),
                _ => body.to_string(),
            };
            messages.push(Message {
                destination: Destination::Cluster {
                    place: admit(&home, &Served::Any, "spoke", &i.origin).unwrap(),
                    cluster,
                },
                body,
                attributes: Vec::new(),
                kind: Some(i.kind),
            });
        }
    }
    plan_batches(&messages).len()
}

fn per_kind(c: &mut Criterion) {
    let mut group = c.benchmark_group("classify");
    group.throughput(Throughput::Elements(1));
    for (label, file) in [
        ("spot-interruption", "spot-interruption-warning.json"),
        ("rebalance-recommendation", "rebalance-recommendation.json"),
        ("state-change", "state-change-stopping.json"),
        (
            "capacity-reservation",
            "capacity-reservation-interruption-warning.json",
        ),
        (
            "scheduled-change",
            "health-instance-retirement-arn-entity.json",
        ),
        ("ignored-state", "state-change-pending.json"),
    ] {
        let body = fixture(file);
        group.bench_function(label, |b| b.iter(|| route(&[black_box(&body)], 1)));
    }
    group.finish();
}

fn sqs_batch(c: &mut Criterion) {
    // 100 spot warnings over 10 clusters, as an event source mapping delivers them.
    let spot: Value = serde_json::from_str(&fixture("spot-interruption-warning.json")).unwrap();
    let records: Vec<Value> = (0..100)
        .map(|i| {
            let mut e = spot.clone();
            e["detail"]["instance-id"] = json!(format!("i-{i:017x}"));
            json!({"messageId": format!("m{i}"), "receiptHandle": "h", "body": e.to_string(), "attributes": {},
                   "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ingest", "awsRegion": "us-east-1"})
        })
        .collect();
    let payload = json!({"Records": records}).to_string();
    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(100));
    group.bench_function("sqs-100", |b| {
        b.iter(|| {
            let event: aws_lambda_events::sqs::SqsEvent =
                serde_json::from_str(black_box(&payload)).unwrap();
            let bodies: Vec<&str> = event
                .records
                .iter()
                .filter_map(|r| r.body.as_deref())
                .collect();
            route(&bodies, 10)
        })
    });
    group.finish();
}

/// A scheduled change costs more than the EC2 kinds: it is read twice, once to classify it and
/// once to write the cluster's copy. These two figures show where its time goes.
fn health_split(c: &mut Criterion) {
    let body = fixture("health-instance-retirement-arn-entity.json");
    let Ok(Classified::Route(interruption)) = classify(&body) else {
        panic!("the Health fixture is routed")
    };
    let mut group = c.benchmark_group("scheduled-change");
    group.throughput(Throughput::Elements(1));
    group.bench_function("classify-only", |b| {
        b.iter(|| classify(black_box(&body)).unwrap())
    });
    group.bench_function("split-only", |b| {
        b.iter(|| health_body_for(black_box(&body), &interruption.instances).unwrap())
    });
    group.finish();
}

criterion_group!(benches, per_kind, sqs_batch, health_split);
criterion_main!(benches);
