//! `ingest-queue`, `ingest-queue:policy`, `event-source-mapping`, `dead-letter-queue`,
//! `dead-letter-queue:policy`: the base stack's own queues exist and are encrypted, the ingest
//! queue's visibility suits the function and it redrives to the DLQ, EventBridge may deliver to
//! both from exactly the stack's rules, and in Queue mode a mapping with ReportBatchItemFailures
//! reads the ingest queue. Also what the other families share about queues: reading one
//! ([`load_queue`]) and its encryption.

use std::collections::HashMap;

use aws_sdk_lambda::types::FunctionResponseType;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

use super::{
    report::{Check, Findings, Mode, fail},
    stack::Base,
};
use aws_model::{
    aws::{Aws, arn_name, arn_name_after_slash, describe},
    policy::{Decision, Policy, Principal, Request, evaluate},
};

/// A queue as SQS describes it.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    pub name: String,
    pub arn: String,
    pub url: String,
    pub attributes: HashMap<String, String>,
}

impl Queue {
    pub fn attribute(&self, name: QueueAttributeName) -> Option<&str> {
        self.attributes.get(name.as_str()).map(String::as_str)
    }

    /// What the queue policy `policy` decides for the AWS principal `principal` doing `action` on
    /// this queue over HTTPS, as the SDKs call.
    pub fn decision(&self, policy: &Policy, principal: &str, action: &str) -> Decision {
        let context = [
            ("aws:PrincipalArn", principal),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(policy),
            &Request {
                principal: Principal::Aws(principal),
                action,
                resource: &self.arn,
                context: &context,
            },
        )
    }
}

/// Checks the ingest queue (Queue mode) and the DLQ against the stack's rules.
pub(super) async fn check(
    aws: &Aws,
    base: &Base,
    rule_arns: &[String],
    function_timeout: Option<i32>,
    checks: &mut Vec<Check>,
) {
    let region = &aws.region;
    let dlq_arn = base.output("DeadLetterQueueArn");
    if base.mode == Mode::Queue {
        match base.output("IngestQueueArn") {
            Some(arn) => match load_queue(aws, arn_name(arn)).await {
                Ok(queue) => {
                    checks.push(check_ingest_queue(&queue, function_timeout, dlq_arn));
                    checks.push(events_may_send(
                        "ingest-queue:policy",
                        INGEST_SID,
                        &queue,
                        rule_arns,
                        base,
                        region,
                    ));
                    checks.push(check_event_source_mapping(aws, base, &queue).await);
                }
                Err(problem) => {
                    let fix = format!(
                        "the stack's IngestQueue was deleted outside CloudFormation: delete and \
                         re-deploy the stack {}, or re-create the queue as base.yaml defines it",
                        base.name
                    );
                    checks.push(fail("ingest-queue", problem, fix));
                }
            },
            None => checks.push(fail(
                "ingest-queue",
                "the stack is in Queue mode but has no IngestQueueArn output",
                "update the stack with this project's cloudformation/base.yaml",
            )),
        }
    }
    match dlq_arn {
        Some(arn) => match load_queue(aws, arn_name(arn)).await {
            Ok(queue) => {
                let mut f = Findings::default();
                encryption(&queue, &mut f, region);
                checks.push(f.into_check("dead-letter-queue"));
                checks.push(events_may_send(
                    "dead-letter-queue:policy",
                    "AllowDeadLettersFromTheseRules",
                    &queue,
                    rule_arns,
                    base,
                    region,
                ));
            }
            Err(problem) => checks.push(fail(
                "dead-letter-queue",
                problem,
                "re-create it as base.yaml defines it, or delete and re-deploy the stack",
            )),
        },
        None => checks.push(fail(
            "dead-letter-queue",
            "the stack has no DeadLetterQueueArn output",
            "update the stack with this project's cloudformation/base.yaml",
        )),
    }
}

pub(crate) async fn load_queue(aws: &Aws, name: &str) -> Result<Queue, String> {
    let url = match aws.sqs.get_queue_url().queue_name(name).send().await {
        Ok(out) => out.queue_url().unwrap_or_default().to_owned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_queue_does_not_exist()) =>
        {
            return Err(format!("queue {name} does not exist in {}", aws.region));
        }
        Err(e) => return Err(format!("GetQueueUrl {name}: {}", describe(&e))),
    };
    let attributes: HashMap<String, String> = aws
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .map_err(|e| format!("GetQueueAttributes {name}: {}", describe(&e)))?
        .attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let arn = attributes
        .get(QueueAttributeName::QueueArn.as_str())
        .cloned()
        .unwrap_or_default();
    Ok(Queue {
        name: name.to_owned(),
        arn,
        url,
        attributes,
    })
}

pub(super) fn encryption(queue: &Queue, f: &mut Findings, region: &str) {
    let sse = queue.attribute(QueueAttributeName::SqsManagedSseEnabled) == Some("true");
    let kms = queue
        .attribute(QueueAttributeName::KmsMasterKeyId)
        .filter(|k| !k.is_empty());
    match (sse, kms) {
        // Who may use the key is the `:key` check's (keys.rs).
        (_, Some(key)) => f.ok(format!("{} encrypted with KMS key {key}", queue.name)),
        (true, None) => f.ok(format!("{} encrypted (SSE-SQS)", queue.name)),
        (false, None) => f.problem(
            format!("{} is not encrypted at rest", queue.name),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes SqsManagedSseEnabled=true",
                queue.url
            ),
        ),
    }
}

fn check_ingest_queue(queue: &Queue, function_timeout: Option<i32>, dlq: Option<&str>) -> Check {
    let mut f = Findings::default();
    let region = queue.arn.split(':').nth(3).unwrap_or_default().to_owned();
    encryption(queue, &mut f, &region);
    let visibility: Option<i32> = queue
        .attribute(QueueAttributeName::VisibilityTimeout)
        .and_then(|v| v.parse().ok());
    if let (Some(visibility), Some(timeout)) = (visibility, function_timeout) {
        // Lambda refuses a mapping whose queue's visibility timeout is under the function
        // timeout, and recommends six times it (Lambda developer guide, SQS event sources).
        if visibility >= 6 * timeout {
            f.ok(format!(
                "visibility {visibility} s ≥ 6 × function timeout {timeout} s"
            ));
        } else {
            let why = if visibility < timeout {
                "Lambda refuses to update the event source mapping, and records reappear while \
                 the router still works on them"
            } else {
                "under Lambda's recommended 6×: a batch Lambda itself retries can reappear while \
                 the router still works on it"
            };
            f.problem(
                format!(
                    "visibility timeout {visibility} s against the function timeout {timeout} s: \
                     {why}"
                ),
                format!(
                    "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes VisibilityTimeout={}",
                    queue.url,
                    6 * timeout
                ),
            );
        }
    }
    let redrive: Option<Value> = queue
        .attribute(QueueAttributeName::RedrivePolicy)
        .and_then(|r| serde_json::from_str(r).ok());
    let target = redrive
        .as_ref()
        .and_then(|r| r["deadLetterTargetArn"].as_str());
    match (target, dlq) {
        (Some(t), Some(d)) if t == d => f.ok("redrives to the DLQ"),
        (found, _) => f.problem(
            format!(
                "redrive target is {found:?}, not the stack's DLQ: records that keep failing are \
                 dropped after the retention period"
            ),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes \
                 '{{\"RedrivePolicy\":\"{{\\\"deadLetterTargetArn\\\":\\\"{}\\\",\\\"maxReceiveCount\\\":5}}\"}}'",
                queue.url,
                dlq.unwrap_or("<DeadLetterQueueArn>")
            ),
        ),
    }
    f.into_check("ingest-queue")
}

/// EventBridge may deliver from each of the stack's rules, and from no other rule.
fn events_may_send(
    name: &str,
    sid: &str,
    queue: &Queue,
    rules: &[String],
    base: &Base,
    region: &str,
) -> Check {
    let mut f = Findings::default();
    let fix = set_policy_command(
        region,
        &queue.url,
        &events_queue_policy(&queue.arn, rules, sid),
    );
    let Some(text) = queue.attribute(QueueAttributeName::Policy) else {
        f.problem(
            format!(
                "{} has no queue policy: EventBridge cannot deliver to it",
                queue.name
            ),
            fix,
        );
        return f.into_check(name);
    };
    let policy = match Policy::parse("queue policy", text) {
        Ok(p) => p,
        Err(e) => {
            f.problem(e, fix);
            return f.into_check(name);
        }
    };
    let decide = |source: &str, account: &str| {
        let context = [
            ("aws:SourceArn", source),
            ("aws:SourceAccount", account),
            ("aws:SecureTransport", "true"),
        ];
        evaluate(
            std::slice::from_ref(&policy),
            &Request {
                principal: Principal::Service("events.amazonaws.com"),
                action: "sqs:SendMessage",
                resource: &queue.arn,
                context: &context,
            },
        )
    };
    let refused: Vec<String> = rules
        .iter()
        .filter_map(|rule| {
            let d = decide(rule, &base.account);
            (!d.is_allowed()).then(|| format!("{} ({d})", arn_name_after_slash(rule)))
        })
        .collect();
    if refused.is_empty() {
        f.ok(format!(
            "EventBridge may deliver from the {} rules",
            rules.len()
        ));
    } else {
        f.problem(
            format!("EventBridge may not deliver from {}", refused.join(", ")),
            fix.clone(),
        );
    }
    let stranger = format!(
        "arn:{}:events:{region}:111111111111:rule/not-ours",
        base.partition
    );
    if decide(&stranger, "111111111111").is_allowed() {
        f.problem(
            "it lets any EventBridge rule send (no aws:SourceArn condition): anyone can inject \
             interruptions",
            fix.clone(),
        );
    } else {
        f.ok("no other rule may");
    }
    if sid == INGEST_SID {
        // An identity policy elsewhere in the account (an admin, a CI role with sqs:SendMessage
        // on "*") grants a principal of the account the queue unless the queue denies it: the
        // router would forward a made-up event into any served cluster's queue.
        let admin = format!(
            "arn:{}:iam::{}:role/any-admin",
            base.partition, base.account
        );
        if let Decision::Denied { .. } = queue.decision(&policy, &admin, "sqs:SendMessage") {
            f.ok("every other sender is denied");
        } else {
            f.problem(
                format!(
                    "it does not deny other senders: a principal of account {} whose identity \
                     policy allows sqs:SendMessage (an admin or CI role) can post a made-up \
                     interruption, which the router forwards into a served cluster's queue and \
                     Karpenter acts on",
                    base.account
                ),
                fix,
            );
        }
    }
    f.into_check(name)
}

async fn check_event_source_mapping(aws: &Aws, base: &Base, ingest: &Queue) -> Check {
    const NAME: &str = "event-source-mapping";
    let region = &aws.region;
    let function = base.output("FunctionName").unwrap_or_default();
    let mappings = match aws
        .lambda
        .list_event_source_mappings()
        .function_name(function)
        .send()
        .await
    {
        Ok(out) => out,
        Err(e) => {
            return fail(
                NAME,
                format!("ListEventSourceMappings {function}: {}", describe(&e)),
                "run verify with lambda:ListEventSourceMappings",
            );
        }
    };
    let Some(mapping) = mappings
        .event_source_mappings()
        .iter()
        .find(|m| m.event_source_arn() == Some(ingest.arn.as_str()))
    else {
        return fail(
            NAME,
            format!(
                "no event source mapping from {} to {function}: nothing reads the ingest queue",
                ingest.name
            ),
            format!(
                "aws lambda create-event-source-mapping --region {region} --function-name {function} \
                 --event-source-arn {} --batch-size 100 --maximum-batching-window-in-seconds 1 \
                 --function-response-types ReportBatchItemFailures",
                ingest.arn
            ),
        );
    };
    let uuid = mapping.uuid().unwrap_or_default();
    let mut f = Findings::default();
    match mapping.state() {
        Some("Enabled") => f.ok(format!("{uuid} Enabled")),
        state => f.problem(
            format!(
                "mapping {uuid} is {}: the ingest queue is not read",
                state.unwrap_or("in no state")
            ),
            format!(
                "aws lambda update-event-source-mapping --region {region} --uuid {uuid} --enabled"
            ),
        ),
    }
    if mapping
        .function_response_types()
        .contains(&FunctionResponseType::ReportBatchItemFailures)
    {
        f.ok("ReportBatchItemFailures");
    } else {
        f.problem(
            format!(
                "mapping {uuid} lacks ReportBatchItemFailures: Lambda ignores the router's \
                 batchItemFailures and deletes records it could not forward"
            ),
            format!(
                "aws lambda update-event-source-mapping --region {region} --uuid {uuid} \
                 --function-response-types ReportBatchItemFailures"
            ),
        );
    }
    f.into_check(NAME)
}

/// The Sid of the ingest queue policy's grant to the rules (the DLQ's has its own).
pub const INGEST_SID: &str = "AllowTheseRulesOnly";

/// base.yaml's IngestQueuePolicy / DeadLetterQueuePolicy for these ARNs (the central bus's rules
/// included, when it has them). The ingest queue's also refuses every other sender.
pub fn events_queue_policy(queue_arn: &str, rule_arns: &[String], sid: &str) -> Value {
    let mut statements = vec![
        json!({"Sid": sid, "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}}}),
    ];
    if sid == INGEST_SID {
        statements.push(
            json!({"Sid": "DenySendersOtherThanTheseRules", "Effect": "Deny",
            "Principal": "*", "Action": "sqs:SendMessage", "Resource": queue_arn,
            "Condition": {"ArnNotEquals": {"aws:SourceArn": rule_arns}}}),
        );
    }
    statements.push(
        json!({"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*",
        "Action": "sqs:*", "Resource": queue_arn,
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}),
    );
    json!({"Version": "2012-10-17", "Statement": statements})
}

/// A ready-to-paste command that sets `policy` on a queue.
pub(crate) fn set_policy_command(region: &str, url: &str, policy: &Value) -> String {
    let attributes = json!({"Policy": policy.to_string()}).to_string();
    format!(
        "aws sqs set-queue-attributes --region {region} --queue-url {url} --attributes '{attributes}'"
    )
}
