//! `ingest-queue`, `ingest-queue:policy`, `event-source-mapping`, `dead-letter-queue`,
//! `dead-letter-queue:policy`: the base stack's own queues exist and are encrypted, the ingest
//! queue's visibility suits the function and it redrives to the DLQ, EventBridge may deliver to
//! both from exactly the stack's rules, and a mapping with ReportBatchItemFailures reads the
//! ingest queue. Also what the other families share about queues: their encryption, and the
//! command that puts a policy back.

use crate::deployment::{Base, Queue, load_queue};
use std::collections::BTreeMap;

use serde_json::{Value, json};

use aws_model::documents::{BaseQueue, BaseSite, base_queue_policy};

use super::report::{Check, fail};
use crate::{
    check::{self, Expect},
    cloud::Cloud,
};
use aws_model::{
    arn::arn_name,
    arn::arn_name_after_slash,
    policy::{Decision, Policy, Principal, Request, evaluate},
};

/// Checks the ingest queue and the DLQ against the stack's rules (their ARNs by logical id).
pub(super) async fn check(
    aws: &impl Cloud,
    base: &Base,
    rules: &BTreeMap<String, String>,
    function_timeout: Option<i32>,
    checks: &mut Vec<Check>,
) {
    let region = aws.region();
    let dlq_arn = base.output("DeadLetterQueueArn");
    let rule_arns: Vec<String> = rules.values().cloned().collect();
    let rule_arns = rule_arns.as_slice();
    // What base.yaml renders for this deployment: the policies a fix puts back.
    let mut arns = rules.clone();
    for (logical, output) in [
        ("IngestQueue", "IngestQueueArn"),
        ("DeadLetterQueue", "DeadLetterQueueArn"),
    ] {
        if let Some(arn) = base.output(output) {
            arns.insert(logical.to_owned(), arn.to_owned());
        }
    }
    let site = BaseSite {
        stack: &base.name,
        account: &base.account,
        region,
        parameters: &base.parameters,
        arns: &arns,
    };
    let rendered = |queue| base_queue_policy(&site, queue).map_err(|e| format!("{e:#}"));
    match base.output("IngestQueueArn") {
        Some(arn) => match load_queue(aws, arn_name(arn)).await {
            Ok(queue) => {
                checks.push(check_ingest_queue(&queue, function_timeout, dlq_arn));
                checks.push(events_may_send(
                    "ingest-queue:policy",
                    BaseQueue::Ingest,
                    &queue,
                    rule_arns,
                    &rendered(BaseQueue::Ingest),
                    base,
                ));
                checks.push(
                    check_event_source_mapping(aws, base, &queue, "event-source-mapping").await,
                );
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
            "the stack has no IngestQueueArn output",
            "update the stack with this project's cloudformation/base.yaml",
        )),
    }
    match dlq_arn {
        Some(arn) => match load_queue(aws, arn_name(arn)).await {
            Ok(queue) => {
                checks.push(check::evaluate(
                    "dead-letter-queue",
                    [encryption(&queue, region)],
                ));
                checks.push(events_may_send(
                    "dead-letter-queue:policy",
                    BaseQueue::DeadLetter,
                    &queue,
                    rule_arns,
                    &rendered(BaseQueue::DeadLetter),
                    base,
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

/// The row saying the queue is encrypted at rest (with SSE-SQS or a KMS key).
pub(super) fn encryption(queue: &Queue, region: &str) -> Expect {
    let sse = queue.attribute("SqsManagedSseEnabled") == Some("true");
    let kms = queue.attribute("KmsMasterKeyId").filter(|k| !k.is_empty());
    match (sse, kms) {
        // Who may use the key is the `:key` check's (keys.rs).
        (_, Some(key)) => Expect::found(format!("{} encrypted with KMS key {key}", queue.name)),
        (true, None) => Expect::found(format!("{} encrypted (SSE-SQS)", queue.name)),
        (false, None) => Expect::problem(
            format!("{} is not encrypted at rest", queue.name),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes SqsManagedSseEnabled=true",
                queue.url
            ),
        ),
    }
}

fn check_ingest_queue(queue: &Queue, function_timeout: Option<i32>, dlq: Option<&str>) -> Check {
    check_read_queue("ingest-queue", queue, function_timeout, dlq)
}

/// A queue the function reads through a mapping (the ingest queue, the direct queue): encrypted,
/// its visibility suiting the function, redriving to the DLQ; as check `name`.
pub(super) fn check_read_queue(
    name: &str,
    queue: &Queue,
    function_timeout: Option<i32>,
    dlq: Option<&str>,
) -> Check {
    let region = queue.arn.split(':').nth(3).unwrap_or_default().to_owned();
    let visibility: Option<i32> = queue
        .attribute("VisibilityTimeout")
        .and_then(|v| v.parse().ok());
    let redrive: Option<Value> = queue
        .attribute("RedrivePolicy")
        .and_then(|r| serde_json::from_str(r).ok());
    let target = redrive
        .as_ref()
        .and_then(|r| r["deadLetterTargetArn"].as_str());

    // Expect → what was found → the fix.
    let mut rows = vec![encryption(queue, &region)];
    if let (Some(visibility), Some(timeout)) = (visibility, function_timeout) {
        rows.push(visibility_row(queue, visibility, timeout, &region));
    }
    rows.push(
        Expect::that(target.is_some() && target == dlq, "redrives to the DLQ").otherwise(
            format!(
                "redrive target is {target:?}, not the stack's DLQ: records that keep failing are \
                 dropped after the retention period"
            ),
            format!(
                "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes \
                 '{{\"RedrivePolicy\":\"{{\\\"deadLetterTargetArn\\\":\\\"{}\\\",\\\"maxReceiveCount\\\":5}}\"}}'",
                queue.url,
                dlq.unwrap_or("<DeadLetterQueueArn>")
            ),
        ),
    );
    check::evaluate(name, rows)
}

/// Lambda refuses a mapping whose queue's visibility timeout is under the function timeout, and
/// recommends six times it (Lambda developer guide, SQS event sources).
fn visibility_row(queue: &Queue, visibility: i32, timeout: i32, region: &str) -> Expect {
    let why = if visibility < timeout {
        "Lambda refuses to update the event source mapping, and records reappear while the router \
         still works on them"
    } else {
        "under Lambda's recommended 6×: a batch Lambda itself retries can reappear while the \
         router still works on it"
    };
    Expect::that(
        visibility >= 6 * timeout,
        format!("visibility {visibility} s ≥ 6 × function timeout {timeout} s"),
    )
    .otherwise(
        format!("visibility timeout {visibility} s against the function timeout {timeout} s: {why}"),
        format!(
            "aws sqs set-queue-attributes --region {region} --queue-url {} --attributes VisibilityTimeout={}",
            queue.url,
            6 * timeout
        ),
    )
}

/// EventBridge may deliver from each of the stack's rules, and from no other rule; the fix puts
/// back `expected`, the policy base.yaml renders for this deployment.
fn events_may_send(
    name: &str,
    which: BaseQueue,
    queue: &Queue,
    rules: &[String],
    expected: &Result<Value, String>,
    base: &Base,
) -> Check {
    let region = queue.arn.split(':').nth(3).unwrap_or_default();
    let fix = match expected {
        Ok(policy) => set_policy_command(region, &queue.url, policy),
        Err(e) => format!(
            "update the stack {} with this project's cloudformation/base.yaml, which sets the \
             policy (it could not be rendered here: {e})",
            base.name
        ),
    };
    // Where: the queue's policy.
    let policy = queue
        .attribute("Policy")
        .ok_or_else(|| {
            format!(
                "{} has no queue policy: EventBridge cannot deliver to it",
                queue.name
            )
        })
        .and_then(|text| Policy::parse("queue policy", text));
    let policy = match &policy {
        Ok(policy) => policy,
        Err(_) => return check::evaluate(name, [Expect::lookup(&policy, fix)]),
    };

    // Expect → what was found → the fix.
    let mut rows = Vec::from(rules_may_send(policy, queue, rules, base, region, &fix));
    if which == BaseQueue::Ingest {
        rows.push(others_denied(policy, queue, base, fix));
    }
    check::evaluate(name, rows)
}

/// Whether EventBridge may deliver to `queue` for the rule `source` of `account`, over TLS.
fn events_decide(policy: &Policy, queue: &Queue, source: &str, account: &str) -> Decision {
    let context = [
        ("aws:SourceArn", source),
        ("aws:SourceAccount", account),
        ("aws:SecureTransport", "true"),
    ];
    evaluate(
        std::slice::from_ref(policy),
        &Request {
            principal: Principal::Service("events.amazonaws.com"),
            action: "sqs:SendMessage",
            resource: &queue.arn,
            context: &context,
        },
    )
}

/// Every one of the stack's `rules` may deliver, and a stranger's rule in `region` may not.
fn rules_may_send(
    policy: &Policy,
    queue: &Queue,
    rules: &[String],
    base: &Base,
    region: &str,
    fix: &str,
) -> [Expect; 2] {
    let refused: Vec<String> = rules
        .iter()
        .filter_map(|rule| {
            let d = events_decide(policy, queue, rule, &base.account);
            (!d.is_allowed()).then(|| format!("{} ({d})", arn_name_after_slash(rule)))
        })
        .collect();
    let stranger = format!(
        "arn:{}:events:{region}:111111111111:rule/not-ours",
        base.partition
    );
    let stranger_may = events_decide(policy, queue, &stranger, "111111111111").is_allowed();
    [
        Expect::that(
            refused.is_empty(),
            format!("EventBridge may deliver from the {} rules", rules.len()),
        )
        .otherwise(
            format!("EventBridge may not deliver from {}", refused.join(", ")),
            fix,
        ),
        Expect::that(!stranger_may, "no other rule may").otherwise(
            "it lets any EventBridge rule send (no aws:SourceArn condition): anyone can inject \
             interruptions",
            fix,
        ),
    ]
}

/// The ingest queue must deny every other sender outright: an identity policy elsewhere in the
/// account (an admin, a CI role with sqs:SendMessage on "*") grants a principal of the account
/// the queue unless the queue denies it, and the router would forward a made-up event into any
/// served cluster's queue.
fn others_denied(policy: &Policy, queue: &Queue, base: &Base, fix: String) -> Expect {
    let admin = format!(
        "arn:{}:iam::{}:role/any-admin",
        base.partition, base.account
    );
    let admin_may = queue.decision(policy, &admin, "sqs:SendMessage");
    Expect::that(
        matches!(admin_may, Decision::Denied { .. }),
        "every other sender is denied",
    )
    .otherwise(
        format!(
            "it does not deny other senders: a principal of account {} whose identity \
             policy allows sqs:SendMessage (an admin or CI role) can post a made-up \
             interruption, which the router forwards into a served cluster's queue and \
             Karpenter acts on",
            base.account
        ),
        fix,
    )
}

/// The mapping that reads `ingest` (the ingest queue, or the direct queue), as check `name`.
pub(super) async fn check_event_source_mapping(
    aws: &impl Cloud,
    base: &Base,
    ingest: &Queue,
    name: &str,
) -> Check {
    let region = aws.region();
    let function = base.output("FunctionName").unwrap_or_default();
    // Where: the function's mappings, then the one from the ingest queue.
    let listed = aws
        .mappings(function)
        .await
        .map_err(|e| format!("ListEventSourceMappings {function}: {e}"));
    let found = listed.as_ref().map_err(Clone::clone).and_then(|mappings| {
        mappings
            .iter()
            .find(|m| m.event_source_arn.as_deref() == Some(ingest.arn.as_str()))
            .ok_or_else(|| {
                format!(
                    "no event source mapping from {} to {function}: nothing reads the queue",
                    ingest.name
                )
            })
    });
    let mapping = match &found {
        Ok(mapping) => mapping,
        Err(_) => {
            return check::evaluate(
                name,
                [
                    Expect::lookup(&listed, "run verify with lambda:ListEventSourceMappings"),
                    Expect::lookup(
                        &found,
                        format!(
                            "aws lambda create-event-source-mapping --region {region} --function-name {function} \
                             --event-source-arn {} --batch-size 100 --maximum-batching-window-in-seconds 1 \
                             --function-response-types ReportBatchItemFailures",
                            ingest.arn
                        ),
                    ),
                ],
            );
        }
    };
    let uuid = mapping.uuid.as_str();
    let state = mapping.state.as_deref();

    // Expect → what was found → the fix.
    check::evaluate(
        name,
        [
            Expect::that(state == Some("Enabled"), format!("{uuid} Enabled")).otherwise(
                format!(
                    "mapping {uuid} is {}: {} is not read",
                    state.unwrap_or("in no state"),
                    ingest.name
                ),
                format!(
                    "aws lambda update-event-source-mapping --region {region} --uuid {uuid} --enabled"
                ),
            ),
            Expect::that(
                mapping
                    .function_response_types
                    .iter()
                    .any(|t| t == "ReportBatchItemFailures"),
                "ReportBatchItemFailures",
            )
            .otherwise(
                format!(
                    "mapping {uuid} lacks ReportBatchItemFailures: Lambda ignores the router's \
                     batchItemFailures and deletes records it could not forward"
                ),
                format!(
                    "aws lambda update-event-source-mapping --region {region} --uuid {uuid} \
                     --function-response-types ReportBatchItemFailures"
                ),
            ),
        ],
    )
}

/// A ready-to-paste command that sets `policy` on a queue.
pub(crate) fn set_policy_command(region: &str, url: &str, policy: &Value) -> String {
    let attributes = json!({"Policy": policy.to_string()}).to_string();
    format!(
        "aws sqs set-queue-attributes --region {region} --queue-url {url} --attributes '{attributes}'"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:ir-ingest";
    const DLQ: &str = "arn:aws:sqs:us-east-1:123456789012:ir-dlq";
    const RULE: &str = "arn:aws:events:us-east-1:123456789012:rule/ir-StateChangeRule-X";

    fn queue(attributes: &[(&str, String)]) -> Queue {
        Queue {
            name: "ir-ingest".into(),
            arn: ARN.into(),
            url: "https://sqs.us-east-1.amazonaws.com/123456789012/ir-ingest".into(),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        }
    }

    fn base() -> Base {
        crate::fixtures::base(&[], &[])
    }

    #[test]
    fn the_ingest_queue_check_lists_each_row_it_judged() {
        let redrive = json!({"deadLetterTargetArn": DLQ, "maxReceiveCount": 5}).to_string();
        let good = queue(&[
            ("SqsManagedSseEnabled", "true".into()),
            ("VisibilityTimeout", "180".into()),
            ("RedrivePolicy", redrive),
        ]);
        let check = check_ingest_queue(&good, Some(30), Some(DLQ));
        assert!(check.passed, "{check:?}");
        assert_eq!(
            check.detail,
            "ir-ingest encrypted (SSE-SQS); visibility 180 s ≥ 6 × function timeout 30 s; \
             redrives to the DLQ"
        );

        let bad = queue(&[("VisibilityTimeout", "20".into())]);
        let check = check_ingest_queue(&bad, Some(30), Some(DLQ));
        assert!(!check.passed);
        assert_eq!(
            check.detail,
            "ir-ingest is not encrypted at rest; visibility timeout 20 s against the function \
             timeout 30 s: Lambda refuses to update the event source mapping, and records \
             reappear while the router still works on them; redrive target is None, not the \
             stack's DLQ: records that keep failing are dropped after the retention period"
        );
        let fix = check.fix.unwrap();
        assert_eq!(fix.matches("; then ").count(), 2, "{fix}");
        assert!(fix.contains("VisibilityTimeout=180"), "{fix}");
    }

    #[test]
    fn the_queue_policy_check_admits_the_rules_and_refuses_everyone_else() {
        let rules = [RULE.to_owned()];
        // The policy base.yaml renders for a stack whose StateChangeRule is RULE.
        let mut parameters = BTreeMap::new();
        parameters.insert("CodeS3Bucket".to_owned(), "code".to_owned());
        let arns = BTreeMap::from([
            ("StateChangeRule".to_owned(), RULE.to_owned()),
            ("IngestQueue".to_owned(), ARN.to_owned()),
        ]);
        let site = BaseSite {
            stack: "ir",
            account: "123456789012",
            region: "us-east-1",
            parameters: &parameters,
            arns: &arns,
        };
        let rendered = base_queue_policy(&site, BaseQueue::Ingest).map_err(|e| e.to_string());
        let policy = rendered.clone().unwrap().to_string();
        let q = queue(&[("Policy", policy)]);
        let judged = |q: &Queue, which| events_may_send("q", which, q, &rules, &rendered, &base());
        let check = judged(&q, BaseQueue::Ingest);
        assert!(check.passed, "{check:?}");
        assert_eq!(
            check.detail,
            "EventBridge may deliver from the 1 rules; no other rule may; every other sender is \
             denied"
        );

        // Any rule may send, and nobody else is denied.
        let open = json!({"Statement": [{"Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Resource": ARN}]});
        let q = queue(&[("Policy", open.to_string())]);
        let check = judged(&q, BaseQueue::Ingest);
        assert!(!check.passed);
        assert!(
            check
                .detail
                .starts_with("it lets any EventBridge rule send (no aws:SourceArn condition)"),
            "{}",
            check.detail
        );
        assert!(
            check.detail.contains("; it does not deny other senders"),
            "{}",
            check.detail
        );

        let none = queue(&[]);
        let check = judged(&none, BaseQueue::DeadLetter);
        assert_eq!(
            check.detail,
            "ir-ingest has no queue policy: EventBridge cannot deliver to it"
        );
        assert!(
            check
                .fix
                .unwrap()
                .starts_with("aws sqs set-queue-attributes")
        );
    }
}
