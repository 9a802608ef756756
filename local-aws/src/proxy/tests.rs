//! Fault decisions and the shapes of faulted answers.

use super::action_of;
use super::faults::{add_failed_entries, withhold_entries};
use bytes::Bytes;
use serde_json::{Value, json};

#[test]
fn actions_are_read_from_each_protocol() {
    let mut h = hyper::HeaderMap::new();
    assert_eq!(
        action_of(&h, None, b"Action=DescribeInstances&Version=2016-11-15"),
        "DescribeInstances"
    );
    assert_eq!(
        action_of(&h, Some("Action=GetQueueUrl&QueueName=x"), b""),
        "GetQueueUrl"
    );
    h.insert(
        "x-amz-target",
        "AmazonSQS.SendMessageBatch".parse().unwrap(),
    );
    assert_eq!(action_of(&h, None, b"{}"), "SendMessageBatch");
}

#[test]
fn withholding_always_fails_at_least_one_entry_and_keeps_the_rest() {
    let body = Bytes::from(json!({"QueueUrl": "q", "Entries": (0..10).map(|i| json!({"Id": i.to_string(), "MessageBody": "b"})).collect::<Vec<_>>()}).to_string());
    let mut rng = 7;
    for _ in 0..50 {
        let (kept, withheld) = withhold_entries(&body, &mut rng);
        let kept: Value = serde_json::from_slice(&kept).unwrap();
        let kept_ids: Vec<&str> = kept["Entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["Id"].as_str().unwrap())
            .collect();
        assert!(!withheld.is_empty());
        assert_eq!(kept_ids.len() + withheld.len(), 10);
        assert!(withheld.iter().all(|id| !kept_ids.contains(&id.as_str())));
    }
}

#[test]
fn failed_entries_are_appended_to_the_answer() {
    let answer =
        Bytes::from(r#"{"Successful":[{"Id":"0","MessageId":"m","MD5OfMessageBody":"x"}]}"#);
    let v: Value = serde_json::from_slice(&add_failed_entries(&answer, &["3".into()])).unwrap();
    assert_eq!(v["Failed"][0]["Id"], "3");
    assert_eq!(v["Failed"][0]["SenderFault"], false);
    assert_eq!(v["Successful"].as_array().unwrap().len(), 1);
}

/// A call the emulator answers late is recorded whole, with what it names; the answer still
/// goes back to the caller.
#[tokio::test]
async fn a_call_the_emulator_answers_late_is_recorded_with_its_request() {
    use http_body_util::{BodyExt, Full};
    use hyper::{Request, Response};

    let emulator =
        crate::http::LoopbackServer::start(|req: Request<hyper::body::Incoming>| async move {
            let body = req.into_body().collect().await?.to_bytes();
            if String::from_utf8_lossy(&body).contains("karpenter-slow") {
                tokio::time::sleep(super::LATE_ANSWER + std::time::Duration::from_millis(100))
                    .await;
            }
            Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from_static(b"{}"))))
        })
        .await
        .unwrap();
    let proxy = super::AwsProxy::start(&format!("http://{}", emulator.addr()))
        .await
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let send = |queue: &str| {
        let request = Request::post(proxy.endpoint())
            .header("x-amz-target", "AmazonSQS.SendMessageBatch")
            .body(Full::new(Bytes::from(
                json!({"QueueUrl": format!("http://q/{queue}"), "Entries": []}).to_string(),
            )))
            .unwrap();
        client.request(request)
    };
    let answer = send("karpenter-slow").await.unwrap();
    assert_eq!(answer.status(), 200);
    send("karpenter-fast").await.unwrap();

    let late = proxy.late_answers();
    let slow: Vec<_> = late
        .iter()
        .filter(|l| l.request.contains("karpenter-slow"))
        .collect();
    assert_eq!(slow.len(), 1, "{late:?}");
    assert_eq!(slow[0].action, "SendMessageBatch");
    assert!(slow[0].took >= super::LATE_ANSWER, "{late:?}");
    proxy.reset_counts();
    assert!(proxy.late_answers().is_empty());
}
