//! Where simulate's events go: the ingest queue, as the base stack's rules would put them there
//! (refused in AWS, whose ingest queue admits only those rules: the error says so), or the router
//! function, as the SQS batch its event source mapping would have read.

use anyhow::{Result, bail};

use super::Sent;
use crate::cloud::{
    deliveries::{Deliveries, Entry},
    missing,
};
use aws_model::events::Synthetic;

pub(super) async fn check_queue(aws: &impl Deliveries, url: &str) -> Result<()> {
    match aws.queue_attributes(url).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == missing::QUEUE => {
            bail!(
                "queue {url} does not exist in {}: pass the base stack's IngestQueueUrl output \
             (aws cloudformation describe-stacks --stack-name <stack> --query \
             \"Stacks[0].Outputs[?OutputKey=='IngestQueueUrl'].OutputValue\" --output text)",
                aws.region()
            )
        }
        Err(e) => bail!("GetQueueAttributes on {url}: {e}"),
    }
}

pub(super) async fn send_to_queue(
    aws: &impl Deliveries,
    url: &str,
    events: Vec<Synthetic>,
) -> Vec<Sent> {
    let mut sent: Vec<Sent> = Vec::with_capacity(events.len());
    let mut broken: Option<String> = None;
    for chunk in events.chunks(10) {
        if let Some(why) = &broken {
            sent.extend(chunk.iter().map(|e| Sent {
                event: e.clone(),
                result: Err(format!("not sent: {why}")),
            }));
            continue;
        }
        let entries: Vec<(String, String)> = chunk
            .iter()
            .enumerate()
            .map(|(i, e)| (i.to_string(), e.body()))
            .collect();
        match aws.send_batch(url, &entries).await {
            Ok(out) => {
                for (i, event) in chunk.iter().enumerate() {
                    let id = i.to_string();
                    let result = match out.iter().find(|(listed, _)| *listed == id) {
                        Some((_, Entry::Sent(message_id))) => Ok(format!("message {message_id}")),
                        Some((
                            _,
                            Entry::Failed {
                                code,
                                message,
                                sender_fault,
                            },
                        )) => Err(format!(
                            "{code}: {message}{}",
                            if is_access_denied(Some(code)) {
                                INGEST_DENIES
                            } else if *sender_fault {
                                ""
                            } else {
                                " (SQS-side; retry)"
                            }
                        )),
                        None => Err("SQS did not answer for this entry".to_owned()),
                    };
                    sent.push(Sent {
                        event: event.clone(),
                        result,
                    });
                }
            }
            Err(e) => {
                let mut why = format!("SendMessageBatch: {e}");
                if is_access_denied(Some(&e.code)) {
                    why.push_str(INGEST_DENIES);
                }
                sent.extend(chunk.iter().map(|e| Sent {
                    event: e.clone(),
                    result: Err(why.clone()),
                }));
                broken = Some("an earlier SendMessageBatch failed".to_owned());
            }
        }
    }
    sent
}

/// Why an ingest queue deployed from base.yaml refuses simulate, and what works instead.
const INGEST_DENIES: &str = ". The base stack's ingest queue admits only its own rules \
    (DenySendersOtherThanTheseRules: a fake spot warning drains a real node); send to the router \
    function instead: --to <the stack's FunctionName output> (needs lambda:InvokeFunction)";

fn is_access_denied(code: Option<&str>) -> bool {
    matches!(code, Some("AccessDenied" | "AccessDeniedException"))
}

/// The events as the event source mapping would hand them to the router from the ingest queue:
/// SQS batches of at most 10 records, each invoked synchronously, so the router's answer
/// (`batchItemFailures`) says which it could not route. Nothing retries a simulated event the
/// router hands back: there is no queue to hand it back to.
pub(super) async fn invoke(
    aws: &impl Deliveries,
    function: &str,
    events: Vec<Synthetic>,
) -> Result<Vec<Sent>> {
    let mut sent = Vec::with_capacity(events.len());
    for chunk in events.chunks(10) {
        let records: Vec<serde_json::Value> = chunk
            .iter()
            .map(|e| {
                serde_json::json!({
                    "messageId": e.id, "body": e.body(), "eventSource": "aws:sqs",
                    "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                })
            })
            .collect();
        let payload = serde_json::json!({ "Records": records }).to_string();
        let answer: Result<serde_json::Value, String> = match aws.invoke(function, payload).await {
            Ok(out) if out.function_error.is_some() => Err(format!(
                "the router failed the invocation: {}",
                String::from_utf8_lossy(&out.payload)
            )),
            Ok(out) => Ok(serde_json::from_slice(&out.payload).unwrap_or_default()),
            Err(e) if e.code == missing::RESOURCE => {
                bail!(
                    "function {function} not found in {}: pass the base stack's FunctionName \
                     output, or its ingest queue URL",
                    aws.region()
                )
            }
            Err(e) => Err(format!("Invoke: {e}")),
        };
        sent.extend(chunk.iter().map(|event| {
            Sent {
                result: match answer.as_ref().map(|a| a["outcomes"][&event.id].as_str()) {
                    Ok(Some("forwarded")) => Ok("forwarded by the router".to_owned()),
                    Ok(Some("failed")) => Err(
                        "the router could not route it now and handed it back (its log says why); \
                     nothing retries a simulated event"
                            .to_owned(),
                    ),
                    Ok(Some(other)) => Err(format!(
                        "the router answered {other} (its log says why: not a cluster's instance, \
                     a kind its tenant stack declines (EventKinds), \
                     no tenant queue, …)"
                    )),
                    Ok(None) => Err(format!(
                        "the router's answer names no outcome for it: {}",
                        answer.as_ref().map(|a| a.to_string()).unwrap_or_default()
                    )),
                    Err(why) => Err(why.clone()),
                },
                event: event.clone(),
            }
        }));
    }
    Ok(sent)
}
