//! Lambda's SQS event source mapping, as data: when a poller's batch is ready, the event it hands
//! the function, and which records it leaves in the queue after the function answers. The
//! emulator's poller (`local-aws/src/esm.rs`, over moto's SQS), the simulation's
//! (`simulation/src/esm.rs`, in virtual time) and the tests that build an event by hand all build
//! with these, so the three cannot disagree about what Lambda does.
//!
//! * **Batching** (Lambda developer guide, "Using Lambda with Amazon SQS", batching behaviour):
//!   a poller gathers records until it has `BatchSize`, or until the batching window, counted
//!   from the first record, has passed; with no window it invokes with what one receive gave.
//! * **The event**: `{"Records": [...]}`, each record the message's id, receipt handle, body,
//!   system attributes (strings), MD5 of the body, `eventSource` `aws:sqs`, the queue's ARN and
//!   region.
//! * **The answer** (ReportBatchItemFailures, "Implementing partial batch responses"): Lambda
//!   deletes every record but those the response names in `batchItemFailures`. An empty or null
//!   list, or an empty or null response, is a complete success. A function error, a response that
//!   is not JSON, or an item whose `itemIdentifier` is missing, null, empty or not a message of
//!   the batch is a complete failure: the whole batch stays, to its visibility timeout.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// A mapping's batching: `size` records at most (BatchSize), gathered for up to `window` from the
/// first (MaximumBatchingWindowInSeconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub size: usize,
    pub window: Duration,
}

impl Batching {
    /// How much longer a poller that holds `gathered` records, the first received `since_first`
    /// ago, may keep gathering; `None`: the batch is ready (full, or its window has passed).
    /// Before the first record there is no window yet: the poller waits for one.
    pub fn left(&self, gathered: usize, since_first: Duration) -> Option<Duration> {
        if gathered >= self.size {
            return None;
        }
        self.window
            .checked_sub(since_first)
            .filter(|left| !left.is_zero())
    }
}

/// One received message as the mapping puts it into the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub message_id: &'a str,
    pub receipt_handle: &'a str,
    pub body: &'a str,
    /// System attributes by SQS's names (ApproximateReceiveCount, SentTimestamp,
    /// ApproximateFirstReceiveTimestamp, SenderId, …), in the order given.
    pub attributes: Vec<(String, String)>,
    pub md5_of_body: &'a str,
    /// The queue the mapping reads (`eventSourceARN`).
    pub queue_arn: &'a str,
    pub region: &'a str,
}

impl Record<'_> {
    fn json(&self) -> Value {
        let attributes: Map<String, Value> = self
            .attributes
            .iter()
            .map(|(name, value)| (name.clone(), Value::from(value.as_str())))
            .collect();
        json!({
            "messageId": self.message_id,
            "receiptHandle": self.receipt_handle,
            "body": self.body,
            "attributes": attributes,
            "messageAttributes": {},
            "md5OfBody": self.md5_of_body,
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        })
    }
}

/// The SQS event the mapping invokes the function with.
pub fn sqs_event<'a>(records: impl IntoIterator<Item = Record<'a>>) -> Value {
    let records: Vec<Value> = records.into_iter().map(|r| r.json()).collect();
    json!({ "Records": records })
}

/// How an invocation ended, as the mapping sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer<'a> {
    /// The function returned this payload (`None`: one that is not JSON).
    Response(Option<&'a Value>),
    /// The function failed, timed out or its environment died.
    Error,
}

/// What the mapping leaves in the queue after an invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Left {
    /// Nothing: every record is deleted.
    Nothing,
    /// These records (their message ids, as named), handed back; the rest are deleted.
    HandedBack(Vec<String>),
    /// The whole batch, and why.
    Batch(&'static str),
}

impl Left {
    /// Whether the record `id` stays in the queue.
    pub fn keeps(&self, id: &str) -> bool {
        match self {
            Left::Nothing => false,
            Left::HandedBack(ids) => ids.iter().any(|i| i == id),
            Left::Batch(_) => true,
        }
    }
}

/// What the mapping leaves of a batch of `batch` (message ids) after `answer`, with
/// ReportBatchItemFailures on (base.yaml's mapping).
pub fn left(answer: Answer<'_>, batch: &[&str]) -> Left {
    let response = match answer {
        Answer::Error => return Left::Batch("the invocation failed"),
        Answer::Response(None) => return Left::Batch("the response is not JSON"),
        Answer::Response(Some(response)) => response,
    };
    let failures = match response {
        Value::Null => return Left::Nothing,
        Value::Object(fields) => match fields.get("batchItemFailures") {
            None | Some(Value::Null) => return Left::Nothing,
            Some(Value::Array(failures)) => failures,
            Some(_) => return Left::Batch("batchItemFailures is not a list"),
        },
        _ => return Left::Batch("the response is not an object"),
    };
    let mut ids = Vec::with_capacity(failures.len());
    for failure in failures {
        match failure.get("itemIdentifier").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && batch.contains(&id) => {
                if !ids.iter().any(|i| i == id) {
                    ids.push(id.to_owned());
                }
            }
            Some("") => return Left::Batch("an itemIdentifier is empty"),
            Some(_) => return Left::Batch("an itemIdentifier names no record of the batch"),
            None => return Left::Batch("a batch item failure has no itemIdentifier"),
        }
    }
    if ids.is_empty() {
        Left::Nothing
    } else {
        Left::HandedBack(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BATCH: [&str; 3] = ["a", "b", "c"];

    fn answered(response: Value) -> Left {
        left(Answer::Response(Some(&response)), &BATCH)
    }

    #[test]
    fn a_batch_is_ready_when_full_or_when_its_window_from_the_first_record_has_passed() {
        let batching = Batching {
            size: 10,
            window: Duration::from_secs(1),
        };
        assert_eq!(
            batching.left(3, Duration::from_millis(400)),
            Some(Duration::from_millis(600))
        );
        assert_eq!(batching.left(10, Duration::ZERO), None);
        assert_eq!(batching.left(3, Duration::from_secs(1)), None);
        assert_eq!(batching.left(3, Duration::from_secs(2)), None);
        let no_window = Batching {
            size: 10,
            window: Duration::ZERO,
        };
        assert_eq!(no_window.left(1, Duration::ZERO), None);
    }

    #[test]
    fn what_lambda_counts_a_complete_success_deletes_every_record() {
        for response in [
            json!({"batchItemFailures": []}),
            json!({"batchItemFailures": null}),
            json!({}),
            Value::Null,
        ] {
            assert_eq!(answered(response.clone()), Left::Nothing, "{response}");
        }
    }

    #[test]
    fn the_records_named_are_handed_back_once_each_and_the_rest_deleted() {
        let left = answered(json!({"batchItemFailures": [
            {"itemIdentifier": "b"}, {"itemIdentifier": "c"}, {"itemIdentifier": "b"}]}));
        assert_eq!(left, Left::HandedBack(vec!["b".into(), "c".into()]));
        assert!(!left.keeps("a") && left.keeps("b") && left.keeps("c"));
    }

    #[test]
    fn what_lambda_counts_a_complete_failure_leaves_the_whole_batch() {
        for (response, why) in [
            (
                json!({"batchItemFailures": [{"itemIdentifier": ""}]}),
                "empty",
            ),
            (
                json!({"batchItemFailures": [{"itemIdentifier": null}]}),
                "no itemIdentifier",
            ),
            (
                json!({"batchItemFailures": [{"itemId": "a"}]}),
                "no itemIdentifier",
            ),
            (
                json!({"batchItemFailures": [{"itemIdentifier": "z"}]}),
                "names no record",
            ),
            (json!({"batchItemFailures": "a"}), "not a list"),
            (json!(["a"]), "not an object"),
        ] {
            let left = answered(response.clone());
            assert!(
                matches!(left, Left::Batch(reason) if reason.contains(why)),
                "{response}: {left:?}"
            );
            assert!(BATCH.iter().all(|id| left.keeps(id)));
        }
        assert_eq!(
            left(Answer::Response(None), &BATCH),
            Left::Batch("the response is not JSON")
        );
        assert_eq!(
            left(Answer::Error, &BATCH),
            Left::Batch("the invocation failed")
        );
    }

    #[test]
    fn the_event_carries_each_record_as_lambda_builds_it() {
        let event = sqs_event([Record {
            message_id: "m-1",
            receipt_handle: "rh-1",
            body: "{}",
            attributes: vec![
                ("ApproximateReceiveCount".into(), "2".into()),
                ("SenderId".into(), "AROAEXAMPLE:session".into()),
            ],
            md5_of_body: "99914b932bd37a50b983c5e7c90ae93b",
            queue_arn: "arn:aws:sqs:eu-west-1:123456789012:ingest",
            region: "eu-west-1",
        }]);
        assert_eq!(
            event,
            json!({"Records": [{
                "messageId": "m-1", "receiptHandle": "rh-1", "body": "{}",
                "attributes": {"ApproximateReceiveCount": "2", "SenderId": "AROAEXAMPLE:session"},
                "messageAttributes": {}, "md5OfBody": "99914b932bd37a50b983c5e7c90ae93b",
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:ingest",
                "awsRegion": "eu-west-1"}]})
        );
    }
}
