//! Batch planning, denial classification and the forwarder against a stubbed SQS.

use std::sync::Arc;

use super::batch::{Destination, MAX_BATCH_BYTES, Message, plan_batches};
use super::delivery::Denial;
use crate::{
    accounts::{Place, Scope, Sender},
    aws::is_denial,
};

fn home() -> Place {
    Place {
        scope: Scope::new("111111111111", "us-east-1"),
        sender: Sender::Home,
    }
}

fn to(cluster: &str, size: usize) -> Message {
    Message {
        destination: Destination::Cluster {
            place: home(),
            cluster: Arc::from(cluster),
        },
        body: "x".repeat(size),
        attributes: Vec::new(),
        kind: None,
    }
}

#[test]
fn batches_hold_at_most_ten_entries_of_one_destination_in_order() {
    let mut messages: Vec<Message> = Vec::new();
    for i in 0..25 {
        messages.push(to(if i % 2 == 0 { "a" } else { "b" }, 100));
    }
    let batches = plan_batches(&messages);
    let evens: Vec<usize> = (0..25).filter(|i| i % 2 == 0).collect();
    let odds: Vec<usize> = (0..25).filter(|i| i % 2 == 1).collect();
    assert_eq!(
        batches,
        vec![
            evens[..10].to_vec(),
            evens[10..].to_vec(),
            odds[..10].to_vec(),
            odds[10..].to_vec()
        ]
    );
}

#[test]
fn batches_stay_under_256_kib() {
    let messages: Vec<Message> = (0..5).map(|_| to("a", 100 * 1024)).collect();
    let batches = plan_batches(&messages);
    assert_eq!(batches, vec![vec![0, 1], vec![2, 3], vec![4]]);
    for batch in &batches {
        assert!(batch.iter().map(|&i| messages[i].size()).sum::<usize>() <= MAX_BATCH_BYTES);
    }
    // Exactly at the limit still fits; one byte over does not.
    let exact = vec![
        to("a", MAX_BATCH_BYTES / 2),
        to("a", MAX_BATCH_BYTES / 2),
        to("a", 1),
    ];
    assert_eq!(plan_batches(&exact), vec![vec![0, 1], vec![2]]);
}

#[test]
fn an_oversized_message_travels_alone() {
    let messages = vec![to("a", 10), to("a", MAX_BATCH_BYTES + 1), to("a", 10)];
    assert_eq!(plan_batches(&messages), vec![vec![0], vec![1], vec![2]]);
}

#[test]
fn attribute_bytes_count_towards_the_limit() {
    let mut m = to("a", 10);
    m.attributes.push(("reason", "malformed".into()));
    assert_eq!(
        m.size(),
        10 + "reason".len() + "String".len() + "malformed".len()
    );
}

#[test]
fn dead_letter_messages_batch_separately() {
    let mut dlq = to("a", 10);
    dlq.destination = Destination::DeadLetter { home: home() };
    let messages = vec![to("a", 10), dlq.clone(), to("a", 10), dlq];
    assert_eq!(plan_batches(&messages), vec![vec![0, 2], vec![1, 3]]);
}

#[test]
fn denials_are_told_apart_from_brownouts() {
    for code in [
        "AccessDenied",
        "KmsAccessDenied",
        "KMS.AccessDeniedException",
        "KmsDisabled",
    ] {
        assert!(is_denial(code), "{code}");
    }
    for code in [
        "KmsThrottled",
        "RequestThrottled",
        "InternalError",
        "ServiceUnavailable",
    ] {
        assert!(!is_denial(code), "{code}");
    }
    let denial = Denial {
        queue: "https://sqs.eu-west-1.amazonaws.com/111111111111/karpenter-alpha".into(),
        sender: "the spoke role arn:aws:iam::111111111111:role/interruption-router-spoke".into(),
        code: "AccessDenied".into(),
        message: "Access to the resource is denied.".into(),
    };
    let text = denial.to_string();
    for part in [
        "karpenter-alpha",
        "interruption-router-spoke",
        "AccessDenied",
        "BaseStackName",
    ] {
        assert!(text.contains(part), "{text}");
    }
    let kms = Denial {
        code: "KmsAccessDenied".into(),
        ..denial
    };
    assert!(kms.fix().contains("kms:GenerateDataKey"));
}

#[test]
fn no_messages_no_batches() {
    assert!(plan_batches(&[]).is_empty());
}
